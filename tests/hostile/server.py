"""A loopback HTTP server that misbehaves on purpose, one way per path: the shard server every hostile network test
talks to. Files come from a folder; `modes` maps a file name to how the server answers for it:

- ``ok``: the file (the default);
- ``trickle``: the status line and headers at once, then one byte every `trickle_s` seconds;
- ``stall``: the headers, then nothing until the client gives up;
- ``html``: 200 with an HTML error page, as a proxy or a login wall answers;
- ``short``: a Content-Length of the whole file, half of it, then the connection closes;
- ``oversize``: the file followed by a megabyte of zeros per request, with no Content-Length;
- ``fail-once``: 503 to the first request, the file afterwards;
- ``redirect-loop``: 302 to itself, for ever;
- ``missing``: 404;
- ``endless``: 200 without a Content-Length, then zeros until the client stops reading.

`hits` counts the requests per file name, so a test can tell a cache hit from a download.
"""

from __future__ import annotations

import collections
import http.server
import threading
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest


class HostileHandler(http.server.BaseHTTPRequestHandler):
    folder: Path
    modes: Dict[str, str]
    hits: collections.Counter
    trickle_s: float = 2.0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        name = self.path.lstrip("/").split("?", 1)[0]
        self.hits[name] += 1
        mode = self.modes.get(name, "ok")
        try:
            getattr(self, "_" + mode.replace("-", "_"))(name)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what the modes are for

    def _body(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def _send(self, status: int, body: bytes, content_type: str = "application/octet-stream", length: bool = True):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _ok(self, name: str) -> None:
        path = self.folder / name
        if not path.is_file():
            self._missing(name)
            return
        self._send(200, path.read_bytes())

    def _missing(self, name: str) -> None:
        self._send(404, b"not found\n", "text/plain")

    def _html(self, name: str) -> None:
        self._send(200, b"<html><body><h1>Please log in</h1></body></html>\n" * 20, "text/html")

    def _fail_once(self, name: str) -> None:
        if self.hits[name] == 1:
            self._send(503, b"busy\n", "text/plain")
        else:
            self._ok(name)

    def _redirect_loop(self, name: str) -> None:
        self.send_response(302)
        self.send_header("Location", "/" + name)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _short(self, name: str) -> None:
        body = self._body(name)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True

    def _oversize(self, name: str) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self._body(name))
        for _ in range(64):
            self.wfile.write(bytes(1 << 20))
        self.close_connection = True

    def _endless(self, name: str) -> None:
        self.send_response(200)
        self.end_headers()
        while True:
            self.wfile.write(bytes(1 << 16))

    def _trickle(self, name: str) -> None:
        body = self._body(name)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for byte in body:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(self.trickle_s)

    def _stall(self, name: str) -> None:
        body = self._body(name)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        time.sleep(3600)

    def log_message(self, *args) -> None:
        pass


class HostileServer:
    def __init__(self, folder: Path):
        self.modes: Dict[str, str] = {}
        self.hits: collections.Counter = collections.Counter()
        handler = type("Handler", (HostileHandler,), {"folder": Path(folder), "modes": self.modes, "hits": self.hits})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.handler = handler

    def set_trickle(self, seconds: float) -> None:
        self.handler.trickle_s = seconds

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(folder: Path) -> Iterator[HostileServer]:
    server = HostileServer(folder)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def hostile_server(tmp_path) -> Iterator[HostileServer]:
    """Serves tmp_path/www (tests put their files there)."""
    www = tmp_path / "www"
    www.mkdir()
    yield from serve(www)

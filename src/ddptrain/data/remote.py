"""Bytes from an HTTP(S) server or an S3 store (data/s3.py) that ddptrain can trust: bounded in time and size, checked before use.

Every download has a deadline for the whole transfer, retries included (`--fetch-timeout`): a server that
trickles a byte at a time or stops mid-body fails the download when the deadline passes, instead of holding the
run for ever (a socket timeout alone bounds each read, not the transfer). A body is never larger than the size
it is expected to have (the index's record for a shard, a cap for the index itself), redirects are followed at
most MAX_REDIRECTS times, and an HTML page where a shard or an index was expected is an error naming the URL,
its status and its type. A shard is written to a `.part` file and enters the cache only after its size and SHA-1
matched the index; a mismatch is fetched once more, then an error naming what differed.

The cache (`ShardCache`) is node-local and keyed by the shard set's location (its folder) and by each shard's
SHA-1 (its file name): a shard set re-made at the same URL has new hashes, so a stale copy is never read. A
cached file is used only while its size and modification time are those it had when its hash was checked.
URLs are redacted (`util.redact`) in every message.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import http.client
import json
import logging
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from ..errors import DataError
from ..util import pid_alive, redact

log = logging.getLogger("ddptrain")

FETCH_ATTEMPTS = 4
READ_TIMEOUT_S = 60.0  # one read that waits longer: the connection is dropped and the transfer retried
DEFAULT_DEADLINE_S = 900.0  # --fetch-timeout
MAX_REDIRECTS = 5
LOCK_MARGIN_S = 10.0  # waited for another process's download beyond the deadline
BLOCK = 1 << 20
CACHE_ENV = "DDPTRAIN_SHARD_CACHE"
CACHE_SHARDS_ENV = "DDPTRAIN_SHARD_CACHE_SHARDS"
DEFAULT_CACHE_SHARDS = 16
UNKNOWN_SHARD_MAX_BYTES = 64 * 2**30  # a shard of a tar set without an index: larger is not a shard
RETRIED_STATUS = (408, 425, 429, 500, 502, 503, 504)


@dataclass(frozen=True)
class Expected:
    """What a download must be: at most `limit` bytes; exactly `size` bytes with SHA-1 `sha1` when they are known."""

    limit: int
    size: Optional[int] = None
    sha1: Optional[str] = None
    what: str = "shard"  # how messages name it


class Refused(DataError):
    """A final answer about a URL: retrying cannot help (a 404, an HTML page, a redirect loop, the deadline)."""


class Mismatch(DataError):
    """The body arrived whole but is not what the index says (size or hash): fetched once more, then an error."""


class _BoundedRedirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS
    max_repeats = 1  # the same URL twice in one chain is a loop


_OPENER = urllib.request.build_opener(_BoundedRedirects)


def fetch(url: str, expected: Expected, deadline_s: float, into: Optional[Path] = None) -> bytes:
    """GET `url` as `expected` describes it, within `deadline_s` seconds in all; into the file `into` (returns b"")
    or into memory. Network failures and 5xx answers are retried with back-off (FETCH_ATTEMPTS in all), a body
    that does not match the index once; everything else is an error naming the URL at once."""
    deadline = time.monotonic() + deadline_s
    last, mismatches, progress = "", 0, _Progress()
    for attempt in range(FETCH_ATTEMPTS):
        try:
            return _fetch_once(url, expected, deadline, deadline_s, into, progress)
        except Refused:
            raise
        except Mismatch as error:
            mismatches += 1
            if mismatches > 1:
                raise
            last = str(error)
        except urllib.error.HTTPError as error:
            if error.code not in RETRIED_STATUS:
                raise _http_refusal(url, expected, error) from None
            last = f"HTTP {error.code} {error.reason}"
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            last = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
        pause = min(0.5 * 2**attempt, max(0.0, deadline - time.monotonic()))
        if attempt + 1 < FETCH_ATTEMPTS:
            time.sleep(pause)
    raise DataError(
        f"{expected.what} {redact(url)} could not be downloaded after {FETCH_ATTEMPTS} attempts (last: {redact(last)}); "
        "check the server and the network, then resume with --resume auto"
    )


def _http_refusal(url: str, expected: Expected, error: urllib.error.HTTPError) -> Refused:
    if 300 <= error.code < 400:
        return Refused(
            f"{expected.what} {redact(url)}: the server redirects in a loop or more than {MAX_REDIRECTS} times "
            f"(HTTP {error.code}); give the final URL of the shard set"
        )
    if error.code in (401, 403):
        why = "refuses access"
    elif error.code in (404, 410):
        why = "is not on the server"
    else:
        why = "is refused by the server"
    return Refused(
        f"{expected.what} {redact(url)} {why} (HTTP {error.code} {error.reason}); check the --data URL, or re-upload "
        "the shard set (ddptrain shard writes every shard listed in shards.json)"
    )


class _Progress:
    """The most bytes one attempt of a download received: what a message about a slow server reports."""

    def __init__(self) -> None:
        self.most = 0


def _fetch_once(
    url: str, expected: Expected, deadline: float, deadline_s: float, into: Optional[Path], progress: _Progress
) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _too_slow(url, expected, deadline_s, progress.most)
    with _open(url, min(READ_TIMEOUT_S, remaining), expected.what) as response:
        _check_answer(url, expected, response)
        sink = _Sink(into)
        try:
            got = _read_body(url, response, expected, deadline, deadline_s, sink.write, progress)
            _check_body(url, expected, response, got, sink.digest.hexdigest())
            return sink.finish()
        finally:
            sink.discard()


def _open(url: str, timeout_s: float, what: str):
    """The answer to a GET of `url`: an HTTP(S) response, or an S3 object's body (data/s3.py) read the same way."""
    if url.startswith("s3://"):
        from . import s3

        try:
            return s3.open_object(url, timeout_s, what)
        except s3.Refusal as error:
            raise Refused(str(error)) from None
    return _OPENER.open(_request(url), timeout=timeout_s)


def _request(url: str) -> urllib.request.Request:
    """A GET of `url`; credentials written in it (`https://user:password@host/...`) become a Basic authorization
    header that is not sent on to another host when the server redirects."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return urllib.request.Request(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=netloc)))
    secret = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(secret.encode()).decode())
    return request


def _check_answer(url: str, expected: Expected, response) -> None:
    kind = response.headers.get("Content-Type", "")
    if "html" in kind.lower():
        raise Refused(
            f"{expected.what} {redact(url)}: the server answered HTTP {response.status} with an HTML page ({kind}), "
            f"not the {expected.what}: a login page, a proxy's error or a wrong URL; nothing was cached"
        )
    length = response.headers.get("Content-Length")
    if length is not None and length.isdigit() and int(length) > expected.limit:
        raise Mismatch(
            f"{expected.what} {redact(url)}: the server announces {int(length)} bytes, more than the "
            f"{expected.limit} the index allows; the shard set on the server differs from its index"
        )


def _read_body(
    url: str, response, expected: Expected, deadline: float, deadline_s: float, write: Callable, progress: _Progress
) -> int:
    """Read the body in blocks as they arrive, within the deadline and never beyond `expected.limit` bytes."""
    got = 0
    sock = _socket_of(response)
    while True:
        remaining = deadline - time.monotonic()
        progress.most = max(progress.most, got)
        if remaining <= 0:
            raise _too_slow(url, expected, deadline_s, got)
        if sock is not None:
            sock.settimeout(min(READ_TIMEOUT_S, remaining))
        block = response.read1(min(BLOCK, expected.limit + 1 - got))
        if not block:
            return got
        got += len(block)
        if got > expected.limit:
            raise Mismatch(
                f"{expected.what} {redact(url)}: the server sent more than the {expected.limit} bytes the index "
                "allows; the shard set on the server differs from its index"
            )
        write(block)


def _socket_of(response) -> Optional[socket.socket]:
    raw = getattr(getattr(response, "fp", None), "raw", None)
    return getattr(raw, "_sock", None)


def _too_slow(url: str, expected: Expected, deadline_s: float, got: int) -> Refused:
    of = f" of {expected.size}" if expected.size else ""
    return Refused(
        f"{expected.what} {redact(url)}: the download did not finish within --fetch-timeout {deadline_s:g} s "
        f"({got}{of} bytes arrived); the server or the network is too slow or stalled: check them, or raise "
        "--fetch-timeout"
    )


def _check_body(url: str, expected: Expected, response, got: int, sha1: str) -> None:
    length = response.headers.get("Content-Length")
    if length is not None and length.isdigit() and got < int(length):
        raise http.client.IncompleteRead(b"", int(length) - got)  # cut short: retried
    differs = []
    if expected.size is not None and got != expected.size:
        differs.append(f"{got} bytes where the index says {expected.size}")
    if expected.sha1 is not None and sha1 != expected.sha1:
        differs.append(f"SHA-1 {sha1[:12]}... where the index says {expected.sha1[:12]}...")
    if differs:
        raise Mismatch(
            f"{expected.what} {redact(url)} is not the one its index lists ({'; '.join(differs)}); the shard set "
            "on the server was changed after its shards.json was written, or something else answers at that URL: "
            "re-upload the whole shard set"
        )


class _Sink:
    """Where a body goes while it arrives: memory, or a `.part` file renamed into place only once it is whole and
    checked (and removed otherwise)."""

    def __init__(self, into: Optional[Path]):
        self.into, self.digest, self.chunks = into, hashlib.sha1(), []  # type: ignore[var-annotated]
        self.tmp = into.with_name(f".{into.name}.{os.getpid()}.part") if into is not None else None
        self.handle = open(self.tmp, "wb") if self.tmp is not None else None  # noqa: SIM115 (closed in finish/discard)

    def write(self, block: bytes) -> None:
        self.digest.update(block)
        if self.handle is not None:
            self.handle.write(block)
        else:
            self.chunks.append(block)

    def finish(self) -> bytes:
        if self.handle is None:
            return b"".join(self.chunks)
        self.handle.close()
        assert self.tmp is not None and self.into is not None
        os.replace(self.tmp, self.into)
        return b""

    def discard(self) -> None:
        if self.handle is not None:
            self.handle.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)


IMAGE_DEADLINE_S = 120.0  # one image of a manifest, retries included


class UnreadableObject(OSError):
    """An image a manifest names by URL that could not be fetched: skipped and counted like an unreadable file."""


def read_object(url: str, limit: int) -> bytes:
    """One image a manifest names by URL (`s3://`, `http(s)://`): at most `limit` bytes, retried with back-off
    within IMAGE_DEADLINE_S; what cannot be fetched is an OSError naming the URL, so the loader skips and counts it."""
    try:
        return fetch(url, Expected(limit, what="image"), IMAGE_DEADLINE_S)
    except DataError as error:
        raise UnreadableObject(str(error)) from None


def default_cache(location: str) -> Path:
    """The cache folder of one shard set: under DDPTRAIN_SHARD_CACHE, named by a hash of its location."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ddptrain" / "shards")
    return root / hashlib.sha1(location.rstrip("/").encode()).hexdigest()[:16]


def cache_size() -> int:
    text = os.environ.get(CACHE_SHARDS_ENV) or str(DEFAULT_CACHE_SHARDS)
    if not text.isdigit() or int(text) < 1:
        raise DataError(f"{CACHE_SHARDS_ENV}={text}: give a number of shards to keep, 1 or more")
    return int(text)


class ShardCache:
    """Remote shards downloaded whole into a node-local folder: one process downloads a shard while the others on
    the node wait for it (a file lock, waited for at most the download's own deadline); the least recently used
    beyond `keep` shards are deleted."""

    def __init__(self, folder: Path, keep: int, deadline_s: float = DEFAULT_DEADLINE_S):
        self.folder, self.keep, self.deadline_s = folder, keep, deadline_s

    def local(self, url: str, size: int, sha1: str) -> Path:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        target = self.folder / f"{sha1[:16]}-{name}"
        if self._usable(target, size, sha1):
            return target
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._locked(f".{name}.lock", url):
            if not self._usable(target, size, sha1):
                self._remove_abandoned_parts()
                fetch(url, Expected(size, size, sha1), self.deadline_s, into=target)
                self._stamp(target, sha1)
                self._evict(keep=target)
        return target

    def fetch_unknown(self, url: str) -> Path:
        """A shard nobody recorded the size and hash of (a tar set ddptrain did not write), downloaded whole into
        the cache folder under a temporary name (at most UNKNOWN_SHARD_MAX_BYTES), for the caller to hash and
        `admit`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._remove_abandoned_parts()
        target = self.folder / f".{url.rstrip('/').rsplit('/', 1)[-1]}.{os.getpid()}.unverified"
        fetch(url, Expected(UNKNOWN_SHARD_MAX_BYTES), self.deadline_s, into=target)
        return target

    def admit(self, path: Path, url: str, sha1: str) -> Path:
        """A downloaded shard whose SHA-1 the caller took, moved into the cache under its hash."""
        target = self.folder / f"{sha1[:16]}-{url.rstrip('/').rsplit('/', 1)[-1]}"
        os.replace(path, target)
        self._stamp(target, sha1)
        self._evict(keep=target)
        return target

    def _usable(self, target: Path, size: int, sha1: str) -> bool:
        """A cached copy whose size and modification time are those it had when its SHA-1 was checked."""
        try:
            info = target.stat()
            stamp = json.loads(self._stamp_path(target).read_text())
        except (OSError, ValueError):
            return False
        if info.st_size != size or stamp != {"sha1": sha1, "size": size, "mtime_ns": info.st_mtime_ns}:
            return False
        os.utime(target, ns=(time.time_ns(), info.st_mtime_ns))  # recently used: the access time, not the stamp
        return True

    def _stamp_path(self, target: Path) -> Path:
        return target.with_name(f".{target.name}.ok")

    def _stamp(self, target: Path, sha1: str) -> None:
        info = target.stat()
        stamp = {"sha1": sha1, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
        self._stamp_path(target).write_text(json.dumps(stamp))

    def _locked(self, name: str, url: str):
        # the holder's own download ends within the same deadline; the margin covers its check and rename
        return _FileLock(self.folder / name, self.deadline_s + LOCK_MARGIN_S, url)

    def _remove_abandoned_parts(self) -> None:
        """`.part` files of downloads whose process is gone (killed mid-transfer)."""
        for part in [*self.folder.glob(".*.part"), *self.folder.glob(".*.unverified")]:
            pid = part.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not pid_alive(int(pid)):
                part.unlink(missing_ok=True)

    def _evict(self, keep: Path) -> None:
        found = (p for p in self.folder.glob("*.tar") if p != keep and not p.name.startswith("."))
        cached = sorted(found, key=lambda p: p.stat().st_atime)
        for stale in cached[: max(0, len(cached) + 1 - self.keep)]:
            stale.unlink(missing_ok=True)  # a process still reading it keeps its open handle
            self._stamp_path(stale).unlink(missing_ok=True)


class _FileLock:
    """An exclusive flock, waited for at most `timeout_s` (another process of this node downloading the shard)."""

    def __init__(self, path: Path, timeout_s: float, url: str):
        self.path, self.timeout_s, self.url = path, timeout_s, url

    def __enter__(self) -> _FileLock:
        self.handle = open(self.path, "w")  # noqa: SIM115 (closed in __exit__)
        waited_until = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > waited_until:
                    self.handle.close()
                    raise Refused(
                        f"waited {self.timeout_s:g} s for another process of this node to download "
                        f"{redact(self.url)} (lock {self.path}); it is stuck: stop it, or delete the lock file"
                    ) from None
                time.sleep(0.2)
            except OSError:  # a file system without flock: each process downloads for itself
                return self

    def __exit__(self, *exc) -> None:
        self.handle.close()


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """A local file of at most `limit` bytes (an index), or an error naming it: an endless or huge file is never
    read into memory."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise DataError(f"{what} {path} is larger than {limit} bytes; it is not an index ddptrain wrote")
    return data


def safe_names(names: List[str]) -> Optional[str]:
    """The first name that could point outside its shard set (absolute, a URL, `..`, odd characters), or None."""
    for name in names:
        parts = name.split("/")
        if not name or any(not part or part.startswith(".") or not _PLAIN.issuperset(part) for part in parts):
            return name
    return None


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+")

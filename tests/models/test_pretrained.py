"""Pretrained weights come from the libraries' caches; a missing file is downloaded once per cache, however many
processes ask at the same time (real processes, a real HTTP server on loopback)."""

import hashlib
import io
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from ddptrain.models.pretrained import WeightsFile, fetch_file

from ..conftest import cli_env


def _serve(payload: bytes, delay_s: float):
    requests = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            time.sleep(delay_s)  # the other processes ask while this download runs
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, requests


def test_processes_sharing_a_cache_download_a_missing_file_once(tmp_path):
    buffer = io.BytesIO()
    torch.save({"fc.weight": torch.full((2, 2), 0.25)}, buffer)
    payload = buffer.getvalue()
    name = f"tiny-{hashlib.sha256(payload).hexdigest()[:8]}.pth"  # torch hub checks this hash prefix
    server, requests = _serve(payload, delay_s=1.0)
    url = f"http://127.0.0.1:{server.server_address[1]}/{name}"
    code = (
        "from ddptrain.models.pretrained import WeightsFile, fetch_file\n"
        f"path, downloaded = fetch_file(WeightsFile('tiny', 'tiny', url={url!r}))\n"
        "print(path, downloaded)\n"
    )
    env = cli_env({"TORCH_HOME": str(tmp_path / "torch")})
    try:
        procs = [
            subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)
        ]
        outputs = [proc.communicate(timeout=120)[0].split() for proc in procs]
    finally:
        server.shutdown()
    cached = tmp_path / "torch" / "hub" / "checkpoints" / name
    assert requests == [f"/{name}"]  # one download for three processes
    assert sorted(downloaded for _, downloaded in outputs) == ["False", "False", "True"]
    assert {path for path, _ in outputs} == {str(cached)} and cached.read_bytes() == payload


def test_a_cached_file_is_used_without_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    wanted = WeightsFile("m", "m", url="http://127.0.0.1:9/m-00000000.pth")  # nothing listens on port 9
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    (tmp_path / "hub" / "checkpoints" / "m-00000000.pth").write_bytes(b"cached")
    assert fetch_file(wanted) == (tmp_path / "hub" / "checkpoints" / "m-00000000.pth", False)


def _fetch(names, env):
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", "fetch-weights", *names],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return proc, time.perf_counter() - started


def test_fetch_weights_names_a_model_that_does_not_exist_as_such(tmp_path):
    env = cli_env({"TORCH_HOME": str(tmp_path / "torch"), "HF_HOME": str(tmp_path / "hf")})
    proc, _ = _fetch(["resnet1"], env)
    assert proc.returncode != 0 and "--pretrained" not in proc.stderr
    assert "torchvision has no model named 'resnet1'; did you mean" in proc.stderr
    proc, _ = _fetch(["timm:resnet10"], env)
    assert "timm has no model named 'resnet10'; did you mean" in proc.stderr

"""`fetch-weights` on a machine without network: the Hub's host does not resolve, and the command says so at once in
one line, instead of a minute of the Hub client's retries."""

import subprocess
import sys

from ..conftest import cli_env


def _fetch(names, env):
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", "fetch-weights", *names],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return proc


def test_fetch_weights_without_network_says_so_at_once_in_one_line(tmp_path):
    """A Hub host that does not resolve (what a machine without network sees) ends the command at once with
    ddptrain's one line, instead of a minute of the Hub client's retry lines."""
    env = cli_env({"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "https://hub.invalid"})
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE"):
        env.pop(name, None)
    proc = _fetch(["timm:resnet10t"], env)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert errors[-1].startswith("ddptrain fetch-weights: error: the pretrained weights of timm:resnet10t")
    # said by the name lookup before any request: none of the Hub client's five retries (23 s here) was made
    assert "hub.invalid does not resolve" in errors[-1] and "Retry" not in proc.stderr

"""Trackers and services: a tracker never stops or stalls training, a backend that cannot be opened is one line
before launch, and credentials in a tracking URI are never printed. MLflow's own client talks to a loopback server
(`mlflow_server.py`) that stops answering, or demands credentials."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from ..conftest import TINY, cli_env, read_metrics, run_cli
from .mlflow_server import MlflowLikeServer


def _train(tiny_shapes, run_dir, env: dict, *extra, timeout: int = 120):
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *TINY, *extra]
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env=cli_env(env), timeout=timeout)


def test_a_file_store_mlflow_refuses_is_one_line_before_launch(tiny_shapes, tmp_path):
    """The report: MLFLOW_TRACKING_URI=file:///... failed only after launch, as 'collective failed ... stalled'."""
    env = {"MLFLOW_TRACKING_URI": (tmp_path / "store").as_uri(), "MLFLOW_ALLOW_FILE_STORE": ""}
    proc = _train(tiny_shapes, tmp_path / "run", env, "--log-to", "mlflow", "--nproc", 2)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.count("\n") == 1 and "MLFLOW_ALLOW_FILE_STORE=true" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_an_unreachable_tracking_server_is_one_line_before_launch(tiny_shapes, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    env = {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}
    proc = _train(tiny_shapes, tmp_path / "run", env, "--log-to", "mlflow", "--nproc", 2)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert f"cannot use MLFLOW_TRACKING_URI=http://127.0.0.1:{port}" in proc.stderr


def test_a_tracking_server_that_never_answers_is_one_line_before_launch_within_seconds(tiny_shapes, tmp_path):
    server = MlflowLikeServer(tmp_path / "artifacts", stall_after=0)
    try:
        started = time.monotonic()
        proc = _train(tiny_shapes, tmp_path / "run", {"MLFLOW_TRACKING_URI": server.url()}, "--log-to", "mlflow")
        took = time.monotonic() - started
    finally:
        server.close()
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert "--log-to mlflow:" in proc.stderr and took < 30


def test_bad_credentials_are_one_line_before_launch_and_never_printed(tiny_shapes, tmp_path):
    server = MlflowLikeServer(tmp_path / "artifacts", password="right")
    try:
        uri = server.url().replace("http://", "http://alice:wrong-secret@")
        proc = _train(tiny_shapes, tmp_path / "run", {"MLFLOW_TRACKING_URI": uri}, "--log-to", "mlflow")
    finally:
        server.close()
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert "refuses the credentials" in proc.stderr and "wrong-secret" not in proc.stderr
    assert "alice:***@" in proc.stderr


def test_wandb_online_without_an_api_key_is_one_line_before_launch(tiny_shapes, tmp_path):
    env = {"WANDB_MODE": "online", "WANDB_API_KEY": "", "NETRC": str(tmp_path / "none"), "HOME": str(tmp_path)}
    proc = _train(tiny_shapes, tmp_path / "run", env, "--log-to", "wandb")
    assert proc.returncode == 2 and "needs an API key" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_tracking_server_that_stops_answering_mid_run_costs_the_tracker_not_the_run(tiny_shapes, tmp_path):
    """The report: an MLflow server that stopped answering killed the job after ~76 s (a synchronous call on rank 0
    with 7 x 120 s of retries; the other rank's collective timed out). Here it stops after the run is opened; the
    2-process run finishes its epochs, metrics.jsonl has them all, one warning names mlflow, and the password in the
    tracking URI appears nowhere."""
    server = MlflowLikeServer(tmp_path / "artifacts", password="s3cret")
    run_dir = tmp_path / "run"
    env = {
        "MLFLOW_TRACKING_URI": server.url(user="alice"),
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "2",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    }

    def stop_answering_once_the_run_is_open():
        while "/api/2.0/mlflow/runs/create" not in server.requests:
            time.sleep(0.05)
        time.sleep(0.5)  # its parameters go in
        server.stall_after = len(server.requests)

    threading.Thread(target=stop_answering_once_the_run_is_open, daemon=True).start()
    try:
        started = time.monotonic()
        proc = run_cli(
            [
                "train",
                "--data",
                tiny_shapes,
                "--out",
                run_dir,
                *TINY,
                "--epochs",
                6,  # calls enough after the stall to fail three times in a row, however fast the epochs go
                "--nproc",
                2,
                "--log-to",
                "mlflow",
                "--dist-timeout",
                20,
            ],
            env_extra=env,
        )
        took = time.monotonic() - started
    finally:
        server.close()
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1, 2, 3, 4, 5]
    log = (run_dir / "train.log").read_text()
    assert "--log-to mlflow:" in proc.stderr and "mlflow is disabled for the rest of this run" in log
    assert "s3cret" not in proc.stderr + proc.stdout + log and "alice:***@" in log
    assert took < 150

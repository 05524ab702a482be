"""Faults: a worker killed mid-run is restarted and the run resumes; nothing is lost or repeated."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from .conftest import CLI_TIMEOUT_S, cli_env, read_metrics, started

TRAIN = ["--model", "timm:test_resnet", "--img-size", 32, "--batch-size", 2, "--workers", 0,
         "--val-split", 0.25, "--seed", 9]


def _worker_pid(launcher_pid: int, rank: int) -> int | None:
    for child in Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        if f"RANK={rank}".encode() in environ:
            return int(child)
    return None


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def test_killed_worker_is_restarted_and_every_epoch_is_recorded_once(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *TRAIN,
           "--epochs", 4, "--nproc", 2, "--max-restarts", 1]
    with started(cmd) as launcher:
        metrics = run_dir / "metrics.jsonl"
        _wait_for(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 1, 120)
        victim = _worker_pid(launcher.pid, rank=1)
        assert victim is not None
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        output, _ = launcher.communicate(timeout=CLI_TIMEOUT_S)
    recovery_s = time.monotonic() - killed_at
    assert launcher.returncode == 0, output[-4000:]
    assert "resuming from the last checkpoint" in output
    records = read_metrics(run_dir)
    assert [m["epoch"] for m in records] == [0, 1, 2, 3], records
    import torch

    last = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 3
    print(json.dumps({"kill_to_finish_s": round(recovery_s, 1)}))


STALL_HOOK = '''
import os
if os.environ.get("RANK") == os.environ.get("STALL_RANK"):
    import time
    import ddptrain.engine as engine
    real_step, calls = engine._optimizer_step, []

    def stalling_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            time.sleep(float(os.environ["STALL_S"]))  # this rank stops answering
        return real_step(*args, **kwargs)

    engine._optimizer_step = stalling_step
'''


def test_a_stalled_rank_fails_the_job_within_the_timeout_and_is_named(tiny_shapes, tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(STALL_HOOK)
    env = cli_env({"PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]),
                   "STALL_RANK": "1", "STALL_S": "120"})
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", tmp_path / "run", *TRAIN,
           "--epochs", 2, "--nproc", 2, "--dist-timeout", 8]
    start = time.monotonic()
    with started(cmd, env) as proc:  # the sleeping rank dies with its process group even if this fails
        output, _ = proc.communicate(timeout=100)
    elapsed_s = time.monotonic() - start
    assert proc.returncode != 0
    # rank 1 sleeps inside its 3rd optimizer update; rank 0 finished it and waits in a collective
    assert "rank(s) 1 stopped at step 3 (before its optimizer update) while rank 0 reached step" \
        in output, output[-3000:]
    assert elapsed_s < 60  # the 120 s stall did not hold the job: the 8 s timeout did
    print(json.dumps({"stall_detected_exit_s": round(elapsed_s, 1)}))

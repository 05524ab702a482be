"""Preemption: SIGTERM or SIGUSR1 to the launcher -> every rank stops at the same step, rank 0 saves, the
job exits 75, and `--resume auto` continues from that exact point. The rendezvous listens on loopback only."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..conftest import (
    RESUME_FLAGS,
    assert_same_weights,
    cli_env,
    fault_env,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)

EXIT_PREEMPTED = 75


def _listening_addresses(pids) -> list:
    """Local addresses of TCP sockets in LISTEN state owned by these processes (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = str(fd.readlink()) if fd.is_symlink() else ""
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(_address(fields[1]))
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    if len(host) == 8:
        host = ".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return f"{host}:{int(port, 16)}"


def _session_pids(session_id: int) -> list:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == session_id or int(fields[1]) == session_id:  # session, or parent
            pids.append(int(stat.parent.name))
    return pids


def test_sigterm_saves_mid_epoch_and_resume_ends_where_an_uninterrupted_run_does(tiny_shapes, straight, tmp_path):
    # rank 0 signals the launcher during its 4th step (the first of epoch 2, 3 steps per epoch);
    # --log-every 1: the ranks agree at that step's end and stop there.
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        tiny_shapes,
        "--out",
        run_dir,
        *RESUME_FLAGS,
        "--nproc",
        2,
        "--log-every",
        1,
    ]
    with started(cmd, cli_env(fault_env("signal:SIGTERM", rank=0, step=4))) as launcher:
        deadline = time.monotonic() + 120
        listening = []
        while not listening and time.monotonic() < deadline and launcher.poll() is None:
            listening = _listening_addresses([launcher.pid, *_session_pids(launcher.pid)])
            time.sleep(0.2)
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    assert listening and all(address.startswith("127.0.0.1:") for address in listening), listening
    assert "stopped on SIGTERM" in output and "epoch 2 after 8 of its samples (step 4)" in output, output[-3000:]
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert saved["partial"]["epoch"] == 1 and saved["step"] == 4
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0]

    resumed = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--resume", "auto"]
    )
    assert "continuing at epoch 2/2 after 8 of its samples (step 4" in resumed.stderr
    assert_same_weights(run_dir, straight)
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1]


def test_sigusr1_stops_every_rank_and_one_process_finishes_the_epoch(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--log-every", 1],
        check=False,
        env_extra=fault_env("signal:SIGUSR1", rank=1, step=2),
    )
    assert proc.returncode == EXIT_PREEMPTED, proc.stderr[-4000:]
    assert proc.stderr.count("stopped on SIGUSR1") == 1  # one message, from rank 0
    assert "epoch 1 after 16 of its samples (step 2)" in proc.stderr
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["partial"]["position"]["samples_done"] == 16
    assert not (run_dir / "metrics.jsonl").exists()  # no epoch finished, none recorded

    # the rest of epoch 1 (27 - 16 = 11 samples) re-sharded over one process, which keeps the global batch of 8 with
    # --grad-accum 2: 1 step of 2 x 4 (the last 3 dropped, as any uneven tail), then 3 steps in epoch 2
    resumed = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, "--resume", "auto"])
    assert "the rest of the epoch is re-sharded" in resumed.stderr
    assert "--grad-accum 1 -> 2 keeps the global batch at 8" in resumed.stderr
    assert [(m["epoch"], m["global_batch"]) for m in read_metrics(run_dir)] == [(0, 8), (1, 8)]
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert saved["step"] == 2 + 1 + 3
    # a later resume starts from the recipe as given and the global batch recorded (tests/train/test_optim.py)
    assert saved["config"]["grad_accum"] == 1 and saved["global_batch"] == 8

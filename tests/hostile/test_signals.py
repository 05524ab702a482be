"""Ctrl-C does what it says: the first interrupt stops every rank at its next step with a checkpoint (exit 75) and
`--resume auto` continues from there, bit for bit; a second one aborts at once. A one-node job stays on loopback
even when --master-addr names an address."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from ..conftest import (
    RESUME_FLAGS,
    _descendants,
    assert_same_weights,
    cli_env,
    fault_env,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)
from ..e2e.test_preempt_e2e import _listening_addresses, _session_pids

pytestmark = pytest.mark.slow
EXIT_PREEMPTED, EXIT_INTERRUPTED = 75, 130


def _train(tiny_shapes, run_dir, *extra):
    return [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, *extra]


def _wait_for(condition, proc, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"exited before {what}:\n{proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_ctrl_c_saves_on_every_rank_and_resume_ends_where_an_uninterrupted_run_does(tiny_shapes, straight, tmp_path):
    """The report: Ctrl-C printed 'the workers were told to save a checkpoint and stop', exited 75, saved nothing.
    Here the launcher gets SIGINT during rank 0's 4th step, as a terminal's Ctrl-C would deliver it; --master-addr
    127.0.0.1 is given, and still only loopback listens."""
    run_dir = tmp_path / "run"
    cmd = _train(tiny_shapes, run_dir, "--nproc", 2, "--log-every", 1, "--master-addr", "127.0.0.1")
    with started(cmd, cli_env(fault_env("signal:SIGINT", rank=0, step=4))) as launcher:
        listening = []
        deadline = time.monotonic() + 120
        while not listening and time.monotonic() < deadline and launcher.poll() is None:
            listening = _listening_addresses([launcher.pid, *_session_pids(launcher.pid), *_descendants(launcher.pid)])
            time.sleep(0.2)
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    assert listening and all(address.startswith("127.0.0.1:") for address in listening), listening
    assert "interrupted; every process saves a checkpoint at its next step" in output
    assert "every process saved a checkpoint at step 4 and stopped; continue with --resume auto" in output
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert saved["partial"]["epoch"] == 1 and saved["step"] == 4

    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--resume", "auto"])
    assert_same_weights(run_dir, straight)
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1]


def test_a_second_ctrl_c_aborts_at_once_and_leaves_no_process(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    cmd = _train(tiny_shapes, run_dir, "--nproc", 2, "--log-every", 1)
    with started(cmd, cli_env(fault_env("slow_forward:4", rank="all"))) as launcher:
        _wait_for(
            lambda: (run_dir / "train.log").is_file() and "training" in (run_dir / "train.log").read_text(),
            launcher,
            "training to start",
        )
        workers = _descendants(launcher.pid)
        os.kill(launcher.pid, signal.SIGINT)
        time.sleep(1.0)
        os.kill(launcher.pid, signal.SIGINT)
        interrupted = time.monotonic()
        output, _ = launcher.communicate(timeout=60)
        took = time.monotonic() - interrupted
    assert launcher.returncode == EXIT_INTERRUPTED, output[-3000:]
    assert "interrupted twice" in output and "killed at once, without a checkpoint" in output
    assert took < 4, took  # not the 4-second step, not torchrun's 30-second grace
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_ctrl_c_in_a_terminal_stops_a_single_process_run_with_a_checkpoint(tiny_shapes, tmp_path):
    """One process, its loader workers in the same process group: a terminal sends SIGINT to all of them."""
    run_dir = tmp_path / "run"
    cmd = _train(tiny_shapes, run_dir, "--log-every", 1)
    with started(cmd, cli_env(fault_env("slow_forward:0.3", rank="all"))) as proc:
        _wait_for(
            lambda: (run_dir / "train.log").is_file() and "training" in (run_dir / "train.log").read_text(),
            proc,
            "training to start",
        )
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)  # the whole foreground group, as the terminal does
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_PREEMPTED, output[-3000:]
    assert "stopped on SIGINT: checkpoint saved" in output
    assert (run_dir / "checkpoints" / "last.pt").is_file()

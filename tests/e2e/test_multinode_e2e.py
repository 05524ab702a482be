"""Two separately started agents (--nnodes 2) rendezvous on localhost and train as one job; only
global rank 0 touches the run dir and draws a progress bar."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ddptrain.runtime.launch import free_port

from ..conftest import CLI_TIMEOUT_S, cli_env, read_metrics, started
from .test_twohost_e2e import REASON as TWO_HOSTS_REASON

TRAIN = [
    "--model",
    "timm:test_resnet",
    "--img-size",
    32,
    "--batch-size",
    2,
    "--epochs",
    2,
    "--workers",
    0,
    "--val-split",
    0.25,
    "--seed",
    5,
]

AUDIT_HOOK = """
import os, sys
_root = os.environ.get("AUDIT_ROOT")
_log = os.environ.get("AUDIT_LOG")
_busy = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _hook(event, args):
    if _busy or not _root:
        return
    if event == "open":
        path, mode, flags = args
        writing = any(c in str(mode or "") for c in "wax+") or bool((flags or 0) & _WRITE_FLAGS)
    elif event in ("os.rename", "os.mkdir", "os.remove", "os.rmdir", "os.truncate"):
        path, writing = args[0], True
    else:
        return
    if not writing or not isinstance(path, (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(path)
    if not os.path.abspath(path).startswith(_root):
        return
    _busy.append(1)
    try:
        with open(_log, "a") as handle:
            handle.write(f"{os.environ.get('RANK', 'launcher')}\\t{event}\\t{path}\\n")
    finally:
        _busy.pop()


sys.addaudithook(_hook)
"""


def _agent_cmd(data: Path, run_dir: Path, node_rank: int, nproc: int, port: int) -> list:
    return [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        data,
        "--out",
        run_dir,
        *TRAIN,
        "--nnodes",
        2,
        "--node-rank",
        node_rank,
        "--nproc",
        nproc,
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        port,
    ]


@pytest.mark.skipif(TWO_HOSTS_REASON is None, reason="test_twohost_e2e runs two agents across two network hosts")
@pytest.mark.parametrize("nproc", [2])
def test_two_agents_train_as_one_job(tiny_shapes, tmp_path, nproc):
    """Two agents on loopback, where network namespaces are unavailable."""
    run_dir, port = tmp_path / "run", free_port()
    with (
        started(_agent_cmd(tiny_shapes, run_dir, 0, nproc, port)) as node0,
        started(_agent_cmd(tiny_shapes, run_dir, 1, nproc, port)) as node1,
    ):
        agents = [node0, node1]
        outputs = [agent.communicate(timeout=CLI_TIMEOUT_S)[0] for agent in agents]
    assert [a.returncode for a in agents] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1]  # one writer: no duplicated lines
    assert {m["world_size"] for m in metrics} == {2 * nproc}
    assert len(list((run_dir / "tb").glob("events.out.tfevents.*"))) == 1


def _run_in_terminal(cmd: list, env: dict) -> str:
    """Run with stdout/stderr on a 120-column pseudo-terminal, as a user at a console would."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [str(c) for c in cmd], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: every writer has exited
                break
            if not chunk:
                break
            chunks.append(chunk)
        returncode = proc.wait(timeout=CLI_TIMEOUT_S)
    finally:
        os.close(master)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers included, whatever happened above
        except ProcessLookupError:
            pass
    assert returncode == 0, b"".join(chunks).decode(errors="replace")[-4000:]
    return b"".join(chunks).decode(errors="replace")


def test_only_rank_zero_writes_files_and_draws_the_progress_bar(tiny_shapes, tmp_path):
    hook_dir, run_dir, log = tmp_path / "hook", tmp_path / "run", tmp_path / "writes.tsv"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    env = cli_env(
        {
            "PYTHONPATH": os.pathsep.join([str(hook_dir), os.environ.get("PYTHONPATH", "")]),
            "AUDIT_ROOT": str(run_dir),
            "AUDIT_LOG": str(log),
        }
    )
    console = _run_in_terminal(
        [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *TRAIN, "--nproc", 2], env
    )
    writers = {line.split("\t")[0] for line in log.read_text().splitlines()}
    assert writers == {"0"}, log.read_text()[:2000]
    written = {Path(line.split("\t")[2]).name for line in log.read_text().splitlines()}
    assert {"metrics.jsonl", "train.log", "config.yaml"} <= written
    for epoch in (1, 2):  # each bar prints its empty state once when it is created
        assert console.count(f"epoch {epoch}/2:   0%") == 1, console[-3000:]

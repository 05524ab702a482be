"""An elastic job (--nnodes 1:2, c10d) that loses a node mid-epoch: the survivor re-forms the job alone, resumes
from the last step checkpoint and finishes with each epoch once, the same global batch and the same number of
optimizer steps as an uninterrupted run."""

from __future__ import annotations

import socket
import sys
import time

from ddptrain.runtime.launch import free_port

from ..conftest import (
    CLI_TIMEOUT_S,
    TINY,
    _kill_group,
    cli_env,
    fault_env,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)

RUN = ["--epochs", 2, "--seed", 4]
# Re-form quickly once a node is gone: its keep-alive lapses after 1 s x 3, then 12 s of last call for late joiners.
RDZV_CONF = "last_call_timeout=12,keep_alive_interval=1,keep_alive_max_attempt=3"


def _wait_until(condition, what: str, agent) -> None:
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while not condition():
        assert agent.poll() is None, f"node a exited before {what}:\n{agent.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_lost_node_leaves_the_survivor_with_the_same_global_batch_and_steps(tiny_shapes, tmp_path):
    reference = tmp_path / "reference"
    run_cli(["train", "--data", tiny_shapes, "--out", reference, *TINY, *RUN, "--nproc", 2])

    run_dir, port = tmp_path / "run", free_port()
    node = [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        tiny_shapes,
        "--out",
        run_dir,
        *TINY,
        *RUN,
        "--nproc",
        1,
        "--nnodes",
        "1:2",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "lost-node",
        "--rdzv-conf",
        RDZV_CONF,
        "--max-restarts",
        3,
        "--save-every-steps",
        2,
        "--resume",
        "auto",
    ]
    slow = cli_env(fault_env("slow_data:0.15", rank="all"))  # first attempt only: the restarted workers run clean
    with started(node, env=slow) as node_a:
        _wait_until(lambda: _listening(port), "node a to host the rendezvous", node_a)  # a hosts it, so it survives
        with started(node, env=slow) as node_b:
            _wait_until(lambda: list((run_dir / "checkpoints").glob("step-*.pt")), "a step checkpoint", node_a)
            _kill_group(node_b)  # the node is gone: its agent and its worker, SIGKILLed
        output = node_a.communicate(timeout=CLI_TIMEOUT_S)[0]
    assert node_a.returncode == 0, output[-4000:]
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1]  # each epoch once
    assert {m["global_batch"] for m in metrics} == {4} and metrics[-1]["world_size"] == 1
    assert "--grad-accum 1 -> 2 keeps the global batch at 4" in output
    want = load_checkpoint(reference / "checkpoints" / "last.pt")["step"]
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == want == 12

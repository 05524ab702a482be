"""An elastic job's membership change is a resume of the same run, never a fresh start or a wipe: a second agent
joins a running job (torchrun restarts the workers without counting a restart), and the job — started with
`--overwrite`, the worst case — continues from its checkpoint with each epoch once."""

from __future__ import annotations

import sys

import pytest

from ddptrain.runtime.launch import free_port

from ..conftest import CLI_TIMEOUT_S, TINY, cli_env, fault_env, load_checkpoint, read_metrics, started
from ..e2e.test_elastic_e2e import _listening, _wait_until

pytestmark = pytest.mark.slow
# a lone first node starts after 2 s of last call; a joiner is seen within a second of its arrival. No node is lost
# here, so an agent has 10 keep-alives to miss before the others count it dead: a loaded machine stalls a process
# for seconds at times, and a node wrongly dropped mid-join is not what this test is about.
RDZV_CONF = "last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=10"


def test_a_node_that_joins_a_running_job_continues_its_run(tiny_shapes, tmp_path):
    run_dir, port = tmp_path / "run", free_port()
    node = [
        sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *TINY,
        "--epochs", 3, "--seed", 4, "--nproc", 1, "--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{port}",
        "--rdzv-id", "join", "--rdzv-conf", RDZV_CONF, "--save-every-steps", 2, "--overwrite",
    ]  # fmt: skip
    slow = cli_env(fault_env("slow_data:0.1", rank="all"))
    with started(node, env=slow) as node_a:
        _wait_until(lambda: _listening(port), "node a to host the rendezvous", node_a)
        _wait_until(lambda: list((run_dir / "checkpoints").glob("step-*.pt")), "a step checkpoint alone", node_a)
        with started(node, env=slow) as node_b:
            output_a = node_a.communicate(timeout=CLI_TIMEOUT_S)[0]
            output_b = node_b.communicate(timeout=CLI_TIMEOUT_S)[0]
    assert node_a.returncode == 0 and node_b.returncode == 0, (
        "\n=== a\n" + output_a[-5000:] + "\n=== b\n" + output_b[-5000:]
    )
    output = output_a + output_b
    assert "elastic job 'join' re-formed: its workers continue the run" in output, output[-4000:]
    assert "--overwrite: removed" not in output
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1, 2]  # each epoch once: nothing started again
    assert metrics[-1]["world_size"] == 2
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["epoch"] == 2

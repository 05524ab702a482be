"""Ranks that would train different things are stopped before the first step, by name."""

from __future__ import annotations

import sys

import pytest

from ddptrain.runtime.launch import free_port
from ddptrain.runtime.preflight import disagreements

from ..conftest import CLI_TIMEOUT_S, started, write_synthetic


def test_disagreements_name_the_field_and_the_ranks():
    facts = [
        {"classes": ["a", "b"], "steps_per_epoch": 3},
        {"classes": ["a", "b"], "steps_per_epoch": 3},
        {"classes": ["a", "b", "c"], "steps_per_epoch": 3},
    ]
    assert disagreements(facts) == ["classes: rank 0 has ['a', 'b'], rank 2 has ['a', 'b', 'c']"]
    assert disagreements(facts[:2]) == []


@pytest.mark.slow
def test_nodes_with_different_data_stop_with_a_clear_error(tmp_path):
    """Two agents (one per 'node') whose data folders differ by a class: an error, not a hang."""
    data = [
        write_synthetic(tmp_path / "node0", classes=2, per_class=8),
        write_synthetic(tmp_path / "node1", classes=3, per_class=8),
    ]
    port = free_port()
    cmds = [
        [
            sys.executable,
            "-m",
            "ddptrain",
            "train",
            "--data",
            data[node],
            "--out",
            tmp_path / f"run{node}",
            "--model",
            "timm:test_resnet",
            "--img-size",
            32,
            "--batch-size",
            2,
            "--epochs",
            1,
            "--workers",
            0,
            "--nnodes",
            2,
            "--node-rank",
            node,
            "--nproc",
            1,
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            port,
        ]
        for node in (0, 1)
    ]
    with started(cmds[0]) as node0, started(cmds[1]) as node1:
        agents = [node0, node1]
        outputs = [agent.communicate(timeout=CLI_TIMEOUT_S)[0] for agent in agents]
    assert all(agent.returncode != 0 for agent in agents)
    joined = "\n".join(outputs)
    assert "ranks disagree before the first step: classes: rank 0 has ['disc', 'ring'], rank 1 has" in joined
    assert not (tmp_path / "run0" / "metrics.jsonl").exists()

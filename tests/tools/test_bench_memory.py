"""`ddptrain bench memory` on 2 gloo processes: FSDP holds about half of DDP's states per process, gradient
checkpointing keeps fewer activations, and the table, JSON and chart are written."""

from __future__ import annotations

import json
import re

from ..conftest import run_cli


def test_memory_bench_measures_each_strategy_on_real_processes(tmp_path):
    out = tmp_path / "bench"
    proc = run_cli(
        ["bench", "memory", "--model", "timm:test_vit", "--img-size", 32, "--batch-size", 2, "--steps", 1]
        + ["--nproc", 2, "--device", "cpu", "--out", out, "--json"],
        timeout=600,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = {row["variant"]: row for row in result["rows"]}
    assert list(rows) == ["ddp", "fsdp", "fsdp+gc"] and result["nproc"] == 2
    for key in ("parameters MB", "gradients MB", "optimizer MB", "states MB"):
        assert 0.45 <= rows["fsdp"][key] / rows["ddp"][key] <= 0.6, (key, rows)
    # AdamW: two moments per weight (and a step count per tensor)
    assert 2 <= rows["ddp"]["optimizer MB"] / rows["ddp"]["parameters MB"] <= 2.01
    assert rows["fsdp+gc"]["activations MB"] < rows["fsdp"]["activations MB"]
    assert all(row["peak MB"] > 0 and row["images/s"] > 0 for row in rows.values())
    assert json.loads((out / "memory.json").read_text())["rows"] == result["rows"]
    assert (out / "memory.png").stat().st_size > 0


def test_a_variant_that_fails_says_which_rank_and_why(tmp_path):
    """The row's error is the worker's own exception, or the signal that ended it: not the last line of torchrun's
    banner ("====")."""
    args = ["bench", "memory", "--img-size", 32, "--batch-size", 2, "--steps", 1, "--nproc", 2, "--device", "cpu"]
    args += ["--variants", "ddp", "--out", tmp_path / "bench"]
    misspelled = run_cli([*args, "--model", "timm:nosuch_model"], check=False)
    assert misspelled.returncode != 0 and misspelled.stderr.count("\n") == 1  # refused before any process starts
    assert "--model timm:nosuch_model: unknown timm model 'nosuch_model'" in misspelled.stderr
    (tmp_path / "net.py").write_text("def build(num_classes):\n    raise ValueError('no such width')\n")
    raised = run_cli([*args, "--model", f"{tmp_path / 'net.py'}:build"], check=False)
    assert raised.returncode == 1
    assert re.search(
        r"^ddp: rank [01]: \S*ModelSourceError: --model .*raised ValueError: no such width", raised.stderr, re.M
    )

    hook = tmp_path / "hook"  # rank 1 is killed as the kernel's out-of-memory killer would kill it
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, signal\nif os.environ.get('RANK') == '1':\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = run_cli([*args, "--model", "timm:test_vit"], check=False, env_extra={"PYTHONPATH": str(hook)})
    assert killed.returncode == 1
    assert "ddp: rank 1 ended with signal 9 and printed no error (killed: out of memory?)" in killed.stderr, (
        killed.stderr
    )

"""Faults: a worker killed mid-epoch is restarted and resumes from the step checkpoint, ending bit for bit
where an uninterrupted run ends; a stalled rank fails the job within the timeout, named."""

from __future__ import annotations

import json
import sys
import time

import pytest

from ..conftest import (
    RESUME_FLAGS,
    TIMING_KEYS,
    assert_same_weights,
    cli_env,
    fault_env,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)


def test_worker_killed_mid_epoch_restarts_from_its_step_checkpoint(tiny_shapes, straight, tmp_path):
    # 3 steps per epoch; checkpoints after steps 2 and 4 (mid-epoch 1 and 2); rank 1 is SIGKILLed in
    # step 5, before its optimizer update, so the restarted job must continue from step 4.
    run_dir = tmp_path / "run"
    start = time.monotonic()
    proc = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            run_dir,
            *RESUME_FLAGS,
            "--nproc",
            2,
            "--max-restarts",
            1,
            "--save-every-steps",
            2,
            "--keep-last",
            1,
        ],
        env_extra=fault_env("kill", rank=1, step=5),
    )
    elapsed_s = time.monotonic() - start
    assert "resuming from the last checkpoint" in proc.stderr
    assert "continuing at epoch 2/2 after 8 of its samples (step 4" in proc.stderr, proc.stderr[-3000:]
    assert_same_weights(run_dir, straight)
    got, want = read_metrics(run_dir), read_metrics(straight)
    assert [m["epoch"] for m in got] == [0, 1]  # each epoch exactly once
    for mine, theirs in zip(got, want):
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-9)  # summed in another order
        same = set(theirs) - TIMING_KEYS - {"train_loss"}
        assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}
    steps = sorted(p.name for p in (run_dir / "checkpoints").glob("step-*.pt"))
    assert steps == ["step-000000004.pt"]  # --keep-last 1 pruned step 2
    assert load_checkpoint(run_dir / "checkpoints" / steps[0])["partial"]["position"]["samples_done"] == 8
    print(json.dumps({"killed_run_total_s": round(elapsed_s, 1)}))


def test_a_stalled_rank_fails_the_job_within_the_timeout_and_is_named(tiny_shapes, tmp_path):
    env = cli_env(fault_env("stall:120", rank=1, step=3))
    cmd = [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        tiny_shapes,
        "--out",
        tmp_path / "run",
        "--model",
        "timm:test_resnet",
        "--img-size",
        32,
        "--batch-size",
        2,
        "--workers",
        0,
        "--val-split",
        0.25,
        "--seed",
        9,
        "--epochs",
        2,
        "--nproc",
        2,
        "--dist-timeout",
        8,
    ]
    start = time.monotonic()
    with started(cmd, env) as proc:  # the sleeping rank dies with its process group even if this fails
        output, _ = proc.communicate(timeout=100)
    elapsed_s = time.monotonic() - start
    assert proc.returncode != 0
    # rank 1 sleeps inside its 3rd optimizer update; rank 0 finished it and waits in a collective
    assert "rank 1 stopped at step 3 (before its optimizer update) while rank 0 reached step" in output, output[-3000:]
    # the 120 s stall did not hold the job: the 8 s timeout did, and the stalled rank, stuck in one step
    # for longer than that, exits at once on torchrun's SIGTERM instead of taking its 30 s grace
    assert elapsed_s < 45
    assert "stuck in one step for" in output
    print(json.dumps({"stall_detected_exit_s": round(elapsed_s, 1)}))

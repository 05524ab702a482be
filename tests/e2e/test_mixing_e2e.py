"""Mixup + CutMix + repeated augmentation + an EMA of the weights on 2 processes: stopped mid-epoch by SIGTERM and
resumed, the run ends bit-identical to an uninterrupted one — model and EMA — because every draw is a function of
(seed, epoch, step, rank) or (seed, epoch, sample, copy) and the EMA is saved in every checkpoint, mid-epoch ones
included."""

import pytest
import torch

from ..conftest import RESUME_FLAGS, assert_same_weights, fault_env, json_lines, load_checkpoint, read_metrics, run_cli

EXIT_PREEMPTED = 75


def test_mixup_cutmix_repeated_aug_and_ema_resume_mid_epoch_bit_identical(tiny_shapes, tmp_path):
    flags = [*RESUME_FLAGS, "--nproc", 2, "--log-every", 1, "--mixup", 0.8, "--cutmix", 1.0, "--label-smoothing", 0.1]
    flags += ["--ema-decay", 0.9, "--repeated-aug", 2]
    straight, run_dir = tmp_path / "straight", tmp_path / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", straight, *flags])
    stopped = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *flags],
        check=False,
        env_extra=fault_env("signal:SIGTERM", rank=0, step=4),
    )
    assert stopped.returncode == EXIT_PREEMPTED, stopped.stderr[-3000:]
    assert "ema" in load_checkpoint(run_dir / "checkpoints" / "last.pt")  # the mid-epoch checkpoint has it
    resumed = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *flags, "--resume", "auto"])
    assert "continuing at epoch 2/2 after 8 of its samples (step 4" in resumed.stderr
    assert_same_weights(run_dir, straight)
    got, want = (load_checkpoint(d / "checkpoints" / "last.pt")["ema"] for d in (run_dir, straight))
    assert all(torch.equal(got[name], value) for name, value in want.items())
    model = load_checkpoint(straight / "checkpoints" / "last.pt")["model"]
    assert any(not torch.equal(model[name], value) for name, value in want.items())  # an average, not a copy
    metrics = read_metrics(run_dir)
    assert [m["train_loss"] for m in metrics] == [m["train_loss"] for m in read_metrics(straight)]

    evaluated = run_cli(["eval", "--checkpoint", run_dir / "checkpoints" / "last.pt", "--data", tiny_shapes, "--ema"])
    result = json_lines(evaluated.stdout)[0]
    assert result["top1"] == metrics[-1]["val_top1_ema"]  # eval --ema is the EMA the run evaluated
    assert result["loss"] == pytest.approx(metrics[-1]["val_loss_ema"], rel=1e-5)  # summed on 1 process, not 2

"""Mixup + CutMix on 2 processes: stopped mid-epoch by SIGTERM and resumed, the run ends bit-identical to an
uninterrupted one — every draw is a function of (seed, epoch, step, rank), none of the process's history."""

from ..conftest import RESUME_FLAGS, assert_same_weights, fault_env, read_metrics, run_cli

EXIT_PREEMPTED = 75


def test_mixup_and_cutmix_resume_mid_epoch_bit_identical(tiny_shapes, tmp_path):
    flags = [*RESUME_FLAGS, "--nproc", 2, "--log-every", 1, "--mixup", 0.8, "--cutmix", 1.0, "--label-smoothing", 0.1]
    straight, run_dir = tmp_path / "straight", tmp_path / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", straight, *flags])
    stopped = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *flags],
        check=False,
        env_extra=fault_env("signal:SIGTERM", rank=0, step=4),
    )
    assert stopped.returncode == EXIT_PREEMPTED, stopped.stderr[-3000:]
    resumed = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *flags, "--resume", "auto"])
    assert "continuing at epoch 2/2 after 8 of its samples (step 4" in resumed.stderr
    assert_same_weights(run_dir, straight)
    assert [m["train_loss"] for m in read_metrics(run_dir)] == [m["train_loss"] for m in read_metrics(straight)]

"""--eval-every and --patience on 2 processes: evaluations where asked, and every rank stops at the same epoch end."""

from ..conftest import TINY, load_checkpoint, read_metrics, run_cli


def test_patience_stops_every_rank_at_the_same_epoch_and_a_resume_trains_no_more(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--nproc", 2, "--epochs", 8, "--eval-every", 2]
    flags += ["--patience", 1, "--lr", 1e-6]  # a learning rate too small to change the predictions
    proc = run_cli(["train", *flags])  # exit 0: no rank was left waiting in a collective
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1, 2, 3]  # evaluated after 2 and 4; no better after 4: stop
    assert ["val_top1" in m for m in metrics] == [False, True, False, True]
    assert metrics[3]["val_top1"] <= metrics[1]["val_top1"]
    assert "not evaluated" in proc.stderr
    assert "early stop before epoch 5 of 8: val_top1 has not improved for 1 evaluation (--patience 1)" in proc.stderr
    last = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert (last["epoch"], last["since_best"]) == (3, 1)

    resumed = run_cli(["train", *flags, "--resume", "auto"])
    assert "early stop before epoch 5 of 8" in resumed.stderr and len(read_metrics(run_dir)) == 4


def test_eval_metric_loss_picks_best_pt_by_the_lowest_loss_and_patience_follows_it(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 8, "--lr", 0.2, "--patience", 1]
    proc = run_cli(["train", *flags, "--eval-metric", "loss"])
    metrics = read_metrics(run_dir)
    losses = [m["val_loss"] for m in metrics]
    # patience 1: the run ends at the first evaluation whose loss is not below every one before it
    first_worse = next((i for i in range(1, len(losses)) if losses[i] >= min(losses[:i])), None)
    assert len(metrics) == (8 if first_worse is None else first_worse + 1), losses
    assert [m["best"] for m in metrics] == [min(losses[: i + 1]) for i in range(len(losses))]
    assert all(m["eval_metric"] == "loss" for m in metrics)
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert best["metrics"]["val_loss"] == min(losses) and best["best_metric"] == "loss"
    if first_worse is not None and first_worse < 7:  # the check comes before the next epoch: none after the last
        assert "val_loss has not improved for 1 evaluation " in proc.stderr
    assert f"done: best val_loss {min(losses):.4f}" in proc.stderr

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
    assert "early stop before epoch 5 of 8: val_top1 has not improved for 1 evaluation(s) (--patience 1)" in proc.stderr
    last = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert (last["epoch"], last["since_best"]) == (3, 1)

    resumed = run_cli(["train", *flags, "--resume", "auto"])
    assert "early stop before epoch 5 of 8" in resumed.stderr and len(read_metrics(run_dir)) == 4

"""An interrupted run continues at the next epoch with `--resume auto`."""
import torch

from .conftest import read_metrics, run_cli

COMMON = ["--model", "resnet18", "--img-size", 32, "--batch-size", 4, "--epochs", 3, "--lr", 0.01,
          "--workers", 0, "--val-split", 0.25, "--seed", 3]


def test_resume_auto_continues_at_the_next_epoch(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *COMMON, "--nproc", 2, "--stop-after-epochs", 1])
    first = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert first["epoch"] == 0 and [m["epoch"] for m in read_metrics(run_dir)] == [0]

    # Resume in a single process: the same run continues, on another world size.
    proc = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *COMMON, "--resume", "auto"])
    assert "continuing at epoch 2/3" in proc.stderr
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1, 2]
    assert [m["world_size"] for m in metrics] == [2, 1, 1]
    last = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 2
    steps = [m["step"] for m in metrics]
    assert steps[0] == first["step"] and steps == sorted(steps)
    assert metrics[-1]["lr"] < metrics[0]["lr"]  # the cosine schedule carried on, it did not restart


def test_resume_from_a_missing_file_is_an_error(tiny_shapes, tmp_path):
    proc = run_cli(["train", "--data", tiny_shapes, "--out", tmp_path / "r", *COMMON,
                    "--resume", tmp_path / "nope.pt"], check=False)
    assert proc.returncode != 0 and "no such checkpoint" in proc.stderr

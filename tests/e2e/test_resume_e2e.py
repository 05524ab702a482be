"""Resume: an interrupted run continues at the next epoch and ends exactly where an uninterrupted one does."""

import shutil

import pytest
import torch

from ..conftest import RESUME_FLAGS as COMMON
from ..conftest import TIMING_KEYS, assert_same_weights, read_metrics, run_cli


def _train(data, run_dir, *extra):
    return run_cli(["train", "--data", data, "--out", run_dir, *COMMON, *extra])


def _model(run_dir):
    return torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)


def _without_timings(metrics):
    return [{k: v for k, v in m.items() if k not in TIMING_KEYS} for m in metrics]


@pytest.fixture(scope="module")
def half_done(tiny_shapes, tmp_path_factory):
    """A 2-process run stopped after its first epoch (kept pristine; tests resume copies of it)."""
    run_dir = tmp_path_factory.mktemp("half") / "run"
    _train(tiny_shapes, run_dir, "--nproc", 2, "--stop-after-epochs", 1)
    return run_dir


def test_resume_equals_the_uninterrupted_run(tiny_shapes, straight, half_done, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(half_done, run_dir)
    assert _model(run_dir)["epoch"] == 0 and [m["epoch"] for m in read_metrics(run_dir)] == [0]
    proc = _train(tiny_shapes, run_dir, "--nproc", 2, "--resume", "auto")
    assert "continuing at epoch 2/2" in proc.stderr
    assert_same_weights(run_dir, straight)
    assert _without_timings(read_metrics(run_dir)) == _without_timings(read_metrics(straight))


def test_resume_on_one_process_continues_the_same_schedule(tiny_shapes, straight, half_done, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(half_done, run_dir)
    _train(tiny_shapes, run_dir, "--resume", "auto")  # 2 ranks -> 1
    metrics, reference = read_metrics(run_dir), read_metrics(straight)
    assert [m["epoch"] for m in metrics] == [0, 1] and [m["world_size"] for m in metrics] == [2, 1]
    assert [m["lr"] for m in metrics] == pytest.approx([m["lr"] for m in reference])
    assert metrics[1]["val_samples"] == reference[1]["val_samples"]


def test_resume_on_two_processes_from_a_single_process_run(tiny_shapes, straight, tmp_path):
    run_dir = tmp_path / "run"
    _train(tiny_shapes, run_dir, "--stop-after-epochs", 1)
    _train(tiny_shapes, run_dir, "--nproc", 2, "--resume", "auto")  # 1 rank -> 2
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1] and [m["world_size"] for m in metrics] == [1, 2]
    assert [m["lr"] for m in metrics] == pytest.approx([m["lr"] for m in read_metrics(straight)])
    assert _model(run_dir)["epoch"] == 1


def test_resume_from_a_missing_file_is_an_error(tiny_shapes, tmp_path):
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "r", *COMMON, "--resume", tmp_path / "nope.pt"],
        check=False,
    )
    assert proc.returncode != 0 and "no such checkpoint" in proc.stderr


def test_the_saved_config_reproduces_the_run(straight, tmp_path):
    """`ddptrain train --config RUN_DIR/config.yaml` alone (a new --out aside) repeats the run bit for bit."""
    run_dir = tmp_path / "again"
    run_cli(["train", "--config", straight / "config.yaml", "--out", run_dir])
    assert_same_weights(run_dir, straight)
    assert _without_timings(read_metrics(run_dir)) == _without_timings(read_metrics(straight))
    assert (run_dir / "config.yaml").read_text() == (straight / "config.yaml").read_text().replace(
        str(straight), str(run_dir)
    )

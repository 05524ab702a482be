"""Training from WebDataset shards written by the `webdataset` package: a SIGTERM mid-epoch resumes to the weights
of an uninterrupted run, and evaluation counts the same images with the same results as the folder they hold."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..conftest import (
    RESUME_FLAGS,
    assert_same_weights,
    cli_env,
    fault_env,
    json_lines,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)
from ..wds_data import folder_images, write_wds

EXIT_PREEMPTED = 75
TAR_FLAGS = [*RESUME_FLAGS, "--label-key", "txt", "--nproc", 2]


@pytest.fixture(scope="module")
def tar_set(tiny_shapes, tmp_path_factory) -> Path:
    return write_wds(tmp_path_factory.mktemp("wds") / "set", "part-%06d.tar", folder_images(Path(tiny_shapes)))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> dict:
    return {"DDPTRAIN_SHARD_CACHE": str(tmp_path_factory.mktemp("cache"))}


@pytest.fixture(scope="module")
def from_tars(tar_set, cache, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("from-tars") / "run"
    done = run_cli(["train", "--data", tar_set, "--out", run_dir, *TAR_FLAGS], env_extra=cache)
    assert "(tar set layout)" in done.stderr, done.stderr[-3000:]
    return run_dir


def test_sigterm_mid_epoch_on_a_tar_set_resumes_to_the_same_weights(tar_set, from_tars, cache, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tar_set, "--out", run_dir, *TAR_FLAGS, "--log-every", 1]
    with started(cmd, cli_env({**cache, **fault_env("signal:SIGTERM", rank=0, step=4)})) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["partial"]["epoch"] == 1
    run_cli(["train", "--data", tar_set, "--out", run_dir, *TAR_FLAGS, "--resume", "auto"], env_extra=cache)
    assert_same_weights(run_dir, from_tars)


def test_eval_of_a_tar_set_equals_the_run_and_the_folder_it_holds(tar_set, tiny_shapes, from_tars, cache):
    checkpoint = from_tars / "checkpoints" / "last.pt"
    val = json_lines(run_cli(["eval", "--checkpoint", checkpoint, "--data", tar_set], env_extra=cache).stdout)
    last = read_metrics(from_tars)[-1]
    assert val[0]["samples"] == 9 and val[0]["top1"] == last["val_top1"]
    assert val[0]["loss"] == pytest.approx(last["val_loss"], rel=1e-5)
    every = [["eval", "--checkpoint", checkpoint, "--data", data, "--split", "all"] for data in (tar_set, tiny_shapes)]
    tars, folder = (json_lines(run_cli(args, env_extra=cache).stdout)[0] for args in every)
    assert tars["samples"] == folder["samples"] == 36 and tars["skipped"] == folder["skipped"] == 0
    assert tars["top1"] == folder["top1"] and tars["loss"] == pytest.approx(folder["loss"], rel=1e-5)


def test_predict_reads_every_image_of_a_tar_set(tar_set, from_tars, cache):
    done = run_cli(
        ["predict", "--checkpoint", from_tars / "checkpoints" / "last.pt", "--data", tar_set], env_extra=cache
    )
    lines = json_lines(done.stdout)
    assert len(lines) == 36 and all("topk" in line and ".tar:part-" in line["path"] for line in lines)
    assert len({line["path"] for line in lines}) == 36

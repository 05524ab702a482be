"""Training from a Hugging Face dataset made by the `datasets` library (imagefolder + save_to_disk): a SIGTERM
mid-epoch resumes to the weights of an uninterrupted run, and `eval --split all` equals the folder it holds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..conftest import RESUME_FLAGS, assert_same_weights, cli_env, fault_env, json_lines, run_cli, started
from ..hf_data import write_hf

EXIT_PREEMPTED = 75
FLAGS = [*RESUME_FLAGS, "--nproc", 2]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict:
    return {"HF_HOME": str(tmp_path_factory.mktemp("hf-home"))}


@pytest.fixture(scope="module")
def saved(tiny_shapes, home, tmp_path_factory) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", home["HF_HOME"])
        return write_hf(Path(tiny_shapes), tmp_path_factory.mktemp("hf") / "shapes")


@pytest.fixture(scope="module")
def from_hf(saved, home, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("from-hf") / "run"
    done = run_cli(["train", "--data", saved, "--out", run_dir, *FLAGS], env_extra=home)
    assert "(hf dataset layout)" in done.stderr, done.stderr[-3000:]
    return run_dir


def test_sigterm_mid_epoch_on_a_hf_dataset_resumes_to_the_same_weights(saved, from_hf, home, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", saved, "--out", run_dir, *FLAGS, "--log-every", 1]
    with started(cmd, cli_env({**home, **fault_env("signal:SIGTERM", rank=0, step=4)})) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    run_cli(["train", "--data", saved, "--out", run_dir, *FLAGS, "--resume", "auto"], env_extra=home)
    assert_same_weights(run_dir, from_hf)


def test_eval_of_every_row_equals_the_folders(saved, tiny_shapes, from_hf, home):
    checkpoint = from_hf / "checkpoints" / "last.pt"
    every = [["eval", "--checkpoint", checkpoint, "--data", data, "--split", "all"] for data in (saved, tiny_shapes)]
    hf, folder = (json_lines(run_cli(args, env_extra=home).stdout)[0] for args in every)
    assert hf["samples"] == folder["samples"] == 36 and hf["skipped"] == folder["skipped"] == 0
    assert hf["top1"] == folder["top1"] and hf["loss"] == pytest.approx(folder["loss"], rel=1e-5)

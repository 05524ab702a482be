"""Training from a Hugging Face dataset made by the `datasets` library (imagefolder + save_to_disk): a SIGTERM
mid-epoch resumes to the weights of the uninterrupted run on the folder it was made from, and `eval --split all`
equals the folder's."""

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


def test_sigterm_mid_epoch_on_a_hf_dataset_resumes_to_the_folders_weights(saved, straight, home, tmp_path):
    """The dataset holds the folder's images in the folder's order, so its run is the folder's, bit for bit."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", saved, "--out", run_dir, *FLAGS, "--log-every", 1]
    with started(cmd, cli_env({**home, **fault_env("signal:SIGTERM", rank=0, step=4)})) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    resumed = run_cli(["train", "--data", saved, "--out", run_dir, *FLAGS, "--resume", "auto"], env_extra=home)
    assert "(hf dataset layout)" in resumed.stderr, resumed.stderr[-3000:]
    assert_same_weights(run_dir, straight)


def test_eval_of_every_row_equals_the_folders(saved, tiny_shapes, straight, home):
    checkpoint = straight / "checkpoints" / "last.pt"
    every = [["eval", "--checkpoint", checkpoint, "--data", data, "--split", "all"] for data in (saved, tiny_shapes)]
    hf, folder = (json_lines(run_cli(args, env_extra=home).stdout)[0] for args in every)
    assert hf["samples"] == folder["samples"] == 36 and hf["skipped"] == folder["skipped"] == 0
    assert hf["top1"] == folder["top1"] and hf["loss"] == pytest.approx(folder["loss"], rel=1e-5)

"""A model of the user's own, from a file outside the package (`--model file.py:build`), through everything a run
does: 2 ranks, SIGTERM and `--resume auto` bit for bit, eval, predict, export, and one clear line when the file is
gone."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import assert_same_weights, cli_env, fault_env, json_lines, load_checkpoint, run_cli, started

# a small CNN with BatchNorm and dropout, written as a research team's model file would be, importing a helper file
# that sits beside it
MODEL_FILE = """
from torch import nn

from blocks import conv_block


class TinyNet(nn.Module):
    def __init__(self, num_classes, width=4, drop_rate=0.0):
        super().__init__()
        self.body = nn.Sequential(conv_block(3, width), conv_block(width, 2 * width), nn.AdaptiveAvgPool2d(1))
        self.drop = nn.Dropout(drop_rate)
        self.classifier = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        return self.classifier(self.drop(self.body(x).flatten(1)))


def build(num_classes, width=4, drop_rate=0.0):
    return TinyNet(num_classes, width, drop_rate)
"""
BLOCKS_FILE = """
from torch import nn


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout), nn.ReLU())
"""
FLAGS = [
    "--sync-bn",  # the factory's BatchNorm layers normalise over both ranks' batches
    "--model-kwargs",
    "width=6",
    "--dropout",
    0.1,
    "--img-size",
    32,
    "--batch-size",
    4,
    "--epochs",
    2,
    "--lr",
    0.05,
    "--workers",
    1,
    "--val-split",
    0.25,
    "--seed",
    5,
]
EXIT_PREEMPTED = 75


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("their_repo")
    (folder / "tinynet.py").write_text(textwrap.dedent(MODEL_FILE))
    (folder / "blocks.py").write_text(textwrap.dedent(BLOCKS_FILE))
    return folder


@pytest.fixture(scope="module")
def custom_straight(tiny_shapes, model_dir, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("custom") / "run"
    run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, "--model", model_dir / "tinynet.py:build"]
        + FLAGS
        + ["--nproc", 2]
    )
    return run_dir


def test_a_model_file_trains_on_two_ranks_and_resumes_bit_for_bit_after_sigterm(
    tiny_shapes, model_dir, custom_straight, tmp_path, monkeypatch
):
    saved = load_checkpoint(custom_straight / "checkpoints" / "last.pt")
    assert saved["config"]["model"] == f"{model_dir / 'tinynet.py'}:build"
    assert saved["config"]["model_kwargs"] == {"width": 6} and saved["config"]["dropout"] == 0.1
    assert saved["model"]["classifier.weight"].shape == (3, 12)  # width 6 reached the factory

    # from another folder, with a relative path: the run records the file's absolute path
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        tiny_shapes,
        "--out",
        run_dir,
        "--model",
        "tinynet.py:build",
        *FLAGS,
        "--nproc",
        2,
        "--log-every",
        1,
    ]
    monkeypatch.chdir(model_dir)  # the model file named relative to the folder the command runs in
    with started(cmd, cli_env(fault_env("signal:SIGTERM", rank=0, step=4))) as launcher:
        output, _ = launcher.communicate(timeout=240)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["partial"] is not None

    resumed = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            run_dir,
            "--model",
            model_dir / "tinynet.py:build",
            *FLAGS,
            "--nproc",
            2,
            "--resume",
            "auto",
        ]
    )
    assert "continuing at epoch" in resumed.stderr
    assert_same_weights(run_dir, custom_straight)


def test_eval_predict_and_export_rebuild_the_model_from_its_checkpoint(tiny_shapes, custom_straight, tmp_path):
    best = custom_straight / "checkpoints" / "best.pt"
    evaluated = json_lines(run_cli(["eval", "--checkpoint", best, "--data", tiny_shapes]).stdout)[-1]
    assert (
        evaluated["samples"] == 9
        and evaluated["top1"] == json.loads((custom_straight / "best_eval.json").read_text())["top1"]
    )

    images = tiny_shapes / "disc"
    from_checkpoint = json_lines(run_cli(["predict", "--checkpoint", best, images]).stdout)
    exported = tmp_path / "tinynet.safetensors"
    run_cli(["export", "--checkpoint", best, "--format", "safetensors", "--out", exported])
    from_export = json_lines(run_cli(["predict", "--checkpoint", exported, images]).stdout)
    assert len(from_checkpoint) == 12 and from_export == from_checkpoint
    assert json.loads((tmp_path / "tinynet.safetensors.json").read_text())["model"].endswith("tinynet.py:build")


def test_a_checkpoint_whose_model_file_is_gone_is_one_clear_line(tiny_shapes, model_dir, custom_straight, tmp_path):
    import torch

    moved = tmp_path / "moved"
    shutil.copytree(model_dir, moved)
    saved = load_checkpoint(custom_straight / "checkpoints" / "best.pt")
    saved["config"]["model"] = f"{moved / 'tinynet.py'}:build"
    torch.save(saved, tmp_path / "best.pt")
    assert run_cli(["eval", "--checkpoint", tmp_path / "best.pt", "--data", tiny_shapes]).returncode == 0
    (moved / "tinynet.py").unlink()

    failed = run_cli(["eval", "--checkpoint", tmp_path / "best.pt", "--data", tiny_shapes], check=False)
    lines = failed.stderr.strip().splitlines()
    assert failed.returncode != 0 and len(lines) == 1, failed.stderr
    assert f"model file {moved / 'tinynet.py'} does not exist" in lines[0] and "put it" in lines[0]
    assert "Traceback" not in failed.stderr

    train = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "run", "--model", "nowhere.py:build"], check=False
    )
    assert train.returncode == 2 and "model file" in train.stderr and "nowhere.py does not exist" in train.stderr
    assert not (tmp_path / "run").exists()


UNUSED_HEAD = """
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.aux = nn.Linear(4, 7)  # an auxiliary head the forward never uses
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))
"""


def test_a_model_with_parameters_outside_the_loss_is_named_not_a_ddp_traceback(tiny_shapes, tmp_path):
    (tmp_path / "aux.py").write_text(UNUSED_HEAD)
    failed = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            tmp_path / "run",
            "--model",
            f"{tmp_path / 'aux.py'}:Net",
            "--img-size",
            32,
            "--batch-size",
            4,
            "--epochs",
            1,
            "--workers",
            0,
            "--nproc",
            2,
        ],
        check=False,
    )
    assert failed.returncode != 0
    assert "trainable parameters that take no part in the loss (aux.weight, aux.bias)" in failed.stderr
    assert "Traceback" not in failed.stderr and "Expected to have finished reduction" not in failed.stderr


def test_weights_head_name_and_a_frozen_backbone_on_a_custom_model(tiny_shapes, model_dir, custom_straight, tmp_path):
    start = custom_straight / "checkpoints" / "last.pt"
    run_dir = tmp_path / "tuned"
    run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            run_dir,
            "--model",
            model_dir / "tinynet.py:build",
            "--model-kwargs",
            "width=6",
            "--weights",
            start,
            "--head-name",
            "classifier",
            "--freeze-backbone",
            "--img-size",
            32,
            "--batch-size",
            4,
            "--epochs",
            1,
            "--workers",
            0,
            "--lr",
            0.1,
        ]
    )
    before, after = load_checkpoint(start)["model"], load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]
    learned = [
        k for k in before if k.startswith("body.") and not k.endswith(("running_mean", "running_var", "tracked"))
    ]
    assert learned and all(after[k].equal(before[k]) for k in learned)  # BatchNorm statistics still move
    assert not after["classifier.weight"].equal(before["classifier.weight"])  # only the named head learned

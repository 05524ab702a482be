"""Files from elsewhere: nothing is ever unpickled into running code; safetensors are accepted."""

from __future__ import annotations

import pathlib

import pytest
import torch
from safetensors.torch import save_file

from ddptrain.errors import CheckpointError, WeightsError
from ddptrain.models import build_model, load_weights
from ddptrain.models.weights import read_model_weights
from ddptrain.train import checkpointer

from ..conftest import run_cli

SMALL = ["--model", "resnet18", "--img-size", 32, "--batch-size", 4, "--workers", 0]


class _Payload:
    """Unpickling this would create a file: proof that code from the file ran."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _crafted(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    marker = tmp_path / "payload-ran"
    path = tmp_path / "crafted.pt"
    torch.save({"model": {"fc.weight": torch.zeros(1)}, "extra": _Payload(marker)}, path)
    return path, marker


def test_crafted_weights_and_checkpoints_are_refused_without_running_code(tmp_path):
    path, marker = _crafted(tmp_path)
    with pytest.raises(WeightsError, match="weights_only"):
        read_model_weights(path)
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        checkpointer.load(path)
    assert not marker.exists()


def test_a_refusal_is_one_line_naming_what_the_file_holds(tmp_path):
    """torch's own refusal is eight lines with terminal escapes and advice to load with weights_only=False."""
    path, marker = _crafted(tmp_path)
    with pytest.raises(WeightsError) as refused:
        read_model_weights(path)
    said = str(refused.value)
    assert "\n" not in said and "\x1b" not in said and "weights_only=False" not in said
    assert said.startswith(f"cannot read weights from {path}: it holds a pickled `getattr`, which could run code")
    assert not marker.exists()


def test_a_timm_checkpoint_with_its_command_line_is_read(tmp_path):
    """timm's train.py stores its arguments as an argparse.Namespace in every checkpoint (beside `state_dict`,
    saved from the DDP-wrapped model): refused before as 'pickled code'. A Namespace unpickles as plain data."""
    import argparse

    model = build_model("resnet18", 3)
    path = tmp_path / "model_best.pth.tar"
    state = {f"module.{k}": v for k, v in model.state_dict().items()}
    torch.save({"epoch": 4, "arch": "resnet18", "state_dict": state, "args": argparse.Namespace(lr=0.1)}, path)
    weights = read_model_weights(path)
    assert weights.keys() == model.state_dict().keys()
    assert load_weights(build_model("resnet18", 3), weights, "fc", str(path)) == []


@pytest.mark.slow
def test_crafted_checkpoint_is_refused_by_the_cli(tmp_path, tiny_shapes):
    path, marker = _crafted(tmp_path)
    proc = run_cli(["eval", "--checkpoint", path, "--data", tiny_shapes], check=False)
    assert proc.returncode != 0 and "cannot read checkpoint" in proc.stderr
    proc = run_cli(["train", "--data", tiny_shapes, "--out", tmp_path / "run", *SMALL, "--resume", path], check=False)
    assert proc.returncode != 0 and "cannot read checkpoint" in proc.stderr
    assert not marker.exists()


def test_safetensors_weights_load(tmp_path):
    source = build_model("resnet18", 3)
    save_file({f"module.{k}": v.contiguous() for k, v in source.state_dict().items()}, str(tmp_path / "w.safetensors"))
    model = build_model("resnet18", 3)
    path = tmp_path / "w.safetensors"
    assert load_weights(model, read_model_weights(path), "fc", str(path)) == []
    assert torch.equal(model.layer1[0].conv1.weight, source.layer1[0].conv1.weight)


def test_missing_weights_file_stops_the_cli(tmp_path, tiny_shapes):
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "run", *SMALL, "--weights", tmp_path / "nope.pth"],
        check=False,
    )
    assert proc.returncode != 0 and "does not exist" in proc.stderr and "from scratch" in proc.stderr
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_another_tools_checkpoint_is_named_as_such_by_eval_and_resume(tmp_path):
    """A script's {'model', 'optimizer', 'epoch'} checkpoint passed as a ddptrain one: eval rebuilt a model of 0
    classes and stopped on a traceback of size mismatches; a resume said "classes [] vs ['disc', 'ring']". timm's
    .pth.tar was refused for its pickled arguments. Each now says it is another tool's and to use --weights."""
    import argparse

    from ddptrain.tools.modelfile import ModelFileError, load_model
    from ddptrain.train.resume import Resume

    weights = build_model("resnet18", 3).state_dict()
    script = tmp_path / "script.pth"
    torch.save({"model": weights, "optimizer": {}, "epoch": 3}, script)
    timm_like = tmp_path / "model_best.pth.tar"
    torch.save({"state_dict": weights, "args": argparse.Namespace(lr=0.1), "epoch": 3}, timm_like)
    with pytest.raises(ModelFileError, match=r"script.pth is not a checkpoint ddptrain train wrote .*--weights"):
        load_model(script, torch.device("cpu"))
    with pytest.raises(CheckpointError, match=r"model_best.pth.tar is not a ddptrain checkpoint .*use --weights"):
        load_model(timm_like, torch.device("cpu"))
    with pytest.raises(CheckpointError) as refused:
        Resume(script, checkpointer.load(script))
    assert str(refused.value) == (
        f"cannot resume from {script}: it is not a checkpoint ddptrain train wrote (it holds no class names or "
        f"training options; another tool's?). To start from its weights use --weights {script}"
    )
    assert refused.value.every_rank  # said once per node, not by every rank

"""`ddptrain export`: exported files predict and evaluate exactly like the checkpoint they came from."""

import io
import json
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from ddptrain.config import Config
from ddptrain.models import build_model
from ddptrain.runtime.env import detect
from ddptrain.tools.export import ExportError, export
from ddptrain.tools.inference import EvalOptions, run_eval, run_predict
from ddptrain.tools.modelfile import ModelFileError, load_model, sidecar_path

from ..conftest import run_cli, write_synthetic

CLASSES = ["disc", "ring", "star"]


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("images"), classes=3, per_class=3)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """A checkpoint as the trainer writes it, with weights that make confident, distinct predictions."""
    torch.manual_seed(0)
    model = build_model("timm:test_resnet", len(CLASSES))
    with torch.no_grad():
        for module in model.modules():  # non-trivial BatchNorm statistics, so eval mode matters
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
        model.get_classifier().weight.mul_(20)
    preprocessing = {"img_size": 32, "mean": "0.5,0.5,0.5", "std": "0.5,0.5,0.5", "crop_fraction": 0.95}
    config = Config.from_flat({"data": "unused", "model": "timm:test_resnet", **preprocessing}).to_flat()
    path = tmp_path_factory.mktemp("run") / "best.pt"
    torch.save({"model": model.state_dict(), "config": config, "class_names": CLASSES, "epoch": 4}, path)
    return path


def predictions(model_file: Path, images: Path) -> list:
    out = io.StringIO()
    assert (
        run_predict(str(model_file), [str(images)], topk=3, device="cpu", batch_size=4, out=out, trust_torchscript=True)
        == 0
    )
    return [json.loads(line) for line in out.getvalue().splitlines()]


def assert_same_predictions(got: list, want: list) -> None:
    assert [p["path"] for p in got] == [p["path"] for p in want]
    for a, b in zip(got, want):
        assert [t["class"] for t in a["topk"]] == [t["class"] for t in b["topk"]], a["path"]
        assert [t["prob"] for t in a["topk"]] == pytest.approx([t["prob"] for t in b["topk"]], abs=1e-5)


@pytest.mark.parametrize("fmt", ["torchscript", "safetensors"])
def test_exported_model_predicts_like_the_checkpoint(ckpt, images, fmt):
    exported = export(ckpt, fmt)
    assert exported.name == {"torchscript": "best.torchscript.pt", "safetensors": "best.safetensors"}[fmt]
    meta = json.loads(sidecar_path(exported).read_text())
    assert meta["class_names"] == CLASSES and meta["img_size"] == 32 and meta["epoch"] == 4
    assert (meta["mean"], meta["std"], meta["crop_fraction"]) == ([0.5] * 3, [0.5] * 3, 0.95)  # as trained
    want = predictions(ckpt, images)
    assert len(want) == 9 and len({p["topk"][0]["prob"] for p in want}) > 1  # outputs depend on the image
    assert_same_predictions(predictions(exported, images), want)


def test_an_exported_file_has_the_permissions_of_the_runs_other_files(ckpt):
    """safetensors writes 0600 whatever the umask; the export follows the umask like config.yaml beside it."""
    exported = export(ckpt, "safetensors")
    assert exported.stat().st_mode & 0o777 == sidecar_path(exported).stat().st_mode & 0o777


def test_exported_files_carry_their_class_names_inside(ckpt, tmp_path):
    """Moved without its .json, an exported file still knows its classes and model."""
    for fmt in ("torchscript", "safetensors"):
        name = "model.torchscript.pt" if fmt == "torchscript" else "written/model.safetensors"
        exported = export(ckpt, fmt, tmp_path / name)
        if fmt == "safetensors":  # moved away from its .json
            exported = exported.rename(tmp_path / "model.safetensors")
        else:
            sidecar_path(exported).unlink()
        loaded = load_model(exported, torch.device("cpu"), trust_torchscript=True)
        assert loaded.class_names == CLASSES and loaded.config.data.img_size == 32


def test_eval_of_an_exported_model_equals_eval_of_the_checkpoint(ckpt, images, capsys):
    exported = export(ckpt, "torchscript", ckpt.parent / "m.torchscript.pt")
    env = detect({})
    reports = [
        run_eval(
            EvalOptions(
                checkpoint=str(path),
                data=str(images),
                split="all",
                batch_size=4,
                workers=0,
                device="cpu",
                trust_torchscript=True,
            ),
            env,
        )
        for path in (ckpt, exported)
    ]
    assert reports[0]["samples"] == reports[1]["samples"] == 9
    assert reports[1]["confusion"] == reports[0]["confusion"]
    assert reports[1]["loss"] == pytest.approx(reports[0]["loss"], rel=1e-5)


def test_onnx_without_the_package_says_what_to_install(ckpt, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if it were not installed
    with pytest.raises(ExportError, match="pip install onnx"):
        export(ckpt, "onnx", tmp_path / "m.onnx")


def test_onnx_export_runs_like_the_checkpoint(ckpt, tmp_path):
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    exported = export(ckpt, "onnx", tmp_path / "m.onnx")
    images = torch.randn(2, 3, 32, 32)
    want = load_model(ckpt, torch.device("cpu")).model(images).detach().numpy()
    got = ort.InferenceSession(str(exported)).run(None, {"images": images.numpy()})[0]
    assert abs(got - want).max() < 1e-4
    with pytest.raises(ModelFileError, match="onnxruntime"):
        load_model(exported, torch.device("cpu"))


def test_export_cli_writes_the_model_and_its_classes(ckpt, tmp_path):
    from ddptrain.cli import main

    assert (
        main(["export", "--checkpoint", str(ckpt), "--format", "safetensors", "--out", str(tmp_path / "x.safetensors")])
        == 0
    )
    assert json.loads((tmp_path / "x.safetensors.json").read_text())["class_names"] == CLASSES


class _Payload:
    """Unpickling this would create a file: proof that code from the file ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_torchscript_program_runs_only_by_its_name_and_with_trust(ckpt, images, tmp_path):
    program = export(ckpt, "torchscript", tmp_path / "m.torchscript.pt")
    with pytest.raises(ModelFileError, match="runs the code it holds. Pass --trust-torchscript"):
        load_model(program, torch.device("cpu"))
    disguised = tmp_path / "best.pt"  # the same program, named like a checkpoint: never loaded, whatever the flag
    disguised.write_bytes(program.read_bytes())
    with pytest.raises(ModelFileError, match="is a TorchScript program, not a checkpoint"):
        load_model(disguised, torch.device("cpu"), trust_torchscript=True)
    with pytest.raises(ExportError, match="name a TorchScript export"):
        export(ckpt, "torchscript", tmp_path / "model.pt")
    with pytest.raises(ExportError, match=r"name a safetensors export \*.safetensors \(not exp\)"):
        export(ckpt, "safetensors", tmp_path / "exp")  # predict would read it as a checkpoint
    assert not (tmp_path / "exp").exists()


def test_a_crafted_file_named_like_a_checkpoint_is_refused_without_running_anything(tmp_path, images):
    marker = tmp_path / "payload-ran"
    crafted = tmp_path / "best.pt"
    torch.save({"model": {"w": torch.zeros(1)}, "extra": _Payload(marker)}, crafted)
    with zipfile.ZipFile(crafted, "a") as archive:  # and it claims to be one of ddptrain's TorchScript exports
        archive.writestr("best/extra/ddptrain.json", "{}")
    for command in (
        ["eval", "--checkpoint", crafted, "--data", images, "--split", "all", "--trust-torchscript"],
        ["predict", "--checkpoint", crafted, images, "--trust-torchscript"],
    ):
        proc = run_cli(command, check=False)
        assert proc.returncode != 0 and "is a TorchScript program, not a checkpoint" in proc.stderr, proc.stderr
    assert not marker.exists()

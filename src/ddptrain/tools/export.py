"""`ddptrain export`: a trained model as safetensors, TorchScript or ONNX, with what a user needs to run
it (class names, image size, normalisation, training config) written beside it as `<file>.json` and,
where the format allows, inside the file too — so `predict` and `eval` take the exported file back."""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from torch import nn

from ..data.transforms import Preprocess
from ..errors import DdptrainError
from ..version import __version__
from .modelfile import META_KEY, TORCHSCRIPT_SUFFIX, ModelCard, load_model, quiet_jit, sidecar_path

log = logging.getLogger("ddptrain")

FORMATS = ("safetensors", "torchscript", "onnx")
SUFFIXES = {"safetensors": ".safetensors", "torchscript": TORCHSCRIPT_SUFFIX, "onnx": ".onnx"}


class ExportError(DdptrainError):
    pass


def default_output(source: Path, fmt: str) -> Path:
    """`runs/a/checkpoints/best.pt` -> `runs/a/checkpoints/best.safetensors` (or .torchscript.pt, .onnx)."""
    return source.with_name(source.stem + SUFFIXES[fmt])


def export(source: str | Path, fmt: str, out: Optional[str | Path] = None, ema: bool = False) -> Path:
    """Write the exported model and its `.json`; return the model file's path."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format '{fmt}'; choose one of {', '.join(FORMATS)}")
    if fmt == "onnx":
        _require_onnx()  # before the model is loaded: say it at once
    source = Path(source)
    loaded = load_model(source, torch.device("cpu"), ema=ema)
    config = loaded.config
    preprocess = Preprocess.of(config.data)  # as the model was trained
    card = ModelCard(
        format=fmt,
        model=config.model.name,
        img_size=preprocess.img_size,
        class_names=loaded.class_names,
        input=(
            f"float32 NCHW RGB in [0, 1], normalised with mean and std; resized ({preprocess.interpolation}) to "
            f"img_size / crop_fraction and centre-cropped to img_size"
            + (
                "; outputs: one logit per class, sigmoid scores >= threshold are the labels"
                if config.data.task == "multilabel"
                else "; outputs: one logit per class (softmax)"
            )
        ),
        mean=list(preprocess.mean),
        std=list(preprocess.std),
        interpolation=preprocess.interpolation,
        crop_fraction=preprocess.crop_fraction,
        epoch=loaded.epoch,
        source=str(source),
        ddptrain_version=__version__,
        config=config.to_flat(),
        task=config.data.task,
        threshold=config.optim.threshold if config.data.task == "multilabel" else None,
    )
    path = Path(out) if out else default_output(source, fmt)
    if fmt == "torchscript" and not path.name.endswith(TORCHSCRIPT_SUFFIX):
        raise ExportError(
            f"name a TorchScript export *{TORCHSCRIPT_SUFFIX} (not {path.name}): that name is what "
            "predict and eval load TorchScript from (with --trust-torchscript); any other name is "
            "read as a checkpoint"
        )
    if fmt != "torchscript" and not path.name.endswith(SUFFIXES[fmt]):
        raise ExportError(
            f"name a {fmt} export *{SUFFIXES[fmt]} (not {path.name}): predict, eval and other tools know the format "
            "by that name; any other name is read as a checkpoint"
        )
    if path.resolve() == source.resolve():
        raise ExportError(f"--out {path} is the file being exported; choose another name")
    path.parent.mkdir(parents=True, exist_ok=True)
    WRITERS[fmt](loaded.model, card, path)
    sidecar_path(path).write_text(json.dumps(card.to_dict(), indent=2) + "\n")
    log.info("exported %s (%s, %d classes) and %s", path, fmt, len(loaded.class_names), sidecar_path(path).name)
    return path


def _example_input(card: ModelCard) -> torch.Tensor:
    return torch.zeros(1, 3, card.img_size, card.img_size)


def _write_safetensors(model: nn.Module, card: ModelCard, path: Path) -> None:
    from safetensors.torch import save_model

    save_model(model, str(path), metadata={META_KEY: json.dumps(card.to_dict())})
    _as_created(path)  # safetensors writes 0600 whatever the umask; the run's other files follow it


def _as_created(path: Path) -> None:
    """The permissions a file made by open() would have under this process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def _write_torchscript(model: nn.Module, card: ModelCard, path: Path) -> None:
    with torch.no_grad(), quiet_jit():
        traced = torch.jit.trace(model, _example_input(card))
        torch.jit.save(traced, str(path), _extra_files={META_KEY: json.dumps(card.to_dict())})


def _require_onnx():
    try:
        import onnx
    except ImportError:
        raise ExportError(
            "ONNX export needs the onnx package, which is not installed here: "
            "pip install onnx (safetensors and torchscript need nothing extra)"
        ) from None
    return onnx


def _write_onnx(model: nn.Module, card: ModelCard, path: Path) -> None:
    onnx = _require_onnx()
    kwargs: Dict[str, Any] = {
        "input_names": ["images"],
        "output_names": ["logits"],
        "dynamic_axes": {"images": {0: "batch"}, "logits": {0: "batch"}},
    }
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # the TorchScript-based exporter needs onnx only (no onnxscript)
    with torch.no_grad(), quiet_jit():
        torch.onnx.export(model, (_example_input(card),), str(path), **kwargs)
    proto = onnx.load(str(path))
    entry = proto.metadata_props.add()
    entry.key, entry.value = META_KEY, json.dumps(card.to_dict())
    onnx.save(proto, str(path))


WRITERS = {"safetensors": _write_safetensors, "torchscript": _write_torchscript, "onnx": _write_onnx}

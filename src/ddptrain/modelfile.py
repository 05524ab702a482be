"""Model files ddptrain reads for inference: its checkpoints and the safetensors / TorchScript files
`ddptrain export` writes (which carry the class names and training config inside)."""
from __future__ import annotations

import contextlib
import json
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import nn

from . import checkpoint
from .errors import CheckpointError, DdptrainError
from .models import build_model

META_KEY = "ddptrain.json"  # safetensors metadata key / TorchScript extra file / ONNX metadata entry


class ModelFileError(DdptrainError):
    pass


@dataclass
class LoadedModel:
    """A plain model in eval mode, ready for inference, whatever file it came from."""

    model: nn.Module
    class_names: List[str]
    train_config: Dict
    epoch: Optional[int] = None


def sidecar_path(path: Path) -> Path:
    """`best.safetensors` -> `best.safetensors.json`: class names, input size, normalisation, config."""
    return path.with_name(path.name + ".json")


@contextlib.contextmanager
def quiet_jit():
    """torch.jit announces its deprecation on every call; TorchScript still works (the docs say so)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=r".*torch\.jit.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit.*")
        yield


def load_model(path: str | Path, device: torch.device) -> LoadedModel:
    """From a ddptrain checkpoint or an exported .safetensors / TorchScript file."""
    path = Path(path)
    fmt = exported_format(path)
    if fmt is None:
        return _load_checkpoint(path, device)
    if not path.is_file():
        raise CheckpointError(f"model file {path} does not exist")
    if fmt == "onnx":
        raise ModelFileError(f"{path} is an ONNX model: run it with onnxruntime (its .json holds the class names "
                             "and input size); predict and eval take checkpoints, .safetensors or TorchScript")
    return _load_safetensors(path, device) if fmt == "safetensors" else _load_torchscript(path, device)


def exported_format(path: Path) -> Optional[str]:
    """'safetensors' / 'torchscript' / 'onnx' for a file written by `ddptrain export`, None otherwise."""
    if path.suffix == ".safetensors":
        return "safetensors"
    if path.suffix == ".onnx":
        return "onnx"
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            if any(name.endswith("/extra/" + META_KEY) for name in archive.namelist()):
                return "torchscript"
    return None


def _load_checkpoint(path: Path, device: torch.device) -> LoadedModel:
    state = checkpoint.load(path)
    config, classes = state["config"], list(state["class_names"])
    model = build_model(config["model"], len(classes))
    model.load_state_dict(state["model"])
    return LoadedModel(model.to(device).eval(), classes, config, state.get("epoch"))


def _load_safetensors(path: Path, device: torch.device) -> LoadedModel:
    from safetensors import safe_open
    from safetensors.torch import load_model as load_into

    with safe_open(str(path), framework="pt") as handle:
        text = (handle.metadata() or {}).get(META_KEY)
    meta = json.loads(text) if text else _read_sidecar(path)
    model = build_model(meta["model"], len(meta["class_names"]))
    load_into(model, str(path))
    return LoadedModel(model.to(device).eval(), list(meta["class_names"]), meta["config"], meta.get("epoch"))


def _load_torchscript(path: Path, device: torch.device) -> LoadedModel:
    extra = {META_KEY: ""}
    with quiet_jit():
        model = torch.jit.load(str(path), map_location=device, _extra_files=extra)
    meta = json.loads(extra[META_KEY])
    return LoadedModel(model.eval(), list(meta["class_names"]), meta["config"], meta.get("epoch"))


def _read_sidecar(path: Path) -> Dict:
    sidecar = sidecar_path(path)
    if not sidecar.is_file():
        raise ModelFileError(f"{path} carries no ddptrain metadata and {sidecar.name} is missing beside it; "
                             "export the checkpoint again with ddptrain export")
    return json.loads(sidecar.read_text())

"""Model files ddptrain reads for inference: its checkpoints and the safetensors / TorchScript files
`ddptrain export` writes, which carry a `ModelCard` (class names, input size, normalisation, training
config) inside and beside them."""

from __future__ import annotations

import contextlib
import json
import warnings
import zipfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ..config import Config
from ..errors import CheckpointError, DdptrainError
from ..models import ModelSourceError, build_configured
from ..train import checkpointer

META_KEY = "ddptrain.json"
TORCHSCRIPT_SUFFIX = ".torchscript.pt"  # the only name a TorchScript program is loaded from (with --trust-torchscript)  # safetensors metadata key / TorchScript extra file / ONNX metadata entry


class ModelFileError(DdptrainError):
    pass


@dataclass
class ModelCard:
    """What an exported model carries besides its weights (its `.json` beside it holds the same)."""

    format: str
    model: str
    img_size: int
    class_names: List[str]
    input: str
    mean: List[float]
    std: List[float]
    interpolation: Optional[str]  # None in files exported before these were recorded: bilinear
    crop_fraction: Optional[float]  # and 0.875
    epoch: Optional[int]
    source: str
    ddptrain_version: str
    config: Dict[str, Any]  # the flat training config
    task: Optional[str] = None  # multiclass / multilabel (None in files exported before it was recorded: multiclass)
    threshold: Optional[float] = None  # multilabel: the score a class is predicted at

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> ModelCard:
        known: Dict[str, Any] = {f.name: values.get(f.name) for f in fields(cls)}
        return cls(**known)


@dataclass
class LoadedModel:
    """A plain model in eval mode, ready for inference, whatever file it came from."""

    model: nn.Module
    class_names: List[str]
    config: Config  # the training run's options
    epoch: Optional[int] = None
    split: Optional[Dict[str, Any]] = None  # the checkpoint's train/val split summary (digest, sizes)


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


def load_model(
    path: str | Path, device: torch.device, trust_torchscript: bool = False, ema: bool = False
) -> LoadedModel:
    """From a ddptrain checkpoint (read with weights_only=True, whatever its name) or an exported .safetensors file;
    a TorchScript program only when it is named *.torchscript.pt and the caller trusts it: loading one runs the
    code inside it."""
    path = Path(path)
    fmt = exported_format(path)
    if fmt is None:
        _refuse_disguised_program(path)
        return _load_checkpoint(path, device, ema)
    if ema:
        raise ModelFileError(f"--ema takes a checkpoint; {path} is an export, which holds one set of weights already")
    if not path.is_file():
        raise CheckpointError(f"model file {path} does not exist")
    if fmt == "torchscript" and not trust_torchscript:
        raise ModelFileError(
            f"{path} is a TorchScript program: loading it runs the code it holds. Pass "
            "--trust-torchscript if you trust where it came from, or use its .safetensors export"
        )
    if fmt == "onnx":
        raise ModelFileError(
            f"{path} is an ONNX model: run it with onnxruntime (its .json holds the class names "
            "and input size); predict and eval take checkpoints, .safetensors or TorchScript"
        )
    return _load_safetensors(path, device) if fmt == "safetensors" else _load_torchscript(path, device)


def exported_format(path: Path) -> Optional[str]:
    """'safetensors' / 'torchscript' / 'onnx' by the name `ddptrain export` gives each; None: a checkpoint."""
    if path.suffix == ".safetensors":
        return "safetensors"
    if path.suffix == ".onnx":
        return "onnx"
    if path.name.endswith(TORCHSCRIPT_SUFFIX):
        return "torchscript"
    return None


def _refuse_disguised_program(path: Path) -> None:
    """A TorchScript archive named like a checkpoint is refused from its file list alone, before anything loads."""
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
        if any(
            "/code/" in name or name.endswith("/constants.pkl") or name.endswith("/extra/" + META_KEY) for name in names
        ):
            raise ModelFileError(
                f"{path} is a TorchScript program, not a checkpoint: loading it would run the code "
                f"it holds, so it is not loaded. If you trust it, name it "
                f"{path.stem}{TORCHSCRIPT_SUFFIX} and pass --trust-torchscript"
            )


def _train_config(flat: Dict[str, Any], source: Path) -> Config:
    # A file written by another ddptrain version may carry options this one does not know: left out.
    return Config.from_flat(flat, str(source), strict=False)


def _load_checkpoint(path: Path, device: torch.device, ema: bool = False) -> LoadedModel:
    state = checkpointer.load_whole(path)
    if not state.from_a_run:
        raise ModelFileError(
            f"{path} is not a checkpoint ddptrain train wrote (it holds no class names or training options; another "
            "tool's?): eval, predict and export rebuild the model from those. Train from its weights with --weights"
        )
    config = _train_config(state.config, path)
    model = _rebuild(config, len(state.class_names), config.data.img_size, path)
    if ema and state.ema is None:
        raise ModelFileError(f"--ema: {path} holds no EMA weights (its run was trained without --ema-decay)")
    model.load_state_dict(state.ema if ema and state.ema is not None else state.model)
    return LoadedModel(model.to(device).eval(), list(state.class_names), config, state.epoch, state.split)


def _load_safetensors(path: Path, device: torch.device) -> LoadedModel:
    from safetensors import safe_open
    from safetensors.torch import load_model as load_into

    with safe_open(str(path), framework="pt") as handle:
        text = (handle.metadata() or {}).get(META_KEY)
    card = ModelCard.from_dict(json.loads(text)) if text else _read_sidecar(path)
    config = _train_config(card.config, path)
    if config.model.name != card.model:  # a card without its training config
        config = config.replace(model=card.model)
    model = _rebuild(config, len(card.class_names), card.img_size, path)
    load_into(model, str(path))
    return LoadedModel(model.to(device).eval(), list(card.class_names), config, card.epoch)


def _rebuild(config: Config, num_classes: int, img_size: Optional[int], path: Path) -> nn.Module:
    """The architecture a model file was trained with; a model of the user's own that is not importable here is
    one line naming the file and the model."""
    try:
        return build_configured(config.model, num_classes, img_size)
    except ModelSourceError as error:
        raise ModelFileError(
            f"{path} holds weights of {config.model.name}, which cannot be built here: {error}"
        ) from None


def _load_torchscript(path: Path, device: torch.device) -> LoadedModel:
    extra = {META_KEY: ""}
    with quiet_jit():
        model = torch.jit.load(str(path), map_location=device, _extra_files=extra)
    card = ModelCard.from_dict(json.loads(extra[META_KEY]))
    return LoadedModel(model.eval(), list(card.class_names), _train_config(card.config, path), card.epoch)


def _read_sidecar(path: Path) -> ModelCard:
    sidecar = sidecar_path(path)
    if not sidecar.is_file():
        raise ModelFileError(
            f"{path} carries no ddptrain metadata and {sidecar.name} is missing beside it; "
            "export the checkpoint again with ddptrain export"
        )
    return ModelCard.from_dict(json.loads(sidecar.read_text()))

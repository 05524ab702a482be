"""What a model's pretrained config says about its input — size, mean/std, interpolation, crop fraction — read
from timm's pretrained config or torchvision's weights transforms, without building the model or downloading."""

from __future__ import annotations

from typing import Any, Dict

from ..config.sections import is_factory
from .build import TIMM_PREFIX
from .custom import declared_preprocessing


def pretrained_preprocessing(name: str) -> Dict[str, Any]:
    """Config options (`img_size`, `mean`, `std`, `interpolation`, `crop_fraction`) for model `name`, those its
    pretrained config gives (a factory of the user's own: its `pretrained_cfg` attribute); {} when it has none."""
    if is_factory(name):
        return declared_preprocessing(name)
    if name.startswith(TIMM_PREFIX):
        return _timm(name[len(TIMM_PREFIX) :])
    return _torchvision(name)


def _timm(name: str) -> Dict[str, Any]:
    import timm

    cfg = timm.get_pretrained_cfg(name)
    if cfg is None:
        return {}
    found: Dict[str, Any] = {}
    if cfg.input_size:
        found["img_size"] = int(cfg.input_size[-1])
    if cfg.mean and cfg.std:
        found["mean"], found["std"] = _floats(cfg.mean), _floats(cfg.std)
    if cfg.interpolation in ("bilinear", "bicubic", "nearest"):
        found["interpolation"] = cfg.interpolation
    if cfg.crop_pct:
        found["crop_fraction"] = float(cfg.crop_pct)
    return found


def _torchvision(name: str) -> Dict[str, Any]:
    import torchvision

    try:
        weights = torchvision.models.get_model_weights(name).DEFAULT
    except (ValueError, KeyError, AttributeError):  # a model without published weights
        return {}
    transforms = weights.transforms()
    crop, resize = int(transforms.crop_size[0]), int(transforms.resize_size[0])
    return {
        "img_size": crop,
        "mean": _floats(transforms.mean),
        "std": _floats(transforms.std),
        "interpolation": transforms.interpolation.value,
        "crop_fraction": round(crop / resize, 4),
    }


def _floats(values) -> tuple:
    return tuple(float(v) for v in values)

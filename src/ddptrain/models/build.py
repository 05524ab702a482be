"""Build a classifier by name (torchvision or timm), find its classifier head, freeze the rest.

Naming rule: a bare name (`resnet18`) is a torchvision model; `timm:NAME` is a timm model.
Nothing here downloads: torchvision models are built with weights=None and timm models with
pretrained=False; pretrained weights come from `--weights PATH` or `--pretrained` (models.pretrained).
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, Optional

from torch import nn

from ..errors import ConfigError

TIMM_PREFIX = "timm:"


def build_model(name: str, num_classes: int, img_size: Optional[int] = None) -> nn.Module:
    """`img_size`: the input size the model will see; it matters only to models built for one size (see
    `timm_size_args`)."""
    if name.startswith(TIMM_PREFIX):
        return _build_timm(name[len(TIMM_PREFIX) :], num_classes, img_size)
    import torchvision

    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"unknown torchvision model '{name}'.{hint} For a timm model write --model timm:{name}.", every_rank=True
        )
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)


def timm_size_args(name: str, img_size: Optional[int]) -> Dict[str, Any]:
    """timm's create_model arguments for input size `img_size`: a model built for one input size (a ViT's position
    embedding has one entry per patch) is built for `img_size` when it differs — pretrained weights are resampled
    by timm on loading; models that take any size get nothing."""
    import timm

    cfg = timm.get_pretrained_cfg(name)
    if img_size is None or cfg is None or not cfg.fixed_input_size or int(cfg.input_size[-1]) == img_size:
        return {}
    return {"img_size": img_size}


def _build_timm(name: str, num_classes: int, img_size: Optional[int] = None) -> nn.Module:
    try:
        import timm
    except ImportError as error:  # pragma: no cover - timm is a dependency
        raise ConfigError("timm is not installed: pip install timm") from error
    if not _known_timm(timm, name):
        close = difflib.get_close_matches(name, timm.list_models(pretrained="." in name), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown timm model '{name}'.{hint}", every_rank=True)
    return timm.create_model(name, pretrained=False, num_classes=num_classes, **timm_size_args(name, img_size))


def _known_timm(timm: Any, name: str) -> bool:
    """An architecture timm has (`vit_small_patch16_224`), or one of its pretrained tags
    (`vit_small_patch16_224.augreg_in21k_ft_in1k`)."""
    if not timm.is_model(name):
        return False
    if "." not in name:
        return True
    return name in timm.list_pretrained(name.split(".")[0] + ".*")


def head_name(model: nn.Module, num_classes: int) -> str:
    """Name of the final classifier layer: the last Linear/Conv2d whose output size is the class count."""
    found = None
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)) and module.weight.shape[0] == num_classes:
            found = name
    if found is None:
        raise ConfigError(f"cannot find a classifier layer with {num_classes} outputs in {type(model).__name__}")
    return found


def freeze_backbone(model: nn.Module, head: str) -> int:
    """Stop gradients everywhere but the head; return the number of trainable parameters left."""
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith(head + ".")
        trainable += param.numel() if param.requires_grad else 0
    return trainable

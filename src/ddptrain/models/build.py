"""Build a classifier by name (torchvision, timm or the user's own factory), find its classifier head, freeze the
rest.

Naming rule: a bare name (`resnet18`) is a torchvision model; `timm:NAME` is a timm model; `file.py:FACTORY` or
`package.module:FACTORY` is the user's own (models.custom).
Nothing here downloads: torchvision models are built with weights=None and timm models with
pretrained=False; pretrained weights come from `--weights PATH` or `--pretrained` (models.pretrained).
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, Optional

from torch import nn

from ..config.sections import TIMM_PREFIX, ModelConfig, hub_spelling, is_factory
from ..errors import ConfigError
from .custom import build_custom

# each library's argument name for --drop-path and --dropout
TIMM_RATES = {"drop_path": "drop_path_rate", "dropout": "drop_rate"}
TORCHVISION_RATES = {"drop_path": "stochastic_depth_prob", "dropout": "dropout"}


def build_configured(model: ModelConfig, num_classes: int, img_size: Optional[int] = None) -> nn.Module:
    """The model a run's options describe: its name, --model-kwargs, --drop-path and --dropout."""
    return build_model(model.name, num_classes, img_size, model.kwargs, rates_of(model))


def rates_of(model: ModelConfig) -> Dict[str, float]:
    return {"drop_path": model.drop_path, "dropout": model.dropout}


def build_model(
    name: str,
    num_classes: int,
    img_size: Optional[int] = None,
    kwargs: Optional[Dict[str, Any]] = None,
    rates: Optional[Dict[str, float]] = None,
) -> nn.Module:
    """`img_size`: the input size the model will see; it matters only to models built for one size (see
    `timm_size_args`). `kwargs`: the model's own arguments; `rates`: non-zero `drop_path` / `dropout`."""
    hub = hub_spelling(name)
    if hub is not None:
        raise ConfigError(hub, every_rank=True)
    if is_factory(name):
        return build_custom(name, num_classes, kwargs, img_size, rates)
    if name.startswith(TIMM_PREFIX):
        extra = {**rated(TIMM_RATES, rates), **(kwargs or {})}
        return _build_timm(name[len(TIMM_PREFIX) :], num_classes, img_size, extra)
    import torchvision

    unknown = unknown_model(name)
    if unknown is not None:
        raise ConfigError(unknown, every_rank=True)
    extra = {**rated(TORCHVISION_RATES, rates), **(kwargs or {})}
    try:
        return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **extra)
    except TypeError as error:
        raise ConfigError(
            f"torchvision's {name} does not take {', '.join(sorted(extra))} ({error}): drop that option, or pick a "
            "model that has it (stochastic depth: convnext, efficientnet, swin; dropout: vit, efficientnet, ...)",
            every_rank=True,
        ) from None


def unknown_model(name: str) -> Optional[str]:
    """Why `name` (a torchvision model, or timm:NAME) is no model its library has, with the closest names; None
    when it is one. Imports the library."""
    if name.startswith(TIMM_PREFIX):
        import timm

        name = name[len(TIMM_PREFIX) :]
        if _known_timm(timm, name):
            return None
        close = difflib.get_close_matches(name, timm.list_models(pretrained="." in name), n=3)
        hint = f" Did you mean: {', '.join(TIMM_PREFIX + c for c in close)}?" if close else ""
        return f"unknown timm model '{name}'.{hint}"
    import torchvision

    known = torchvision.models.list_models(module=torchvision.models)
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (
        f"unknown torchvision model '{name}'.{hint} For a timm model write --model timm:{name}; for your own, "
        "path/to/file.py:FACTORY."
    )


def rated(names: Dict[str, str], rates: Optional[Dict[str, float]]) -> Dict[str, float]:
    return {names[option]: value for option, value in (rates or {}).items() if value}


def timm_size_args(name: str, img_size: Optional[int]) -> Dict[str, Any]:
    """timm's create_model arguments for input size `img_size`: a model built for one input size (a ViT's position
    embedding has one entry per patch) is built for `img_size` when it differs — pretrained weights are resampled
    by timm on loading; models that take any size get nothing."""
    import timm

    cfg = timm.get_pretrained_cfg(name)
    if img_size is None or cfg is None or not cfg.fixed_input_size or int(cfg.input_size[-1]) == img_size:
        return {}
    return {"img_size": img_size}


def _build_timm(
    name: str, num_classes: int, img_size: Optional[int] = None, extra: Optional[Dict[str, Any]] = None
) -> nn.Module:
    try:
        import timm
    except ImportError as error:  # pragma: no cover - timm is a dependency
        raise ConfigError("timm is not installed: pip install timm") from error
    unknown = unknown_model(TIMM_PREFIX + name)
    if unknown is not None:
        raise ConfigError(unknown, every_rank=True)
    arguments = {**timm_size_args(name, img_size), **(extra or {})}
    try:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, **arguments)
    except TypeError as error:
        raise ConfigError(
            f"timm's {name} does not take {', '.join(sorted(arguments))}: {error}", every_rank=True
        ) from None


def _known_timm(timm: Any, name: str) -> bool:
    """An architecture timm has (`vit_small_patch16_224`), or one of its pretrained tags
    (`vit_small_patch16_224.augreg_in21k_ft_in1k`)."""
    if not timm.is_model(name):
        return False
    if "." not in name:
        return True
    return name in timm.list_pretrained(name.split(".")[0] + ".*")


def head_name(model: nn.Module, num_classes: int, given: Optional[str] = None) -> str:
    """Name of the final classifier layer: `given` (--head-name) when the model has a module of that name with
    parameters, else the last Linear/Conv2d whose output size is the class count."""
    if given:
        return _named_head(model, given)
    found = None
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)) and module.weight.shape[0] == num_classes:
            found = name
    if found is None:
        raise ConfigError(
            f"cannot find a classifier layer with {num_classes} outputs in {type(model).__name__}: name it with "
            "--head-name (e.g. fc, head.fc)",
            every_rank=True,
        )
    return found


def _named_head(model: nn.Module, given: str) -> str:
    modules = dict(model.named_modules())
    if given in modules and any(True for _ in modules[given].parameters()):
        return given
    with_params = [n for n, m in modules.items() if n and any(True for _ in m.parameters(recurse=False))]
    close = difflib.get_close_matches(given, with_params, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; its last layers: {', '.join(with_params[-3:])}"
    raise ConfigError(f"--head-name {given}: {type(model).__name__} has no module of that name with weights{hint}")


def freeze_backbone(model: nn.Module, head: str) -> int:
    """Stop gradients everywhere but the head; return the number of trainable parameters left."""
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith(head + ".")
        trainable += param.numel() if param.requires_grad else 0
    return trainable

"""Build a classifier by name (torchvision or timm), load local weights, find and freeze the head.

Naming rule: a bare name (`resnet18`) is a torchvision model; `timm:NAME` is a timm model.
Nothing here downloads: torchvision models are built with weights=None and timm models with
pretrained=False; pretrained weights come from `--weights PATH` only.
"""
from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Dict, Iterable, List

import torch
from torch import nn

from .errors import ConfigError, WeightsError

log = logging.getLogger("ddptrain")

TIMM_PREFIX = "timm:"
STRIP_PREFIXES = ("module.", "_orig_mod.")  # added by DistributedDataParallel and torch.compile


def build_model(name: str, num_classes: int) -> nn.Module:
    if name.startswith(TIMM_PREFIX):
        return _build_timm(name[len(TIMM_PREFIX):], num_classes)
    import torchvision

    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown torchvision model '{name}'.{hint} "
                          f"For a timm model write --model timm:{name}.")
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)


def _build_timm(name: str, num_classes: int) -> nn.Module:
    try:
        import timm
    except ImportError as error:  # pragma: no cover - timm is a dependency
        raise ConfigError("timm is not installed: pip install timm") from error
    if not timm.list_models(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown timm model '{name}'.{hint}")
    return timm.create_model(name, pretrained=False, num_classes=num_classes)


def head_name(model: nn.Module, num_classes: int) -> str:
    """Name of the final classifier layer: the last Linear/Conv2d whose output size is the class count."""
    found = None
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)) and module.weight.shape[0] == num_classes:
            found = name
    if found is None:
        raise ConfigError(f"cannot find a classifier layer with {num_classes} outputs in {type(model).__name__}")
    return found


def strip_prefixes(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    cleaned = {}
    for key, value in state.items():
        changed = True
        while changed:
            changed = False
            for prefix in STRIP_PREFIXES:
                if key.startswith(prefix):
                    key, changed = key[len(prefix):], True
        cleaned[key] = value
    return cleaned


def read_state_dict(path: str | Path) -> Dict[str, torch.Tensor]:
    """A model state dict from a bare state-dict file or from a ddptrain / common checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"weights file {path} does not exist; refusing to train from scratch silently "
                           "(drop --weights to start from random initialisation)")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded = load_file(str(path), device="cpu")
        else:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise WeightsError(f"cannot read weights from {path}: {error}. Only tensor state dicts, checkpoints "
                           "and .safetensors are accepted (weights_only=True): pickled code is refused.") from None
    for key in ("model", "state_dict", "model_state_dict"):
        if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
            loaded = loaded[key]
            break
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise WeightsError(f"{path} does not hold a state dict of tensors")
    return strip_prefixes(loaded)


def load_weights(model: nn.Module, path: str | Path, head: str) -> List[str]:
    """Load `path` into `model`. A head that does not fit is left freshly initialised and returned;
    any other missing, unexpected or mis-shaped key is an error listing the keys."""
    state = read_state_dict(path)
    own = model.state_dict()
    head_keys = {k for k in own if k.startswith(head + ".")}
    reinit_head = sorted(k for k in head_keys if k not in state or state[k].shape != own[k].shape)
    problems = describe_mismatch(state, own, head_keys)
    if problems:
        raise WeightsError(f"weights in {path} do not fit the model ({problems}); "
                           "check --model matches the architecture the weights were trained with")
    usable = {k: v for k, v in state.items() if k not in reinit_head}
    model.load_state_dict(usable, strict=False)
    if reinit_head:
        log.info("weights %s: classifier head %s re-initialised (its shape does not fit %s)",
                 path, ", ".join(reinit_head), tuple(own[reinit_head[0]].shape))
    return reinit_head


def describe_mismatch(state: Dict[str, torch.Tensor], own: Dict[str, torch.Tensor],
                      allowed: Iterable[str] = ()) -> str:
    """'' when `state` fits `own` (keys in `allowed` may differ); otherwise the offending keys by kind."""
    allowed = set(allowed)
    mismatched = sorted(k for k in state if k in own and k not in allowed and state[k].shape != own[k].shape)
    unexpected = sorted(k for k in state if k not in own)
    # Old checkpoints may lack BatchNorm's step counter; it carries no learned value.
    missing = sorted(k for k in own if k not in state and k not in allowed
                     and not k.endswith("num_batches_tracked"))
    return "; ".join(f"{label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}"
                     for label, keys in (("shape mismatch", mismatched), ("unexpected", unexpected),
                                         ("missing", missing)) if keys)


def freeze_backbone(model: nn.Module, head: str) -> int:
    """Stop gradients everywhere but the head; return the number of trainable parameters left."""
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith(head + ".")
        trainable += param.numel() if param.requires_grad else 0
    return trainable


def place_model(model: nn.Module, device: torch.device, world_size: int, sync_bn: bool,
                channels_last: bool) -> nn.Module:
    """Synchronised BatchNorm (only when there is more than one process), then device and memory format."""
    if sync_bn and world_size > 1:
        from .syncbn import convert_sync_bn

        model = convert_sync_bn(model, device)
    model.to(device)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    return model


def wrap_ddp(model: nn.Module, device: torch.device, grad_compress: str = "off") -> nn.Module:
    """DistributedDataParallel on every world size (1 included): one code path for 1 and N processes.
    On creation DDP broadcasts rank 0's parameters and buffers, so all ranks start identical.

    Gradients are views into DDP's all-reduce buckets (no copy in or out of them each step);
    `grad_compress` bf16/fp16 halves the bytes each all-reduce moves (the averaged gradient is cast
    back to the parameters' dtype), worth it when the interconnect, not compute, limits the step."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True)
    if grad_compress != "off":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        hook = {"bf16": default_hooks.bf16_compress_hook, "fp16": default_hooks.fp16_compress_hook}[grad_compress]
        ddp.register_comm_hook(None, hook)
    return ddp

"""Put a model where it trains: synchronised BatchNorm, device, memory format, DistributedDataParallel —
and take those wrappers off again (`unwrap`) for evaluation, saving and inference."""

from __future__ import annotations

import re
from typing import Optional, cast

import torch
from torch import nn

from ..errors import ConfigError


def place_model(
    model: nn.Module, device: torch.device, world_size: int, sync_bn: bool, channels_last: bool
) -> nn.Module:
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


def compile_model(model: nn.Module) -> nn.Module:
    """torch.compile, before the DDP wrap (DDP then sees the compiled module; `unwrap` takes it off again)."""
    return cast(nn.Module, torch.compile(model))


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DistributedDataParallel and/or torch.compile wrappers."""
    while True:
        wrapped, compiled = getattr(model, "module", None), getattr(model, "_orig_mod", None)
        if isinstance(wrapped, nn.Module):
            model = wrapped
        elif isinstance(compiled, nn.Module):
            model = compiled
        else:
            return model


def is_compiled(model: nn.Module) -> bool:
    """A torch.compile'd model (possibly inside DDP): hooks on its original module would force recompiles."""
    inner = getattr(model, "module", model)
    return hasattr(inner, "_orig_mod")


UNUSED_MARK = "Parameter indices which did not receive grad for rank"


def unused_parameters_error(error: RuntimeError, model: nn.Module, rank: int) -> Optional[ConfigError]:
    """DDP's "Expected to have finished reduction" (a trainable parameter took no part in the loss: an unused head,
    a branch the forward skips) as one line naming the parameters, from the indices DDP reports; None for any other
    error."""
    text = str(error)
    if UNUSED_MARK not in text:
        return None
    trainable = [name for name, p in unwrap(model).named_parameters() if p.requires_grad]
    line = text[text.index(UNUSED_MARK) :].splitlines()[0]
    indices = [int(i) for i in re.findall(r"\d+", line.partition(":")[2])]
    names = [trainable[i] for i in indices if i < len(trainable)]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return ConfigError(
        f"the model has trainable parameters that take no part in the loss ({shown or line}); DDP needs a gradient "
        "for each at every step: remove them from the model, or set requires_grad=False on them where it is built",
        rank=rank,
    )

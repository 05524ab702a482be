"""--grad-checkpointing: keep only each block's input in the forward and recompute the block in the backward.

timm models without BatchNorm do it themselves (`set_grad_checkpointing`); any other model (torchvision's, a
factory of the user's own, a timm ResNet) gets `torch.utils.checkpoint` around each of the blocks FSDP shards by
(`fsdp.block_units`), with BatchNorm's running statistics put back after the recomputation: a plain checkpoint
updates them twice per step. Results are the same as without it (the recomputation also replays the RNG: dropout
draws the same masks); only memory and time change.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, List

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..errors import ConfigError
from .fsdp import block_units


def enable_grad_checkpointing(model: nn.Module) -> str:
    """Turn it on; returns how, in words, for the log."""
    setter = getattr(model, "set_grad_checkpointing", None)
    if callable(setter) and not _norm_layers(model):
        setter(True)
        return "timm's set_grad_checkpointing"
    units = block_units(model)
    if not units:
        raise ConfigError(
            f"--grad-checkpointing: {type(model).__name__} has no stack of blocks (an nn.Sequential or nn.ModuleList "
            "within two levels of the model) to recompute; drop the flag, or give the model a "
            "set_grad_checkpointing(enable) method"
        )
    for unit in units:
        unit.forward = _recomputed(unit, unit.forward)
    return f"torch.utils.checkpoint around {len(units)} blocks"


def _recomputed(unit: nn.Module, forward: Callable) -> Callable:
    norms = _norm_layers(unit)

    @functools.wraps(forward)
    def run(*args, **kwargs):
        if not torch.is_grad_enabled():  # evaluation: nothing to keep or recompute
            return forward(*args, **kwargs)
        calls = [0]

        def body(*inner_args, **inner_kwargs):
            calls[0] += 1
            if calls[0] == 1:  # the forward pass
                return forward(*inner_args, **inner_kwargs)
            with _statistics_kept(norms):  # the recomputation in the backward
                return forward(*inner_args, **inner_kwargs)

        return checkpoint(body, *args, use_reentrant=False, **kwargs)

    return run


def _norm_layers(module: nn.Module) -> List[nn.modules.batchnorm._BatchNorm]:
    return [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


@contextlib.contextmanager
def _statistics_kept(norms: List[nn.modules.batchnorm._BatchNorm]) -> Iterator[None]:
    """BatchNorm's running mean, variance and batch count as they were before (the recomputation's update undone)."""
    kept = [[buffer.clone() for buffer in norm.buffers()] for norm in norms]
    try:
        yield
    finally:
        with torch.no_grad():
            for norm, buffers in zip(norms, kept):
                for buffer, value in zip(norm.buffers(), buffers):
                    buffer.copy_(value)

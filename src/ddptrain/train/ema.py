"""--ema-decay: timm's ModelEmaV3 of the model's weights. Under --strategy fsdp the average is sharded like the model
(a copy of the plain model, sharded by the same plan), and each process averages its own shards."""

from __future__ import annotations

from typing import Any, List

import torch
from torch import nn


def build_ema(model: nn.Module, decay: float, warmup: bool) -> Any:
    """The average, a copy of `model` (built before the model is sharded: `shard` it alongside)."""
    from timm.utils import ModelEmaV3

    class LocalShardEma(ModelEmaV3):
        """ModelEmaV3 whose update works on each process's local shards (a no-op difference for plain tensors)."""

        def _foreach_lerp_(self, ema_values: List[torch.Tensor], model_values: List[torch.Tensor], weight: float):
            super()._foreach_lerp_(_local(ema_values), _local(model_values), weight)

    ema = LocalShardEma(model, decay=decay, use_warmup=warmup)
    ema.module.requires_grad_(False)
    return ema


def _local(values: List[torch.Tensor]) -> List[torch.Tensor]:
    """A sharded parameter (DTensor) as this process's shard (the same storage); plain tensors as they are."""
    return [value.to_local() if hasattr(value, "to_local") else value for value in values]

"""Mixed precision: which autocast dtype, and a GradScaler only where one is needed (fp16)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Optional

import torch

from ..errors import ConfigError


@dataclass
class Precision:
    device_type: str
    dtype: Optional[torch.dtype]  # None: full fp32
    scaler: Optional[torch.amp.GradScaler]

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    @property
    def name(self) -> str:
        return {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]


def resolve_precision(amp: str, device: torch.device) -> Precision:
    """auto = bf16 on CUDA that supports it, off on CPU. A GradScaler only for fp16."""
    if amp == "auto":
        amp = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "off"
    dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
    scaler = None
    if dtype is torch.float16:
        try:
            scaler = torch.amp.GradScaler(device.type)
        except (AttributeError, RuntimeError, TypeError) as error:
            raise ConfigError(
                f"--amp fp16 is not supported on {device.type} by torch {torch.__version__} "
                f"({error}); use --amp bf16 or off"
            ) from None
    return Precision(device.type, dtype, scaler)

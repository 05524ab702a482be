"""Training throughput on synthetic input (random tensors made on the device): the model, precision and
DDP step alone, no data loading. One process through ddptrain's own runtime, DDP wrap, optimizer and
step functions, for each precision / memory-format / compile variant."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import torch

from ...data.datasets import Batch
from ...models import build_model, compile_model, place_model, wrap_ddp
from ...runtime import dist
from ...runtime.env import DistEnv
from ...train.loop import StepSettings, forward_backward, optimizer_step
from ...train.optim import build_optimizer
from ...train.precision import Precision, resolve_precision
from ...train.timing import StepTimer


def _variant_throughput(
    rt: dist.Runtime,
    model_name: str,
    img_size: int,
    batch: int,
    steps: int,
    amp: str,
    channels_last: bool,
    compiled: bool,
) -> Dict:
    torch.manual_seed(0)
    model = place_model(build_model(model_name, 1000), rt.device, 1, False, channels_last)
    if compiled:
        model = compile_model(model)
    ddp = wrap_ddp(model, rt.device)
    optimizer = build_optimizer(ddp, "sgd", 0.1, 0.9, 1e-4, rt.device)
    precision: Precision = resolve_precision(amp, rt.device)
    settings = StepSettings(1, None, 10**9, channels_last, 0.0)
    data = Batch(
        torch.randint(0, 256, (batch, 3, img_size, img_size), dtype=torch.uint8, device=rt.device),
        torch.randint(0, 1000, (batch,), device=rt.device),
        (),
    )
    timer = StepTimer(rt.device, rt.rank)
    warmup = max(3, steps // 4)
    if rt.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(rt.device)
    for step in range(warmup + steps):
        if step == warmup:
            _sync(rt.device)
            start = time.perf_counter()
        forward_backward(ddp, data, precision, settings, rt.device, timer, sync=True)
        optimizer_step(ddp, optimizer, precision, None)
    _sync(rt.device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(rt.device) / 2**20 if rt.device.type == "cuda" else None
    return {"images/s": batch * steps / seconds, "peak MiB": peak}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synthetic_precision(
    model: str, img_size: int, batch: int, steps: int, device_kind: str, compile_too: bool
) -> List[Dict]:
    rt = dist.setup(DistEnv(), device_kind, 600)
    try:
        amps = ["off", "bf16"] + (["fp16"] if rt.device.type == "cuda" else [])
        variants = [(amp, channels_last, False) for amp in amps for channels_last in (False, True)]
        if compile_too:  # compiling takes a minute or more per variant: only the recommended one
            variants.append(("bf16", True, True))
        rows = []
        for amp, channels_last, compiled in variants:
            label = (
                {"off": "fp32"}.get(amp, amp) + (" +cl" if channels_last else "") + (" +compile" if compiled else "")
            )
            row: Dict[str, Any] = {"variant": label}
            try:
                row.update(_variant_throughput(rt, model, img_size, batch, steps, amp, channels_last, compiled))
            except Exception as error:  # one variant failing (e.g. no compiler) must not hide the rest
                row.update({"images/s": 0.0, "note": f"{type(error).__name__}: {str(error)[:100]}"})
            rows.append(row)
        base = rows[0]["images/s"] or 1.0
        for row in rows:
            row["speed-up"] = row["images/s"] / base
        return rows
    finally:
        dist.cleanup()

"""--batch-size auto: the largest per-process batch whose training step fits the GPU, found by trying.

Each process tries steps of its own model on random images of the run's size — doubling the batch until one does
not fit, then halving the gap — with the optimizer stepping at a learning rate of 0 so its state is allocated too;
then the processes agree on the smallest (one all-reduce) and the optimizer's state starts fresh. The search
stops at the training images one process gets per optimizer step (`batch_for_the_data`): a batch larger than the
data would leave an epoch without a step. The tries run
before the model is wrapped in DDP: no collective runs inside them, so a try that fails on one process cannot leave
another waiting. Under --strategy fsdp every forward gathers from every process, so there it is refused.
"""

from __future__ import annotations

import logging
from typing import Callable

import torch
from torch import nn

from ..config.sections import AUTO_BATCH
from ..errors import ConfigError
from ..runtime.dist import Runtime
from .precision import Precision

log = logging.getLogger("ddptrain")

AUTO = AUTO_BATCH
LARGEST = 4096


def largest_fitting(fits: Callable[[int], bool], start: int = 1, cap: int = LARGEST) -> int:
    """The largest batch in [1, cap] for which `fits` holds, assuming a larger batch never fits where a smaller one
    does not: doubling from `start`, then bisecting. 0 when not even one image fits."""
    good, bad = 0, cap + 1
    batch = max(1, min(start, cap))
    while batch < bad and fits(batch):
        good = batch
        if batch == cap:
            return cap
        batch = min(batch * 2, cap)
    bad = batch if batch > good else bad
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good


def batch_for_the_data(train_images: int, world_size: int, grad_accum: int) -> int:
    """The largest per-process batch that still makes one optimizer step of an epoch (at least 1)."""
    return max(1, train_images // world_size // grad_accum)


def find_batch_size(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    rt: Runtime,
    img_size: int,
    num_classes: int,
    strategy: str,
    most: int = LARGEST,
) -> int:
    """The batch every process can train with (the smallest of their largest), at most `most`."""
    _refuse_where_tries_cannot_work(rt, strategy)
    cap = max(1, min(LARGEST, most))
    own = _largest_on_this_process(model, optimizer, precision, rt.device, img_size, num_classes, cap)
    agreed = torch.tensor([own], device=rt.device)
    torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MIN)
    batch = int(agreed.item())
    if batch == 0:
        raise ConfigError(
            "--batch-size auto: not even one image per process fits the GPU; use --strategy fsdp, "
            "--grad-checkpointing, --amp bf16 or a smaller --img-size",
            rank=rt.rank,
            every_rank=True,
        )
    if batch == cap and cap == most:
        log.warning(
            "--batch-size auto: %d images per process, all the training images a process gets per optimizer step "
            "(the GPU has room for more): one step per epoch; give --batch-size N for more steps",
            batch,
        )
    else:
        log.info("--batch-size auto: %d images per process fit (this process alone: %d)", batch, own)
    return batch


def _refuse_where_tries_cannot_work(rt: Runtime, strategy: str) -> None:
    if rt.device.type != "cuda":
        raise ConfigError(
            f"--batch-size auto finds the largest batch that fits a GPU by trying; on {rt.device.type} there is no "
            "device memory to fill: give a number, e.g. --batch-size 32",
            rank=rt.rank,
            every_rank=True,
        )
    if strategy == "fsdp":
        raise ConfigError(
            "--batch-size auto tries batches on each process alone, and under --strategy fsdp every forward gathers "
            "from every process: a try that fails on one would leave the others waiting. Give a number, or find it "
            "with --strategy ddp on a model that fits",
            rank=rt.rank,
            every_rank=True,
        )


def _largest_on_this_process(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    device: torch.device,
    img_size: int,
    num_classes: int,
    cap: int,
) -> int:
    """The largest batch (at most `cap`) whose step fits this process's GPU; the model's buffers, the learning
    rates and the optimizer's state are left as they were before the tries."""
    lrs = [group["lr"] for group in optimizer.param_groups]
    buffers = [buffer.clone() for buffer in model.buffers()]  # the tries' BatchNorm statistics are not the run's
    for group in optimizer.param_groups:
        group["lr"] = 0.0

    def fits(batch: int) -> bool:
        try:
            _try_step(model, optimizer, precision, device, batch, img_size, num_classes)
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    own = largest_fitting(fits, cap=cap)
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    optimizer.state.clear()  # the tries' moments are not the run's
    with torch.no_grad():
        for buffer, kept in zip(model.buffers(), buffers):
            buffer.copy_(kept)
    return own


def _try_step(model, optimizer, precision: Precision, device, batch: int, img_size: int, num_classes: int) -> None:
    model.train()
    images = torch.randn(batch, 3, img_size, img_size, device=device)
    labels = torch.randint(0, num_classes, (batch,), device=device)
    with precision.autocast():
        loss = nn.functional.cross_entropy(model(images).float(), labels)
    loss.backward()
    optimizer.step()

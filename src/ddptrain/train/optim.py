"""The optimizer (no weight decay on norm layers and biases) and the learning-rate schedule."""

from __future__ import annotations

import logging
import math
from typing import Any, Dict, List

import torch
from torch import nn

from ..config import OptimConfig
from ..errors import ConfigError

log = logging.getLogger("ddptrain")


def param_groups(model: nn.Module, weight_decay: float) -> list:
    """Weight decay on weight matrices and kernels only; never on norm layers' scales or biases."""
    decay: List[nn.Parameter] = []
    no_decay: List[nn.Parameter] = []
    for param in model.parameters():
        if param.requires_grad:
            (no_decay if param.ndim <= 1 else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def resumed_grad_accum(optim: OptimConfig, saved: OptimConfig, saved_world: int, saved_global: int, world: int) -> int:
    """The --grad-accum a resumed run uses so that it keeps its global batch when the number of processes changed (an
    elastic job that lost or gained a node, a restart on fewer GPUs). `saved` is the recipe the run was started with,
    `saved_global` the global batch its checkpoint records (0 in older checkpoints). Another --batch-size or
    --grad-accum than the run's is the user's choice and is kept; a change that no --grad-accum can take up is said."""
    now = optim.batch_size * optim.grad_accum * world
    target = saved_global or saved.batch_size * saved.grad_accum * saved_world
    if target == now:
        return optim.grad_accum
    if (saved.batch_size, saved.grad_accum) != (optim.batch_size, optim.grad_accum):
        log.info("resume: the global batch changes from %d to %d with --batch-size/--grad-accum", target, now)
        return optim.grad_accum
    where = f"resume on {world} process(es) (the checkpoint's: {saved_world})"
    if target % (optim.batch_size * world) == 0:
        accum = target // (optim.batch_size * world)
        log.warning("%s: --grad-accum %d -> %d keeps the global batch at %d", where, optim.grad_accum, accum, target)
        return accum
    log.warning(
        "%s: the global batch changes from %d to %d (--batch-size %d x %d processes does not divide %d); the learning "
        "rate stays as configured",
        where,
        target,
        now,
        optim.batch_size,
        world,
        target,
    )
    return optim.grad_accum


def build_optimizer(
    model: nn.Module, name: str, lr: float, momentum: float, weight_decay: float, device: torch.device
) -> torch.optim.Optimizer:
    groups = param_groups(model, weight_decay)
    fused: Dict[str, Any] = {"foreach": True} if device.type == "cuda" else {}
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=False, **fused)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, **fused)
    raise ConfigError(f"unknown optimizer '{name}' (choose sgd or adamw)")


def apply_settings(optimizer: torch.optim.Optimizer, momentum: float, weight_decay: float) -> List[str]:
    """After loading a checkpoint's optimizer state, make its hyperparameters the command line's again (the state
    restores the old ones): weight decay on the first group (weights) only, momentum for SGD. The learning rate
    is set by the schedule at every step. Returns the changes, as "name old -> new"."""
    wanted: List[Dict[str, float]] = [{"weight_decay": weight_decay}, {"weight_decay": 0.0}]  # param_groups' order
    changes: List[str] = []
    for group, values in zip(optimizer.param_groups, wanted):
        if isinstance(optimizer, torch.optim.SGD):
            values = {**values, "momentum": momentum}
        for name, value in values.items():
            if group.get(name) != value:
                note = f"{name} {group.get(name)} -> {value}"
                if note not in changes:
                    changes.append(note)
                group[name] = value
    return changes


def peak_lr(optim: OptimConfig, global_batch: int) -> float:
    """--lr, or with --lr-base the linear scaling rule: lr_base x global batch / 256."""
    return optim.lr if optim.lr_base is None else optim.lr_base * global_batch / 256


class LrSchedule:
    """Linear warmup, then cosine or linear decay to `min_ratio` x base LR, or a step decay, as a function of
    fractional epochs.

    Defined on epochs rather than step counts, so a run resumed with a different number of processes
    (and so a different number of steps per epoch) continues on the same curve."""

    def __init__(
        self,
        base_lr: float,
        epochs: int,
        warmup_epochs: float,
        min_ratio: float,
        kind: str = "cosine",
        decay_epochs: float = 30.0,
        decay_rate: float = 0.1,
    ):
        self.base_lr = base_lr
        self.epochs = epochs
        self.warmup_epochs = min(max(0.0, warmup_epochs), epochs * 0.5)
        self.min_ratio = min_ratio
        self.kind, self.decay_epochs, self.decay_rate = kind, decay_epochs, decay_rate

    def factor(self, progress_epochs: float) -> float:
        if progress_epochs < self.warmup_epochs:
            return progress_epochs / self.warmup_epochs
        after = progress_epochs - self.warmup_epochs
        if self.kind == "step":
            return self.decay_rate ** math.floor(after / self.decay_epochs + 1e-9)
        done = min(1.0, after / max(self.epochs - self.warmup_epochs, 1e-9))
        shape = 1 - done if self.kind == "linear" else 0.5 * (1 + math.cos(math.pi * done))
        return self.min_ratio + (1 - self.min_ratio) * shape

    def apply(self, optimizer, epoch: int, samples_done: int, samples_per_epoch: int) -> float:
        """Set the LR for the step that ends with `samples_done` of the epoch's samples consumed
        (counted over all ranks, so a resumed or re-sharded epoch stays on the curve)."""
        lr = self.base_lr * self.factor(epoch + samples_done / max(samples_per_epoch, 1))
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self) -> dict:
        return dict(vars(self))

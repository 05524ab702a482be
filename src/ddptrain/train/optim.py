"""The optimizer — timm's factory, no weight decay on norm layers, biases and the model's own no-decay list, optional
layer-wise learning-rate decay — and the learning-rate schedule."""

from __future__ import annotations

import logging
import math
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ..config import OptimConfig
from ..errors import ConfigError
from ..models.wrap import unwrap
from ..util import counted

log = logging.getLogger("ddptrain")


def param_groups(model: nn.Module, weight_decay: float, layer_decay: Optional[float] = None) -> List[Dict[str, Any]]:
    """Weight decay on weight matrices and kernels only; never on norm layers' scales, biases or what the model lists
    in `no_weight_decay()` (a ViT's position embedding and class token). With `layer_decay` (timm models), one group
    per layer and decay kind, each with an `lr_scale` of layer_decay ** (depth from the head) that the schedule
    multiplies in: the head learns at the full rate, the stem at the smallest."""
    model = unwrap(model)
    no_decay_names = set(getattr(model, "no_weight_decay", lambda: ())())
    if layer_decay is not None:
        if not hasattr(model, "group_matcher"):
            raise ConfigError(
                f"--layer-decay needs a model that names its layers (a timm model, timm:NAME); "
                f"{type(model).__name__} does not: leave --layer-decay out"
            )
        from timm.optim import param_groups_layer_decay

        return param_groups_layer_decay(
            model, weight_decay=weight_decay, no_weight_decay_list=no_decay_names, layer_decay=layer_decay
        )
    decay: List[nn.Parameter] = []
    no_decay: List[nn.Parameter] = []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim <= 1 or name in no_decay_names else decay).append(param)
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
    where = f"resume on {counted(world, 'process')} (the checkpoint's: {saved_world})"
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


TIMM_NAMES = {"sgd": "momentum"}  # ddptrain's sgd is momentum SGD without Nesterov; timm's "sgd" has it
SETTINGS = ("weight_decay", "lr_scale", "momentum")  # what flags set in a group; the schedule sets "lr"


def build_optimizer(
    model: nn.Module,
    name: str,
    lr: float,
    momentum: float,
    weight_decay: float,
    device: torch.device,
    layer_decay: Optional[float] = None,
) -> torch.optim.Optimizer:
    """timm's optimizer factory (sgd, nesterov, adamw, adam, lamb, lars, lion, ...) over `param_groups`."""
    from timm.optim import create_optimizer_v2

    groups = param_groups(model, weight_decay, layer_decay)
    try:
        return create_optimizer_v2(
            groups,
            opt=TIMM_NAMES.get(name, name),
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            foreach=True if device.type == "cuda" else None,
        )
    except (AssertionError, ValueError) as error:  # timm's way of saying it does not know the name
        raise ConfigError(f"optimizer '{name}' is not available in the installed timm: {error}") from error


def group_settings(optimizer: torch.optim.Optimizer) -> List[Dict[str, Any]]:
    """The flag-controlled settings of each parameter group (see `apply_settings`)."""
    return [{key: group[key] for key in SETTINGS if key in group} for group in optimizer.param_groups]


def same_groups(optimizer: torch.optim.Optimizer, saved_state: Dict[str, Any]) -> bool:
    """Whether a saved optimizer state has this optimizer's parameter groups (count and sizes): a run resumed with
    another --layer-decay (or none) has other groups, and its state cannot be carried over."""
    saved = [len(group["params"]) for group in saved_state.get("param_groups", [])]
    return saved == [len(group["params"]) for group in optimizer.param_groups]


def apply_settings(optimizer: torch.optim.Optimizer, wanted: List[Dict[str, Any]]) -> List[str]:
    """After loading a checkpoint's optimizer state, make its settings this command line's again (`wanted`, from
    `group_settings` of the freshly built optimizer; the state restores the old ones): weight decay, layer-decay
    scales, momentum. The learning rate is set by the schedule at every step. Returns the changes, as
    "name old -> new"."""
    changes: List[str] = []
    for group, values in zip(optimizer.param_groups, wanted):
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
            group["lr"] = lr * group.get("lr_scale", 1.0)  # --layer-decay's per-layer scale
        return lr

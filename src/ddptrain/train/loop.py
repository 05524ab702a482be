"""The training step loop. No files, no console: the caller decides what to show and save.

Distributed hazards handled here:
- every rank runs the same number of optimizer steps and the same collectives in the same order
  (the sampler drops the uneven tail; loss reductions happen at fixed step numbers);
- gradients are *averaged* by DDP, so `--clip-grad` clips the global-batch gradient norm with the
  same value a single GPU would use: no sqrt(world size) factor;
- micro-steps of gradient accumulation run under `no_sync()` so only the last one all-reduces.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Protocol, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..data.loaders import batches as rank_batches
from ..errors import ConfigError
from ..runtime.dist import Runtime
from ..runtime.preempt import StopRequest
from .mixing import Mixing, soft_cross_entropy
from .monitor import LossWindow, StepMonitor, advance
from .optim import LrSchedule
from .precision import Precision
from .state import EpochPosition
from .timing import RankTiming, StepTimer, summarize


class StepReporter(Protocol):
    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None: ...


@dataclass
class StepSettings:
    grad_accum: int
    clip_grad: Optional[float]
    log_every: int
    channels_last: bool
    label_smoothing: float
    mixing: Optional[Mixing] = None  # Mixup/CutMix with soft targets (label smoothing folded in)


@dataclass
class EpochPlan:
    """Which epoch to train, from where, and what to do at reduction, checkpoint and stop points."""

    epoch: int
    global_step: int  # optimizer steps before this call
    start: EpochPosition = dataclasses.field(default_factory=EpochPosition)
    samples_per_epoch: Optional[int] = None  # a whole epoch's samples over all ranks (default: this loader's)
    save_every_steps: int = 0  # 0: no mid-epoch checkpoints
    on_checkpoint: Optional[Callable[[int, EpochPosition, int], None]] = None  # (epoch, position, step), all ranks
    report: Optional[StepReporter] = None  # progress after each reduction
    stop: Optional[StopRequest] = None  # this rank's wish to stop; ranks agree at reduction points
    on_failure: Optional[Callable[[Iterable[str]], None]] = None  # unreadable files met in a batch
    after_first_step: Optional[Callable[[], None]] = None  # once, when this call's first step is done
    after_step: Optional[Callable[[int], None]] = None  # after every optimizer step (global step): e.g. the EMA

    def saves_after(self, global_step: int) -> bool:
        return bool(self.save_every_steps) and global_step % self.save_every_steps == 0


@dataclass
class EpochStats:
    train_loss: float
    steps: int
    images_per_sec: float
    epoch_time_s: float
    data_wait_frac: float
    skipped_images: int
    lr: float
    stopped: Optional[EpochPosition] = None  # set when every rank agreed to stop before the epoch's end
    ranks: List[RankTiming] = dataclasses.field(default_factory=list)  # per-rank breakdown (timing.py)


def steps_per_epoch(batches: int, grad_accum: int) -> int:
    return batches // grad_accum


def train_one_epoch(
    model: nn.Module,
    loader,
    optimizer,
    schedule: LrSchedule,
    precision: Precision,
    settings: StepSettings,
    rt: Runtime,
    plan: EpochPlan,
) -> EpochStats:
    model.train()
    n_steps = steps_per_epoch(len(loader), settings.grad_accum)
    monitor = StepMonitor(rt, model, loader, n_steps, plan.stop, plan.on_failure, plan.after_first_step)
    window, position = LossWindow(rt.device), dataclasses.replace(plan.start)
    batches = rank_batches(loader, rt.rank)  # a loader worker's ddptrain error as one line
    for step in range(n_steps):
        global_step = plan.global_step + step + 1
        with monitor.step(global_step):
            for micro in range(settings.grad_accum):
                batch = monitor.next_batch(batches)
                draw = (plan.epoch, global_step, rt.rank, micro)  # Mixup/CutMix: a pure function of these
                loss = forward_backward(
                    model, batch, precision, settings, rt.device, monitor.timer, micro == settings.grad_accum - 1, draw
                )
                window.add(loss, len(batch), len(batch.failures))
            if step == 0:  # every rank's batches have the same size (the sampler drops the uneven tail)
                per_step = monitor.clock.images * rt.world_size
                per_epoch = plan.samples_per_epoch or (plan.start.samples_done + n_steps * per_step)
            samples_done = plan.start.samples_done + (step + 1) * per_step
            schedule.apply(optimizer, plan.epoch, samples_done, per_epoch)
            optimizer_step(model, optimizer, precision, settings.clip_grad)
            if plan.after_step is not None:
                plan.after_step(global_step)
        last = step + 1 == n_steps
        save = plan.saves_after(global_step) and not last
        if save or last or (step + 1) % settings.log_every == 0:
            totals = window.reduce(monitor.before_reduction(), plan.epoch, global_step, rt.rank)
            advance(position, totals, samples_done)
            if plan.report is not None:
                plan.report(
                    step + 1, totals.loss, optimizer.param_groups[0]["lr"], monitor.clock.images_per_sec(rt.world_size)
                )
            if (save or totals.stop) and not last and plan.on_checkpoint is not None:
                plan.on_checkpoint(plan.epoch, dataclasses.replace(position), global_step)
            if totals.stop and not last:
                return _finish(monitor, position, optimizer, rt, stopped=True)
    return _finish(monitor, position, optimizer, rt)


def forward_backward(
    model,
    batch,
    precision: Precision,
    settings: StepSettings,
    device: torch.device,
    timer: StepTimer,
    sync: bool,
    draw: Tuple[int, int, int, int] = (0, 0, 0, 0),
) -> torch.Tensor:
    """One micro-batch: forward under autocast, backward of the (scaled) loss share; DDP all-reduces
    only when `sync` (the last micro-batch of an optimizer step). `draw`: (epoch, step, rank, micro) for
    Mixup/CutMix."""
    images, labels = batch.to_device(device, settings.channels_last)
    mixing = settings.mixing
    targets = None
    if mixing is not None and mixing.active:
        images, targets = mixing.apply(images, labels, *draw)
    context = contextlib.nullcontext() if sync else model.no_sync()
    with context:
        with precision.autocast(), timer.forward():
            logits = forward(model, images)
            if targets is not None:
                loss = soft_cross_entropy(logits, targets)
            else:
                loss = F.cross_entropy(logits.float(), labels, label_smoothing=settings.label_smoothing)
        scaled = loss / settings.grad_accum
        (precision.scaler.scale(scaled) if precision.scaler else scaled).backward()
    return loss


def forward(model, images: torch.Tensor) -> torch.Tensor:
    try:
        return model(images)
    except ValueError as error:
        if "more than 1 value per channel" not in str(error):
            raise
        raise ConfigError(
            f"batch norm cannot train on {len(images)} image(s) per process: {error}. Raise "
            "--batch-size (it is per process), or use --sync-bn to normalise over every "
            "process's batch"
        ) from None


def optimizer_step(model, optimizer, precision: Precision, clip_grad: Optional[float]) -> None:
    scaler = precision.scaler
    if clip_grad is not None:
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradient, not the loss-scaled one
        params = [p for p in model.parameters() if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, clip_grad)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _finish(monitor: StepMonitor, position: EpochPosition, optimizer, rt: Runtime, stopped: bool = False) -> EpochStats:
    ranks = monitor.rank_timings()
    return EpochStats(
        train_loss=position.loss_sum / max(position.loss_count, 1.0),
        steps=monitor.steps_done,
        images_per_sec=monitor.clock.images_per_sec(rt.world_size),
        epoch_time_s=monitor.clock.elapsed_s(),
        data_wait_frac=summarize(ranks)["data_wait_frac"],
        skipped_images=position.skipped,
        lr=optimizer.param_groups[0]["lr"],
        stopped=position if stopped else None,
        ranks=ranks,
    )

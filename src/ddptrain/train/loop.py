"""The training step loop. No files, no console: it yields what happened — `Stepped` after every optimizer
step, `Reduced` where the ranks agreed on the loss (and on whether to stop or save), `Finished` with the epoch's
figures — and the trainer does the saving, stopping, EMA and progress where a reader sees them.

Distributed hazards handled here:
- every rank runs the same number of optimizer steps and the same collectives in the same order
  (the sampler drops the uneven tail; loss reductions happen at fixed step numbers);
- gradients are *averaged* by DDP, so `--clip-grad` clips the global-batch gradient norm with the
  same value a single GPU would use: no sqrt(world size) factor;
- micro-steps of gradient accumulation run under `no_sync()` so only the last one all-reduces (under FSDP the
  gradients stay unsharded until the last one, which reduce-scatters);
- --clip-grad's norm is over the whole gradient also under FSDP: `clip_grad_norm_` reduces the shards' norms.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..data.loaders import batches as rank_batches
from ..errors import ConfigError
from ..models.fsdp import gradient_sync
from ..models.wrap import unused_parameters_error
from ..runtime.dist import Runtime
from ..runtime.preempt import StopRequest
from ..util import counted
from .mixing import Mixing, multilabel_loss, soft_cross_entropy, soft_targets
from .monitor import LossWindow, StepMonitor, advance
from .optim import LrSchedule
from .precision import Precision
from .state import EpochPosition
from .timing import RankTiming, StepTimer, summarize


@dataclass
class StepSettings:
    grad_accum: int
    clip_grad: Optional[float]
    log_every: int
    channels_last: bool
    label_smoothing: float
    mixing: Optional[Mixing] = None  # Mixup/CutMix with soft targets (label smoothing folded in)
    class_weights: Optional[torch.Tensor] = None  # --class-weights: per class, on the device


@dataclass
class EpochPlan:
    """Which epoch to train, from where, and when to save; `stop`: this rank's wish to stop, which the ranks agree
    on at reduction points."""

    epoch: int
    global_step: int  # optimizer steps before this epoch's first
    start: EpochPosition = dataclasses.field(default_factory=EpochPosition)
    samples_per_step: Optional[int] = None  # images per optimizer step over all ranks (default: the first step's)
    samples_per_epoch: Optional[int] = None  # a whole epoch's samples over all ranks (default: this loader's)
    save_every_steps: int = 0  # 0: no mid-epoch checkpoints
    stop: Optional[StopRequest] = None

    def saves_after(self, global_step: int) -> bool:
        return bool(self.save_every_steps) and global_step % self.save_every_steps == 0


@dataclass
class Stepped:
    """An optimizer step is done (on this rank): its global number, whether it was this epoch's first, and the
    unreadable files its batches met."""

    global_step: int
    first: bool
    failures: Tuple[str, ...] = ()
    data_wait_frac: float = 0.0  # this rank's share of the epoch so far spent waiting for batches


@dataclass
class Reduced:
    """Every rank reduced its loss window at this step, so each sees the same values: the mean loss since the last
    reduction, the epoch's position, and whether the ranks save a mid-epoch checkpoint or stop here."""

    steps_done: int  # in this epoch call
    global_step: int
    loss: float
    lr: float
    images_per_sec: float
    position: EpochPosition  # a copy: what a mid-epoch checkpoint saves
    save: bool  # a mid-epoch checkpoint is due (--save-every-steps, or a stop)
    stop: bool  # every rank agreed to stop here


@dataclass
class Finished:
    stats: EpochStats


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


def train_epoch(
    model: nn.Module,
    loader,
    optimizer,
    schedule: LrSchedule,
    precision: Precision,
    settings: StepSettings,
    rt: Runtime,
    plan: EpochPlan,
) -> Iterator[Union[Stepped, Reduced, Finished]]:
    """One epoch (or its rest), as events; the last one is `Finished`. The learning rate follows the samples
    consumed over all ranks, so a resume on another number of processes stays on the same curve."""
    model.train()
    n_steps = steps_per_epoch(len(loader), settings.grad_accum)
    monitor = StepMonitor(rt, model, loader, n_steps, plan.stop)
    window, position = LossWindow(rt.device), dataclasses.replace(plan.start)
    batches = rank_batches(loader, rt.rank)  # a loader worker's ddptrain error as one line
    per_step = plan.samples_per_step
    for step in range(n_steps):
        global_step = plan.global_step + step + 1
        with monitor.step(global_step):
            failures, images = _accumulate(
                model, batches, monitor, window, precision, settings, rt, (plan.epoch, global_step)
            )
            per_step = per_step or images * rt.world_size  # every rank's steps have the same size (tail dropped)
            per_epoch = plan.samples_per_epoch or (plan.start.samples_done + n_steps * per_step)
            samples_done = plan.start.samples_done + (step + 1) * per_step
            schedule.apply(optimizer, plan.epoch, samples_done, per_epoch)
            optimizer_step(model, optimizer, precision, settings.clip_grad)
        yield Stepped(global_step, step == 0, failures, monitor.data_wait_frac())
        last = step + 1 == n_steps
        save = plan.saves_after(global_step) and not last
        if save or last or (step + 1) % settings.log_every == 0:
            totals = window.reduce(monitor.before_reduction(), plan.epoch, global_step, rt.rank)
            advance(position, totals, samples_done)
            stop = totals.stop and not last
            lr, speed = optimizer.param_groups[0]["lr"], monitor.clock.images_per_sec(rt.world_size)
            yield Reduced(
                step + 1, global_step, totals.loss, lr, speed, dataclasses.replace(position), save or stop, stop
            )
            if stop:
                yield Finished(_finish(monitor, position, optimizer, rt, stopped=True))
                return
    yield Finished(_finish(monitor, position, optimizer, rt))


def _accumulate(model, batches, monitor, window, precision, settings, rt, step_key) -> Tuple[Tuple[str, ...], int]:
    """The micro-batches of one optimizer step, forward and backward: the unreadable files they met, their images."""
    failures: List[str] = []
    images = 0
    for micro in range(settings.grad_accum):
        batch = monitor.next_batch(batches)
        failures.extend(batch.failures)
        images += len(batch)
        draw = (*step_key, rt.rank, micro)  # Mixup/CutMix: a pure function of (epoch, step, rank, micro)
        sync = micro == settings.grad_accum - 1
        try:
            loss = forward_backward(model, batch, precision, settings, rt.device, monitor.timer, sync, draw)
        except RuntimeError as error:
            explained = unused_parameters_error(error, model, rt.rank)
            if explained is None:
                raise
            raise explained from None
        window.add(loss, len(batch), len(batch.failures))
    return tuple(failures), images


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
    """A whole epoch with nothing done between its steps (tests, benchmarks): `train_epoch`'s last event."""
    for event in train_epoch(model, loader, optimizer, schedule, precision, settings, rt, plan):
        if isinstance(event, Finished):
            return event.stats
    raise AssertionError("train_epoch ends with Finished")


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
    with gradient_sync(model, sync):
        with precision.autocast(), timer.forward():
            logits = forward(model, images)
            loss = training_loss(logits, labels, targets, settings)
        scaled = loss / settings.grad_accum
        (precision.scaler.scale(scaled) if precision.scaler else scaled).backward()
    return loss


def training_loss(
    logits: torch.Tensor, labels: torch.Tensor, targets: Optional[torch.Tensor], settings: StepSettings
) -> torch.Tensor:
    """The step's loss: cross-entropy on class indices (or Mixup/CutMix's soft targets), binary cross-entropy on
    0/1 rows (--task multilabel), each weighted by --class-weights. Always the plain mean over the micro-batch's
    images, so that the mean of the ranks' gradients is one process's on the global batch."""
    weights = settings.class_weights
    if labels.is_floating_point():  # --task multilabel
        smoothed = soft_targets(labels, logits.shape[1], settings.label_smoothing)
        return multilabel_loss(logits, smoothed if targets is None else targets, weights)
    if targets is not None:
        return soft_cross_entropy(logits, targets, weights)
    per_image = F.cross_entropy(logits.float(), labels, label_smoothing=settings.label_smoothing, reduction="none")
    return (per_image * weights[labels]).mean() if weights is not None else per_image.mean()


def forward(model, images: torch.Tensor) -> torch.Tensor:
    try:
        return model(images)
    except ValueError as error:
        if "more than 1 value per channel" not in str(error):
            raise
        raise ConfigError(
            f"batch norm cannot train on {counted(len(images), 'image')} per process: {error}. Raise "
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

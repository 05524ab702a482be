"""The training step and the evaluation pass. No files, no console: the caller decides what to show.

Distributed hazards handled here:
- every rank runs the same number of optimizer steps and the same collectives in the same order
  (the sampler drops the uneven tail; loss reductions happen at fixed step numbers);
- gradients are *averaged* by DDP, so `--clip-grad` clips the global-batch gradient norm with the
  same value a single GPU would use: no sqrt(world size) factor;
- micro-steps of gradient accumulation run under `no_sync()` so only the last one all-reduces;
- evaluation runs on the unwrapped model: ranks may hold different numbers of validation samples
  (or none), and a DDP forward could issue collectives that the other ranks never join.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from . import dist
from .checkpoint import unwrap
from .data.transforms import normalize
from .errors import ConfigError, NonFiniteLossError
from .health import Heartbeat, describe, is_peer_failure
from .metrics import EvalResult, EvalTotals
from .preempt import StopRequest
from .timing import RankTiming, StepTimer, summarize

STEADY_STATE_AFTER_STEPS = 2  # throughput excludes the first steps of an epoch (worker start, allocator warm-up)


@dataclass
class Precision:
    device_type: str
    dtype: Optional[torch.dtype]  # None: full fp32
    scaler: Optional["torch.amp.GradScaler"]

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
            raise ConfigError(f"--amp fp16 is not supported on {device.type} by torch {torch.__version__} "
                              f"({error}); use --amp bf16 or off") from None
    return Precision(device.type, dtype, scaler)


def param_groups(model: nn.Module, weight_decay: float) -> list:
    """Weight decay on weight matrices and kernels only; never on norm layers' scales or biases."""
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (no_decay if param.ndim <= 1 else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, name: str, lr: float, momentum: float, weight_decay: float,
                    device: torch.device) -> torch.optim.Optimizer:
    groups = param_groups(model, weight_decay)
    fused = {"foreach": True} if device.type == "cuda" else {}
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=False, **fused)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, **fused)
    raise ConfigError(f"unknown optimizer '{name}' (choose sgd or adamw)")


class LrSchedule:
    """Linear warmup, then cosine decay to `min_ratio` x base LR, as a function of fractional epochs.

    Defined on epochs rather than step counts, so a run resumed with a different number of processes
    (and so a different number of steps per epoch) continues on the same curve."""

    def __init__(self, base_lr: float, epochs: int, warmup_epochs: float, min_ratio: float):
        self.base_lr = base_lr
        self.epochs = epochs
        self.warmup_epochs = min(max(0.0, warmup_epochs), epochs * 0.5)
        self.min_ratio = min_ratio

    def factor(self, progress_epochs: float) -> float:
        if progress_epochs < self.warmup_epochs:
            return progress_epochs / self.warmup_epochs
        span = max(self.epochs - self.warmup_epochs, 1e-9)
        done = min(1.0, (progress_epochs - self.warmup_epochs) / span)
        return self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * done))

    def apply(self, optimizer, epoch: int, samples_done: int, samples_per_epoch: int) -> float:
        """Set the LR for the step that ends with `samples_done` of the epoch's samples consumed
        (counted over all ranks, so a resumed or re-sharded epoch stays on the curve)."""
        lr = self.base_lr * self.factor(epoch + samples_done / max(samples_per_epoch, 1))
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self) -> dict:
        return dict(vars(self))


class StepReporter(Protocol):
    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None: ...


@dataclass
class StepSettings:
    grad_accum: int
    clip_grad: Optional[float]
    log_every: int
    channels_last: bool
    label_smoothing: float


@dataclass
class EpochPosition:
    """How far an epoch got: positions of its sample permutation consumed (over all ranks) and the
    all-reduced loss sums and skipped-image count so far. Saved in mid-epoch checkpoints."""
    samples_done: int = 0
    loss_sum: float = 0.0
    loss_count: float = 0.0
    skipped: int = 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "EpochPosition":
        return cls(int(values["samples_done"]), float(values["loss_sum"]), float(values["loss_count"]),
                   int(values["skipped"]))


@dataclass
class EpochPlan:
    """Which epoch to train, from where, and what to do at checkpoint and stop points."""
    epoch: int
    global_step: int  # optimizer steps before this call
    start: EpochPosition = dataclasses.field(default_factory=EpochPosition)
    samples_per_epoch: Optional[int] = None  # a whole epoch's samples over all ranks (default: this loader's)
    save_every_steps: int = 0  # 0: no mid-epoch checkpoints
    on_checkpoint: Optional[Callable[[EpochPosition, int], None]] = None  # (position, global step), all ranks
    stop: Optional[StopRequest] = None  # this rank's wish to stop; ranks agree at reduction points


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


def _to_device(batch, device: torch.device, channels_last: bool):
    images = normalize(batch.images.to(device, non_blocking=True))  # uint8 travels; floats are made here
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    return images, batch.labels.to(device, non_blocking=True)


class _Clock:
    """Wall-clock bookkeeping for one epoch on this rank."""

    def __init__(self, device: torch.device):
        self.device = device
        self.start = time.perf_counter()
        self.steady_start: Optional[float] = None
        self.steady_images = 0

    def mark_steady(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.steady_start = time.perf_counter()

    def images_per_sec(self, images_total: int, world_size: int) -> float:
        now = time.perf_counter()
        if self.steady_start is None or now <= self.steady_start:
            return images_total * world_size / max(now - self.start, 1e-9)
        return self.steady_images * world_size / (now - self.steady_start)


def train_one_epoch(model: nn.Module, loader, optimizer, schedule: LrSchedule, precision: Precision,
                    settings: StepSettings, rt: dist.Runtime, plan: EpochPlan,
                    report: Optional[StepReporter] = None,
                    on_failure: Optional[Callable[[str], None]] = None) -> EpochStats:
    heartbeat = Heartbeat(rt)
    try:
        return _train_steps(model, loader, optimizer, schedule, precision, settings, rt, plan, report,
                            on_failure, heartbeat)
    except RuntimeError as error:
        if rt.world_size > 1 and is_peer_failure(error):
            raise describe(heartbeat, error, plan.epoch) from error
        raise


def _train_steps(model, loader, optimizer, schedule, precision, settings, rt, plan: EpochPlan,
                 report, on_failure, heartbeat: Heartbeat) -> EpochStats:
    model.train()
    n_steps = steps_per_epoch(len(loader), settings.grad_accum)
    clock = _Clock(rt.device)
    timer = StepTimer(rt.device, rt.rank, None if _is_compiled(model) else unwrap(model),
                      getattr(loader, "num_workers", 0))
    # loss sum, samples, skipped images since the last reduction, and this rank's stop request
    window = torch.zeros(4, dtype=torch.float64, device=rt.device)
    position = dataclasses.replace(plan.start)
    samples_per_step = 0
    images_total = 0
    batches = iter(loader)
    for step in range(n_steps):
        global_step = plan.global_step + step + 1
        heartbeat.beat(global_step)
        if plan.stop is not None:
            plan.stop.step_started()
        for micro in range(settings.grad_accum):
            with timer.data_wait():
                batch = next(batches)
            timer.add_load(batch.load_s)
            window[2] += len(batch.failures)
            _notify(on_failure, batch.failures)
            loss = _forward_backward(model, batch, precision, settings, rt.device, timer,
                                     sync=micro == settings.grad_accum - 1)
            window[0] += loss.detach().double() * len(batch)
            window[1] += len(batch)
            images_total += len(batch)
            if clock.steady_start is not None:
                clock.steady_images += len(batch)
        if step == 0:  # every rank's batches have the same size (the sampler drops the uneven tail)
            samples_per_step = images_total * rt.world_size
            per_epoch = plan.samples_per_epoch or (plan.start.samples_done + n_steps * samples_per_step)
        samples_done = plan.start.samples_done + (step + 1) * samples_per_step
        schedule.apply(optimizer, plan.epoch, samples_done, per_epoch)
        _optimizer_step(model, optimizer, precision, settings.clip_grad)
        heartbeat.beat(global_step, done=True)
        if plan.stop is not None:
            plan.stop.step_finished()
        heartbeat.first_step_done()
        if step + 1 == min(STEADY_STATE_AFTER_STEPS, n_steps - 1):
            clock.mark_steady()
        if step == 0 and n_steps > 1:
            timer.restart()  # the breakdown leaves out the loader's start-up
        last = step + 1 == n_steps
        save = bool(plan.save_every_steps) and global_step % plan.save_every_steps == 0 and not last
        if save or last or (step + 1) % settings.log_every == 0:
            window[3] = float(plan.stop is not None and plan.stop.requested())
            timer.sample_utilization()
            loss_value, stop = _reduce_window(window, position, rt, plan.epoch, global_step)
            position.samples_done = samples_done
            if report is not None:
                report(step + 1, loss_value, optimizer.param_groups[0]["lr"],
                       clock.images_per_sec(images_total, rt.world_size))
            if (save or stop) and not last and plan.on_checkpoint is not None:
                plan.on_checkpoint(dataclasses.replace(position), global_step)
            if stop and not last:
                return _finish_epoch(clock, timer, position, images_total, step + 1, rt, optimizer,
                                     stopped=True)
    return _finish_epoch(clock, timer, position, images_total, n_steps, rt, optimizer)


def _is_compiled(model: nn.Module) -> bool:
    """Hooks on a compiled module's original would force recompiles; time its whole forward instead."""
    inner = getattr(model, "module", model)
    return hasattr(inner, "_orig_mod")


def _notify(on_failure: Optional[Callable[[str], None]], failures) -> None:
    if on_failure is not None:
        for failure in failures:
            on_failure(failure)


def _forward_backward(model, batch, precision: Precision, settings: StepSettings, device, timer: StepTimer,
                      sync: bool):
    images, labels = _to_device(batch, device, settings.channels_last)
    context = contextlib.nullcontext() if sync else model.no_sync()
    with context:
        with precision.autocast(), timer.forward():
            logits = _forward(model, images)
            loss = F.cross_entropy(logits.float(), labels, label_smoothing=settings.label_smoothing)
        scaled = loss / settings.grad_accum
        (precision.scaler.scale(scaled) if precision.scaler else scaled).backward()
    return loss


def _forward(model, images: torch.Tensor) -> torch.Tensor:
    try:
        return model(images)
    except ValueError as error:
        if "more than 1 value per channel" not in str(error):
            raise
        raise ConfigError(f"batch norm cannot train on {len(images)} image(s) per process: {error}. Raise "
                          "--batch-size (it is per process), or use --sync-bn to normalise over every "
                          "process's batch") from None


def _optimizer_step(model, optimizer, precision: Precision, clip_grad: Optional[float]) -> None:
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


def _reduce_window(window: torch.Tensor, position: EpochPosition, rt: dist.Runtime, epoch: int,
                   step: int) -> tuple:
    """Sum every rank's window. The loss mean since the last reduction arrives the same on every
    rank, so a non-finite loss stops all ranks at the same step instead of leaving peers hanging; so
    does a stop request (SIGTERM/SIGUSR1) that reached any rank."""
    loss_sum, count, skipped, stop = dist.all_reduce_sum(window.clone()).tolist()
    window.zero_()
    mean = loss_sum / max(count, 1.0)
    if not math.isfinite(mean):
        raise NonFiniteLossError(
            f"rank {rt.rank}: training loss became {mean} at epoch {epoch + 1}, step {step}; every rank "
            "stops here. Lower --lr, set --clip-grad, or use --amp bf16/off instead of fp16.")
    position.loss_sum += loss_sum
    position.loss_count += count
    position.skipped += int(skipped)
    return mean, stop > 0


def _finish_epoch(clock: _Clock, timer: StepTimer, position: EpochPosition, images_total: int, n_steps: int,
                  rt: dist.Runtime, optimizer, stopped: bool = False) -> EpochStats:
    images_per_sec = clock.images_per_sec(images_total, rt.world_size)
    elapsed = time.perf_counter() - clock.start
    counted = n_steps - 1 if n_steps > 1 else n_steps
    ranks = dist.gather_objects(timer.finish(counted))  # every rank's breakdown, in rank order
    return EpochStats(
        train_loss=position.loss_sum / max(position.loss_count, 1.0),
        steps=n_steps,
        images_per_sec=images_per_sec,
        epoch_time_s=elapsed,
        data_wait_frac=summarize(ranks)["data_wait_frac"],
        skipped_images=position.skipped,
        lr=optimizer.param_groups[0]["lr"],
        stopped=position if stopped else None,
        ranks=ranks,
    )


@torch.no_grad()
def evaluate(model: nn.Module, loader, precision: Precision, num_classes: int, rt: dist.Runtime,
             channels_last: bool = False, on_failure: Optional[Callable[[str], None]] = None) -> EvalResult:
    """Exact top-1/top-5/loss over exactly the samples in the loader, summed over every rank."""
    plain = unwrap(model)
    was_training = plain.training
    plain.eval()
    totals = EvalTotals(num_classes, rt.device)
    for batch in loader:
        totals.add_skipped(len(batch.failures))
        _notify(on_failure, batch.failures)
        if len(batch) == 0:
            continue
        images, labels = _to_device(batch, rt.device, channels_last)
        with precision.autocast():
            logits = plain(images).float()
        totals.update(logits, labels, F.cross_entropy(logits, labels, reduction="sum"))
    plain.train(was_training)
    return totals.reduce()

"""The bookkeeping around each training step, kept out of the step loop: heartbeats and the stop
request's step timer (`StepMonitor`), the epoch's clock and throughput (`EpochClock`), and the loss
sums that all ranks reduce together (`LossWindow`)."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Iterator, Optional

import torch
from torch import nn

from ..errors import NonFiniteLossError
from ..models.wrap import is_compiled, unwrap
from ..runtime import dist
from ..runtime.dist import Runtime
from ..runtime.heartbeat import Heartbeat
from ..runtime.preempt import StopRequest
from .state import EpochPosition
from .timing import StepTimer

STEADY_STATE_AFTER_STEPS = 2  # throughput excludes the first steps of an epoch (worker start, allocator warm-up)


class EpochClock:
    """Wall-clock time and images of one epoch on this rank; throughput from the steady state on."""

    def __init__(self, device: torch.device):
        self.device = device
        self.start = time.perf_counter()
        self.steady_start: Optional[float] = None
        self.images = 0  # consumed by this rank this epoch
        self.steady_images = 0

    def add_images(self, count: int) -> None:
        self.images += count
        if self.steady_start is not None:
            self.steady_images += count

    def mark_steady(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.steady_start = time.perf_counter()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.start

    def images_per_sec(self, world_size: int) -> float:
        """Summed over all ranks (every rank consumes as many images per step)."""
        now = time.perf_counter()
        if self.steady_start is None or now <= self.steady_start:
            return self.images * world_size / max(now - self.start, 1e-9)
        return self.steady_images * world_size / (now - self.steady_start)


@dataclass
class WindowTotals:
    """A reduced loss window: the same values on every rank."""

    loss_sum: float
    samples: float
    skipped: int
    stop: bool  # some rank was asked to stop (SIGTERM/SIGUSR1)

    @property
    def loss(self) -> float:
        """The mean training loss since the last reduction, over all ranks."""
        return self.loss_sum / max(self.samples, 1.0)


class LossWindow:
    """This rank's sums since the last reduction, all-reduced in one collective: loss x samples, samples,
    unreadable files skipped, and whether this rank was asked to stop."""

    def __init__(self, device: torch.device):
        self.sums = torch.zeros(4, dtype=torch.float64, device=device)

    def add(self, loss: torch.Tensor, samples: int, skipped: int) -> None:
        self.sums[0] += loss.detach().double() * samples
        self.sums[1] += samples
        self.sums[2] += skipped

    def reduce(self, stop_wish: bool, epoch: int, step: int, rank: int) -> WindowTotals:
        """Every rank calls this at the same steps. A non-finite mean arrives the same on every rank, so all
        ranks stop at the same step instead of leaving peers hanging; so does a stop request."""
        self.sums[3] = float(stop_wish)
        loss_sum, samples, skipped, stop = dist.all_reduce_sum(self.sums.clone()).tolist()
        self.sums.zero_()
        totals = WindowTotals(loss_sum, samples, int(skipped), stop > 0)
        if not math.isfinite(totals.loss):
            raise NonFiniteLossError(
                f"training loss became {totals.loss} at epoch {epoch + 1}, step {step}; every rank stops here. "
                "Lower --lr, set --clip-grad, or use --amp bf16/off instead of fp16.",
                rank=rank,
            )
        return totals


def advance(position: EpochPosition, totals: WindowTotals, samples_done: int) -> None:
    """Fold a reduced window into the epoch's position (what a mid-epoch checkpoint saves)."""
    position.samples_done = samples_done
    position.loss_sum += totals.loss_sum
    position.loss_count += totals.samples
    position.skipped += totals.skipped


class StepMonitor:
    """Everything a step does besides learning: heartbeats in the job store, the stop request's stuck-step
    timer, the step-time breakdown and this epoch's clock."""

    def __init__(
        self,
        rt: Runtime,
        model: nn.Module,
        loader,
        n_steps: int,
        stop: Optional[StopRequest] = None,
    ):
        self.rt, self.n_steps, self.stop = rt, n_steps, stop
        self.heartbeat = Heartbeat.of(rt)  # one per run: publishes from a thread, bounded by time
        self.timer = StepTimer(
            rt.device, rt.rank, None if is_compiled(model) else unwrap(model), getattr(loader, "num_workers", 0)
        )
        self.clock = EpochClock(rt.device)
        self.steps_done = 0

    @contextlib.contextmanager
    def step(self, global_step: int) -> Iterator[None]:
        self.heartbeat.beat(global_step)
        if self.stop is not None:
            self.stop.step_started()
        yield
        self.heartbeat.beat(global_step, done=True)
        if self.stop is not None:
            self.stop.step_finished()
        self.steps_done += 1
        if self.steps_done == min(STEADY_STATE_AFTER_STEPS, self.n_steps - 1):
            self.clock.mark_steady()
        if self.steps_done == 1 and self.n_steps > 1:
            self.timer.restart()  # the breakdown leaves out the loader's start-up

    def next_batch(self, batches: Iterator):
        with self.timer.data_wait():
            batch = next(batches)
        self.timer.add_load(batch.load_s)
        self.clock.add_images(len(batch))
        return batch

    def data_wait_frac(self) -> float:
        """The share of this epoch's steady state (after its first step) spent waiting for batches, so far."""
        return self.timer.data_wait_s / max(time.perf_counter() - self.timer.start, 1e-9)

    def before_reduction(self) -> bool:
        """At a reduction point: sample GPU utilisation; return whether this rank was asked to stop."""
        self.timer.sample_utilization()
        return self.stop is not None and self.stop.requested()

    def rank_timings(self) -> list:
        """Every rank's step-time breakdown for this epoch, in rank order (a collective)."""
        counted = self.steps_done - 1 if self.steps_done > 1 else self.steps_done
        return dist.gather_objects(self.timer.finish(counted))

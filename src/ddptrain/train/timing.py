"""Where each rank's step time goes, and what to do about it.

Per rank and epoch: time waiting for the DataLoader, time in the model's own forward passes
(measured by hooks on the unwrapped model, so DDP's buffer broadcast before it is left out; no
collective runs there, so a slow GPU or CPU shows up on its own rank and not on its peers), wall
time, peak memory and, on CUDA with NVML (`nvidia-ml-py`) importable, GPU utilisation. The backward
pass is left out of the per-rank comparison: DDP's gradient all-reduce runs inside it, so every
rank waits there for the slowest one and the times come out equal.

Gathered to every rank at the epoch's end; rank 0 writes the summary to metrics.jsonl and
TensorBoard and prints advice: input-bound, a named straggler, memory close to the limit.
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Set

import torch

from ..util import counted

INPUT_BOUND_FRAC = 0.20
STRAGGLER_RATIO = 1.20
STRAGGLER_MIN_EXCESS_S = 0.01  # per step; below this, differences are timer noise
MEMORY_HIGH_FRAC = 0.92


@dataclass
class RankTiming:
    rank: int
    steps: int
    elapsed_s: float
    data_wait_s: float
    forward_s: float
    load_s: float  # reading + decoding + augmenting this rank's samples, summed over its loader workers
    workers: int
    max_mem_mb: float
    mem_total_mb: Optional[float]  # the device's memory on CUDA; None on CPU (RAM is shared)
    gpu_util: Optional[float]  # mean NVML utilisation in %, when available
    batches: int = 0  # loader batches the epoch took, its first included (the window above leaves it out)

    @property
    def work_per_step_s(self) -> float:
        """This rank's own work per step, independent of its peers: its forward passes plus its input
        pipeline's time spread over its loader workers. (Time waiting for data is not comparable
        between ranks: whichever rank gets its batch last waits, the others wait in the all-reduce.)"""
        return (self.forward_s + self.load_s / max(self.workers, 1)) / max(self.steps, 1)


class StepTimer:
    """Accumulates one rank's breakdown during an epoch; no host-device sync until `finish`."""

    def __init__(self, device: torch.device, rank: int, module: Optional[torch.nn.Module] = None, workers: int = 0):
        self.device, self.rank, self.workers = device, rank, workers
        self.nvml = _nvml_handle(device)
        self.util_samples: List[float] = []
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.active = False
        self.batches = 0  # the whole epoch's, unlike the window `restart` begins
        self._pending: Any = None  # a CUDA event or a perf_counter reading
        self._hooks = (
            []
            if module is None
            else [
                module.register_forward_pre_hook(self._before, prepend=True),
                module.register_forward_hook(self._after),
            ]
        )
        self.restart()

    def restart(self) -> None:
        """Start the window again: called after an epoch's first step, whose data wait is mostly the
        loader's start-up, so the breakdown describes the steady state."""
        self.start = time.perf_counter()
        self.data_wait_s = 0.0
        self.load_s = 0.0
        self.forward_cpu_s = 0.0
        self.events: List[tuple] = []

    @contextlib.contextmanager
    def data_wait(self) -> Iterator[None]:
        begin = time.perf_counter()
        yield
        self.data_wait_s += time.perf_counter() - begin
        self.batches += 1

    def add_load(self, seconds: float) -> None:
        self.load_s += seconds

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """Training forward passes happen inside this; evaluation's are not counted. Without a module
        to hook (a compiled model), the whole block is timed."""
        self.active = True
        whole = not self._hooks
        if whole:
            self._before(None, None)
        try:
            yield
        finally:
            if whole:
                self._after(None, None, None)
            self.active = False

    def _before(self, module, args) -> None:
        if not self.active:
            return
        if self.device.type == "cuda":
            self._pending = torch.cuda.Event(enable_timing=True)
            self._pending.record()
        else:
            self._pending = time.perf_counter()

    def _after(self, module, args, output) -> None:
        if not self.active or self._pending is None:
            return
        if self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.events.append((self._pending, end))
        else:
            self.forward_cpu_s += time.perf_counter() - self._pending
        self._pending = None

    def sample_utilization(self) -> None:
        if self.nvml is not None:
            try:
                self.util_samples.append(float(sys.modules["pynvml"].nvmlDeviceGetUtilizationRates(self.nvml).gpu))
            except Exception:  # NVML hiccups never stop training
                self.nvml = None

    def finish(self, steps: int) -> RankTiming:
        for hook in self._hooks:
            hook.remove()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            forward_s = sum(b.elapsed_time(e) for b, e in self.events) / 1000.0
            max_mem = torch.cuda.max_memory_allocated(self.device) / 2**20
            total = torch.cuda.get_device_properties(self.device).total_memory / 2**20
        else:
            forward_s = self.forward_cpu_s
            max_mem = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
            total = None
        util = statistics.fmean(self.util_samples) if self.util_samples else None
        return RankTiming(
            self.rank,
            steps,
            time.perf_counter() - self.start,
            self.data_wait_s,
            forward_s,
            self.load_s,
            self.workers,
            max_mem,
            total,
            util,
            self.batches,
        )


def _nvml_handle(device: torch.device):
    if device.type != "cuda":
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        bus_id = getattr(torch.cuda.get_device_properties(device), "pci_bus_id", None)
        if bus_id:
            return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
    except Exception:  # not installed, no driver access, ...: utilisation is simply absent
        return None


def summarize(ranks: List[RankTiming]) -> Dict:
    """The metrics.jsonl fields for one epoch."""
    fracs = [r.data_wait_s / max(r.elapsed_s, 1e-9) for r in ranks]
    work = [r.work_per_step_s for r in ranks]
    fastest = max(min(work), 1e-9)
    summary = {
        "data_wait_frac": statistics.fmean(fracs),
        "data_wait_frac_max": max(fracs),
        "step_time_s": statistics.fmean(r.elapsed_s / max(r.steps, 1) for r in ranks),
        "rank_work_s": work,
        "step_time_spread": max(work) / fastest - 1.0,
        "max_mem_mb": max(r.max_mem_mb for r in ranks),
    }
    utils = [r.gpu_util for r in ranks if r.gpu_util is not None]
    if utils:
        summary["gpu_util"] = statistics.fmean(utils)
    return summary


def advice(ranks: List[RankTiming], workers: int, straggler_history: Optional[List] = None) -> Dict[str, str]:
    """Warnings a user can act on, keyed by kind. With `straggler_history` (the slowest rank of each
    epoch so far, appended to here), a straggler is named only when the same rank was one in the
    previous epoch too: consistently slower, not one noisy epoch."""
    found: Dict[str, str] = {}
    fracs = [r.data_wait_s / max(r.elapsed_s, 1e-9) for r in ranks]
    worst = max(range(len(ranks)), key=lambda i: fracs[i])
    if fracs[worst] > INPUT_BOUND_FRAC:  # every rank waits for that one in the next all-reduce
        found["input_bound"] = _input_bound(ranks[worst], fracs[worst], statistics.fmean(fracs), workers)
    rank, straggler = _straggler(ranks)
    if straggler_history is not None:
        straggler_history.append(rank)
        consistent = len(straggler_history) >= 2 and straggler_history[-2] == rank
    else:
        consistent = True
    if straggler and consistent:
        found["straggler"] = straggler
    for r in ranks:
        if r.mem_total_mb and r.max_mem_mb > MEMORY_HIGH_FRAC * r.mem_total_mb:
            found["memory"] = (
                f"rank {r.rank} peaked at {r.max_mem_mb:.0f} of {r.mem_total_mb:.0f} MiB of GPU memory "
                f"({r.max_mem_mb / r.mem_total_mb:.0%}): close to out-of-memory; lower --batch-size (and raise "
                "--grad-accum to keep the global batch), use --amp bf16 or --grad-checkpointing, or --strategy fsdp "
                "to shard the weights, gradients and optimizer state (`ddptrain bench memory` shows what each saves)"
            )
            break
    return found


def _input_bound(worst: RankTiming, frac: float, mean: float, workers: int) -> str:
    said = f"input-bound: rank {worst.rank} waited for data {frac:.0%} of the epoch (all ranks: {mean:.0%} on average)"
    if 0 < worst.batches <= workers:  # each worker builds whole batches, all of them at once from the start
        return (
            f"{said}; with {counted(worst.batches, 'batch')} an epoch and {counted(workers, 'loader worker')}, each "
            "batch is built by one worker and the epoch waits for the first ones: more workers do not help, a "
            "smaller --batch-size (more steps an epoch) does"
        )
    return (
        f"{said}; raise --workers (now {workers} per process), keep the images on local disk, or store them closer "
        "to the training size so decoding is cheaper"
    )


def _straggler(ranks: List[RankTiming]) -> tuple:
    """(rank, message) for a rank whose own work is well above the others', else (None, None)."""
    if len(ranks) < 2:
        return None, None
    work = [r.work_per_step_s for r in ranks]
    slowest = max(range(len(ranks)), key=lambda i: work[i])
    others = statistics.median(w for i, w in enumerate(work) if i != slowest)
    if work[slowest] > STRAGGLER_RATIO * others and work[slowest] - others > STRAGGLER_MIN_EXCESS_S:
        r = ranks[slowest]
        return r.rank, (
            f"straggler: rank {r.rank} spends {work[slowest] * 1000:.0f} ms per step on its own input pipeline "
            f"and forward pass, {work[slowest] / max(others, 1e-9):.1f}x the other ranks' {others * 1000:.0f} ms; "
            "every rank waits for it in each gradient all-reduce. "
            + (
                "Check that device (clocks, temperature, other processes: nvidia-smi) or that node's storage and "
                "CPU load"
                if r.mem_total_mb is not None
                else "Check that node's CPU load (other processes: top), its storage, and whether its processes "
                "share cores (--workers, OMP_NUM_THREADS)"
            )
        )
    return None, None


class AdviceOnce:
    """Each kind of advice is printed once per run, the first epoch it applies."""

    def __init__(self) -> None:
        self.shown: Set[str] = set()

    def new(self, found: Dict[str, str]) -> List[str]:
        fresh = [message for kind, message in found.items() if kind not in self.shown]
        self.shown.update(found)
        return fresh

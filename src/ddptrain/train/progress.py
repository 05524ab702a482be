"""Progress within an epoch, on rank 0: a bar on an interactive terminal, and a log line at least every
`--progress-every` seconds — on the console (stderr) and in train.log where there is no terminal (SLURM, nohup,
CI), in train.log alone beside a bar — so a slow epoch can be told from a hung one wherever the output goes."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Optional, Protocol

from tqdm import tqdm

log = logging.getLogger("ddptrain")


class Progress(Protocol):
    def step(self, global_step: int, data_wait_frac: float) -> None: ...

    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None: ...

    def close(self) -> None: ...


class _Bar(tqdm):
    monitor_interval = 0  # no monitor thread (see sinks.TensorBoard: no thread may start while loaders fork)


def progress_bar(total: int, epoch: int, epochs: int, enabled: bool) -> tqdm:
    """An epoch's bar, on an interactive terminal only."""
    return _terminal_bar(total, f"epoch {epoch + 1}/{epochs}", "step", enabled)


def _terminal_bar(total: Optional[int], desc: str, unit: str, enabled: bool) -> tqdm:
    """A bar on stderr where it is an interactive terminal; a disabled one elsewhere."""
    return _Bar(
        total=total,
        desc=desc,
        unit=unit,
        dynamic_ncols=True,
        disable=not (enabled and sys.stderr.isatty()),
        leave=False,
        file=sys.stderr,
    )


@dataclass
class EpochPlace:
    """Where this epoch call starts: its number, the run's epochs, the optimizer steps of a whole epoch, those
    done before this call (a mid-epoch resume), the global step before its first, and images per step."""

    epoch: int
    epochs: int
    steps: int
    done_before: int
    step_offset: int
    global_batch: int


class EpochProgress:
    """The bar and TensorBoard points at each loss reduction, and the timed log line between them."""

    def __init__(self, place: EpochPlace, tb, every_s: float, log_file: Optional[logging.Handler]):
        self.place, self.tb, self.every_s, self.log_file = place, tb, every_s, log_file
        self.bar = progress_bar(place.steps, place.epoch, place.epochs, True)
        self.shown = 0
        self.loss: Optional[float] = None
        self.lr: Optional[float] = None
        self.started = self.last_line = time.perf_counter()

    def step(self, global_step: int, data_wait_frac: float) -> None:
        """After each optimizer step: a line when `every_s` has passed since the last one."""
        now = time.perf_counter()
        if self.every_s <= 0 or now - self.last_line < self.every_s:
            return
        self.last_line = now
        self._line(global_step - self.place.step_offset, now - self.started, data_wait_frac)

    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None:
        self.bar.update(steps_done - self.shown)
        self.shown = steps_done
        self.loss, self.lr = loss, lr
        self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.3g}", img_s=f"{images_per_sec:.0f}")
        self.tb.scalars({"train/loss": loss, "lr": lr}, self.place.step_offset + steps_done)

    def _line(self, steps_done: int, elapsed_s: float, data_wait_frac: float) -> None:
        place = self.place
        at = place.done_before + steps_done
        per_step = elapsed_s / max(steps_done, 1)
        loss = f"  loss {self.loss:.4f}  lr {self.lr:.4g}" if self.loss is not None else ""
        line = (
            f"epoch {place.epoch + 1}/{place.epochs} {at / max(place.steps, 1):.0%}: step {at}/{place.steps} "
            f"(global {place.step_offset + steps_done}){loss}  {place.global_batch / per_step:.1f} img/s  "
            f"data_wait {data_wait_frac:.0%}  epoch ends in ~{_duration((place.steps - at) * per_step)}"
        )
        if self.bar.disable or self.log_file is None:
            log.info(line)
        else:  # beside a bar the line goes to train.log only
            self.log_file.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, line, (), None))

    def close(self) -> None:
        self.bar.close()


class CountProgress:
    """Progress through a known count of items outside the training steps (shard's images, an evaluation's
    batches): the bar on an interactive terminal, else a log line at least every `every_s` seconds (0: none), so a
    pipe or a job log gets lines it can read, not a bar's frames."""

    def __init__(self, total: Optional[int], what: str, unit: str, every_s: float = 30.0, enabled: bool = True):
        self.total, self.what, self.unit, self.every_s = total, what, unit, every_s
        self.bar = _terminal_bar(total, what, unit, enabled)
        self.lines = enabled and self.bar.disable and every_s > 0
        self.done = 0
        self.started = self.last_line = time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        self.done += n
        if not self.lines:
            return
        now = time.perf_counter()
        if now - self.last_line < self.every_s:
            return
        self.last_line = now
        rate = self.done / max(now - self.started, 1e-9)
        if self.total is None:  # a stream of unknown length (a tar set without an index)
            log.info("%s: %d %s, %.1f %s/s", self.what, self.done, self.unit, rate, self.unit)
            return
        log.info(
            "%s: %d/%d %s (%.0f%%), %.1f %s/s, ends in ~%s",
            self.what,
            self.done,
            self.total,
            self.unit,
            100.0 * self.done / max(self.total, 1),
            rate,
            self.unit,
            _duration(max(self.total - self.done, 0) / max(rate, 1e-9)),
        )

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> CountProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NoProgress:
    def step(self, global_step: int, data_wait_frac: float) -> None:
        pass

    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None:
        pass

    def close(self) -> None:
        pass


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"

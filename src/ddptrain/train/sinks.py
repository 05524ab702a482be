"""Where a run speaks: train.log, config.yaml, the class list and splits, metrics.jsonl, TensorBoard,
best_eval.json, the --log-to trackers (metrics.csv, MLflow, W&B: `trackers.py`), the progress bar and the
end-of-epoch lines.

Rank 0 holds a `RunSinks`; every other rank holds a `NullSinks` with the same methods doing nothing, so the trainer
calls its sinks on every rank without asking which rank it is. Both satisfy `Sinks` (mypy checks `open_sinks`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol

from ..config import Config, save_yaml
from ..data.split import Split, write_split_files
from ..errors import DataError, DdptrainError
from ..logs import add_log_file
from ..runtime.startup import StartupClock
from ..util import (
    DamagedLine,
    counted,
    read_epoch_records,
    redact,
    top5_says_something,
    write_json_atomic,
    write_text_atomic,
)
from . import timing
from .loop import EpochStats
from .metrics import EvalResult
from .progress import EpochPlace, EpochProgress, NoProgress, Progress
from .trackers import FAILED, FINISHED, Trackers, run_status

log = logging.getLogger("ddptrain")

METRICS = "metrics.jsonl"
BEST_EVAL = "best_eval.json"


def epoch_record(
    epoch: int,
    step: int,
    world_size: int,
    global_batch: int,
    stats: EpochStats,
    result: Optional[EvalResult],
    ema: Optional[EvalResult] = None,
) -> Dict:
    """One line of metrics.jsonl (the val_ entries only after an epoch that was evaluated: --eval-every)."""
    record: Dict = {"epoch": epoch, "step": step, "train_loss": stats.train_loss}
    if result is not None:
        record.update(val_loss=result.loss, val_top1=result.top1, val_top5=result.top5, val_samples=result.samples)
        record.update({f"val_{name}": value for name, value in result.multilabel().items()})
    if ema is not None:
        record.update(val_loss_ema=ema.loss, val_top1_ema=ema.top1, val_top5_ema=ema.top5)
        record.update({f"val_{name}_ema": value for name, value in ema.multilabel().items()})
    record.update(
        lr=stats.lr,
        images_per_sec=stats.images_per_sec,
        epoch_time_s=stats.epoch_time_s,
        data_wait_frac=stats.data_wait_frac,
        skipped_images=stats.skipped_images + (result.skipped if result is not None else 0),
        world_size=world_size,
        global_batch=global_batch,  # images per optimizer step over all processes
        time=time.time(),
    )
    if stats.ranks:
        record.update(timing.summarize(stats.ranks))
    return record


def perf_scalars(record: Dict) -> Dict[str, float]:
    """The step-time breakdown as TensorBoard scalars (perf/...)."""
    scalars = {
        f"perf/{key}": record[key]
        for key in ("data_wait_frac", "step_time_s", "step_time_spread", "max_mem_mb", "gpu_util")
        if key in record
    }
    for rank, seconds in enumerate(record.get("rank_work_s", [])):
        scalars[f"perf/rank{rank}_work_s"] = seconds
    return scalars


class MetricsLog:
    """metrics.jsonl: one JSON object per epoch, exactly once per epoch even across resumes."""

    def __init__(self, path: Path):
        self.path = path

    def truncate_after(self, last_epoch: int) -> List[Dict]:
        """Drop lines for epochs after `last_epoch` (written before a crash, redone after resume), and a last line
        a crash cut short; the records kept. Rewritten through a temporary file, so a full disk here loses nothing."""
        if not self.path.is_file():
            return []
        try:
            records, cut_short = read_epoch_records(self.path)
        except DamagedLine as error:
            raise DataError(str(error)) from None
        if cut_short is not None:
            log.warning(
                "%s: dropped an unreadable last line (a write cut short by a crash): %.80s", self.path, cut_short
            )
        kept = [record for record in records if record["epoch"] <= last_epoch]
        write_text_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))
        return kept

    def append(self, record: Dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())  # the epoch is on disk before its checkpoint is written


class TensorBoard:
    """A SummaryWriter under RUN_DIR/tb; after a resume, events past the resumed step are purged.

    Opened by `RunSinks.start`, before training: the writer runs a thread of its own, and a thread that
    starts or ends while a DataLoader forks its workers can deadlock the new worker inside the fork
    (CPython takes its thread-state lock for both; python/cpython#112275, fixed after 3.11.7). Loader
    workers are forked at each loader's first pass; no thread may start from then on."""

    def __init__(self, folder: Path, resumed_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        purge = resumed_step + 1 if resumed_step else None
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge)

    def scalars(self, values: Dict[str, Optional[float]], step: int) -> None:
        for tag, value in values.items():
            if value is not None:
                self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


# Writes `ddptrain report`'s figures and report.md for a run directory and returns their folder: handed down by the
# command line (tools/ is a layer above), for the trackers that take files (MLflow, W&B).
ReportWriter = Callable[[Path], Path]


class RunSinks:
    """Rank 0's outputs."""

    def __init__(self, run_dir: Path, epochs: int, report: Optional[ReportWriter] = None, progress_every: float = 30.0):
        self.run_dir, self.epochs, self.report, self.progress_every = run_dir, epochs, report, progress_every
        run_dir.mkdir(parents=True, exist_ok=True)
        self.log_handler = add_log_file(run_dir / "train.log")
        self.metrics = MetricsLog(run_dir / METRICS)
        self._tb: Optional[TensorBoard] = None  # opened by start(), before any loader forks
        self.trackers = Trackers()  # --log-to, also opened by start()
        self.advice = timing.AdviceOnce()
        self.straggler_history: List = []  # the slowest rank of each epoch so far

    def write_run_files(self, cfg: Config, split: Split) -> None:
        """config.yaml (repeats the run), class_indices.json and splits/*.txt."""
        save_yaml(cfg, self.run_dir / "config.yaml")
        write_split_files(split, self.run_dir)

    def start(
        self, last_complete_epoch: int, resumed_step: int, cfg: Optional[Config] = None, resumed: bool = False
    ) -> None:
        """Forget what a crashed attempt wrote after the checkpoint this run continues from; open TensorBoard and
        cfg's --log-to trackers (`resumed`: continue the runs kept in RUN_DIR/trackers.json)."""
        history = self.metrics.truncate_after(last_complete_epoch)
        self._tb = TensorBoard(self.run_dir / "tb", resumed_step)
        if cfg is not None:
            self.trackers = Trackers.start(cfg.run.trackers(), self.run_dir, cfg.to_flat(), resumed, history)

    @property
    def tb(self) -> TensorBoard:
        if self._tb is None:
            raise RuntimeError("RunSinks.start() opens TensorBoard before the first epoch")
        return self._tb

    def epoch_progress(self, place: EpochPlace) -> EpochProgress:
        return EpochProgress(place, self.tb, self.progress_every, self.log_handler)

    def epoch_end(
        self,
        record: Dict,
        result: Optional[EvalResult],
        stats: EpochStats,
        workers: int,
        ema: Optional[EvalResult] = None,
    ) -> None:
        """The metrics line (written before the checkpoint: a crash in between is redone, not lost),
        TensorBoard points, the epoch's console line, and advice the first time it applies."""
        epoch = record["epoch"]
        self.metrics.append(record)
        self.trackers.log_epoch(record)
        evaluated = (
            {} if result is None else {"val/loss": result.loss, "val/top1": result.top1, "val/top5": result.top5}
        )
        if ema is not None:
            evaluated.update({"val_ema/loss": ema.loss, "val_ema/top1": ema.top1, "val_ema/top5": ema.top5})
        self.tb.scalars(
            {**evaluated, "perf/images_per_sec": stats.images_per_sec, **perf_scalars(record)}, record["step"]
        )
        validation = (
            "not evaluated"
            if result is None
            else f"val_loss {result.loss:.4f}  val_top1 {result.top1:.4f}  "
            + (f"val_top5 {result.top5:.4f}  " if top5_says_something(len(result.per_class_count)) else "")
            + "".join(f"val_{name} {value:.4f}  " for name, value in result.multilabel().items())
            + f"({result.samples} images)"
            + (f"  ema: val_top1 {ema.top1:.4f}" if ema is not None else "")
        )
        log.info(
            "epoch %d/%d: train_loss %.4f  %s  %.1f img/s  data_wait %.0f%%  %.1fs",
            epoch + 1,
            self.epochs,
            stats.train_loss,
            validation,
            stats.images_per_sec,
            100 * stats.data_wait_frac,
            stats.epoch_time_s,
        )
        for message in self.advice.new(timing.advice(stats.ranks, workers, self.straggler_history)):
            log.warning("epoch %d: %s", epoch + 1, message)
        val_skipped = result.skipped if result is not None else 0
        if stats.skipped_images + val_skipped:
            log.warning(
                "epoch %d: %s skipped (%d train, %d val); see warnings above",
                epoch + 1,
                counted(stats.skipped_images + val_skipped, "unreadable image"),
                stats.skipped_images,
                val_skipped,
            )

    def startup(self, clock: StartupClock) -> None:
        """The start-up breakdown, once: from the command to the first optimizer step."""
        clock.report_once(log)

    def best_eval(self, epoch: int, checkpoint: str, result: EvalResult, class_names: List[str]) -> None:
        """best_eval.json, written with best.pt: the report's confusion matrix and per-class accuracy."""
        write_json_atomic(
            self.run_dir / BEST_EVAL, {"epoch": epoch, "checkpoint": checkpoint, **result.to_dict(class_names)}
        )
        self.trackers.log_artifacts([self.run_dir / BEST_EVAL])

    def close(self, failure: Optional[BaseException] = None) -> None:
        """`failure`: what ended the run early, if anything. A run that ended as asked hands the trackers that take
        files config.yaml, best_eval.json and the report's figures (made here)."""
        status = run_status(failure)
        if status == FINISHED and self.trackers.take_artifacts:
            self.trackers.log_artifacts([*self._shareable_config(), self.run_dir / BEST_EVAL, *self._report()])
        self.trackers.close(status)
        if self._tb is not None:  # a set-up that failed never opened it
            self._tb.close()
        if failure is not None and status == FAILED:
            self._log_failure(failure)
        logging.getLogger("ddptrain").removeHandler(self.log_handler)
        self.log_handler.close()

    def _log_failure(self, failure: BaseException) -> None:
        """The error that ended the run, in train.log alone (the console has it from the command's own report):
        a run folder read later (a batch job's, a colleague's) says why it stopped."""
        said = str(failure) if isinstance(failure, DdptrainError) else f"{type(failure).__name__}: {failure}"
        record = logging.LogRecord("ddptrain", logging.ERROR, __file__, 0, "the run stopped: %s", (said,), None)
        self.log_handler.handle(record)

    def _shareable_config(self) -> List[Path]:
        """config.yaml for the trackers, unless it holds credentials (a --data URL with a password): then only the
        parameters go, which are redacted, and the file stays on this machine."""
        path = self.run_dir / "config.yaml"
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if redact(text) != text:
            log.info("config.yaml holds credentials in a URL: not sent to the trackers (its options are, redacted)")
            return []
        return [path]

    def _report(self) -> List[Path]:
        if self.report is None or not self.metrics.path.is_file():
            return []
        try:
            return [self.report(self.run_dir)]
        except Exception as error:  # the figures are a convenience; the run itself is done and kept
            log.warning("the report for the trackers could not be made: %s", error)
            return []


class NullSinks:
    """What ranks other than 0 write: nothing."""

    def write_run_files(self, cfg: Config, split: Split) -> None:
        pass

    def start(
        self, last_complete_epoch: int, resumed_step: int, cfg: Optional[Config] = None, resumed: bool = False
    ) -> None:
        pass

    def epoch_progress(self, place: EpochPlace) -> NoProgress:
        return NoProgress()

    def epoch_end(
        self,
        record: Dict,
        result: Optional[EvalResult],
        stats: EpochStats,
        workers: int,
        ema: Optional[EvalResult] = None,
    ) -> None:
        pass

    def startup(self, clock: StartupClock) -> None:
        pass

    def best_eval(self, epoch: int, checkpoint: str, result: EvalResult, class_names: List[str]) -> None:
        pass

    def close(self, failure: Optional[BaseException] = None) -> None:
        pass


class Sinks(Protocol):
    """What a rank's trainer tells its outputs."""

    def write_run_files(self, cfg: Config, split: Split) -> None: ...

    def start(
        self, last_complete_epoch: int, resumed_step: int, cfg: Optional[Config] = None, resumed: bool = False
    ) -> None: ...

    def epoch_progress(self, place: EpochPlace) -> Progress: ...

    def epoch_end(
        self,
        record: Dict,
        result: Optional[EvalResult],
        stats: EpochStats,
        workers: int,
        ema: Optional[EvalResult] = None,
    ) -> None: ...

    def startup(self, clock: StartupClock) -> None: ...

    def best_eval(self, epoch: int, checkpoint: str, result: EvalResult, class_names: List[str]) -> None: ...

    def close(self, failure: Optional[BaseException] = None) -> None: ...


def open_sinks(
    run_dir: Path, epochs: int, is_main: bool, report: Optional[ReportWriter] = None, progress_every: float = 30.0
) -> Sinks:
    return RunSinks(run_dir, epochs, report, progress_every) if is_main else NullSinks()

"""The run directory has one owner: what a run leaves there, whether a run is there already, the lock
that keeps a second job out, and clearing it for `--overwrite`. The standard library only, so the
command line checks it before any process starts; rank 0 takes the lock for the whole run.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from typing import IO, List, Optional

from ..errors import ConfigError, DataError
from ..util import DamagedLine, read_epoch_records

log = logging.getLogger("ddptrain")

LOCK = ".ddptrain.lock"
# Everything a run writes in its directory (a later run with --overwrite removes all of it, nothing else).
RUN_ENTRIES = (
    "checkpoints",
    "metrics.jsonl",
    "best_eval.json",
    "tb",
    "train.log",
    "config.yaml",
    "class_indices.json",
    "splits",
    "report",
    "metrics.csv",  # --log-to csv
    "trackers.json",  # the MLflow / W&B run ids a resume continues
    "mlruns",  # --log-to mlflow without MLFLOW_TRACKING_URI
    "wandb",  # --log-to wandb
)


class RunDirInUseError(ConfigError):
    pass


def existing_run(run_dir: Path) -> Optional[str]:
    """What a previous run left that a fresh start would overwrite ("2 epochs in metrics.jsonl, 3 checkpoints"),
    or None when there is nothing to lose."""
    found: List[str] = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file() and metrics.stat().st_size > 0:
        lines = sum(1 for line in metrics.read_text(errors="replace").splitlines() if line.strip())
        found.append(f"{lines} epoch(s) in metrics.jsonl")
    checkpoints = sorted((run_dir / "checkpoints").glob("*.pt")) if (run_dir / "checkpoints").is_dir() else []
    if checkpoints:
        found.append(
            f"checkpoints {', '.join(p.name for p in checkpoints[:4])}{' ...' if len(checkpoints) > 4 else ''}"
        )
    return ", ".join(found) or None


def check_fresh_start(run_dir: Path, resume: Optional[str], overwrite: bool) -> None:
    """A run that starts from scratch must not silently replace the results of an earlier one."""
    if resume and overwrite:
        raise ConfigError(
            "--resume and --overwrite contradict each other: --resume continues the run in --out, "
            "--overwrite deletes it; give one"
        )
    if resume or overwrite:
        return
    previous = existing_run(run_dir)
    if previous:
        raise ConfigError(
            f"--out {run_dir} already holds a run ({previous}); use --resume auto to continue it, "
            "--overwrite to delete it and start over, or another --out"
        )


def check_metrics_readable(run_dir: Path) -> None:
    """A resume stops here, before any process starts, on a damaged line in the middle of metrics.jsonl (rank 0
    drops a last line cut short by a crash later, with a warning)."""
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        try:
            read_epoch_records(metrics)
        except DamagedLine as error:
            raise DataError(str(error)) from None


class RunLock:
    """An exclusive `flock` on RUN_DIR/.ddptrain.lock, held by rank 0 for the whole run. The kernel releases it
    when the process ends, however it ends: a killed job never leaves a stale lock behind."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.handle: Optional[IO[str]] = None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - stays open: it holds the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(handle)
            handle.close()
            raise RunDirInUseError(
                f"--out {self.path.parent} is in use by another job ({holder}); two jobs must not "
                "write one run directory: give this one another --out, or stop the other"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}) + "\n")
        handle.flush()
        self.handle = handle
        return self

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


def check_not_in_use(run_dir: Path) -> None:
    """Fail now, before any process starts, when another job holds the run directory."""
    if (run_dir / LOCK).is_file():
        RunLock(run_dir).acquire().release()


def _holder(handle: IO[str]) -> str:
    handle.seek(0)
    try:
        info = json.loads(handle.read() or "{}")
    except ValueError:
        return "holder unknown"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["since"])) if "since" in info else "?"
    return f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, since {since}"


def claim(run_dir: Path, resume: Optional[str], overwrite: bool) -> RunLock:
    """Rank 0, before anything is written: take the lock, refuse to replace an earlier run silently, and with
    --overwrite remove that run's files first."""
    lock = RunLock(run_dir).acquire()
    try:
        check_fresh_start(run_dir, resume, overwrite)
        if overwrite:
            removed = clear_run(run_dir)
            if removed:
                log.warning("--overwrite: removed the earlier run's %s from %s", ", ".join(removed), run_dir)
    except BaseException:
        lock.release()
        raise
    return lock


def clear_run(run_dir: Path) -> List[str]:
    """--overwrite: remove what an earlier run wrote (and only that), so nothing of it mixes with the new one."""
    removed = []
    for name in RUN_ENTRIES:
        entry = run_dir / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.exists() or entry.is_symlink():
            entry.unlink()
        else:
            continue
        removed.append(name)
    return removed

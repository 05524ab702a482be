"""Where a run speaks: console and train.log, metrics.jsonl, TensorBoard, the progress bar.

Only rank 0 writes files and shows progress; other ranks print warnings and errors only,
prefixed with their rank, so a problem on rank 3 is never lost and never drowned.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Dict, Optional

from tqdm import tqdm

LOGGER = "ddptrain"
log = logging.getLogger(LOGGER)


def setup_logging(rank: int, world_size: int) -> logging.Logger:
    logger = logging.getLogger(LOGGER)
    logger.handlers.clear()
    logger.propagate = False
    handler = logging.StreamHandler(sys.stderr)
    prefix = f"[rank {rank}] " if world_size > 1 else ""
    handler.setFormatter(logging.Formatter(f"{prefix}%(levelname)s %(message)s" if rank else "%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    return logger


def ensure_writable(folder: Path) -> None:
    """Fail before any process starts when the run directory cannot be created or written.
    Checks without touching it: only rank 0 ever writes there."""
    from .errors import ConfigError

    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"cannot write to --out {folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write to --out {folder}: no write permission in {existing}")


def add_log_file(path: Path) -> None:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger(LOGGER).addHandler(handler)


def write_json_atomic(path: Path, obj: Dict) -> None:
    """Write through a temporary file and rename: readers see the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class MetricsLog:
    """metrics.jsonl: one JSON object per epoch, exactly once per epoch even across resumes."""

    def __init__(self, path: Path):
        self.path = path

    def truncate_after(self, last_epoch: int) -> None:
        """Drop lines for epochs after `last_epoch` (written before a crash, redone after resume)."""
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line).get("epoch", -1) <= last_epoch]
        self.path.write_text("".join(line + "\n" for line in kept))

    def append(self, record: Dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()


class TensorBoard:
    """A SummaryWriter under RUN_DIR/tb; events after the resumed step are purged."""

    def __init__(self, folder: Path, resume_step: Optional[int]):
        from torch.utils.tensorboard import SummaryWriter

        purge = resume_step + 1 if resume_step is not None else None
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge)

    def scalars(self, values: Dict[str, float], step: int) -> None:
        for tag, value in values.items():
            if value is not None:
                self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


def progress(total: int, epoch: int, epochs: int, enabled: bool) -> tqdm:
    """A bar on an interactive terminal only: in log files the per-epoch line says it all."""
    enabled = enabled and sys.stderr.isatty()
    return tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", unit="step", dynamic_ncols=True,
                disable=not enabled, leave=False, file=sys.stderr)

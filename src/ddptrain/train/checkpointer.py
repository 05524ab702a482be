"""Checkpoint files: atomic writes, CPU-first safe loading, step files and their pruning, where to resume.

`Checkpointer` owns `RUN_DIR/checkpoints/`. Every rank holds one; only rank 0 writes. What goes
into a file is `TrainState` (ddptrain.train.state).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from ..errors import CheckpointError
from ..util import fsync_dir
from .state import TrainState

LAST = "last.pt"
BEST = "best.pt"
STEP_PATTERN = "step-*.pt"


def save_atomic(obj: Any, path: str | Path) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`: a crash at any
    point leaves either the old file or the new one, never a truncated checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(
            f"cannot write checkpoint {path}: {error.strerror or error}; the previous "
            f"{path.name} is intact. Free space or fix permissions in {path.parent}, then "
            "rerun with --resume auto"
        ) from error
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def load_raw(path: str | Path) -> Dict[str, Any]:
    """A checkpoint's dict, loaded to CPU first (every rank the same way), never unpickling arbitrary objects."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from None


def load(path: str | Path) -> TrainState:
    return TrainState.from_dict(load_raw(path), path)


def step_path(folder: Path, global_step: int) -> Path:
    return folder / f"step-{global_step:09d}.pt"


def prune_steps(folder: Path, keep_last: int) -> None:
    for old in sorted(folder.glob(STEP_PATTERN))[:-keep_last]:
        old.unlink(missing_ok=True)


def find_resume(resume: Optional[str], run_dir: Path) -> Optional[Path]:
    """`auto`: the run dir's last.pt when present (a fresh start otherwise); a path must exist."""
    if not resume:
        return None
    if resume == "auto":
        last = run_dir / "checkpoints" / LAST
        return last if last.is_file() else None
    path = Path(resume)
    if not path.is_file():
        raise CheckpointError(
            f"--resume {resume}: no such checkpoint file (use --resume auto to start fresh when nothing is there yet)"
        )
    return path


class Checkpointer:
    """RUN_DIR/checkpoints on every rank; files are written by rank 0 only."""

    def __init__(self, run_dir: Path, keep_last: int, is_main: bool):
        self.run_dir, self.keep_last, self.is_main = Path(run_dir), keep_last, is_main
        self.folder = self.run_dir / "checkpoints"
        if is_main:
            self.folder.mkdir(parents=True, exist_ok=True)

    def resume_path(self, resume: Optional[str]) -> Optional[Path]:
        return find_resume(resume, self.run_dir)

    def save_epoch(self, state: TrainState, is_best: bool) -> None:
        """last.pt (and best.pt on a new best) at an epoch's end."""
        if not self.is_main:
            return
        payload = state.to_dict()
        save_atomic(payload, self.folder / LAST)
        if is_best:
            save_atomic(payload, self.folder / BEST)

    def save_step(self, state: TrainState) -> Optional[Path]:
        """A mid-epoch checkpoint: step-N.pt, also made the new last.pt (a hard link, so no second
        write), then only the newest `keep_last` step files are kept."""
        if not self.is_main:
            return None
        payload = state.to_dict()
        path = step_path(self.folder, state.step)
        save_atomic(payload, path)
        self._link_last(path, payload)
        prune_steps(self.folder, self.keep_last)
        return path

    def _link_last(self, path: Path, payload: Dict[str, Any]) -> None:
        tmp = self.folder / f".{LAST}.link-{os.getpid()}"
        try:
            tmp.unlink(missing_ok=True)
            os.link(path, tmp)
            os.replace(tmp, self.folder / LAST)
            fsync_dir(self.folder)
        except OSError:  # a file system without hard links: write it again
            tmp.unlink(missing_ok=True)
            save_atomic(payload, self.folder / LAST)

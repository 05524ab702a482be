"""Checkpoint files: atomic writes, CPU-first safe loading, step files and their pruning, where to resume.

`Checkpointer` owns `RUN_DIR/checkpoints/`. Every rank holds one; only rank 0 writes. What goes
into a file is `TrainState` (ddptrain.train.state).
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from ..errors import CheckpointError
from ..util import first_line, fsync_dir
from .resume import Beginning, Fresh, Resume
from .state import TrainState, non_finite_entries

log = logging.getLogger("ddptrain")

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


class UnreadableCheckpoint(CheckpointError):
    """A checkpoint file that cannot be used; `reason` says why in a few words."""

    def __init__(self, path: Path, reason: str, verb: str = "cannot read checkpoint"):
        super().__init__(f"{verb} {path}: {reason}")
        self.reason = reason


def load_raw(path: str | Path) -> Dict[str, Any]:
    """A checkpoint's dict, loaded to CPU first (every rank the same way), never unpickling arbitrary objects."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if not zipfile.is_zipfile(path):  # torch.save writes zip archives; anything else is damaged or not ours
        raise UnreadableCheckpoint(path, "not a zip archive (truncated, or not a PyTorch checkpoint)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UnreadableCheckpoint(path, first_line(error)) from None


def load(path: str | Path) -> TrainState:
    return TrainState.from_dict(load_raw(path), path)


def step_path(folder: Path, global_step: int) -> Path:
    return folder / f"step-{global_step:09d}.pt"


def prune_steps(folder: Path, keep_last: int) -> None:
    for old in sorted(folder.glob(STEP_PATTERN))[:-keep_last]:
        old.unlink(missing_ok=True)


def resume_candidates(folder: Path) -> List[Path]:
    """Where `--resume auto` looks, in order: last.pt, the step checkpoints newest first, then best.pt."""
    ordered = [folder / LAST, *sorted(folder.glob(STEP_PATTERN), reverse=True), folder / BEST]
    found, seen = [], set()
    for path in ordered:
        if not path.is_file():
            continue
        identity = (path.stat().st_dev, path.stat().st_ino)  # last.pt may be a hard link to a step file
        if identity not in seen:
            seen.add(identity)
            found.append(path)
    return found


def load_for_resume(resume: Optional[str], run_dir: Path, say: bool = True) -> Optional[Tuple[Path, TrainState]]:
    """The checkpoint to continue from. `auto`: the first of `resume_candidates` that loads (None when there is
    none yet); refused ones are logged (when `say`: every rank reads the same files, one says it) with their
    errors, and only when every one is refused is it an error. A path: that file, which must load."""
    if not resume:
        return None
    if resume != "auto":
        path = Path(resume)
        if not path.is_file():
            raise CheckpointError(
                f"--resume {resume}: no such checkpoint file (use --resume auto to start fresh when nothing is there yet)"
            )
        return path, usable(path)
    refused: List[str] = []
    for path in resume_candidates(run_dir / "checkpoints"):
        try:
            state = usable(path)
        except UnreadableCheckpoint as error:
            refused.append(f"{path.name}: {error.reason}")
            continue
        if refused and say:
            log.warning("resume auto: refused %s; continuing from %s", "; ".join(refused), path.name)
        return path, state
    if refused:
        raise CheckpointError(
            f"resume auto: no checkpoint in {run_dir / 'checkpoints'} can be loaded: {'; '.join(refused)}. "
            "Resume from a good copy with --resume PATH, or start over with --overwrite",
            every_rank=True,
        )
    return None


def usable(path: Path) -> TrainState:
    """A checkpoint that loads and whose weights are all finite (a model with NaN weights cannot be continued)."""
    state = load(path)
    bad = non_finite_entries(state.model)
    if bad:
        shown = ", ".join(bad[:3]) + (" ..." if len(bad) > 3 else "")
        raise UnreadableCheckpoint(path, f"non-finite weights ({shown})", verb="cannot resume from")
    return state


class Checkpointer:
    """RUN_DIR/checkpoints on every rank; files are written by rank 0 only."""

    def __init__(self, run_dir: Path, keep_last: int, is_main: bool):
        self.run_dir, self.keep_last, self.is_main = Path(run_dir), keep_last, is_main
        self.folder = self.run_dir / "checkpoints"
        if is_main:
            self.folder.mkdir(parents=True, exist_ok=True)

    def resume_from(self, resume: Optional[str]) -> Beginning:
        """Where the run begins: the checkpoint --resume names (or auto finds), read once, or a fresh start."""
        found = load_for_resume(resume, self.run_dir, say=self.is_main)
        return Fresh(resume, self.folder) if found is None else Resume(*found)

    def save_epoch(self, state: TrainState, is_best: bool) -> None:
        """last.pt (and best.pt on a new best) at an epoch's end."""
        if not self.is_main:
            return
        payload = state.to_dict()
        save_atomic(payload, self.folder / LAST)
        if is_best:  # a hard link: a later last.pt is a new file (save_atomic replaces), best.pt keeps this one
            self._link(self.folder / LAST, BEST, payload)

    def save_step(self, state: TrainState) -> Optional[Path]:
        """A mid-epoch checkpoint: step-N.pt, also made the new last.pt (a hard link, so no second
        write), then only the newest `keep_last` step files are kept."""
        if not self.is_main:
            return None
        payload = state.to_dict()
        path = step_path(self.folder, state.step)
        save_atomic(payload, path)
        self._link(path, LAST, payload)
        prune_steps(self.folder, self.keep_last)
        return path

    def _link(self, path: Path, name: str, payload: Dict[str, Any]) -> None:
        """`name` in the checkpoint folder made the same file as `path`, atomically, without writing it again."""
        tmp = self.folder / f".{name}.link-{os.getpid()}"
        try:
            tmp.unlink(missing_ok=True)
            os.link(path, tmp)
            os.replace(tmp, self.folder / name)
            fsync_dir(self.folder)
        except OSError:  # a file system without hard links: write it again
            tmp.unlink(missing_ok=True)
            save_atomic(payload, self.folder / name)

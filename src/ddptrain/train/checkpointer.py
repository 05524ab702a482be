"""Checkpoint files: atomic writes, CPU-first safe loading, step files and their pruning, where to resume.

`Checkpointer` owns `RUN_DIR/checkpoints/`. Every rank holds one; only rank 0 writes. What goes
into a file is `TrainState` (ddptrain.train.state). Under --strategy fsdp a checkpoint is a folder every rank writes
its shards into (ddptrain.train.sharded): `epoch-NNNN.dcp` at an epoch's end, `step-N.dcp` in the middle of one,
`last.dcp` and `best.dcp` symlinks to them.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import CheckpointError
from ..util import fsync_dir
from . import sharded
from .ckptio import UnreadableCheckpoint, load_raw, save_atomic  # noqa: F401  (api.py reads them from here)
from .resume import Beginning, Fresh, Resume
from .state import TrainState, non_finite_entries

log = logging.getLogger("ddptrain")

LAST = "last.pt"
BEST = "best.pt"
STEP_PATTERN = "step-*.pt"
SHARDED_LAST, SHARDED_BEST = "last" + sharded.SUFFIX, "best" + sharded.SUFFIX
SHARDED_STEPS, SHARDED_EPOCHS = "step-*" + sharded.SUFFIX, "epoch-*" + sharded.SUFFIX


def load(path: str | Path) -> TrainState:
    """A checkpoint file, or a sharded checkpoint folder (its `model` then the saved shapes, not the weights)."""
    if sharded.is_checkpoint_folder(path):
        return TrainState.from_dict(sharded.read_state(Path(path)), path)
    return TrainState.from_dict(load_raw(path), path)


def load_whole(path: str | Path) -> TrainState:
    """A checkpoint with its model (and EMA) weights whole, also a sharded folder's (read on this process alone):
    what export, eval and predict load."""
    state = load(path)
    if sharded.is_checkpoint_folder(path):
        state.model = sharded.full_tensors(Path(path), "model")
        if state.ema is not None:
            state.ema = sharded.full_tensors(Path(path), "ema")
    return state


def step_path(folder: Path, global_step: int) -> Path:
    return folder / f"step-{global_step:09d}.pt"


def prune_steps(folder: Path, keep_last: int) -> None:
    for old in sorted(folder.glob(STEP_PATTERN))[:-keep_last]:
        old.unlink(missing_ok=True)


def resume_candidates(folder: Path) -> List[Path]:
    """Where `--resume auto` looks: last.pt, the step checkpoints newest first, then best.pt — and the same of the
    sharded folders (last.dcp, step-N.dcp, epoch-N.dcp, best.dcp). Of the two kinds (a run continued under the other
    --strategy has both), the one written most recently comes first."""
    plain = [folder / LAST, *sorted(folder.glob(STEP_PATTERN), reverse=True), folder / BEST]
    shards = [
        folder / SHARDED_LAST,
        *sorted(folder.glob(SHARDED_STEPS), reverse=True),
        *sorted(folder.glob(SHARDED_EPOCHS), reverse=True),
        folder / SHARDED_BEST,
    ]
    kinds = sorted([plain, shards], key=_newest_write, reverse=True)
    found, seen = [], set()
    for path in kinds[0] + kinds[1]:
        if not (path.is_file() or sharded.is_checkpoint_folder(path)):
            continue
        identity = (path.stat().st_dev, path.stat().st_ino)  # last.pt may be a hard link to a step file
        if identity not in seen:
            seen.add(identity)
            found.append(path)
    return found


def _newest_write(paths: List[Path]) -> float:
    times = [0.0]
    for path in paths:
        marker = path / sharded.COMMIT if path.is_dir() else path
        try:
            times.append(marker.stat().st_mtime)
        except OSError:
            continue
    return max(times)


def load_for_resume(resume: Optional[str], run_dir: Path, say: bool = True) -> Optional[Tuple[Path, TrainState]]:
    """The checkpoint to continue from. `auto`: the first of `resume_candidates` that loads (None when there is
    none yet); refused ones are logged (when `say`: every rank reads the same files, one says it) with their
    errors, and only when every one is refused is it an error. A path: that file, which must load."""
    if not resume:
        return None
    if resume != "auto":
        path = Path(resume)
        if not (path.is_file() or sharded.is_checkpoint_folder(path)):
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

    def __init__(self, run_dir: Path, keep_last: int, is_main: bool, sharded_tensors: bool = False):
        self.run_dir, self.keep_last, self.is_main = Path(run_dir), keep_last, is_main
        self.folder = self.run_dir / "checkpoints"
        self.sharded = sharded_tensors
        self._tensors: Optional[Callable[[], Dict[str, Any]]] = None
        if is_main:
            self.folder.mkdir(parents=True, exist_ok=True)

    def attach(self, tensors: Callable[[], Dict[str, Any]]) -> None:
        """Sharded checkpoints: where the live tensors come from (`sharded.live_tensors` of model, optimizer, EMA)."""
        self._tensors = tensors

    @property
    def last(self) -> Path:
        return self.folder / (SHARDED_LAST if self.sharded else LAST)

    @property
    def best(self) -> Path:
        return self.folder / (SHARDED_BEST if self.sharded else BEST)

    def resume_from(self, resume: Optional[str]) -> Beginning:
        """Where the run begins: the checkpoint --resume names (or auto finds), read once, or a fresh start."""
        found = load_for_resume(resume, self.run_dir, say=self.is_main)
        return Fresh(resume, self.folder) if found is None else Resume(*found)

    def save_epoch(self, state: TrainState, is_best: bool) -> None:
        """last.pt (and best.pt on a new best) at an epoch's end."""
        if self.sharded:
            self._save_sharded(f"epoch-{state.epoch + 1:04d}", state, is_best)
            return
        if not self.is_main:
            return
        payload = state.to_dict()
        save_atomic(payload, self.folder / LAST)
        if is_best:  # a hard link: a later last.pt is a new file (save_atomic replaces), best.pt keeps this one
            self._link(self.folder / LAST, BEST, payload)

    def save_step(self, state: TrainState) -> Optional[Path]:
        """A mid-epoch checkpoint: step-N.pt, also made the new last.pt (a hard link, so no second
        write), then only the newest `keep_last` step files are kept."""
        if self.sharded:
            return self._save_sharded(f"step-{state.step:09d}", state, is_best=False)
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

    def _save_sharded(self, name: str, state: TrainState, is_best: bool) -> Optional[Path]:
        """Every rank: a checkpoint folder, then (rank 0) last.dcp / best.dcp pointed at it and old folders pruned."""
        if self._tensors is None:
            raise RuntimeError("Checkpointer.attach() comes before a sharded save")
        path = self.folder / (name + sharded.SUFFIX)
        try:
            sharded.write(path, state, self._tensors(), self.is_main)
        except OSError as error:
            raise CheckpointError(
                f"cannot write checkpoint {path}: {error.strerror or error}; the previous {SHARDED_LAST} is intact. "
                f"Free space or fix permissions in {self.folder}, then rerun with --resume auto"
            ) from error
        if not self.is_main:
            return None
        sharded.link(path, SHARDED_LAST)
        if is_best:
            sharded.link(path, SHARDED_BEST)
        self._prune_sharded()
        return path

    def _prune_sharded(self) -> None:
        """Kept: the newest `keep_last` step folders, the newest epoch folder, and the ones last.dcp and best.dcp
        name. Folders without a commit marker are left-overs of a job that stopped while writing (this job, the only
        one writing here, has just committed its own): removed. Symlinks by those names are never followed."""
        named = {(self.folder / link).resolve() for link in (SHARDED_LAST, SHARDED_BEST)}
        steps = sorted(p for p in self.folder.glob(SHARDED_STEPS) if not p.is_symlink())
        epochs = sorted(p for p in self.folder.glob(SHARDED_EPOCHS) if not p.is_symlink())
        unfinished = [p for p in steps + epochs if not sharded.committed(p)]
        for old in set(steps[: -self.keep_last] + epochs[:-1] + unfinished):
            if old.resolve() not in named and sharded.is_checkpoint_folder(old):
                shutil.rmtree(old, ignore_errors=True)

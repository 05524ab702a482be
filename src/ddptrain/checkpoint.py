"""Checkpoints: atomic writes by rank 0, CPU-first safe loading, RNG capture, resume lookup.

A checkpoint holds the *unwrapped* model (no `module.` / `_orig_mod.` prefixes) so it loads into a
plain model for inference, and everything needed to continue: optimizer, scheduler, scaler,
epoch, step, best metric, RNG states, config and class names.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch
from torch import nn

from .errors import CheckpointError

LAST = "last.pt"
BEST = "best.pt"
STEP_PATTERN = "step-*.pt"
FORMAT_VERSION = 1


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DistributedDataParallel and/or torch.compile wrappers."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, nn.Module):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


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
        raise CheckpointError(f"cannot write checkpoint {path}: {error.strerror or error}; the previous "
                              f"{path.name} is intact. Free space or fix permissions in {path.parent}, then "
                              "rerun with --resume auto") from error
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load(path: str | Path) -> Dict[str, Any]:
    """Load to CPU first (every rank the same way) and never unpickle arbitrary objects."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path} is not a ddptrain checkpoint (no 'model' entry); "
                              "to start from plain weights use --weights")
    return state


def capture_rng() -> Dict[str, Any]:
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"key": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: Dict[str, Any]) -> None:
    random.setstate(_as_tuple(state["python"]))
    numpy = state["numpy"]
    np.random.set_state(("MT19937", numpy["key"].numpy().astype(np.uint32), int(numpy["pos"]),
                         int(numpy["has_gauss"]), float(numpy["gauss"])))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _as_tuple(value):
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def step_path(folder: Path, global_step: int) -> Path:
    return folder / f"step-{global_step:09d}.pt"


def save_step(obj: Any, folder: Path, global_step: int, keep_last: int) -> Path:
    """A mid-epoch checkpoint: step-N.pt, also made the new last.pt (a hard link, so no second
    write), then only the newest `keep_last` step files are kept."""
    path = step_path(folder, global_step)
    save_atomic(obj, path)
    tmp = folder / f".{LAST}.link-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        os.link(path, tmp)
        os.replace(tmp, folder / LAST)
        _fsync_dir(folder)
    except OSError:  # a file system without hard links: write it again
        tmp.unlink(missing_ok=True)
        save_atomic(obj, folder / LAST)
    prune_steps(folder, keep_last)
    return path


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
        raise CheckpointError(f"--resume {resume}: no such checkpoint file (use --resume auto to start "
                              "fresh when nothing is there yet)")
    return path

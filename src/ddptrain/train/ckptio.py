"""Checkpoint files on disk: written atomically, read CPU-first with `weights_only=True`, and the error that says
why one cannot be used."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, Dict

import torch

from ..errors import CheckpointError
from ..util import PLAIN_DATA_GLOBALS, fsync_dir, load_refusal
from .rundir import run_folder_given


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
    if path.is_dir():
        given = run_folder_given(path)
        if given:
            raise CheckpointError(given)
        raise UnreadableCheckpoint(
            path, "a folder that is not a checkpoint (a sharded one, NAME.dcp, holds .metadata, state.pt and COMMIT)"
        )
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if not zipfile.is_zipfile(path):  # torch.save writes zip archives; anything else is damaged or not ours
        raise UnreadableCheckpoint(path, "not a zip archive (truncated, or not a PyTorch checkpoint)")
    try:
        with torch.serialization.safe_globals(PLAIN_DATA_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UnreadableCheckpoint(path, load_refusal(error)) from None

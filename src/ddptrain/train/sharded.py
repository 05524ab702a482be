"""Sharded checkpoints (--strategy fsdp): a folder per checkpoint, written by every rank through
`torch.distributed.checkpoint` (DCP), complete only once its commit marker exists.

    checkpoints/step-000000012.dcp/   __0_0.distcp __1_0.distcp .metadata   every rank's shards (DCP)
                                      state.pt                              the TrainState without its tensors
                                      COMMIT                                written last, by rank 0
    checkpoints/last.dcp -> step-000000012.dcp                              the newest (a symlink)

The tensors are kept under their plain names ("model.layer1.0.conv1.weight", "optimizer.state.<name>.exp_avg",
"ema.<name>"), not by shard, so DCP reshards on load: a checkpoint written by 4 processes resumes on 2, on 1, or under
--strategy ddp (every process then reads whole tensors), and `export`, `eval` and `predict` read the model's tensors
whole on one process (`full_tensors`).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from torch import nn

from ..runtime.dist import barrier
from ..util import fsync_dir
from .ckptio import UnreadableCheckpoint, load_raw, save_atomic
from .state import TrainState

SUFFIX = ".dcp"
COMMIT = "COMMIT"
META = "state.pt"


def is_checkpoint_folder(path: str | Path) -> bool:
    """A folder that is (or was being written as) a sharded checkpoint."""
    path = Path(path)
    return path.is_dir() and ((path / META).exists() or (path / ".metadata").exists() or (path / COMMIT).exists())


def committed(path: Path) -> bool:
    return (path / COMMIT).is_file()


def live_tensors(model: nn.Module, optimizer: Optional[torch.optim.Optimizer], ema: Optional[nn.Module]) -> Dict:
    """The tensors a checkpoint keeps, as this process holds them (its shards under FSDP; whole tensors otherwise),
    under their plain names: what DCP writes, and the shape DCP loads into."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    tensors: Dict[str, Any] = {"model": get_model_state_dict(model)}
    if optimizer is not None:
        tensors["optimizer"] = get_optimizer_state_dict(model, optimizer)
    if ema is not None:
        tensors["ema"] = get_model_state_dict(ema)
    return tensors


def write(folder: Path, state: TrainState, tensors: Dict, is_main: bool) -> None:
    """Every rank: its shards into `folder`; then rank 0 writes the rest of the state and, last, the commit marker.
    A folder of the same name (a run continued from an older checkpoint) is replaced: it was written by ddptrain."""
    import torch.distributed.checkpoint as dcp

    if is_main and folder.is_symlink():  # not ours to follow: the link alone goes
        folder.unlink()
    elif is_main and folder.exists():
        shutil.rmtree(folder)
    barrier()
    dcp.save(tensors, checkpoint_id=str(folder))  # returns on every rank once the metadata is written
    if is_main:
        groups = tensors.get("optimizer", {}).get("param_groups")
        meta = {**state.to_dict(), "model": {}, "optimizer": {"param_groups": groups} if groups else None}
        meta.pop("ema", None)
        save_atomic(meta, folder / META)
        marker = {"format": state.format, "step": state.step, "world_size": state.world_size}
        (folder / COMMIT).write_text(json.dumps(marker) + "\n", encoding="utf-8")
        fsync_dir(folder)
    barrier()  # nobody goes on before the checkpoint is complete


def read_state(folder: Path) -> Dict[str, Any]:
    """The TrainState dict of a committed folder, its `model` the shapes of the saved weights (meta tensors: no data
    read) and `ema` present when EMA weights were kept. `UnreadableCheckpoint` for an incomplete one."""
    if not committed(folder):
        raise UnreadableCheckpoint(
            folder, "incomplete: no commit marker (the job stopped while writing it; it is never resumed from)"
        )
    raw = load_raw(folder / META)
    shapes = _saved_shapes(folder)
    raw["model"] = shapes.get("model", {})
    if "ema" in shapes:
        raw["ema"] = shapes["ema"]
    return raw


def _saved_shapes(folder: Path) -> Dict[str, Dict[str, torch.Tensor]]:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    try:
        metadata = FileSystemReader(str(folder)).read_metadata()
    except Exception as error:  # a damaged .metadata file: DCP's own exceptions vary
        raise UnreadableCheckpoint(folder, f"its DCP metadata cannot be read ({error})") from None
    shapes: Dict[str, Dict[str, torch.Tensor]] = {}
    for key, item in metadata.state_dict_metadata.items():
        part, _, name = key.partition(".")
        if part in ("model", "ema") and isinstance(item, TensorStorageMetadata):
            shapes.setdefault(part, {})[name] = torch.empty(item.size, dtype=item.properties.dtype, device="meta")
    return shapes


def full_tensors(folder: Path, part: str = "model") -> Dict[str, torch.Tensor]:
    """One part's tensors whole, on this process alone (no collective): what export, eval and predict load."""
    import torch.distributed.checkpoint as dcp

    shapes = _saved_shapes(folder).get(part, {})
    tensors = {name: torch.empty(meta.shape, dtype=meta.dtype) for name, meta in shapes.items()}
    with warnings.catch_warnings():  # DCP warns that it loads in one process: what is asked here
        warnings.simplefilter("ignore", UserWarning)
        dcp.load({part: tensors}, checkpoint_id=str(folder), no_dist=True)
    return tensors


def load_into(
    folder: Path, model: nn.Module, optimizer: Optional[torch.optim.Optimizer], ema: Optional[nn.Module]
) -> None:
    """Every rank: the checkpoint's tensors into the live model (sharded or whole), optimizer and EMA, resharded to
    this run's processes by DCP."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    tensors = live_tensors(model, optimizer, ema)
    dcp.load(tensors, checkpoint_id=str(folder))
    set_model_state_dict(model, tensors["model"])
    if optimizer is not None:
        set_optimizer_state_dict(model, optimizer, tensors["optimizer"])
    if ema is not None:
        set_model_state_dict(ema, tensors["ema"])


def link(folder: Path, name: str) -> None:
    """`name` (last.dcp, best.dcp) made a relative symlink to `folder`, atomically."""
    target = folder.parent / name
    tmp = folder.parent / f".{name}.link-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(folder.name, tmp)
    os.replace(tmp, target)
    fsync_dir(folder.parent)

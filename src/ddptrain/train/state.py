"""The checkpoint format, in one place: `TrainState` and its parts, to and from the dict that is saved.

A checkpoint holds the *unwrapped* model (no `module.` / `_orig_mod.` prefixes) so it loads into a
plain model for inference, and everything needed to continue: optimizer, loss scaler, the last complete
epoch, the optimizer step, the best --eval-metric so far, the flat config, class names and the world size that
wrote it — plus, at an epoch end, that epoch's metrics, or, in the middle of an epoch, where it stopped
and every rank's RNG state (`PartialEpoch`). The dict keys are the dataclass field names; no other module
reads a checkpoint by its keys. A new piece of state (e.g. EMA weights) is one more optional field on
`TrainState`.

Every checkpoint says its format (`format`) and the ddptrain that wrote it. One of a newer format is refused,
naming both formats and that ddptrain; older ones are brought up to date by `migrate` (format 1 also kept the LR
schedule and the saving rank's RNG state, which nothing read: the schedule is a function of the config and the
position, the RNG that matters is each rank's in `partial`).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..errors import CheckpointError
from ..version import __version__

FORMAT_VERSION = 3


@dataclass
class EpochPosition:
    """How far an epoch got: positions of its sample permutation consumed (over all ranks) and the
    all-reduced loss sums and skipped-image count so far."""

    samples_done: int = 0
    loss_sum: float = 0.0
    loss_count: float = 0.0
    skipped: int = 0
    lanes: int = 0  # sharded data: the number of processes the epoch's order was laid out for (0: unknown)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> EpochPosition:
        return cls(
            int(values["samples_done"]),
            float(values["loss_sum"]),
            float(values["loss_count"]),
            int(values["skipped"]),
            int(values.get("lanes", 0)),
        )


@dataclass
class PartialEpoch:
    """A mid-epoch checkpoint's place: the epoch in progress, how far it got, every rank's RNG state."""

    epoch: int
    position: EpochPosition
    rng: List[Dict[str, Any]]  # by rank

    def to_dict(self) -> Dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position.to_dict(), "rng": self.rng}

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> PartialEpoch:
        return cls(int(values["epoch"]), EpochPosition.from_dict(values["position"]), list(values["rng"]))


@dataclass
class TrainState:
    model: Dict[str, torch.Tensor]
    optimizer: Optional[Dict[str, Any]] = None
    scaler: Optional[Dict[str, Any]] = None  # the fp16 GradScaler's state; None otherwise
    epoch: int = -1  # the last complete epoch (0-based); -1 before the first
    step: int = 0  # optimizer steps taken
    best: Optional[float] = None  # the best --eval-metric so far (None: no evaluation yet)
    best_metric: str = "top1"  # the --eval-metric `best` is of
    since_best: int = 0  # evaluations since it last improved (--patience)
    config: Dict[str, Any] = field(default_factory=dict)  # the flat config (as in config.yaml)
    class_names: List[str] = field(default_factory=list)
    world_size: int = 1
    global_batch: int = 0  # images per optimizer step over all processes (0: not recorded)
    split: Optional[Dict[str, Any]] = None  # digest and sizes of the train/val split it was trained on
    metrics: Optional[Dict[str, Any]] = None  # at an epoch end: that epoch's metrics.jsonl record
    partial: Optional[PartialEpoch] = None  # in the middle of an epoch: where it stopped
    ema: Optional[Dict[str, torch.Tensor]] = None  # --ema-decay: the averaged weights
    format: int = FORMAT_VERSION
    ddptrain: str = __version__  # the ddptrain that wrote it

    # Entries written only when set (a checkpoint is either an epoch end or a mid-epoch one).
    _WHEN_SET = ("metrics", "partial", "ema")

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"format": self.format}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "format" or (f.name in self._WHEN_SET and value is None):
                continue
            out[f.name] = value.to_dict() if isinstance(value, PartialEpoch) else value
        return out

    @classmethod
    def from_dict(cls, raw: Any, source: str | Path) -> TrainState:
        if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
            raise CheckpointError(
                f"{source} is not a ddptrain checkpoint (no 'model' entry); to start from plain weights use --weights"
            )
        raw = migrate(raw, source)
        values = {f.name: raw[f.name] for f in fields(cls) if f.name in raw}
        if values.get("partial") is not None:
            values["partial"] = PartialEpoch.from_dict(values["partial"])
        return cls(**values)

    @property
    def from_a_run(self) -> bool:
        """Whether `ddptrain train` wrote it: another tool's checkpoint may hold a `model` entry, never the class
        names and the training options eval, predict, export and a resume need."""
        return bool(self.class_names) and bool(self.config)

    def next_epoch(self) -> int:
        """The epoch a resumed run trains first: the interrupted one, or the one after the last complete."""
        return self.partial.epoch if self.partial is not None else self.epoch + 1


def migrate(raw: Dict[str, Any], source: str | Path) -> Dict[str, Any]:
    """A checkpoint's dict in the current format: an older one brought up to date, a newer one refused (naming
    both formats and the ddptrain that wrote it). Checkpoints without a format entry are format 1."""
    found = raw.get("format", 1)
    if not isinstance(found, int) or found > FORMAT_VERSION:
        writer = raw.get("ddptrain", "a newer ddptrain")
        raise CheckpointError(
            f"{source} is a checkpoint of format {found}, written by ddptrain {writer}; this ddptrain ({__version__}) "
            f"reads formats up to {FORMAT_VERSION}: use ddptrain {writer} or newer to load it"
        )
    if found < 2:  # format 1 also kept the LR schedule's state and the saving rank's RNG state: never read
        raw = {key: value for key, value in raw.items() if key not in ("scheduler", "rng")}
    if found < 3:  # formats 1 and 2 kept the best top-1 only (-1: none yet)
        top1 = raw.pop("best_top1", -1.0)
        raw = {**raw, "best": None if top1 is None or top1 < 0 else float(top1), "best_metric": "top1"}
    return {**raw, "format": FORMAT_VERSION}


def non_finite_entries(state: Dict[str, torch.Tensor]) -> List[str]:
    """Names of the floating-point tensors in a state dict that hold a NaN or an infinity. Of a sharded parameter
    (FSDP's DTensor) this process's shard is checked (callers agree over every rank); shapes alone (meta tensors,
    what a sharded checkpoint's state lists) hold nothing to check."""
    bad = []
    for name, value in state.items():
        local = value.to_local() if hasattr(value, "to_local") else value
        if local.is_floating_point() and not local.is_meta and not torch.isfinite(local).all():
            bad.append(name)
    return bad


def library_checkpoint(
    model: Dict[str, torch.Tensor], optimizer: Optional[Dict[str, Any]], extra: Dict[str, Any]
) -> Dict[str, Any]:
    """What `ddptrain.save_checkpoint` writes for a user's own script: the model, the optimizer when given,
    and the user's own entries. `TrainState.from_dict` reads it back."""
    state: Dict[str, Any] = {"model": model, **extra}
    if optimizer is not None:
        state["optimizer"] = optimizer
    return state


# ---- random number generators ---------------------------------------------------------------------
def capture_rng() -> Dict[str, Any]:
    """This process's RNG states, as tensors and plain values (loadable with weights_only=True)."""
    np_state: Any = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "gauss": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_rng(state: Dict[str, Any]) -> None:
    random.setstate(_as_tuple(state["python"]))
    numpy = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            numpy["key"].numpy().astype(np.uint32),
            int(numpy["pos"]),
            int(numpy["has_gauss"]),
            float(numpy["gauss"]),
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _as_tuple(value) -> Tuple:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value

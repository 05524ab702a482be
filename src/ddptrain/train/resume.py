"""Where a run begins: afresh, or from a checkpoint read once and asked for what it restores.

`Checkpointer.resume_from` answers with a `Fresh` or a `Resume`, and the trainer asks it three things: how the
command line's options become the run's (`configure`: the preprocessing a run keeps, the global batch a resume on
another number of processes keeps), and, once model and optimizer exist, to put them where the run continues
(`restore`, which returns the `Start`: epoch, step, best so far, mid-epoch position and RNG). Nothing else in the
trainer knows a checkpoint's contents.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol, Tuple

from ..config import Config
from ..config.files import as_recorded
from ..data.transforms import Preprocess
from ..errors import CheckpointError
from ..models import describe_mismatch, pretrained_preprocessing
from ..models.fsdp import is_sharded, load_whole_into_shards
from ..runtime.dist import Runtime
from ..util import counted
from . import sharded
from .autobatch import AUTO
from .optim import apply_settings, group_settings, resumed_grad_accum, same_groups
from .state import EpochPosition, TrainState

log = logging.getLogger("ddptrain")


@dataclass
class Start:
    """Where training begins: the first epoch to train, the optimizer steps before it, the best --eval-metric so far
    and the evaluations since it improved; in the middle of an epoch, how far it got and this rank's RNG state."""

    epoch: int = 0
    global_step: int = 0
    best: Optional[float] = None
    since_best: int = 0
    position: Optional[EpochPosition] = None
    rng: Optional[Dict[str, Any]] = None
    resumed: bool = False


class Beginning(Protocol):
    @property
    def saved(self) -> Optional[Config]:
        """The options of the checkpoint resumed from; None for a fresh start."""
        ...

    def configure(self, cfg: Config, world_size: int, say: bool) -> Tuple[Config, Config]: ...

    def restore(self, model, optimizer, scaler, ema, classes: List[str], rt: Runtime) -> Start: ...


def resolve_preprocessing(cfg: Config, saved: Optional[Config]) -> Tuple[Config, str]:
    """`cfg` with every preprocessing option set — the command line's, else the resumed checkpoint's (a run keeps
    its input as it was; one written before these options existed had ImageNet's), else the model's pretrained
    config, else ImageNet's — and where the values came from."""
    if saved is not None:
        base, source = Preprocess.of(saved.data).flat(), "the checkpoint's"
    else:
        found = pretrained_preprocessing(cfg.model.name)
        base = {**Preprocess().flat(), **found}
        source = f"{cfg.model.name}'s pretrained config" if found else "ImageNet's"
    flat = cfg.to_flat()
    given = sorted(key for key in base if flat[key] is not None)
    if given:
        source += f"; {', '.join(given)} as given (flags or --config)"
    return cfg.replace(**{key: flat[key] if key in given else value for key, value in base.items()}), source


def describe(preprocess: Preprocess) -> str:
    mean, std = (",".join(f"{v:g}" for v in values) for values in (preprocess.mean, preprocess.std))
    return (
        f"{preprocess.img_size} px, mean {mean}, std {std}, {preprocess.interpolation}, evaluation crop "
        f"{preprocess.crop_fraction:g}"
    )


def _say_preprocessing(cfg: Config, source: str, say: bool) -> None:
    if say:
        log.info("preprocessing: %s (%s)", describe(Preprocess.of(cfg.data)), source)


class Fresh:
    """A run that starts from its initial weights (no checkpoint, or none yet under --resume auto)."""

    def __init__(self, resume: Optional[str], folder: Path):
        self.resume, self.folder = resume, folder
        self.saved: Optional[Config] = None

    def configure(self, cfg: Config, world_size: int, say: bool) -> Tuple[Config, Config]:
        """(the options as the run records them, the options it trains with): the same for a fresh run."""
        cfg, source = resolve_preprocessing(cfg, None)
        _say_preprocessing(cfg, source, say)
        return cfg, cfg

    def restore(self, model, optimizer, scaler, ema, classes: List[str], rt: Runtime) -> Start:
        if self.resume == "auto":
            log.info("resume auto: no checkpoint in %s, starting fresh", self.folder)
        return Start()


class Resume:
    """A checkpoint to continue from: its path, its `TrainState`, and the options it was written with (parsed
    once)."""

    def __init__(self, path: Path, state: TrainState):
        if not state.from_a_run:
            raise CheckpointError(
                f"cannot resume from {path}: it is not a checkpoint ddptrain train wrote (it holds no class names or "
                f"training options; another tool's?). To start from its weights use --weights {path}",
                every_rank=True,
            )
        self.path, self.state = path, state
        self.saved = Config.from_flat(state.config, str(path), strict=False)
        self.cfg: Optional[Config] = None

    def configure(self, cfg: Config, world_size: int, say: bool) -> Tuple[Config, Config]:
        """(the options as the run records them, the options it trains with). The preprocessing is the
        checkpoint's unless given; with another number of processes --grad-accum keeps the global batch
        (`optim.resumed_grad_accum`); pretrained weights are not fetched: the checkpoint has the weights."""
        requested, source = resolve_preprocessing(cfg, self.saved)
        _say_preprocessing(requested, source, say)
        if requested.optim.batch_size == AUTO:  # --batch-size auto: the batch the run found and recorded
            requested = requested.replace(batch_size=self.saved.optim.batch_size or 32)
        state = self.state
        accum = resumed_grad_accum(requested.optim, self.saved.optim, state.world_size, state.global_batch, world_size)
        self.cfg = requested.replace(grad_accum=accum, pretrained=False)
        return requested, self.cfg

    def restore(self, model, optimizer, scaler, ema, classes: List[str], rt: Runtime) -> Start:
        """Weights, optimizer state, loss scaler and EMA from the checkpoint, refusing one of another model or class
        list; the place where training continues."""
        cfg, state = self._configured(), self.state
        self._check(model, classes, cfg, rt.rank)
        if sharded.is_checkpoint_folder(self.path):
            self._restore_sharded(model, optimizer, ema, cfg, rt.is_main)
        else:
            self._restore_whole(model, optimizer, ema, cfg, rt.is_main)
        if scaler is not None and state.scaler:
            scaler.load_state_dict(state.scaler)
        start = Start(state.next_epoch(), state.step, *self._best(cfg, rt.is_main), resumed=True)
        where = ""
        if state.partial is not None:
            start.position = state.partial.position
            where = f" after {state.partial.position.samples_done} of its samples"
            if state.world_size == rt.world_size:
                start.rng = state.partial.rng[rt.rank]
            else:
                log.info(
                    "mid-epoch resume on %d processes (saved on %s): the rest of the epoch is re-sharded; "
                    "dropout draws differ from an uninterrupted run",
                    rt.world_size,
                    state.world_size,
                )
        self._say_where(start, where, cfg.optim.epochs, rt.is_main)
        return start

    def _configured(self) -> Config:
        if self.cfg is None:
            raise RuntimeError("Resume.configure() comes before restore()")
        return self.cfg

    def _say_where(self, start: Start, where: str, epochs: int, is_main: bool) -> None:
        if start.epoch >= epochs:
            if is_main:
                log.warning(
                    "resumed from %s: %s finished, as many as --epochs %d asks for; nothing to train (raise "
                    "--epochs to train on)",
                    self.path,
                    counted(start.epoch, "epoch"),
                    epochs,
                )
            return
        log.info(
            "resumed from %s: continuing at epoch %d/%d%s (step %d, written by %s processes)",
            self.path,
            start.epoch + 1,
            epochs,
            where,
            start.global_step,
            self.state.world_size,
        )

    def _best(self, cfg: Config, say: bool) -> Tuple[Optional[float], int]:
        """The best so far and the evaluations since, when the checkpoint kept them for this --eval-metric; another
        metric starts afresh (best.pt is replaced at the next evaluation)."""
        state = self.state
        if state.best_metric == cfg.optim.eval_metric:
            return state.best, state.since_best
        if say and state.best is not None:
            log.warning(
                "resume: --eval-metric %s replaces the checkpoint's %s; the best so far starts afresh at the next "
                "evaluation (best.pt is replaced then)",
                cfg.optim.eval_metric,
                state.best_metric,
            )
        return None, 0

    def _check(self, model, classes: List[str], cfg: Config, rank: int) -> None:
        """Refuse a checkpoint of another model or class list, listing the differences."""
        state, differences = self.state, []
        if state.class_names != classes:
            differences.append(f"classes {state.class_names} vs {classes} in {cfg.data.path}")
        if self.saved.model.name not in (cfg.model.name, as_recorded(cfg).model.name):  # a file.py:FACTORY is recorded
            differences.append(f"model {self.saved.model.name} vs --model {cfg.model.name}")
        weights = describe_mismatch(state.model, model.state_dict())
        if weights and not differences:
            differences.append(f"weights: {weights}")
        if differences:
            raise CheckpointError(
                f"cannot resume from {self.path}: "
                + "; ".join(differences)
                + ". Use another --out (or --resume PATH) for a different model or data.",
                rank=rank,
                every_rank=True,  # each rank compares the same checkpoint with the same model and data
            )

    def _restore_whole(self, model, optimizer, ema, cfg: Config, say: bool) -> None:
        """A checkpoint file: whole tensors. Into a sharded model (a DDP run continued under --strategy fsdp) each
        process keeps its shards of them; the optimizer's state, kept by parameter position, then starts fresh."""
        state = self.state
        if is_sharded(model):
            load_whole_into_shards(model, state.model)
            if say and state.optimizer is not None:
                log.warning(
                    "resume: %s was written under --strategy ddp; under fsdp the weights continue and the optimizer's "
                    "state (momentum, moments) starts fresh",
                    self.path.name,
                )
        else:
            model.load_state_dict(state.model)
            if self._optimizer_continues(optimizer, cfg, say):
                wanted = group_settings(optimizer)
                optimizer.load_state_dict(state.optimizer)
                self._apply_settings(optimizer, wanted)
        if ema is not None:
            if state.ema is None:
                self._ema_from_weights(ema, model)
            elif is_sharded(ema.module):
                load_whole_into_shards(ema.module, state.ema)
            else:
                ema.module.load_state_dict(state.ema)

    def _restore_sharded(self, model, optimizer, ema, cfg: Config, say: bool) -> None:
        """A sharded checkpoint folder: every rank reads what it holds (its shards under FSDP, whole tensors under
        DDP), resharded by DCP to this run's number of processes."""
        continues = self._optimizer_continues(optimizer, cfg, say)
        wanted = group_settings(optimizer)
        kept_ema = ema.module if ema is not None and self.state.ema is not None else None
        sharded.load_into(self.path, model, optimizer if continues else None, kept_ema)
        if continues:
            self._apply_settings(optimizer, wanted)
        if ema is not None and kept_ema is None:
            self._ema_from_weights(ema, model)

    def _optimizer_continues(self, optimizer, cfg: Config, say: bool) -> bool:
        """The optimizer's state (momentum buffers, moments) continues; its settings are this command line's. Another
        --optimizer or --layer-decay than the checkpoint's starts its state fresh: the run keeps its place in the
        schedule."""
        optim, saved, state = cfg.optim, self.saved.optim, self.state
        if state.optimizer is None:
            return False
        if saved.optimizer != optim.optimizer:
            if say:  # the same on every rank
                log.warning(
                    "resume: --optimizer %s replaces the checkpoint's %s; its state (momentum, moments) starts fresh",
                    optim.optimizer,
                    saved.optimizer,
                )
            return False
        if not same_groups(optimizer, state.optimizer):
            if say:
                log.warning(
                    "resume: --layer-decay %s makes other parameter groups than the checkpoint's (--layer-decay %s); "
                    "the optimizer's state (momentum, moments) starts fresh",
                    optim.layer_decay,
                    saved.layer_decay,
                )
            return False
        return True

    @staticmethod
    def _apply_settings(optimizer, wanted) -> None:
        changes = apply_settings(optimizer, wanted)
        if changes:
            log.info("resume: the command line's optimizer settings replace the checkpoint's: %s", ", ".join(changes))

    @staticmethod
    def _ema_from_weights(ema, model) -> None:
        log.warning("resume: the checkpoint has no EMA weights; the average starts from its weights now")
        ema.module.load_state_dict(model.state_dict())

"""The evaluation pass: exact top-1/top-5/loss over exactly the samples in the loader, summed over every rank.

It runs on the unwrapped model: ranks may hold different numbers of validation samples (or none), and
a DDP forward could issue collectives that the other ranks never join. One all-reduce at the end. A sharded (FSDP)
model cannot be unwrapped — its forward gathers parameters from every rank — so there the ranks run their forwards
in lockstep.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..data.loaders import batches
from ..models.fsdp import is_sharded
from ..models.wrap import unwrap
from ..runtime.dist import Runtime
from .metrics import EvalResult, EvalTotals, MultiLabelTotals
from .precision import Precision
from .progress import CountProgress


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader,
    precision: Precision,
    num_classes: int,
    rt: Runtime,
    channels_last: bool = False,
    on_failure: Optional[Callable[[Iterable[str]], None]] = None,
    threshold: Optional[float] = None,
    img_size: int = 224,
    progress_every: float = 0.0,
    what: str = "evaluation",
) -> EvalResult:
    """`threshold`: --task multilabel (scores and targets gathered for mAP and F1 at it); None: single-label.
    `img_size`: the input size, for a sharded model's spare forwards (`Lockstep`). `progress_every`: on rank 0, a
    bar on a terminal, else a line `what: i/n batches ...` at least this often (seconds; 0: none)."""
    plain = unwrap(model)
    was_training = plain.training
    plain.eval()
    totals: Union[EvalTotals, MultiLabelTotals] = (
        EvalTotals(num_classes, rt.device) if threshold is None else MultiLabelTotals(num_classes, threshold)
    )
    lockstep = Lockstep(rt, len(loader), img_size) if is_sharded(plain) else None
    with CountProgress(_length(loader), what, "batches", progress_every, rt.is_main and progress_every > 0) as progress:
        for batch in batches(loader, rt.rank):
            _add_batch(batch, plain, precision, rt, channels_last, on_failure, totals, lockstep)
            progress.update()
    if lockstep is not None:
        lockstep.finish(plain, precision)
    plain.train(was_training)
    return totals.reduce()


def _length(loader) -> Optional[int]:
    try:
        return len(loader)
    except TypeError:  # an iterable dataset that does not know its length
        return None


def _add_batch(
    batch, plain: nn.Module, precision: Precision, rt: Runtime, channels_last: bool, on_failure, totals, lockstep
) -> None:
    totals.add_skipped(len(batch.failures))
    if on_failure is not None:
        on_failure(batch.failures)
    if len(batch) == 0:
        if lockstep is not None:
            lockstep.idle(plain, precision)
        return
    images, labels = batch.to_device(rt.device, channels_last)
    with precision.autocast():
        logits = plain(images).float()
    if lockstep is not None:
        lockstep.ran()
    if isinstance(totals, MultiLabelTotals):
        totals.update(logits, labels)
    else:
        totals.update(logits, labels, F.cross_entropy(logits, labels, reduction="sum"))


class Lockstep:
    """A sharded model's forward gathers each block's parameters from every rank, so every rank must run as many
    forwards as the rank with the most validation batches: the others run the ones they lack on an image of zeros
    (of the run's input size), and discard the output."""

    def __init__(self, rt: Runtime, own_batches: int, img_size: int):
        counts = torch.tensor([own_batches], device=rt.device, dtype=torch.int64)
        torch.distributed.all_reduce(counts, op=torch.distributed.ReduceOp.MAX)
        self.owed, self.device, self.shape = int(counts.item()), rt.device, (1, 3, img_size, img_size)

    def ran(self) -> None:
        self.owed -= 1

    def idle(self, model: nn.Module, precision: Precision) -> None:
        self.owed -= 1
        self._spare_forward(model, precision)

    def finish(self, model: nn.Module, precision: Precision) -> None:
        while self.owed > 0:
            self.owed -= 1
            self._spare_forward(model, precision)

    def _spare_forward(self, model: nn.Module, precision: Precision) -> None:
        with precision.autocast():
            model(torch.zeros(self.shape, device=self.device))

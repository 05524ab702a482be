"""The evaluation pass: exact top-1/top-5/loss over exactly the samples in the loader, summed over every rank.

It runs on the unwrapped model: ranks may hold different numbers of validation samples (or none), and
a DDP forward could issue collectives that the other ranks never join. One all-reduce at the end.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..data.loaders import batches
from ..models.wrap import unwrap
from ..runtime.dist import Runtime
from .metrics import EvalResult, EvalTotals, MultiLabelTotals
from .precision import Precision


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
) -> EvalResult:
    """`threshold`: --task multilabel (scores and targets gathered for mAP and F1 at it); None: single-label."""
    plain = unwrap(model)
    was_training = plain.training
    plain.eval()
    totals: Union[EvalTotals, MultiLabelTotals] = (
        EvalTotals(num_classes, rt.device) if threshold is None else MultiLabelTotals(num_classes, threshold)
    )
    for batch in batches(loader, rt.rank):
        totals.add_skipped(len(batch.failures))
        if on_failure is not None:
            on_failure(batch.failures)
        if len(batch) == 0:
            continue
        images, labels = batch.to_device(rt.device, channels_last)
        with precision.autocast():
            logits = plain(images).float()
        if isinstance(totals, MultiLabelTotals):
            totals.update(logits, labels)
        else:
            totals.update(logits, labels, F.cross_entropy(logits, labels, reduction="sum"))
    plain.train(was_training)
    return totals.reduce()

"""Exact metrics over all ranks: every count is a sum, reduced once, so nothing is averaged twice
and every validation image counts exactly once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import torch

from ..config.sections import EVAL_METRICS
from ..runtime import dist

# sums layout: correct@1, correct@5, loss sum, samples, skipped files, then the confusion matrix
# (row: true class, column: predicted class), flattened — or, above CONFUSION_MAX_CLASSES, only
# per-class correct counts and per-class totals (a 20k-class matrix would need gigabytes).
_FIXED = 5
CONFUSION_MAX_CLASSES = 1000


class EvalTotals:
    """Per-rank sums for evaluation; `reduce()` all-reduces them in one collective."""

    def __init__(self, num_classes: int, device: torch.device):
        self.num_classes = num_classes
        self.with_confusion = num_classes <= CONFUSION_MAX_CLASSES
        per_class = num_classes * num_classes if self.with_confusion else 2 * num_classes
        # float64 keeps counts and loss sums exact well beyond any dataset size.
        self.sums = torch.zeros(_FIXED + per_class, dtype=torch.float64, device=device)

    def update(self, logits: torch.Tensor, labels: torch.Tensor, loss_sum: torch.Tensor) -> None:
        k = min(5, self.num_classes)
        top = logits.topk(k, dim=1).indices
        hit1 = top[:, 0] == labels
        hit5 = (top == labels[:, None]).any(dim=1)
        n = self.num_classes
        self.sums[0] += hit1.sum()
        self.sums[1] += hit5.sum()
        self.sums[2] += loss_sum.double()
        self.sums[3] += labels.numel()
        if self.with_confusion:
            self.sums[_FIXED:] += torch.bincount(labels * n + top[:, 0], minlength=n * n).double()
        else:
            self.sums[_FIXED : _FIXED + n] += torch.bincount(labels[hit1], minlength=n).double()
            self.sums[_FIXED + n :] += torch.bincount(labels, minlength=n).double()

    def add_skipped(self, count: int) -> None:
        self.sums[4] += count

    def reduce(self) -> EvalResult:
        dist.all_reduce_sum(self.sums)
        return EvalResult.from_sums(self.sums.cpu().tolist(), self.num_classes)


@dataclass
class EvalResult:
    """One evaluation's figures, exact over every rank."""

    samples: int
    skipped: int
    top1: float
    top5: float
    loss: float
    per_class_correct: List[int]
    per_class_count: List[int]
    confusion: Optional[List[List[int]]] = None  # [true class][predicted class]; None above 1000 classes

    @classmethod
    def from_sums(cls, sums: List[float], num_classes: int) -> EvalResult:
        correct1, correct5, loss_sum, count, skipped = sums[:_FIXED]
        n = num_classes
        denom = max(count, 1.0)
        counts = [int(round(v)) for v in sums[_FIXED:]]
        if n <= CONFUSION_MAX_CLASSES:  # the layout EvalTotals chose
            confusion = [counts[r * n : (r + 1) * n] for r in range(n)]
            correct, totals = [row[i] for i, row in enumerate(confusion)], [sum(row) for row in confusion]
        else:
            confusion, correct, totals = None, counts[:n], counts[n:]
        return cls(
            samples=int(round(count)),
            skipped=int(round(skipped)),
            top1=correct1 / denom,
            top5=correct5 / denom,
            loss=loss_sum / denom,
            per_class_correct=correct,
            per_class_count=totals,
            confusion=confusion,
        )

    def per_class(self, class_names: List[str]) -> Dict[str, Dict[str, Optional[float]]]:
        return {
            name: {"correct": c, "count": t, "acc": (c / t) if t else None}
            for name, c, t in zip(class_names, self.per_class_correct, self.per_class_count)
        }

    def to_dict(self, class_names: List[str]) -> Dict:
        """The JSON form shared by `ddptrain eval` and the run directory's best_eval.json."""
        return {
            "samples": self.samples,
            "top1": self.top1,
            "top5": self.top5,
            "loss": self.loss,
            "skipped": self.skipped,
            "class_names": list(class_names),
            "per_class": self.per_class(class_names),
            "confusion": self.confusion,
        }


def metric_value(result: EvalResult, name: str) -> float:
    """The --eval-metric `name` of an evaluation."""
    return float(getattr(result, name))


def improves(name: str, value: float, best: Optional[float]) -> bool:
    """Whether `value` of metric `name` beats `best` (None: nothing yet), in the metric's direction."""
    if best is None:
        return True
    return value < best if EVAL_METRICS[name] == "min" else value > best

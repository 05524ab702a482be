"""Exact metrics over all ranks: every count is a sum, reduced once, so nothing is averaged twice
and every validation image counts exactly once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F

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
    # --task multilabel (top1: the top-scored class is one of the image's; top5: one of the five is; per class:
    # images of the class predicted at the threshold, images of the class)
    map: Optional[float] = None  # mean over the classes present of the average precision
    macro_f1: Optional[float] = None
    micro_f1: Optional[float] = None

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
            **self.multilabel(),
        }

    def multilabel(self) -> Dict[str, float]:
        """mAP and F1 of a --task multilabel evaluation; {} otherwise."""
        if self.map is None:
            return {}
        return {"map": self.map, "macro_f1": self.macro_f1 or 0.0, "micro_f1": self.micro_f1 or 0.0}


def multilabel_threshold(config) -> Optional[float]:
    """--threshold when the run is --task multilabel (evaluation gathers scores for mAP and F1); None otherwise."""
    return config.optim.threshold if config.data.task == "multilabel" else None


def metric_value(result: EvalResult, name: str) -> float:
    """The --eval-metric `name` of an evaluation."""
    return float(getattr(result, name))


def improves(name: str, value: float, best: Optional[float]) -> bool:
    """Whether `value` of metric `name` beats `best` (None: nothing yet), in the metric's direction."""
    if best is None:
        return True
    return value < best if EVAL_METRICS[name] == "min" else value > best


class MultiLabelTotals:
    """--task multilabel: each rank keeps its images' scores and targets; `reduce()` gathers them on every rank
    (each validation image is on exactly one rank) and computes mAP and F1 from all of them, the same everywhere.
    Average precision counts tied scores as one threshold, so the order the ranks' images arrive in does not
    change it: N ranks give one process's figures."""

    def __init__(self, num_classes: int, threshold: float):
        self.num_classes, self.threshold = num_classes, threshold
        self.scores: List[torch.Tensor] = []
        self.targets: List[torch.Tensor] = []
        self.loss_sum, self.skipped = 0.0, 0

    def update(self, logits: torch.Tensor, targets: torch.Tensor) -> None:
        logits, targets = logits.float(), targets.float()
        self.loss_sum += float(F.binary_cross_entropy_with_logits(logits, targets, reduction="sum"))
        self.scores.append(torch.sigmoid(logits).cpu())
        self.targets.append(targets.cpu())

    def add_skipped(self, count: int) -> None:
        self.skipped += count

    def reduce(self) -> EvalResult:
        k = self.num_classes
        mine = (
            torch.cat(self.scores) if self.scores else torch.zeros(0, k),
            torch.cat(self.targets) if self.targets else torch.zeros(0, k),
            self.loss_sum,
            self.skipped,
        )
        parts = dist.gather_objects(mine) if torch.distributed.is_initialized() else [mine]
        scores = torch.cat([p[0] for p in parts]).double()
        targets = torch.cat([p[1] for p in parts]).double()
        return multilabel_result(scores, targets, sum(p[2] for p in parts), sum(p[3] for p in parts), self.threshold)


def multilabel_result(
    scores: torch.Tensor, targets: torch.Tensor, loss_sum: float, skipped: int, threshold: float
) -> EvalResult:
    n, k = targets.shape
    positive = targets > 0.5
    predicted = scores >= threshold
    top = scores.topk(min(5, k), dim=1).indices if n else torch.zeros(0, min(5, k), dtype=torch.long)
    hits = positive.gather(1, top) if n else torch.zeros(0, min(5, k), dtype=torch.bool)
    tp = (predicted & positive).sum(0).double()
    fp = (predicted & ~positive).sum(0).double()
    fn = (~predicted & positive).sum(0).double()
    present = positive.sum(0) > 0
    per_class_f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
    aps = [average_precision(scores[:, c], positive[:, c]) for c in range(k) if present[c]]
    return EvalResult(
        samples=n,
        skipped=skipped,
        top1=float(hits[:, 0].double().mean()) if n else 0.0,
        top5=float(hits.any(dim=1).double().mean()) if n else 0.0,
        loss=loss_sum / max(n * k, 1),
        per_class_correct=[int(v) for v in tp.tolist()],
        per_class_count=[int(v) for v in positive.sum(0).tolist()],
        map=sum(aps) / len(aps) if aps else 0.0,
        macro_f1=float(per_class_f1[present].mean()) if bool(present.any()) else 0.0,
        micro_f1=float(2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum()).clamp(min=1)),
    )


def average_precision(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """Area under the precision-recall steps, one step per distinct score (tied scores are one threshold, as
    scikit-learn's average_precision_score)."""
    order = torch.argsort(scores, descending=True, stable=True)
    ranked, hits = scores[order], positive[order].double()
    tp = torch.cumsum(hits, 0)
    last_of_tie = torch.ones_like(ranked, dtype=torch.bool)
    last_of_tie[:-1] = ranked[1:] != ranked[:-1]
    tp, seen = tp[last_of_tie], torch.arange(1, len(ranked) + 1, dtype=torch.float64)[last_of_tie]
    precision, recall = tp / seen, tp / hits.sum()
    steps = torch.diff(recall, prepend=torch.zeros(1, dtype=torch.float64))
    return float((steps * precision).sum())

"""Mixup and CutMix on each rank's micro-batch, with soft targets (label smoothing folded in).

Every draw — Mixup or CutMix, the mixing weight, the CutMix box — comes from a generator seeded with (seed, epoch,
optimizer step, rank, micro-batch): it differs between ranks and steps, and a resumed run (mid-epoch, on the same
number of processes) draws exactly what the uninterrupted run drew. Images are paired inside the rank's batch (with
the batch reversed, as timm does), so unlike the per-image augmentations these do not make N processes equal one
process on the global batch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..util import mix_seed

SWITCH_PROB = 0.5  # with both on: the chance of CutMix for a micro-batch (timm's default)


@dataclass(frozen=True)
class Mixing:
    mixup: float  # Beta(alpha, alpha) for the mixing weight; 0: off
    cutmix: float
    num_classes: int
    label_smoothing: float
    seed: int

    @property
    def active(self) -> bool:
        return self.mixup > 0 or self.cutmix > 0

    def draw(self, epoch: int, step: int, rank: int, micro: int) -> Tuple[bool, float, float, float]:
        """(cutmix?, lam, box centre y, box centre x): a pure function of its arguments and the seed."""
        rng = np.random.default_rng(mix_seed(self.seed, epoch, step, rank, micro))
        use_cutmix = self.cutmix > 0 and (self.mixup <= 0 or rng.random() < SWITCH_PROB)
        alpha = self.cutmix if use_cutmix else self.mixup
        return use_cutmix, float(rng.beta(alpha, alpha)), float(rng.random()), float(rng.random())

    def apply(
        self, images: torch.Tensor, labels: torch.Tensor, epoch: int, step: int, rank: int, micro: int
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """(mixed images, soft targets) for one micro-batch."""
        use_cutmix, lam, cy, cx = self.draw(epoch, step, rank, micro)
        partner = images.flip(0)
        if use_cutmix:
            height, width = images.shape[-2:]
            cut = math.sqrt(1.0 - lam)
            y0, y1 = _span(cy, cut, height)
            x0, x1 = _span(cx, cut, width)
            images = images.clone()
            images[..., y0:y1, x0:x1] = partner[..., y0:y1, x0:x1]
            lam = 1.0 - (y1 - y0) * (x1 - x0) / float(height * width)  # the area actually pasted
        else:
            images = images * lam + partner * (1.0 - lam)
        targets = soft_targets(labels, self.num_classes, self.label_smoothing)
        return images, targets * lam + targets.flip(0) * (1.0 - lam)


def _span(centre: float, fraction: float, size: int) -> Tuple[int, int]:
    middle, half = int(centre * size), int(size * fraction / 2)
    return max(middle - half, 0), min(middle + half, size)


def soft_targets(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """Class indices (or, --task multilabel, 0/1 rows) as smoothed targets: 1 - smoothing + smoothing / K on each
    positive, smoothing / K elsewhere (timm's, for softmax and for binary cross-entropy alike)."""
    off = smoothing / num_classes
    hot = labels.float() if labels.is_floating_point() else F.one_hot(labels, num_classes).float()
    return hot * (1.0 - smoothing) + off


def multilabel_loss(
    logits: torch.Tensor, targets: torch.Tensor, pos_weight: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Binary cross-entropy per class on the logits, the mean over every (image, class); `pos_weight`: each class's
    positives weighed so (--class-weights)."""
    return F.binary_cross_entropy_with_logits(logits.float(), targets.float(), pos_weight=pos_weight)


def soft_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, weights: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Cross-entropy on soft targets; `weights`: each class's term weighed so (--class-weights)."""
    terms = -targets * F.log_softmax(logits.float(), dim=-1)
    return torch.sum(terms * weights if weights is not None else terms, dim=-1).mean()

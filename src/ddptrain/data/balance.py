"""Class imbalance: per-class loss weights (`--class-weights auto|none|FILE`) and the per-sample draw weights of the
balanced sampler (`--sampler balanced`), both from the training split's labels alone — so every rank, and a resumed
run reading its split back, computes the same values.

auto: single-label, w_c = N / (K x n_c) (each class weighs as much in the loss as if the classes were even);
multi-label, the positive weight of each class's binary cross-entropy, (N - n_c) / n_c (at least 1 / n_c). A FILE is JSON,
{"class name": weight, ...}, naming every class."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .index import Samples

log = logging.getLogger("ddptrain")


def class_counts(samples: Samples, num_classes: int) -> np.ndarray:
    """Images per class in `samples` (multi-label: images that have the class)."""
    targets = getattr(samples, "targets", None)
    if targets is not None:
        return np.asarray(targets, dtype=np.int64).sum(axis=0)
    return np.bincount(np.asarray(samples.labels, dtype=np.int64), minlength=num_classes)


def class_weights(spec: str, samples: Samples, classes: Sequence[str]) -> Optional[np.ndarray]:
    """The loss weight of each class for `--class-weights spec`; None for `none`."""
    if spec == "none":
        return None
    counts = class_counts(samples, len(classes)).astype(np.float64)
    if spec == "auto":
        present = np.maximum(counts, 1.0)
        if getattr(samples, "targets", None) is not None:
            return np.where(counts > 0, np.maximum(len(samples) - counts, 1.0) / present, 1.0)
        return np.where(counts > 0, len(samples) / (len(classes) * present), 0.0)
    return _from_file(Path(spec), classes)


def _from_file(path: Path, classes: Sequence[str]) -> np.ndarray:
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"--class-weights {path}: no such file (auto, none, or a JSON file of class: weight)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"--class-weights {path}: not a JSON file of class: weight ({error})") from None
    if not isinstance(given, dict):
        raise ConfigError(f'--class-weights {path}: write a JSON object, {{"class name": weight, ...}}')
    unknown = sorted(set(given) - set(classes))
    missing = [name for name in classes if name not in given]
    if unknown or missing:
        raise ConfigError(
            f"--class-weights {path}: "
            + "; ".join(
                part
                for part in (
                    f"classes the data does not have: {', '.join(unknown[:5])}" if unknown else "",
                    f"no weight for {', '.join(missing[:5])}" if missing else "",
                )
                if part
            )
            + f" (the classes: {', '.join(list(classes)[:8])}{' ...' if len(classes) > 8 else ''})"
        )
    weights = [given[name] for name in classes]
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights):
        raise ConfigError(f"--class-weights {path}: every weight must be a number of 0 or more")
    return np.asarray(weights, dtype=np.float64)


def loss_weights(spec: str, split, device, say: bool = False):
    """`class_weights` as a tensor on `device` for the loss (None for `none`), said once."""
    import torch

    weights = class_weights(spec, split.train, split.classes)
    if weights is None:
        return None
    if say:
        shown = ", ".join(f"{name} {w:.3g}" for name, w in list(zip(split.classes, weights))[:10])
        log.info("class weights (%s): %s%s", spec, shown, " ..." if len(weights) > 10 else "")
    return torch.tensor(weights, dtype=torch.float32, device=device)


def sample_weights(samples: Samples, num_classes: int) -> np.ndarray:
    """The balanced sampler's draw weight of each sample: 1 / (images of its class) — multi-label, of its rarest
    class — so each class is drawn about equally often."""
    counts = np.maximum(class_counts(samples, num_classes), 1).astype(np.float64)
    targets = getattr(samples, "targets", None)
    if targets is not None:
        inverse = np.where(np.asarray(targets) > 0, 1.0 / counts, 0.0)
        return np.maximum(inverse.max(axis=1), 1.0 / len(samples))
    return 1.0 / counts[np.asarray(samples.labels, dtype=np.int64)]

"""A Python dataset handed to `ddptrain.fit` (`dataset://NAME`): any map-style dataset whose items are
`(image, label)` — a PIL image, a uint8 tensor (C, H, W) or a uint8 array (H, W, C), and a class index — or a
`(train, val)` pair of them. Its indices are the samples: ddptrain's samplers, exact evaluation and mid-epoch resume
work on them, so `__getitem__` must give the same item for the same index every time and `__len__` must not change.

Labels come from a `targets` (or `labels`) attribute when it has one, else from reading every item once; class
names from `classes`, else the label numbers. One dataset is split by `--val-split` and `--seed`, per class, as a
folder is; a pair is its own split."""

from __future__ import annotations

import hashlib
import random
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ... import handed
from ...errors import DataError
from ...util import first_line
from ..images import UNREADABLE_ERRORS, ImageLimits
from ..index import Sample
from ..split import Split, held_out
from .reading import Reading


class PyDatasetSource:
    name = "Python dataset"
    multilabel = True  # --task multilabel: an item's label is a list of class indices or a 0/1 row

    def recognises(self, location: str) -> bool:
        return location.startswith(handed.DATASET_PREFIX)

    def check(self, location: str, reading: Reading) -> None:
        _handed(location)

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        given = _handed(location)
        if reading.multilabel:
            return _multilabel_split(location, given, val_split, seed)
        if isinstance(given, tuple):
            train_set, val_set = given
            labels = labels_of(train_set, location)
            classes = classes_of(train_set, labels, labels_of(val_set, location))
            train = DatasetSamples(location, 0, np.arange(len(train_set)), labels)
            val = DatasetSamples(location, 1, np.arange(len(val_set)), labels_of(val_set, location))
            layout = "train/val"
        else:
            labels = labels_of(given, location)
            classes = classes_of(given, labels)
            train_at, val_at = _stratified(labels, len(classes), val_split, seed)
            train = DatasetSamples(location, 0, train_at, labels[train_at])
            val = DatasetSamples(location, 0, val_at, labels[val_at])
            layout = "folders"
        by_data = layout == "train/val"  # a (train, val) pair
        return Split(classes, train, val, layout, location, source=f"dataset {location}", fixed=True, by_data=by_data)

    def all_images(self, location: str, classes: Sequence[str], reading: Reading) -> DatasetSamples:
        given = _handed(location)
        parts = given if isinstance(given, tuple) else (given,)
        if reading.multilabel:
            return _with_targets(DatasetSamples.of(location, 0, np.arange(len(parts[0]))), _rows(parts[0], location))
        return DatasetSamples(location, 0, np.arange(len(parts[0])), labels_of(parts[0], location))


def _multilabel_split(location: str, given: Any, val_split: float, seed: int) -> Split:
    """Items whose labels are sets: a pair is its own split, one dataset is held out at random by the seed."""
    if isinstance(given, tuple):
        rows = [_rows(part, location) for part in given]
        width = max(r.shape[1] for r in rows)
        rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]))) for r in rows]
        train = _with_targets(DatasetSamples.of(location, 0, np.arange(len(given[0]))), rows[0])
        val = _with_targets(DatasetSamples.of(location, 1, np.arange(len(given[1]))), rows[1])
        dataset, layout = given[0], "train/val"
    else:
        targets = _rows(given, location)
        held = held_out(len(given), val_split, seed)
        at = [np.asarray([i for i in range(len(given)) if (i in held) == bool(p)], dtype=np.int64) for p in (0, 1)]
        train = _with_targets(DatasetSamples.of(location, 0, at[0]), targets[at[0]])
        val = _with_targets(DatasetSamples.of(location, 0, at[1]), targets[at[1]])
        dataset, layout = given, "folders"
    width = train.targets.shape[1] if train.targets is not None else 1
    classes = classes_of(dataset, np.asarray([width - 1]))
    return Split(classes, train, val, layout, location, source=f"dataset {location}", fixed=True)


def _rows(dataset: Any, location: str) -> np.ndarray:
    """Every item's classes as a 0/1 row: from `targets` / `labels` or the items, each a list of class indices or
    a 0/1 row (an array or a tensor) already."""
    found = getattr(dataset, "targets", None)
    if found is None:
        found = getattr(dataset, "labels", None)
    if found is None:
        found = [dataset[i][1] for i in range(len(dataset))]
    sets: List[List[int]] = []
    for label in found:
        sets.append(_classes_in(label, location))
    width = max((max(s) + 1 for s in sets if s), default=1)
    names = getattr(dataset, "classes", None)
    width = max(width, len(names)) if names is not None else width
    rows = np.zeros((len(sets), width), dtype=np.uint8)
    for row, labels in enumerate(sets):
        if labels and labels[0] < 0:
            raise DataError(f"{location}: label {labels[0]} is negative; labels are class indices 0..K-1")
        rows[row, labels] = 1
    return rows


def _classes_in(label: Any, location: str) -> List[int]:
    """A list, tuple or set holds class indices; an array or a tensor is a 0/1 row (one entry per class)."""
    if isinstance(label, (list, tuple, set, frozenset)):
        values = list(label)
    elif hasattr(label, "shape") and len(label.shape) == 1:
        return np.flatnonzero(np.asarray(label)).tolist()
    else:
        values = [label]
    try:
        return sorted({int(v) for v in values})
    except (TypeError, ValueError):
        raise DataError(
            f"{location}: a label must be a list of class indices or a 0/1 row (an array), not {label!r}"
        ) from None


def _with_targets(samples: DatasetSamples, targets: np.ndarray) -> DatasetSamples:
    samples.targets = targets
    samples.labels = np.asarray([int(np.argmax(row)) for row in targets], dtype=np.int64)
    return samples


def _handed(location: str) -> Any:
    given = handed.lookup(location)
    if given is None:
        raise DataError(handed.absent(location))
    return given


def labels_of(dataset: Any, location: str) -> np.ndarray:
    """Every item's class index: the dataset's `targets` / `labels` when it has them (torchvision's convention),
    else each item's second element (every image read once)."""
    found = getattr(dataset, "targets", None)
    if found is None:
        found = getattr(dataset, "labels", None)
    if found is None:
        found = [dataset[i][1] for i in range(len(dataset))]
    try:
        labels = np.asarray([int(label) for label in found], dtype=np.int64)
    except (TypeError, ValueError) as error:
        raise DataError(f"{location}: labels must be class indices (int), not {error}") from None
    if len(labels) != len(dataset):
        raise DataError(f"{location}: {len(labels)} targets for {len(dataset)} items; they must match one to one")
    if len(labels) and labels.min() < 0:
        raise DataError(f"{location}: label {int(labels.min())} is negative; labels are class indices 0..K-1")
    return labels


def classes_of(dataset: Any, *labels: np.ndarray) -> List[str]:
    """The class names: the dataset's `classes`, else "0".."K-1" for the highest label seen."""
    highest = max((int(part.max()) for part in labels if len(part)), default=-1)
    names = getattr(dataset, "classes", None)
    if names is None:
        return [str(i) for i in range(highest + 1)]
    names = [str(name) for name in names]
    if highest >= len(names):
        raise DataError(f"label {highest} is beyond the dataset's {len(names)} classes ({', '.join(names[:5])} ...)")
    return names


def _stratified(labels: np.ndarray, classes: int, val_split: float, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Per class, round(n * val_split) items held out (at least one when val_split > 0 and n > 1), drawn by seed."""
    train: List[int] = []
    val: List[int] = []
    for label in range(classes):
        members = np.flatnonzero(labels == label).tolist()
        random.Random(f"{seed}:{label}").shuffle(members)
        n_val = round(len(members) * val_split)
        if val_split > 0 and n_val == 0 and len(members) > 1:
            n_val = 1
        val += members[:n_val]
        train += members[n_val:]
    return np.asarray(sorted(train), dtype=np.int64), np.asarray(sorted(val), dtype=np.int64)


class DatasetSamples:
    """Items of a handed dataset (`part` 0: the dataset or the pair's first; 1: the pair's second) by index. It
    travels between ranks without the dataset, which every rank has already."""

    def __init__(self, location: str, part: int, indices: np.ndarray, labels: np.ndarray):
        self.location, self.part = location, part
        self.indices, self.labels = indices, labels
        self.source = f"dataset {location}"
        self.hint = "check the dataset's __getitem__"
        self.targets: Optional[np.ndarray] = None  # --task multilabel: each item's classes, 0/1

    @classmethod
    def of(cls, location: str, part: int, indices: np.ndarray) -> DatasetSamples:
        return cls(location, part, indices, np.zeros(len(indices), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> Sample:
        return self.name(index), int(self.labels[index])

    def relative(self, index: int) -> str:
        return f"{('train', 'val')[self.part]}/{int(self.indices[index])}"

    def name(self, index: int) -> str:
        return f"{self.location}[{int(self.indices[index])}]"

    def read(self, index: int, limits: ImageLimits) -> Any:
        given = _handed(self.location)
        dataset = given[self.part] if isinstance(given, tuple) else given
        try:
            item = dataset[int(self.indices[index])]
        except UNREADABLE_ERRORS:
            raise  # an image file the dataset could not read: skipped and counted, as a folder's
        except Exception as error:
            raise DataError(
                f"{self.name(index)}: the dataset's __getitem__ raised {type(error).__name__}: {first_line(error)}",
                every_rank=True,
            ) from error
        return as_image(item[0], self.name(index))

    def digest(self) -> str:
        extra = self.targets.tobytes() if self.targets is not None else b""
        text = self.location.encode() + self.indices.tobytes() + self.labels.tobytes() + extra
        return hashlib.sha1(text).hexdigest()[:16]


def as_image(value: Any, name: str) -> Any:
    """A PIL image in RGB, or a uint8 tensor (3, H, W): what the crop takes. Floats are refused: ddptrain crops,
    resizes and normalises the 8-bit image itself."""
    import torch
    from PIL import Image

    if isinstance(value, Image.Image):
        return value if value.mode == "RGB" else value.convert("RGB")
    if isinstance(value, np.ndarray):
        if value.ndim == 2:
            value = value[:, :, None]
        value = torch.from_numpy(np.ascontiguousarray(value)).permute(2, 0, 1)
    if isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 3:
        if value.shape[0] == 1:
            value = value.expand(3, -1, -1)
        if value.shape[0] == 3:
            return value
    shape = tuple(getattr(value, "shape", ()))
    raise DataError(
        f"{name} is a {type(value).__name__} {getattr(value, 'dtype', '')} {shape}: give images as PIL images, uint8 "
        "tensors (C, H, W) or uint8 arrays (H, W, C), without a transform: ddptrain crops, resizes, augments and "
        "normalises them itself",
        every_rank=True,
    )

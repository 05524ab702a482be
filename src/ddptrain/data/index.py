"""The list of training samples in compact arrays, how a folder or a `path,label` CSV becomes one, and how
one is read back.

A million `(path, label)` tuples are three million Python objects; every DataLoader worker forked from a
rank touches their reference counts as it reads them and so ends up with a private copy of the pages that
hold them. `SampleIndex` keeps the same list as three numpy arrays (the UTF-8 bytes of all paths, their
offsets, the labels): reading an entry writes to none of them, so workers share one copy with their rank.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Protocol, Sequence, Tuple, Union, cast

import numpy as np

from ..errors import DataError
from .images import ImageLimits, check_size, is_image_file

Sample = Tuple[str, int]  # (absolute path, class index)


class Samples(Protocol):
    """What a dataset reads samples from: a SampleIndex (files) or a shard set's part (ddptrain.data.shards)."""

    labels: np.ndarray

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Sample: ...

    def relative(self, index: int) -> str: ...

    def name(self, index: int) -> str: ...

    def read(self, index: int, limits: ImageLimits) -> bytes: ...


class SampleIndex:
    """Samples as arrays: paths relative to `root` (or absolute) and class indices. Indexing gives
    `(absolute path, label)` like the list of tuples it replaces."""

    def __init__(self, root: str, blob: np.ndarray, offsets: np.ndarray, labels: np.ndarray):
        self.root = root
        self.blob, self.offsets, self.labels = blob, offsets, labels

    @classmethod
    def from_pairs(cls, root: str | Path, pairs: Iterable[Tuple[str, int]]) -> SampleIndex:
        """From (path, label) pairs; a path under `root` is kept relative to it."""
        root = str(root)
        prefix = root.rstrip("/") + "/"
        encoded: List[bytes] = []
        labels: List[int] = []
        for path, label in pairs:
            encoded.append((path[len(prefix) :] if path.startswith(prefix) else path).encode())
            labels.append(label)
        lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return cls(root, blob, offsets, np.asarray(labels, dtype=np.int32))

    def __len__(self) -> int:
        return len(self.labels)

    def relative(self, index: int) -> str:
        start, end = self.offsets[index], self.offsets[index + 1]
        return self.blob[start:end].tobytes().decode()

    def path(self, index: int) -> str:
        return os.path.join(self.root, self.relative(index))

    def __getitem__(self, index: int) -> Sample:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.path(index), int(self.labels[index])

    def __iter__(self) -> Iterator[Sample]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """The same samples in the same order (as the lists of tuples compared)."""
        if not isinstance(other, SampleIndex):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def name(self, index: int) -> str:
        """What an error message calls the sample."""
        return self.path(index)

    def read(self, index: int, limits: ImageLimits) -> bytes:
        """The sample's encoded image (its size checked against `limits` before it is read)."""
        path = self.path(index)
        check_size(os.stat(path).st_size, limits)
        with open(path, "rb") as handle:
            return handle.read()

    @property
    def nbytes(self) -> int:
        return int(self.blob.nbytes + self.offsets.nbytes + self.labels.nbytes)


def as_samples(samples: Union[Samples, Sequence[Sample]]) -> Samples:
    """Samples as they are, or a plain (path, label) list as a SampleIndex (the library API takes lists)."""
    if hasattr(samples, "read"):
        return cast(Samples, samples)
    return SampleIndex.from_pairs("/", samples)


def scan_images(folder: Path) -> List[str]:
    """Image files under `folder`, as sorted relative POSIX paths. One `scandir` per directory and no
    per-file `stat` (the directory entry says what is a file): what a network file system can list fast."""
    found: List[str] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(folder / relative if relative else folder) as entries:
            for entry in entries:
                name = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir():
                    pending.append(name)
                elif entry.is_file() and is_image_file(entry.name):
                    found.append(name)
    found.sort()
    return found


def read_manifest(path: Path) -> Tuple[List[str], Dict[str, List[str]], Dict[str, str]]:
    """A `path,label[,split]` CSV: (classes, image paths by class, split by path when a `split` column says
    train/val). Paths are relative to the CSV's folder or absolute. Classes are the labels sorted — as
    numbers when every label is an integer."""
    by_class: Dict[str, List[str]] = {}
    splits: Dict[str, str] = {}
    base = path.resolve().parent
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = {name.strip().lower(): name for name in reader.fieldnames or []}
        if "path" not in columns or "label" not in columns:
            raise DataError(
                f"{path} is not a manifest: its first line must name the columns `path,label` (found "
                f"{','.join(reader.fieldnames or []) or 'nothing'})"
            )
        for number, row in enumerate(reader, 2):
            image, label = (row.get(columns["path"]) or "").strip(), (row.get(columns["label"]) or "").strip()
            if not image or not label:
                raise DataError(f"{path}:{number}: a row needs a path and a label")
            full = os.path.normpath(os.path.join(base, image))
            by_class.setdefault(label, []).append(full)
            if "split" in columns:
                which = (row.get(columns["split"]) or "").strip().lower()
                if which not in ("train", "val"):
                    raise DataError(f"{path}:{number}: split must be train or val, not {which!r}")
                splits[full] = which
    if not by_class:
        raise DataError(f"{path} lists no images")
    numeric = all(label.lstrip("-").isdigit() for label in by_class)
    classes = sorted(by_class, key=(lambda c: (int(c), c)) if numeric else None)
    if splits and len(splits) != sum(len(v) for v in by_class.values()):
        raise DataError(f"{path}: give every row a split (train or val), or none")
    return classes, {name: sorted(by_class[name]) for name in classes}, splits

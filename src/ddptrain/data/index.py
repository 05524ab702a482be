"""The list of samples in compact arrays (`SampleIndex`, what every source of data gives as its parts), and listing
a folder's images fast.

A million `(path, label)` tuples are three million Python objects; every DataLoader worker forked from a
rank touches their reference counts as it reads them and so ends up with a private copy of the pages that
hold them. `SampleIndex` keeps the same list as three numpy arrays (the UTF-8 bytes of all paths, their
offsets, the labels): reading an entry writes to none of them, so workers share one copy with their rank.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union, cast

import numpy as np

from ..logs import RANK_0_SAYS
from .images import ImageLimits, is_image_file, is_other_picture, read_image_file

log = logging.getLogger("ddptrain")

Sample = Tuple[str, int]  # (absolute path, class index)


class Samples(Protocol):
    """What a dataset reads samples from: a SampleIndex (files) or a shard set's part (ddptrain.data.shards)."""

    labels: np.ndarray

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Sample: ...

    def relative(self, index: int) -> str: ...

    def name(self, index: int) -> str: ...

    def read(self, index: int, limits: ImageLimits) -> bytes: ...

    def digest(self) -> str:
        """Of the samples' names (paths relative to the data) and labels, in order: the same on every node that
        lists the same data (the preflight compares it)."""
        ...


class SampleIndex:
    """Samples as arrays: paths relative to `root` (or absolute) and class indices. Indexing gives
    `(absolute path, label)` like the list of tuples it replaces."""

    def __init__(self, root: str, blob: np.ndarray, offsets: np.ndarray, labels: np.ndarray, source: str = ""):
        self.root = root
        self.blob, self.offsets, self.labels = blob, offsets, labels
        self.source = source  # what messages call where the samples come from: "folder /d", "CSV manifest /d/x.csv"
        self.hint = ""  # what to check when many of them cannot be read (set by their source)
        # --task multilabel: (samples, classes) 0/1, each sample's classes; `labels` then holds its first class
        self.targets: Optional[np.ndarray] = None

    @classmethod
    def from_label_sets(
        cls, root: str | Path, pairs: Iterable[Tuple[str, Sequence[int]]], num_classes: int
    ) -> SampleIndex:
        """From (path, class indices) pairs: samples of any number of classes each (--task multilabel)."""
        listed = [(path, sorted(set(labels))) for path, labels in pairs]
        index = cls.from_pairs(root, ((path, labels[0] if labels else 0) for path, labels in listed))
        targets = np.zeros((len(listed), num_classes), dtype=np.uint8)
        for row, (_, labels) in enumerate(listed):
            targets[row, labels] = 1
        index.targets = targets
        return index

    @classmethod
    def from_pairs(cls, root: str | Path, pairs: Iterable[Tuple[str, int]]) -> SampleIndex:
        """From (path, label) pairs; a path under `root` is kept relative to it."""
        root = str(root)
        prefix = root.rstrip("/") + "/"
        encoded: List[bytes] = []
        labels: List[int] = []
        for path, label in pairs:
            # os.fsencode: a name that is not UTF-8 (its bytes kept as surrogates by os.scandir) keeps its bytes
            encoded.append(os.fsencode(path[len(prefix) :] if path.startswith(prefix) else path))
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
        return os.fsdecode(self.blob[start:end].tobytes())

    def path(self, index: int) -> str:
        relative = self.relative(index)
        return relative if "://" in relative else os.path.join(self.root, relative)

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
        """The sample's encoded image: a regular file, its size checked against `limits` before it is read; or an
        `s3://`/`http(s)://` object of a manifest, fetched within the same cap (data/remote.py)."""
        path = self.path(index)
        if "://" in path:
            from .remote import read_object

            return read_object(path, limits.max_bytes)
        return read_image_file(path, limits)

    def digest(self) -> str:
        extra = (self.targets,) if self.targets is not None else ()
        return array_digest(self.blob, self.offsets, self.labels, *extra)

    @property
    def nbytes(self) -> int:
        return int(self.blob.nbytes + self.offsets.nbytes + self.labels.nbytes)


def label_text(samples: Samples, index: int, classes: Sequence[str]) -> str:
    """A sample's label as its class name, or its classes joined by `|` (--task multilabel)."""
    targets = getattr(samples, "targets", None)
    if targets is None:
        return classes[int(samples.labels[index])]
    return LABEL_SEPARATOR.join(classes[int(j)] for j in np.flatnonzero(targets[index]))


LABEL_SEPARATOR = "|"


def array_digest(*arrays: np.ndarray) -> str:
    digest = hashlib.sha1()
    for array in arrays:
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def as_samples(samples: Union[Samples, Sequence[Sample]]) -> Samples:
    """Samples as they are, or a plain (path, label) list as a SampleIndex (the library API takes lists); a relative
    path is taken from the current folder, as `open` would take it (not from the index's root, `/`)."""
    if hasattr(samples, "read"):
        return cast(Samples, samples)
    return SampleIndex.from_pairs("/", ((absolute(os.fspath(path)), label) for path, label in samples))


def absolute(path: str) -> str:
    """A local path made absolute from the current folder; a URL as it is."""
    return path if "://" in path else os.path.abspath(path)


def scan_images(folder: Path, other_pictures: Optional[List[str]] = None) -> List[str]:
    """Image files under `folder`, as sorted relative POSIX paths. One `scandir` per directory and no
    per-file `stat` (the directory entry says what is a file): what a network file system can list fast.
    Symbolic links to folders are followed, each folder once: a folder reached again (a link loop, or a second
    link to it) is skipped with a warning, so a loop cannot make the listing endless. Pictures in formats it does
    not take (a GIF, a phone's HEIC), and entries named as images that are not regular files (a broken link, a
    FIFO, a device), are appended to `other_pictures`, for the caller to count and name (images.left_out_pictures)."""
    found: List[str] = []
    pending = [""]
    seen = {_identity(folder)}
    skipped: List[str] = []
    while pending:
        relative = pending.pop()
        with os.scandir(folder / relative if relative else folder) as entries:
            for entry in entries:
                name = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir():
                    identity = _identity(entry.path)  # one stat per folder (none per file)
                    if identity in seen:
                        skipped.append(name)
                        continue
                    seen.add(identity)
                    pending.append(name)
                elif is_image_file(entry.name):
                    if entry.is_file():
                        found.append(name)
                    elif other_pictures is not None:  # a broken link, a FIFO, a device: left out, said
                        other_pictures.append(name)
                elif other_pictures is not None and is_other_picture(entry.name) and entry.is_file():
                    other_pictures.append(name)
    if skipped:
        log.warning(
            "%s: %s to a folder already listed (a link loop, or a second link to it), not listed again: %s",
            folder,
            "1 linked folder leads" if len(skipped) == 1 else f"{len(skipped)} linked folders lead",
            ", ".join(sorted(skipped)[:5]),
            extra=RANK_0_SAYS,
        )
    found.sort()
    return found


def _identity(path) -> Tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino

"""The list of training samples in compact arrays, how a folder or a `path,label` CSV becomes one, and how
one is read back.

A million `(path, label)` tuples are three million Python objects; every DataLoader worker forked from a
rank touches their reference counts as it reads them and so ends up with a private copy of the pages that
hold them. `SampleIndex` keeps the same list as three numpy arrays (the UTF-8 bytes of all paths, their
offsets, the labels): reading an entry writes to none of them, so workers share one copy with their rank.
"""

from __future__ import annotations

import csv
import logging
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Protocol, Sequence, Tuple, Union, cast

import numpy as np

from ..errors import DataError
from .images import ImageLimits, is_image_file, read_image_file

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


class SampleIndex:
    """Samples as arrays: paths relative to `root` (or absolute) and class indices. Indexing gives
    `(absolute path, label)` like the list of tuples it replaces."""

    def __init__(self, root: str, blob: np.ndarray, offsets: np.ndarray, labels: np.ndarray, source: str = ""):
        self.root = root
        self.blob, self.offsets, self.labels = blob, offsets, labels
        self.source = source  # what messages call where the samples come from: "folder /d", "CSV manifest /d/x.csv"

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
        """The sample's encoded image: a regular file, its size checked against `limits` before it is read."""
        return read_image_file(self.path(index), limits)

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
    per-file `stat` (the directory entry says what is a file): what a network file system can list fast.
    Symbolic links to folders are followed, each folder once: a folder reached again (a link loop, or a second
    link to it) is skipped with a warning, so a loop cannot make the listing endless."""
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
                elif entry.is_file() and is_image_file(entry.name):
                    found.append(name)
    if skipped:
        log.warning(
            "%s: %d linked folder(s) lead to a folder already listed (a link loop, or a second link to it) and were "
            "not listed again: %s",
            folder,
            len(skipped),
            ", ".join(sorted(skipped)[:5]),
        )
    found.sort()
    return found


def _identity(path) -> Tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino


@dataclass
class Manifest:
    """A `path,label[,split]` CSV, read and checked: its classes, its image paths by class, the split of each path
    when a `split` column gives one, and the line numbers of exact repeats that were dropped."""

    classes: List[str]
    by_class: Dict[str, List[str]]
    splits: Dict[str, str]
    repeated: List[Tuple[int, int]] = field(default_factory=list)  # (line, the line it repeats)

    def warn_repeats(self, path: Path) -> None:
        if self.repeated:
            shown = ", ".join(f"line {line} = line {first}" for line, first in self.repeated[:5])
            log.warning(
                "%s: %d row(s) repeat an earlier row exactly and were dropped (%s%s); each image is used once",
                path,
                len(self.repeated),
                shown,
                " ..." if len(self.repeated) > 5 else "",
            )


def canonical_labels(labels: Iterable[str]) -> Dict[str, str]:
    """Each label text -> its class name: the text itself (Unicode NFC), or, when every label is a whole number,
    that number written plainly, so `1`, `01` and `+1` are one class."""
    texts = {label: unicodedata.normalize("NFC", label) for label in labels}
    if texts and all(_INTEGER.match(text) for text in texts.values()):
        return {label: str(int(text)) for label, text in texts.items()}
    return texts


_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def read_manifest(path: Path) -> Manifest:
    """A `path,label[,split]` CSV. Paths are relative to the CSV's folder or absolute; classes are the labels
    sorted (as numbers when every label is an integer). A row that repeats an earlier one exactly is dropped (and
    counted); an image given two labels or two splits is an error naming both lines, so no image can land in
    training and validation at once."""
    try:
        return _read_manifest(path)
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}:{_first_undecodable_line(path)} is not UTF-8 text ({error.reason}); save the manifest as UTF-8"
        ) from None
    except csv.Error as error:
        raise DataError(f"{path} is not a CSV file ({error})") from None


def _first_undecodable_line(path: Path) -> int:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0


def _read_manifest(path: Path) -> Manifest:
    rows: Dict[str, Tuple[str, str, int]] = {}  # full path -> (label, split, line)
    repeated: List[Tuple[int, int]] = []
    base = path.resolve().parent
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns = {name.strip().lower(): name for name in reader.fieldnames or []}
        if "path" not in columns or "label" not in columns:
            raise DataError(
                f"{path} is not a manifest: its first line must name the columns `path,label` (found "
                f"{','.join(reader.fieldnames or []) or 'nothing'})"
            )
        for number, row in _numbered_rows(reader):
            image, label = (row.get(columns["path"]) or "").strip(), (row.get(columns["label"]) or "").strip()
            if not image or not label:
                raise DataError(f"{path}:{number}: a row needs a path and a label")
            which = (row.get(columns["split"]) or "").strip().lower() if "split" in columns else ""
            if "split" in columns and which not in ("train", "val"):
                raise DataError(f"{path}:{number}: split must be train or val, not {which!r}")
            full = os.path.normpath(os.path.join(base, image))
            earlier = rows.get(full)
            if earlier is None:
                rows[full] = (label, which, number)
            elif earlier[:2] == (label, which):
                repeated.append((number, earlier[2]))
            else:
                _conflict(path, image, number, (label, which), earlier)
    if not rows:
        raise DataError(f"{path} lists no images")
    return _manifest(path, rows, repeated)


def _numbered_rows(reader) -> Iterator[Tuple[int, Dict]]:
    """(the line a row starts on, the row): a quoted field may span lines."""
    for row in reader:
        yield reader.line_num - _extra_lines(row), row


def _extra_lines(row: Dict) -> int:
    return sum(str(value).count("\n") for value in row.values() if isinstance(value, str))


def _conflict(path: Path, image: str, number: int, given: Tuple[str, str], earlier: Tuple[str, str, int]) -> None:
    what = "label" if given[0] != earlier[0] else "split"
    values = (given[0], earlier[0]) if what == "label" else (given[1], earlier[1])
    raise DataError(
        f"{path}:{number}: {image} has {what} {values[0]!r} here and {values[1]!r} on line {earlier[2]}; "
        f"give each image one {what} (one row per image)"
    )


def _manifest(path: Path, rows: Dict[str, Tuple[str, str, int]], repeated: List[Tuple[int, int]]) -> Manifest:
    names = canonical_labels({label for label, _, _ in rows.values()})
    by_class: Dict[str, List[str]] = {}
    splits: Dict[str, str] = {}
    for full, (label, which, _) in rows.items():
        by_class.setdefault(names[label], []).append(full)
        if which:
            splits[full] = which
    if splits and len(splits) != len(rows):
        raise DataError(f"{path}: give every row a split (train or val), or none")
    numeric = all(_INTEGER.match(name) for name in by_class)
    classes = sorted(by_class, key=(lambda c: (int(c), c)) if numeric else None)
    _warn_case_twins(path, classes)
    return Manifest(classes, {name: sorted(by_class[name]) for name in classes}, splits, repeated)


def _warn_case_twins(path: Path, classes: Sequence[str]) -> None:
    folded: Dict[str, str] = {}
    for name in classes:
        other = folded.setdefault(name.casefold(), name)
        if other != name:
            log.warning("%s: labels %r and %r differ only in case; they are two classes", path, other, name)

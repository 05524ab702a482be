"""Byte-identical copies of one picture on both sides of the split (`photo.jpg` and `photo (1).jpg` in one class
folder, a picture saved into two classes, one file listed under two names in a manifest). Split apart, the copy in
validation is scored on a picture the model trained on: its top-1 measures memory, not generalisation.

Found by content, cheaply: every file's size (one `stat` each), then, for sizes found on both sides only, the first
4 KiB, then the whole file where those agree. A split ddptrain makes moves each validation copy to training (it
trains on that picture anyway); a split the data gives (train/ and val/, a split column) is the user's, so its copies
are said with the fix. Above MAX_IMAGES images, for data that is not local files, or where more than
MAX_COMPARED_BYTES of whole files would have to be read (scans whose first 4 KiB are all black), nothing is
checked, and the last is said."""

from __future__ import annotations

import hashlib
import os
import stat
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..util import one_line
from .index import SampleIndex

MAX_IMAGES = 200_000  # a stat per image: seconds on a local disk; more on a network file system
MAX_COMPARED_BYTES = 1 << 30  # whole files read where sizes and first 4 KiB agree (uncompressed scans can)
PREFIX = 4096
CHUNK = 1 << 20


Group = Tuple[List[int], List[int]]  # (training rows, validation rows) that may hold one content


def copies_across(train: SampleIndex, val: SampleIndex, budget: Optional[int] = None) -> Optional[Dict[int, int]]:
    """Each validation sample that is a byte-identical copy of a training sample -> that training sample; None when
    telling them apart would read more than `budget` bytes of whole files (default MAX_COMPARED_BYTES)."""
    parts = (train, val)
    sizes: Dict[Tuple[int, int], int] = {}

    def size(side: int, row: int) -> Optional[int]:
        try:
            info = os.stat(parts[side].path(row))
        except OSError:
            return None  # not readable now: the loader skips and counts it
        if not stat.S_ISREG(info.st_mode):
            return None  # a FIFO, device or folder named like a picture: the loader skips and counts it
        sizes[side, row] = info.st_size
        return info.st_size

    groups = _narrowed([(list(range(len(train))), list(range(len(val))))], size)
    groups = _narrowed(groups, lambda side, row: _read(parts[side].path(row), PREFIX))
    if sum(sizes[0, rows[0]] * (len(rows) + len(others)) for rows, others in groups) > (budget or MAX_COMPARED_BYTES):
        return None
    groups = _narrowed(groups, lambda side, row: _digest(parts[side].path(row)))
    return {row: rows[0] for rows, others in groups for row in others}


def _narrowed(groups: List[Group], key: Callable[[int, int], Any]) -> List[Group]:
    """Each group split by `key(side, row)`, keeping the parts with rows on both sides (None: the row is dropped)."""
    narrowed: List[Group] = []
    for group in groups:
        by_key: Dict[Any, Group] = defaultdict(lambda: ([], []))
        for side in (0, 1):
            for row in group[side]:
                value = key(side, row)
                if value is not None:
                    by_key[value][side].append(row)
        narrowed.extend(part for part in by_key.values() if part[0] and part[1])
    return narrowed


def _read(path: str, count: int) -> Optional[bytes]:
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        return os.read(fd, count)
    except OSError:
        return None
    finally:
        os.close(fd)


def _digest(path: str) -> Optional[bytes]:
    fd = _open_regular(path)
    if fd is None:
        return None
    digest = hashlib.blake2b(digest_size=16)
    try:
        for chunk in iter(lambda: os.read(fd, CHUNK), b""):
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest.digest()


def _open_regular(path: str) -> Optional[int]:
    """A descriptor of `path` when it is a regular file; a FIFO named like a picture is never waited on (opened
    without blocking, its kind checked on the descriptor); None otherwise. The loader skips and counts the rest."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def checkable(train: Any, val: Any) -> bool:
    """Local files of one label each, few enough to stat."""
    parts = [part for part in (train, val) if isinstance(part, SampleIndex) and len(part)]
    if len(parts) < 2 or len(train) + len(val) > MAX_IMAGES:
        return False
    return not any("://" in part.relative(0) or part.targets is not None for part in parts)


def moved_to_training(train: SampleIndex, val: SampleIndex, copies: Dict[int, int]) -> Tuple[SampleIndex, SampleIndex]:
    """(training with the validation copies added at its end, validation without them)."""
    moved = [val[row] for row in sorted(copies)]
    kept = [val[row] for row in range(len(val)) if row not in copies]
    return _reindexed(train, list(train) + moved), _reindexed(val, kept)


def _reindexed(like: SampleIndex, samples: Sequence[Tuple[str, int]]) -> SampleIndex:
    index = SampleIndex.from_pairs(like.root, samples)
    index.source, index.hint = like.source, like.hint
    return index


def described(val: SampleIndex, train: SampleIndex, copies: Dict[int, int], shown: int = 3) -> str:
    """The first pairs (`val name = training name`), and how many copies sit under another class than their copy."""
    pairs = [
        f"{one_line(val.relative(row))} = {one_line(train.relative(copies[row]))}" for row in sorted(copies)[:shown]
    ]
    text = ", ".join(pairs) + (", ..." if len(copies) > shown else "")
    relabelled = sum(int(val.labels[row] != train.labels[copies[row]]) for row in copies)
    return text + (f"; {relabelled} of them under another class than their copy" if relabelled else "")

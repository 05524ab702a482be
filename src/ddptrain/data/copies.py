"""Byte-identical copies of one picture on both sides of the split (`photo.jpg` and `photo (1).jpg` in one class
folder, a picture saved into two classes, one file listed under two names in a manifest). Split apart, the copy in
validation is scored on a picture the model trained on: its top-1 measures memory, not generalisation.

Found by content, cheaply: every file's size (one `stat` each), then, for sizes found on both sides only, the first
4 KiB, then the whole file where those agree. A split ddptrain makes moves each validation copy to training (it
trains on that picture anyway); a split the data gives (train/ and val/, a split column) is the user's, so its copies
are said with the fix. Above MAX_IMAGES images, or for data that is not local files, nothing is checked."""

from __future__ import annotations

import hashlib
import logging
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from ..util import one_line
from .index import SampleIndex
from .split import Split

log = logging.getLogger("ddptrain")

MAX_IMAGES = 200_000  # a stat per image: seconds on a local disk; more on a network file system
PREFIX = 4096
CHUNK = 1 << 20


def copies_across(train: SampleIndex, val: SampleIndex) -> Dict[int, int]:
    """Each validation sample that is a byte-identical copy of a training sample -> that training sample."""
    train_sizes, val_sizes = _sizes(train), _sizes(val)
    shared = set(train_sizes) & set(val_sizes)
    if not shared:
        return {}
    found: Dict[int, int] = {}
    for size in sorted(shared):
        first: Dict[Tuple[bytes, bytes], int] = {}
        for row in train_sizes[size]:
            key = _content_key(train.path(row))
            if key is not None:
                first.setdefault(key, row)
        for row in val_sizes[size]:
            key = _content_key(val.path(row))
            if key is not None and key in first:
                found[row] = first[key]
    return found


def _sizes(samples: SampleIndex) -> Dict[int, List[int]]:
    by_size: Dict[int, List[int]] = defaultdict(list)
    for row in range(len(samples)):
        try:
            by_size[os.stat(samples.path(row)).st_size].append(row)
        except OSError:
            continue  # not readable now: the loader skips and counts it
    return by_size


def _content_key(path: str) -> Optional[Tuple[bytes, bytes]]:
    """(first 4 KiB, digest of the whole file); None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(PREFIX)
            digest = hashlib.blake2b(head, digest_size=16)
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                digest.update(chunk)
    except OSError:
        return None
    return head, digest.digest()


def checkable(split: Split) -> bool:
    """Local files of one label each, few enough to stat."""
    parts = [part for part in (split.train, split.val) if isinstance(part, SampleIndex) and len(part)]
    if len(parts) < 2 or len(split.train) + len(split.val) > MAX_IMAGES:
        return False
    return not any("://" in part.relative(0) or part.targets is not None for part in parts)


def without_copies(split: Split) -> Split:
    """`split` with its validation copies of training pictures moved to training (said), or said with the fix
    where the data gives the split."""
    if not checkable(split):
        return split
    train, val = split.train, split.val
    assert isinstance(train, SampleIndex) and isinstance(val, SampleIndex)
    copies = copies_across(train, val)
    if not copies:
        return split
    examples = _examples(val, train, copies)
    relabelled = sum(int(val.labels[row] != train.labels[copies[row]]) for row in copies)
    if relabelled:
        examples += f"; {relabelled} of them under another class than their copy"
    if split.by_data:
        log.warning(
            "%s: %d validation images are byte-identical copies of training images (%s): their scores measure "
            "memory, not generalisation; remove the copies from the validation part",
            split.source or split.root,
            len(copies),
            examples,
        )
        return split
    moved = [val[row] for row in sorted(copies)]
    kept = [val[row] for row in range(len(val)) if row not in copies]
    split.train = _reindexed(train, list(train) + moved)
    split.val = _reindexed(val, kept)
    log.warning(
        "%s: %d validation images were byte-identical copies of training images (%s); they were moved to training, "
        "so validation holds %d images",
        split.source or split.root,
        len(copies),
        examples,
        len(kept),
    )
    return split


def _reindexed(like: SampleIndex, samples: Sequence[Tuple[str, int]]) -> SampleIndex:
    index = SampleIndex.from_pairs(like.root, samples)
    index.source, index.hint = like.source, like.hint
    return index


def _examples(val: SampleIndex, train: SampleIndex, copies: Dict[int, int], shown: int = 3) -> str:
    pairs = [
        f"{one_line(val.relative(row))} = {one_line(train.relative(copies[row]))}" for row in sorted(copies)[:shown]
    ]
    return ", ".join(pairs) + (", ..." if len(copies) > shown else "")

"""WebDataset tar shards written by other tools as a source of data (`--data` a folder of `.tar` files without a
`shards.json`, one `.tar`, a brace pattern `train-{000000..000099}.tar`, local or http(s)://, or any of these after
`wds:`). ddptrain indexes each shard on first use (data/tarindex.py) and then reads samples by index like its own
shards: the same samplers, seeds, mid-epoch resume and exact evaluation.

The split: shards whose names say `train` and `val`/`validation` are the set's own split; otherwise every sample is
split by --val-split and --seed (stratified, as a folder is) — a pure function of the index, so it is computed
again on resume and evaluation rather than read back (the checkpoint's split digest still guards it). Labels
(`--label-key`) are class names; labels that are all integers are numbered as such (`1`, `01` are one class).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import DataError
from ...util import counted, redact
from ..index import SampleIndex
from ..remote import ShardCache, cache_size, default_cache
from ..shards import INDEX, ShardSamples
from ..split import Split, stratified_split
from ..tarindex import LabelKey, ShardIndex, build, cached_remote, index_cache, index_local
from .manifest import canonical_labels, numeric_order
from .reading import Reading

log = logging.getLogger("ddptrain")
PREFIX = "wds:"
HINT = "a shard of the tar set changed since ddptrain indexed it, or is damaged: check it"
_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")


class TarSetSource:
    keyed_labels = "member"  # --label-key names the member (or JSON path) its labels are read from
    name = "tar set"

    def recognises(self, location: str) -> bool:
        if location.startswith(PREFIX):
            return True  # wds:PATH, wds:s3://bucket/prefix/ (every .tar under it)
        if location.lower().endswith(".tar") or ("{" in location and ".tar" in location.lower()):
            return True
        if "://" in location:
            return False
        folder = Path(location)
        return folder.is_dir() and not (folder / INDEX).is_file() and any(folder.glob("*.tar"))

    def check(self, location: str, reading: Reading) -> None:
        """The shards exist, and — local ones — are indexed now (cached for the processes), so a wrong --label-key
        or a set without two classes is one line before any process starts."""
        LabelKey(reading.label_key)
        shards = shard_locations(location)
        for _, where in shards:
            if "://" not in where and not Path(where).is_file():
                raise DataError(f"--data {location}: shard {where} does not exist")
        if reading.known and all("://" not in where for _, where in shards):
            classes = IndexedSet.read(location, reading).classes()
            if len(classes) < 2:
                raise DataError(f"--data {location} has one label ({classes[0]}); a classifier needs at least two")

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        indexed = IndexedSet.read(location, reading)
        classes = indexed.classes()
        given = given_split([name for name, _ in indexed.shards])
        if given is not None:
            rows = [np.flatnonzero(np.isin(indexed.shard, given[part])) for part in ("train", "val")]
            parts = [indexed.samples(part, classes) for part in rows]
            made: Dict = {}
        else:
            train, val = _stratified(indexed, classes, val_split, seed)
            parts = [indexed.samples(rows, classes) for rows in (train, val)]
            made = {"seed": seed, "val_split": val_split}
        parts[0].prefetch_shards = reading.prefetch_shards
        source = f"WebDataset tar set {redact(location)}"
        by_data = not made  # the set's own train/val parts
        return Split(
            classes,
            parts[0],
            parts[1],
            "tar set",
            location,
            made,
            source=source,
            hint=HINT,
            fixed=True,
            by_data=by_data,
        )

    def all_images(self, location: str, classes: Sequence[str], reading: Reading):
        indexed = IndexedSet.read(location, reading)
        unknown = sorted(set(indexed.classes()) - set(classes))
        if unknown:
            raise DataError(f"{location} has labels the model does not know: {', '.join(unknown)}")
        return indexed.samples(np.arange(len(indexed.labels)), list(classes))


def shard_locations(location: str) -> List[Tuple[str, str]]:
    """(name, where) of each shard, in order: `name` is what sample names start with (unique in the set)."""
    text = location[len(PREFIX) :] if location.startswith(PREFIX) else location
    if "://" not in text and Path(text).is_dir():
        folder = Path(text)
        found = sorted(p.name for p in folder.glob("*.tar") if p.is_file())
        if not found:
            raise DataError(f"--data {location}: the folder holds no .tar shards")
        return [(name, str(folder / name)) for name in found]
    if text.startswith("s3://") and text.endswith("/"):
        from ..s3 import list_keys

        found = list_keys(text, ".tar", 60.0)
        if not found:
            raise DataError(f"--data {location}: no .tar objects under the prefix")
        return [(url[len(text) :], url) for url in found]
    expanded = expand_braces(text)
    prefix = _common_folder(expanded)
    return [(where[len(prefix) :], where) for where in expanded]


def expand_braces(pattern: str) -> List[str]:
    """`a-{000..002}.tar` -> a-000.tar, a-001.tar, a-002.tar (zero-padded as written); `{a,b}` lists alternatives."""
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    end = pattern.find("}", start)
    if end < 0:
        raise DataError(f"--data {pattern}: a '{{' without its '}}'")
    inside, head, tail = pattern[start + 1 : end], pattern[:start], pattern[end + 1 :]
    numbers = _RANGE.fullmatch(pattern[start : end + 1])
    if numbers:
        low, high = int(numbers.group(1)), int(numbers.group(2))
        if high < low or high - low > 10_000_000:
            raise DataError(f"--data {pattern}: the range {{{inside}}} is empty or too large")
        width = len(numbers.group(1))
        choices = [f"{n:0{width}d}" for n in range(low, high + 1)]
    elif "," in inside:
        choices = inside.split(",")
    else:
        raise DataError(f"--data {pattern}: {{{inside}}} is neither a range {{000..099}} nor a list {{a,b}}")
    return [head + choice + rest for choice in choices for rest in expand_braces(tail)]


def _common_folder(paths: List[str]) -> str:
    first = paths[0]
    cut = first.rfind("/") + 1
    while cut and not all(p.startswith(first[:cut]) for p in paths):
        cut = first.rfind("/", 0, cut - 1) + 1
    return first[:cut]


def given_split(names: List[str]) -> Dict[str, List[int]] | None:
    """Shard positions by part when every shard's name says `train` or `val`/`validation` and both occur."""
    parts: Dict[str, List[int]] = {"train": [], "val": []}
    for position, name in enumerate(names):
        words = set(re.split(r"[^a-z]+", name.lower()))
        says = [
            part for part, marks in (("train", {"train"}), ("val", {"val", "valid", "validation"})) if words & marks
        ]
        if len(says) != 1:
            return None
        parts[says[0]].append(position)
    return parts if parts["train"] and parts["val"] else None


class IndexedSet:
    """Every shard's index, joined: per sample its shard, image offset and size, name and label text."""

    def __init__(
        self, location: str, shards: List[Tuple[str, str]], indexes: List[ShardIndex], cache, label_key: str = "cls"
    ):
        self.location, self.shards, self.cache = location, shards, cache
        self.entries = [
            {"url": where, "nsamples": len(ix.keys), "filesize": ix.filesize, "sha1": ix.sha1}
            for (_, where), ix in zip(shards, indexes)
        ]
        self.shard = np.concatenate([np.full(len(ix.keys), i, dtype=np.int32) for i, ix in enumerate(indexes)])
        self.offset = np.asarray([o for ix in indexes for o in ix.offsets], dtype=np.int64)
        self.size = np.asarray([s for ix in indexes for s in ix.sizes], dtype=np.int64)
        self.names = [f"{name}/{key}" for (name, _), ix in zip(shards, indexes) for key in ix.keys]
        self.labels = [label for ix in indexes for label in ix.labels]
        if not self.names:
            held = sorted({e for ix in indexes for e in ix.extensions})
            folders = _folder_tree(indexes, held)
            if folders is not None:
                raise DataError(
                    f"--data {location}: a tar of image folders (e.g. {folders}), not a tar set (where each image "
                    "has its label beside it: KEY.jpg and KEY.cls); unpack it (tar xf ARCHIVE) and give the folder, "
                    "or make a shard set of that folder with ddptrain shard"
                )
            raise DataError(
                f"--data {location}: no sample of the tar set has an image and a label (--label-key "
                f"{label_key}); its samples hold: {', '.join(held) or 'nothing'}; give --label-key one of those "
                "(cls, txt, another extension) or json:PATH into the json member"
            )
        _warn_skipped(location, shards, indexes)

    @classmethod
    def read(cls, location: str, reading: Reading) -> IndexedSet:
        label = LabelKey(reading.label_key)
        shards = shard_locations(location)
        remote = any("://" in where for _, where in shards)
        cache = ShardCache(default_cache(location), cache_size(), reading.fetch_timeout_s) if remote else None
        if len(shards) > 1:
            log.info("indexing %d tar shards of %s (once: the index is cached)", len(shards), redact(location))
        indexes = [_index(where, label, cache) for _, where in shards]
        return cls(location, shards, indexes, cache, reading.label_key)

    def classes(self) -> List[str]:
        names = canonical_labels(set(self.labels))
        self.canonical = [names[label] for label in self.labels]
        return numeric_order(set(names.values()))

    def samples(self, rows, classes: Sequence[str]) -> ShardSamples:
        """The samples at `rows` (sorted: each shard's samples stay together, in shard order) as a part."""
        rows = np.sort(np.asarray(rows, dtype=np.int64))
        label_of = {name: i for i, name in enumerate(classes)}
        used, remap = np.unique(self.shard[rows], return_inverse=True)
        counts = np.bincount(remap, minlength=len(used))
        entries = [{**self.entries[s], "nsamples": int(n)} for s, n in zip(used.tolist(), counts.tolist())]
        pairs = ((self.names[r], label_of[self.canonical[r]]) for r in rows.tolist())
        names = SampleIndex.from_pairs("", pairs)
        arrays = {
            "shard": remap.astype(np.int32),
            "offset": self.offset[rows],
            "size": self.size[rows],
            "label": names.labels,
            "name_blob": names.blob,
            "name_offsets": names.offsets,
        }
        part = ShardSamples("", entries, arrays, self.cache)
        part.root, part.source, part.hint = self.location, f"WebDataset tar set {redact(self.location)}", HINT
        part.changed = (
            f"the shard changed on the server after ddptrain indexed it: delete the index cache {index_cache()} "
            "and start again (--resume auto) to index the set anew"
        )
        return part


def _index(where: str, label: LabelKey, cache) -> ShardIndex:
    if "://" not in where:
        return index_local(Path(where), label)

    def download_and_index() -> ShardIndex:
        path = cache.fetch_unknown(where)
        try:
            index = build(path, label, where)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        cache.admit(path, where, index.sha1)
        return index

    return cached_remote(where, label, download_and_index)


def _stratified(indexed: IndexedSet, classes: List[str], val_split: float, seed: int):
    by_class: Dict[str, List[str]] = {name: [] for name in classes}
    row_of = {}
    for row, (name, label) in enumerate(zip(indexed.names, indexed.canonical)):
        by_class[label].append(name)
        row_of[name] = row
    train, val = stratified_split(by_class, classes, val_split, seed, Path(""))
    return [[row_of[part.relative(i)] for i in range(len(part))] for part in (train, val)]


def _folder_tree(indexes: List[ShardIndex], held: List[str]) -> Optional[str]:
    """One of its images, when a tar holds a tree of image folders (what `tar cf` of a class-folder dataset makes):
    every sample left out is in a folder and no member could be a label. None otherwise."""
    keys = [key for ix in indexes for left in ix.skipped.values() for key in left]
    if not keys or not all("/" in key for key in keys) or {"cls", "txt", "json"} & set(held):
        return None
    return keys[0]


def _warn_skipped(location: str, shards, indexes: List[ShardIndex]) -> None:
    counts: Dict[str, List[str]] = {}
    for (name, _), ix in zip(shards, indexes):
        for reason, keys in ix.skipped.items():
            counts.setdefault(reason, []).extend(f"{name}/{key}" for key in keys)
    for reason, keys in sorted(counts.items()):
        shown = ", ".join(keys[:3]) + (" ..." if len(keys) > 3 else "")
        log.warning("%s: %s left out: %s (%s)", redact(location), counted(len(keys), "sample"), reason, shown)

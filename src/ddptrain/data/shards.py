"""Datasets as WebDataset-format tar shards, on a local path or an HTTP(S) server.

`write_shards` turns a split (folder or manifest) into `train-NNNNNN.tar` and `val-NNNNNN.tar` files — each
sample a `KEY.<ext>` image (the original file's bytes) and a `KEY.cls` label, the layout every WebDataset
reader understands — plus `shards.json` (classes, shard list) and `shards-index.npz`: where each sample's
image starts and how long it is, found by re-reading each finished shard with Python's `tarfile`.

Training reads a sample by index from those offsets, so samplers, augmentation seeds, mid-epoch resume and
exact evaluation work as on a folder. A remote shard is downloaded whole, once per node (a file lock), into
a small cache; reads are then local. `_info.json` lets timm's WebDataset reader use the same shards. The training sampler gives each rank a run of whole shards
(see ddptrain.data.samplers.lane_order), so a node downloads about its share of the data per epoch.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import tarfile
from array import array
from functools import partial
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import DataError
from ..util import redact
from ..version import __version__
from .images import ImageLimits, check_size
from .index import SampleIndex
from .presize import Presize
from .reencode import Reencode, reencoded
from .remote import (
    DEFAULT_DEADLINE_S,
    Expected,
    Mismatch,
    ShardCache,
    cache_size,
    default_cache,
    fetch,
    read_capped,
    safe_names,
)
from .restarts import RESTART_MCUS

INDEX = "shards.json"
ARRAYS = "shards-index.npz"
TIMM_INFO = "_info.json"
FORMAT = "ddptrain-shards"
VERSION = 2  # 2: shards.json records the seed, --val-split and the offsets file's size and SHA-1
INDEX_MAX_BYTES = 64 * 2**20  # shards.json: a million shards fit in far less
ARRAYS_MAX_BYTES = 16 * 2**30  # the offsets of a shard set whose shards.json does not give their size (version 1)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'1GB', '500MB', '64k', '1000' (bytes) as a number of bytes (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 1GB, 500MB, 64KB)")
    unit = (match.group(2) or "b").lower()[:1]
    scale = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[unit]
    return int(float(match.group(1)) * scale)


def is_remote(location: str) -> bool:
    return location.startswith(("http://", "https://", "s3://"))


def is_shard_set(location: str) -> bool:
    """--data names a shard set: a URL, or a folder holding shards.json."""
    return is_remote(location) or (Path(location) / INDEX).is_file()


# ---- writing ---------------------------------------------------------------------------------------------


def write_shards(
    split,
    out: Path,
    shard_bytes: int,
    seed: int,
    progress=None,
    val_split: Optional[float] = None,
    presize: Optional[Presize] = None,
    restart_markers: bool = False,
    jobs: int = 1,
) -> Dict:
    """Write `split` (a ddptrain.data.folder.Split) as shards under `out`; the index files last, so a set
    without them is an interrupted one. Samples are shuffled (by `seed`) across shards: each shard mixes
    classes. `presize` re-encodes images larger than its side, `restart_markers` rewrites JPEGs losslessly with
    restart markers (restarts.py); both are recorded in the index, and done on `jobs` processes (reencode.py).
    Returns the index's summary."""
    out.mkdir(parents=True, exist_ok=True)
    index: Dict = {
        "format": FORMAT,
        "version": VERSION,
        "classes": list(split.classes),
        "source": str(split.root),
        "seed": seed,
        "val_split": val_split,
        "layout": split.layout,
        **({"presized": presize.record()} if presize else {}),
        **({"restart_markers": {"most_mcus": RESTART_MCUS}} if restart_markers else {}),
    }
    arrays: Dict[str, np.ndarray] = {}
    resized = marked = 0
    contents: Dict[str, Tuple[List[int], array]] = {}  # part -> (samples in writing order, their contents' digests)
    for part, samples in (("train", split.train), ("val", split.val)):
        order = list(range(len(samples)))
        random.Random(f"{seed}:{part}").shuffle(order)
        shards, columns, counts, digests = _write_part(
            samples, order, out, part, shard_bytes, progress, Reencode(presize, restart_markers), jobs
        )
        contents[part] = (order, digests)
        resized += counts[0]
        marked += counts[1]
        index[part] = {"shardlist": shards, "nsamples": len(order)}
        for name, values in columns.items():
            arrays[f"{part}_{name}"] = values
    # Readers of the WebDataset ecosystem (wids) look for a top-level shard list: the training shards.
    index["wids_version"] = 1
    index["shardlist"] = index["train"]["shardlist"]
    tmp = out / (ARRAYS + ".tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, out / ARRAYS)
    index["arrays"] = {"url": ARRAYS, "filesize": (out / ARRAYS).stat().st_size, "sha1": _sha1(out / ARRAYS)}
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    (out / TIMM_INFO).write_text(json.dumps(_timm_info(index, split.root), indent=1) + "\n")
    summary: Dict = {
        part: {"shards": len(index[part]["shardlist"]), "samples": index[part]["nsamples"]} for part in ("train", "val")
    }
    copies = copies_across_parts(contents, split)
    return {**summary, "resized": resized, "restart_marked": marked, "val_copies_of_train": copies}


def copies_across_parts(contents: Dict[str, Tuple[List[int], array]], split) -> List[Tuple[str, str]]:
    """(validation image, training image) for each validation image whose bytes a training image holds too (a file
    copied into both parts under another name): validation would score it as unseen. Digests of 8 bytes, compared
    as sorted arrays: 10 MB for ImageNet's 1.3 M images."""
    (train_order, train_digests), (val_order, val_digests) = contents["train"], contents["val"]
    trained, checked = np.frombuffer(train_digests, np.uint64), np.frombuffer(val_digests, np.uint64)
    if not len(trained) or not len(checked):
        return []
    by_digest = np.argsort(trained, kind="stable")
    ordered = trained[by_digest]
    at = np.searchsorted(ordered, checked).clip(max=len(ordered) - 1)
    found = np.flatnonzero(ordered[at] == checked).tolist()
    return [(split.val.relative(val_order[i]), split.train.relative(train_order[by_digest[at[i]]])) for i in found]


def _timm_info(index: Dict, root) -> Dict:
    """The split description timm's WebDataset reader looks for (`_info.json`): `timm.data.create_dataset(
    "wds/NAME", root=SHARDS, split="train")` and timm's train.py (`--dataset wds/NAME --data-dir SHARDS`) read the
    shards too."""
    splits = {}
    for part in ("train", "val"):
        shards = index[part]["shardlist"]
        splits[part] = {
            "name": part,
            "num_samples": index[part]["nsamples"],
            "filenames": [s["url"] for s in shards],
            "shard_lengths": [s["nsamples"] for s in shards],
        }
    return {"name": Path(str(root)).name, "splits": splits}


def _write_part(
    samples,
    order: Sequence[int],
    out: Path,
    part: str,
    shard_bytes: int,
    progress,
    reencode: Reencode,
    jobs: int,
):
    shards: List[Dict] = []
    names: List[Tuple[str, int]] = []
    shard_ids: List[int] = []
    offsets: List[int] = []
    sizes: List[int] = []
    tar: Optional[tarfile.TarFile] = None
    written = resized = marked = 0
    digests = array("Q")  # each sample's content, 8 bytes (see copies_across_parts)
    read = partial(_read_sample, samples)  # a file, or a sample of another set of shards
    for position, (i, (given, (data, smaller, rewritten))) in enumerate(
        zip(order, reencoded(read, order, reencode, jobs))
    ):
        digests.append(int.from_bytes(hashlib.blake2b(given, digest_size=8).digest(), "little"))
        resized += smaller
        marked += rewritten
        if tar is None or (written and written + len(data) > shard_bytes):
            if tar is not None:
                tar.close()
                _index_shard(out, shards[-1], offsets, sizes)
            shards.append({"url": f"{part}-{len(shards):06d}.tar", "nsamples": 0})
            tar = tarfile.open(out / shards[-1]["url"], "w", format=tarfile.USTAR_FORMAT)  # noqa: SIM115 (closed per shard)
            written = 0
        key = f"{position:09d}"
        ext = "jpg" if smaller else os.path.splitext(samples.relative(i))[1].lower().lstrip(".") or "jpg"
        # WebDataset's names for the extensions: its readers decode by them
        ext = {"jpeg": "jpg", "jfif": "jpg", "jpe": "jpg", "tiff": "tif"}.get(ext, ext)
        label = int(samples.labels[i])
        _add(tar, f"{key}.{ext}", data)
        _add(tar, f"{key}.cls", str(label).encode())
        written += len(data) + 2048
        shards[-1]["nsamples"] += 1
        shard_ids.append(len(shards) - 1)
        names.append((samples.relative(i), label))
        if progress is not None:
            progress.update(1)
    if tar is not None:
        tar.close()
        _index_shard(out, shards[-1], offsets, sizes)
    keys = SampleIndex.from_pairs("", names)
    columns = {
        "shard": np.asarray(shard_ids, dtype=np.int32),
        "offset": np.asarray(offsets, dtype=np.int64),
        "size": np.asarray(sizes, dtype=np.int64),
        "label": keys.labels,
        "name_blob": keys.blob,
        "name_offsets": keys.offsets,
    }
    return shards, columns, (resized, marked), digests


def _read_sample(samples, index: int) -> bytes:
    return samples.read(index, ImageLimits())


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, 0
    tar.addfile(info, fileobj=io.BytesIO(data))


def _index_shard(out: Path, shard: Dict, offsets: List[int], sizes: List[int]) -> None:
    """Where each image of a finished shard lies, read back with `tarfile` (in the order written)."""
    path = out / shard["url"]
    with tarfile.open(path, "r") as tar:
        for member in tar:
            if not member.name.endswith(".cls"):
                offsets.append(member.offset_data)
                sizes.append(member.size)
    shard["filesize"] = path.stat().st_size
    shard["sha1"] = _sha1(path)


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def join(location: str, name: str) -> str:
    """`name` inside the set at `location`; a name that is a URL or an absolute path (a tar set's shards) as it is."""
    if "://" in name or name.startswith("/"):
        return name
    return f"{location.rstrip('/')}/{name}" if is_remote(location) else str(Path(location) / name)


# ---- reading ---------------------------------------------------------------------------------------------


class ShardSamples:
    """One part (train or val) of a shard set, read by sample index. Picklable without open files: each
    DataLoader worker opens the shards it reads."""

    MAX_OPEN = 8

    def __init__(self, location: str, shards: List[Dict], arrays: Dict[str, np.ndarray], cache: Optional[ShardCache]):
        self.location, self.shards, self.cache = location, shards, cache
        self.shard, self.offset, self.size = arrays["shard"], arrays["offset"], arrays["size"]
        self.labels = arrays["label"]
        self.names = SampleIndex(location, arrays["name_blob"], arrays["name_offsets"], self.labels)
        self.root = location
        self.source = f"shard set {redact(location)}"
        self.hint = "the shard set is damaged: re-make it with `ddptrain shard`"
        self.prefetch_shards = 0  # fetched ahead by a training sampler when remote (set by its source)
        self.changed = ""  # what to do when a remote shard is not the one the index lists (said after the error)
        self._open: Dict[int, int] = {}

    def __getstate__(self):
        return {**self.__dict__, "_open": {}}

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def shard_sizes(self) -> List[int]:
        return [int(s["nsamples"]) for s in self.shards]

    def relative(self, index: int) -> str:
        """The sample's path in the folder the shards were made from."""
        return self.names.relative(index)

    def name(self, index: int) -> str:
        return f"{self.shards[self.shard[index]]['url']}:{self.relative(index)}"

    def __getitem__(self, index: int) -> Tuple[str, int]:
        return self.name(index), int(self.labels[index])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def read(self, index: int, limits: ImageLimits) -> bytes:
        size = int(self.size[index])
        check_size(size, limits)
        data = os.pread(self._fd(int(self.shard[index])), size, int(self.offset[index]))
        if len(data) != size:
            raise DataError(f"shard {self.shards[self.shard[index]]['url']} is shorter than its index says; re-make it")
        return data

    @property
    def remote(self) -> bool:
        """Whether its shards are downloaded into a cache (worth fetching ahead: data/prefetch.py)."""
        return self.cache is not None

    def fetch_shard(self, shard: int) -> None:
        """Shard `shard` into the node's cache, if it is remote and not there yet (a prefetch)."""
        if self.cache is not None:
            entry = self.shards[shard]
            self.cache.local(join(self.location, entry["url"]), int(entry["filesize"]), entry["sha1"])

    def _fd(self, shard: int) -> int:
        fd = self._open.get(shard)
        if fd is None:
            fd = self._open_shard(shard)
            if len(self._open) >= self.MAX_OPEN:
                os.close(self._open.pop(next(iter(self._open))))
            self._open[shard] = fd
        return fd

    def _open_shard(self, shard: int) -> int:
        entry = self.shards[shard]
        url = join(self.location, entry["url"])
        if self.cache is None:
            return _open_local(url, int(entry["filesize"]))
        for _ in range(2):  # another process on the node may evict it between the download and the open
            try:
                return os.open(self.cache.local(url, int(entry["filesize"]), entry["sha1"]), os.O_RDONLY)
            except FileNotFoundError:
                continue
            except Mismatch as error:
                if not self.changed:
                    raise
                raise DataError(f"{error.args[0].split('; ')[0]}; {self.changed}") from None
        raise DataError(
            f"shard {redact(url)} keeps leaving the cache {self.cache.folder}; raise DDPTRAIN_SHARD_CACHE_SHARDS"
        )

    def digest(self) -> str:
        """Of the names of the files the shards were made from, and the labels: as the folder's own digest."""
        return self.names.digest()

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.shard, self.offset, self.size, self.labels)) + self.names.nbytes)


def _open_local(path: str, size: int) -> int:
    """A local shard, refused when it is missing or not the size its index records (re-made or cut short since)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise DataError(f"shard {path} is missing; the shard set is incomplete — re-make it") from None
    found = os.fstat(fd).st_size
    if found != size:
        os.close(fd)
        raise DataError(
            f"shard {path} is {found} bytes where its index ({INDEX}) says {size}: it was changed or cut short after "
            "`ddptrain shard` wrote the set; re-make the shard set"
        )
    return fd


def read_index(location: str, deadline_s: float = DEFAULT_DEADLINE_S) -> Tuple[Dict, Dict[str, np.ndarray]]:
    """shards.json and the offsets of a shard set at a folder or URL prefix, read within size caps and checked:
    every shard name stays inside the set, every sample lies inside its shard, every label names a class."""
    where = redact(join(location, INDEX))
    if is_remote(location):
        meta = fetch(join(location, INDEX), Expected(INDEX_MAX_BYTES, what="shard index"), deadline_s)
    else:
        folder = Path(location)
        if not (folder / INDEX).is_file():
            raise DataError(f"{folder} has no {INDEX}: not a shard set (make one with `ddptrain shard`)")
        meta = read_capped(folder / INDEX, INDEX_MAX_BYTES, "shard index")
    index = _parse_index(meta, where)
    record = index.get("arrays") or {}
    expected = Expected(
        record.get("filesize", ARRAYS_MAX_BYTES), record.get("filesize"), record.get("sha1"), "shard offsets"
    )
    if is_remote(location):
        raw = fetch(join(location, ARRAYS), expected, deadline_s)
    else:
        raw = read_capped(Path(location) / ARRAYS, expected.limit, "shard offsets")
        if expected.sha1 is not None and hashlib.sha1(raw).hexdigest() != expected.sha1:
            raise DataError(f"{Path(location) / ARRAYS} is not the offsets file its {INDEX} lists; re-make the set")
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
    except (ValueError, OSError, EOFError) as error:
        raise DataError(
            f"{redact(join(location, ARRAYS))} is not a shard offsets file ({error}); re-make the set"
        ) from None
    _check_arrays(index, arrays, where)
    return index, arrays


def _parse_index(meta: bytes, where: str) -> Dict:
    try:
        index = json.loads(meta)
    except ValueError:
        raise DataError(f"{where} is not JSON: not a ddptrain shard index (make one with `ddptrain shard`)") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise DataError(f"{where} is not a ddptrain shard index (make one with `ddptrain shard`)")
    version = index.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _damaged(where, "its version is missing or not a whole number")
    if version > VERSION:
        raise DataError(
            f"{where} is a shard index of format {version}; this ddptrain ({__version__}) reads formats up to "
            f"{VERSION}: use the newer ddptrain that wrote it"
        )
    classes = index.get("classes")
    if not isinstance(classes, list) or len(classes) < 1 or not all(isinstance(c, str) for c in classes):
        raise _damaged(where, "its class list is missing or not a list of names")
    if len(set(classes)) != len(classes):
        raise _damaged(where, "its class list names a class twice")
    for part in ("train", "val"):
        entry = index.get(part)
        shards = entry.get("shardlist") if isinstance(entry, dict) else None
        if not isinstance(shards, list) or not all(_is_shard_entry(entry) for entry in shards):
            raise _damaged(
                where, f"its {part} shard list is missing or has an entry without url/nsamples/filesize/sha1"
            )
        outside = safe_names([entry["url"] for entry in shards])
        if outside is not None:
            raise _damaged(where, f"shard name {outside!r} points outside the shard set")
    record = index.get("arrays")
    if record is not None and not (isinstance(record, dict) and _is_file_record(record, ARRAYS_MAX_BYTES)):
        raise _damaged(where, "its record of the offsets file is not a filesize and a sha1")
    return index


def _is_shard_entry(entry) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("url"), str)
        and _is_count(entry.get("nsamples"), 2**40)
        and _is_file_record(entry, 2**50)
    )


def _is_file_record(record: Dict, largest: int) -> bool:
    sha1 = record.get("sha1")
    return _is_count(record.get("filesize"), largest) and isinstance(sha1, str) and _SHA1.fullmatch(sha1) is not None


def _is_count(value, largest: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= largest


_SHA1 = re.compile(r"[0-9a-f]{40}")


def _check_arrays(index: Dict, arrays: Dict[str, np.ndarray], where: str) -> None:
    for part in ("train", "val"):
        shards = index[part]["shardlist"]
        columns = [f"{part}_{name}" for name in ("shard", "offset", "size", "label", "name_blob", "name_offsets")]
        missing = [name for name in columns if name not in arrays]
        if missing:
            raise _damaged(where, f"its offsets file lacks {', '.join(missing)}")
        shard, offset, size, label = (arrays[name].astype(np.int64) for name in columns[:4])
        count = len(label)
        if not (len(shard) == len(offset) == len(size) == count == sum(e["nsamples"] for e in shards)):
            raise _damaged(where, f"its {part} offsets do not list the {part} shards' samples")
        if count and (shard.min() < 0 or shard.max() >= len(shards)):
            raise _damaged(where, f"a {part} sample names a shard that is not in the list")
        if count and (label.min() < 0 or label.max() >= len(index["classes"])):
            raise _damaged(where, f"a {part} sample has a label outside the class list")
        ends = np.asarray([e["filesize"] for e in shards], dtype=np.int64)[shard] if count else shard
        if count and (offset.min() < 0 or size.min() < 0 or (offset + size > ends).any()):
            raise _damaged(where, f"a {part} sample lies outside its shard")
        names = arrays[columns[5]]
        if len(names) != count + 1 or (count and (names[0] != 0 or names[-1] != len(arrays[columns[4]]))):
            raise _damaged(where, f"its {part} sample names are damaged")


def _damaged(where: str, what: str) -> DataError:
    return DataError(f"{where}: {what}; the index is damaged or was not written by `ddptrain shard`: re-make the set")


def open_shard_set(location: str, cache_dir: Optional[Path] = None, deadline_s: float = DEFAULT_DEADLINE_S):
    """(classes, train samples, val samples, the index) of a shard set. Remote shards are cached per node, each
    download bounded by `deadline_s` (--fetch-timeout)."""
    index, arrays = read_index(location, deadline_s)
    cache = None
    if is_remote(location):
        cache = ShardCache(cache_dir or default_cache(location), cache_size(), deadline_s)
    parts = []
    for part in ("train", "val"):
        columns = {name[len(part) + 1 :]: value for name, value in arrays.items() if name.startswith(part + "_")}
        parts.append(ShardSamples(location, index[part]["shardlist"], columns, cache))
    return list(index["classes"]), parts[0], parts[1], index

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

import fcntl
import hashlib
import http.client
import io
import json
import os
import random
import re
import socket
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import DataError
from .images import ImageLimits, check_size
from .index import SampleIndex

INDEX = "shards.json"
ARRAYS = "shards-index.npz"
TIMM_INFO = "_info.json"
FORMAT = "ddptrain-shards"
FETCH_ATTEMPTS = 4
FETCH_TIMEOUT_S = 60.0
CACHE_ENV = "DDPTRAIN_SHARD_CACHE"
CACHE_SHARDS_ENV = "DDPTRAIN_SHARD_CACHE_SHARDS"
DEFAULT_CACHE_SHARDS = 16
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
    return location.startswith(("http://", "https://"))


def is_shard_set(location: str) -> bool:
    """--data names a shard set: a URL, or a folder holding shards.json."""
    return is_remote(location) or (Path(location) / INDEX).is_file()


# ---- writing ---------------------------------------------------------------------------------------------


def write_shards(split, out: Path, shard_bytes: int, seed: int, progress=None) -> Dict:
    """Write `split` (a ddptrain.data.folder.Split) as shards under `out`; the index files last, so a set
    without them is an interrupted one. Samples are shuffled (by `seed`) across shards: each shard mixes
    classes. Returns the index's summary."""
    out.mkdir(parents=True, exist_ok=True)
    index: Dict = {"format": FORMAT, "version": 1, "classes": list(split.classes), "source": str(split.root)}
    arrays: Dict[str, np.ndarray] = {}
    for part, samples in (("train", split.train), ("val", split.val)):
        order = list(range(len(samples)))
        random.Random(f"{seed}:{part}").shuffle(order)
        shards, columns = _write_part(samples, order, out, part, shard_bytes, progress)
        index[part] = {"shardlist": shards, "nsamples": len(order)}
        for name, values in columns.items():
            arrays[f"{part}_{name}"] = values
    # Readers of the WebDataset ecosystem (wids) look for a top-level shard list: the training shards.
    index["wids_version"] = 1
    index["shardlist"] = index["train"]["shardlist"]
    tmp = out / (ARRAYS + ".tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, out / ARRAYS)
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    (out / TIMM_INFO).write_text(json.dumps(_timm_info(index, split.root), indent=1) + "\n")
    return {
        part: {"shards": len(index[part]["shardlist"]), "samples": index[part]["nsamples"]} for part in ("train", "val")
    }


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


def _write_part(samples: SampleIndex, order: Sequence[int], out: Path, part: str, shard_bytes: int, progress):
    shards: List[Dict] = []
    names: List[Tuple[str, int]] = []
    shard_ids: List[int] = []
    offsets: List[int] = []
    sizes: List[int] = []
    tar: Optional[tarfile.TarFile] = None
    written = 0
    for position, i in enumerate(order):
        with open(samples.path(i), "rb") as handle:
            data = handle.read()
        if tar is None or (written and written + len(data) > shard_bytes):
            if tar is not None:
                tar.close()
                _index_shard(out, shards[-1], offsets, sizes)
            shards.append({"url": f"{part}-{len(shards):06d}.tar", "nsamples": 0})
            tar = tarfile.open(out / shards[-1]["url"], "w", format=tarfile.USTAR_FORMAT)  # noqa: SIM115 (closed per shard)
            written = 0
        key = f"{position:09d}"
        ext = os.path.splitext(samples.relative(i))[1].lower().lstrip(".") or "jpg"
        ext = {"jpeg": "jpg", "tiff": "tif"}.get(ext, ext)  # WebDataset's names: its readers decode by them
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
    return shards, columns


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


# ---- fetching --------------------------------------------------------------------------------------------


def join(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}" if is_remote(location) else str(Path(location) / name)


def fetch_bytes(url: str, into: Optional[Path] = None) -> bytes:
    """GET `url` (into a file when `into` is given), retrying a failed or short transfer with back-off; a
    404/403/401 is not retried. Raises DataError naming the URL."""
    last = ""
    for attempt in range(FETCH_ATTEMPTS):
        try:
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
                expected = response.headers.get("Content-Length")
                if into is None:
                    data = response.read()
                    got = len(data)
                else:
                    data, got = b"", _stream(response, into)
                if expected is not None and got != int(expected):
                    raise http.client.IncompleteRead(b"", int(expected) - got)
                return data
        except urllib.error.HTTPError as error:
            if error.code in (401, 403, 404, 410):
                raise DataError(
                    f"shard {url} is not on the server (HTTP {error.code} {error.reason}); check the --data URL, "
                    "or re-upload the shard set (ddptrain shard writes every shard listed in shards.json)"
                ) from None
            last = f"HTTP {error.code} {error.reason}"
        except (urllib.error.URLError, http.client.HTTPException, socket.timeout, ConnectionError, OSError) as error:
            last = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
        if attempt + 1 < FETCH_ATTEMPTS:
            time.sleep(0.5 * 2**attempt)
    raise DataError(
        f"shard {url} could not be downloaded after {FETCH_ATTEMPTS} attempts (last: {last}); check the server "
        "and the network, then resume with --resume auto"
    )


def _stream(response, into: Path) -> int:
    tmp = into.with_name(f".{into.name}.{os.getpid()}.part")
    got = 0
    try:
        with open(tmp, "wb") as handle:
            for block in iter(lambda: response.read(1 << 20), b""):
                handle.write(block)
                got += len(block)
        os.replace(tmp, into)
    finally:
        if tmp.exists():
            tmp.unlink()
    return got


def default_cache(location: str) -> Path:
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ddptrain" / "shards")
    return root / hashlib.sha1(location.rstrip("/").encode()).hexdigest()[:16]


class ShardCache:
    """Remote shards downloaded whole into a node-local folder: one process downloads a shard while the others
    on the node wait for it (a file lock); the least recently used beyond `keep` shards are deleted."""

    def __init__(self, folder: Path, keep: int):
        self.folder, self.keep = folder, keep

    def local(self, url: str) -> Path:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        target = self.folder / name
        if target.is_file():
            os.utime(target)
            return target
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_file():
                fetch_bytes(url, into=target)
                self._evict(keep=target)
        return target

    def _evict(self, keep: Path) -> None:
        cached = sorted((p for p in self.folder.glob("*.tar") if p != keep), key=lambda p: p.stat().st_mtime)
        for stale in cached[: max(0, len(cached) + 1 - self.keep)]:
            stale.unlink(missing_ok=True)  # a process still reading it keeps its open handle


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

    def _fd(self, shard: int) -> int:
        fd = self._open.get(shard)
        if fd is None:
            url = join(self.location, self.shards[shard]["url"])
            fd = self._open_shard(url)
            if len(self._open) >= self.MAX_OPEN:
                os.close(self._open.pop(next(iter(self._open))))
            self._open[shard] = fd
        return fd

    def _open_shard(self, url: str) -> int:
        if self.cache is None:
            try:
                return os.open(url, os.O_RDONLY)
            except FileNotFoundError:
                raise DataError(f"shard {url} is missing; the shard set is incomplete — re-make it") from None
        for _ in range(2):  # another process on the node may evict it between the download and the open
            try:
                return os.open(self.cache.local(url), os.O_RDONLY)
            except FileNotFoundError:
                continue
        raise DataError(f"shard {url} keeps leaving the cache {self.cache.folder}; raise {CACHE_SHARDS_ENV}")

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.shard, self.offset, self.size, self.labels)) + self.names.nbytes)


def read_index(location: str) -> Tuple[Dict, Dict[str, np.ndarray]]:
    """shards.json and the offsets of a shard set at a folder or URL prefix."""
    if is_remote(location):
        meta, raw = fetch_bytes(join(location, INDEX)), fetch_bytes(join(location, ARRAYS))
    else:
        folder = Path(location)
        if not (folder / INDEX).is_file():
            raise DataError(f"{folder} has no {INDEX}: not a shard set (make one with `ddptrain shard`)")
        meta, raw = (folder / INDEX).read_bytes(), (folder / ARRAYS).read_bytes()
    index = json.loads(meta)
    if index.get("format") != FORMAT:
        raise DataError(f"{join(location, INDEX)} is not a ddptrain shard index (make one with `ddptrain shard`)")
    with np.load(io.BytesIO(raw), allow_pickle=False) as loaded:
        arrays = {name: loaded[name] for name in loaded.files}
    return index, arrays


def open_shard_set(location: str, cache_dir: Optional[Path] = None):
    """(classes, train samples, val samples) of a shard set."""
    index, arrays = read_index(location)
    cache = None
    if is_remote(location):
        keep = int(os.environ.get(CACHE_SHARDS_ENV) or DEFAULT_CACHE_SHARDS)
        cache = ShardCache(cache_dir or default_cache(location), keep)
    parts = []
    for part in ("train", "val"):
        columns = {name[len(part) + 1 :]: value for name, value in arrays.items() if name.startswith(part + "_")}
        parts.append(ShardSamples(location, index[part]["shardlist"], columns, cache))
    return list(index["classes"]), parts[0], parts[1]

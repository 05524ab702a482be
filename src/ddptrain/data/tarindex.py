"""Indexes of WebDataset tar shards that ddptrain did not write (timm `wds/`, OpenCLIP, LAION-style sets, the
`webdataset` package's `ShardWriter`): where each sample's image lies in its shard and what its label is.

A sample is the run of members that share a key (the member name up to the first dot of its last part, as the
`webdataset` package groups them). Its image is the first `jpg/jpeg/png/webp` member; its label the member the
label key names: `cls` (an integer as text), `txt`, any other extension, or `json:PATH` (a dotted path into a
JSON member, e.g. `json:annotation.label`). A sample without an image or a label is counted and left out.

An index is built in one pass per shard (the SHA-1 of the shard's bytes is taken in the same pass) and cached
under `DDPTRAIN_SHARD_CACHE/tar-index/`: a local shard's entry is found by its path, size and modification time
and records the hash it had; a remote shard's by its URL, with the size and SHA-1 its cached download is
verified against on every later read.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import DataError
from ..util import redact
from .remote import CACHE_ENV, _FileLock

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
INDEX_VERSION = 2  # 2: the member extensions seen
LABEL_KEYS_HELP = "cls, txt, json:PATH or another member extension"
_KEY = re.compile(
    r"^((?:.*/|)[^./][^/.]*)[.]([^/]*)$"
)  # (key, extensions): `a/b/key.seg.jpg` -> (`a/b/key`, `seg.jpg`)


@dataclass
class ShardIndex:
    """One shard's samples: key, image offset and size, label text; the shard's size and SHA-1; what was left out."""

    filesize: int
    sha1: str
    keys: List[str] = field(default_factory=list)
    offsets: List[int] = field(default_factory=list)
    sizes: List[int] = field(default_factory=list)
    labels: List[str] = field(default_factory=list)
    skipped: Dict[str, List[str]] = field(default_factory=dict)  # reason -> keys
    extensions: List[str] = field(default_factory=list)  # of every member, for messages about a wrong --label-key

    def to_arrays(self) -> Dict[str, np.ndarray]:
        reasons = sorted(self.skipped)
        return {
            "version": np.asarray(INDEX_VERSION),
            "filesize": np.asarray(self.filesize, dtype=np.int64),
            "sha1": np.frombuffer(self.sha1.encode(), dtype=np.uint8),
            "offsets": np.asarray(self.offsets, dtype=np.int64),
            "sizes": np.asarray(self.sizes, dtype=np.int64),
            "keys": _blob(self.keys),
            "labels": _blob(self.labels),
            "reasons": _blob(reasons),
            "skipped": _blob([json.dumps(self.skipped[r]) for r in reasons]),
            "extensions": _blob(self.extensions),
        }

    @classmethod
    def from_arrays(cls, arrays: Dict[str, np.ndarray]) -> ShardIndex:
        reasons = _unblob(arrays["reasons"])
        return cls(
            int(arrays["filesize"]),
            arrays["sha1"].tobytes().decode(),
            _unblob(arrays["keys"]),
            arrays["offsets"].tolist(),
            arrays["sizes"].tolist(),
            _unblob(arrays["labels"]),
            {r: json.loads(k) for r, k in zip(reasons, _unblob(arrays["skipped"]))},
            _unblob(arrays["extensions"]),
        )


def _blob(texts: List[str]) -> np.ndarray:
    return np.frombuffer(json.dumps(texts).encode("utf-8", "surrogateescape"), dtype=np.uint8)


def _unblob(array: np.ndarray) -> List[str]:
    return json.loads(array.tobytes().decode("utf-8", "surrogateescape"))


class LabelKey:
    """Which member of a sample holds its label, and how its text is read."""

    def __init__(self, text: str):
        self.text = text
        kind, _, path = text.partition(":")
        self.extension = kind.lower()
        self.path = [part for part in path.split(".") if part] if path else []
        if not self.extension or "/" in self.extension or (path and self.extension != "json"):
            raise DataError(f"--label-key {text}: give {LABEL_KEYS_HELP}")

    def wants(self, extensions: str) -> bool:
        """Whether a member with these extensions (`cls`, `seg.json`) holds the label."""
        return extensions == self.extension or (self.extension == "json" and extensions.endswith(".json"))

    def read(self, data: bytes) -> Optional[str]:
        """The label text of a member's bytes, or None when it holds none."""
        try:
            text = data.decode("utf-8").strip()
        except UnicodeDecodeError:
            return None
        if self.extension != "json":
            return text or None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        for part in self.path:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
                value = value[int(part)]
            else:
                return None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return None
        return str(value).strip() or None


def index_local(path: Path, label: LabelKey) -> ShardIndex:
    """The index of a local tar shard (cached; built with one pass over its bytes when not)."""
    info = path.stat()
    key = f"local\0{path.resolve()}\0{info.st_size}\0{info.st_mtime_ns}\0{label.text}"
    return _cached(key, str(path), lambda: build(path, label))


def cached_remote(url: str, label: LabelKey, build_from) -> ShardIndex:
    """The cached index of a remote shard, or `build_from()`'s (which downloads and indexes it) stored."""
    return _cached(f"remote\0{url}\0{label.text}", redact(url), build_from)


def _cached(key: str, name: str, make) -> ShardIndex:
    folder = index_cache()
    target = folder / (hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".npz")
    found = _load(target)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with _FileLock(folder / f".{target.stem}.lock", 3600.0, name):  # another process of the node indexing it
        found = _load(target)
        if found is None:
            found = make()
            tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, **found.to_arrays())
            os.replace(tmp, target)
    return found


def _load(target: Path) -> Optional[ShardIndex]:
    try:
        with np.load(target, allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        if int(arrays["version"]) != INDEX_VERSION:
            return None
        return ShardIndex.from_arrays(arrays)
    except (OSError, ValueError, KeyError, EOFError):
        return None  # absent, or damaged: built again


def index_cache() -> Path:
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ddptrain" / "shards")
    return root / "tar-index"


def build(path: Path, label: LabelKey, name: Optional[str] = None) -> ShardIndex:
    """Index the tar shard at `path` (`name`: what messages call it) in one pass over its bytes."""
    name = name or str(path)
    with open(path, "rb") as raw:
        hashing = _Hashing(raw)
        try:
            with tarfile.open(fileobj=hashing, mode="r|") as tar:  # a stream: members in order, bytes read once
                index = _members(tar, label)
        except (tarfile.TarError, EOFError, OSError) as error:
            raise DataError(
                f"shard {redact(name)} is not a readable tar file ({error}); re-make or re-download it"
            ) from None
        hashing.drain()
    index.filesize, index.sha1 = hashing.count, hashing.digest.hexdigest()
    return index


def _members(tar: tarfile.TarFile, label: LabelKey) -> ShardIndex:
    index = ShardIndex(0, "")
    current: Optional[str] = None
    image: Optional[Tuple[int, int, str]] = None
    text: Optional[str] = None
    seen: set = set()
    extensions: set = set()

    def close() -> None:
        if current is None:
            return
        if current in seen:
            index.skipped.setdefault("a key repeated in the shard", []).append(current)
        elif image is None:
            index.skipped.setdefault("no image member (jpg, jpeg, png, webp)", []).append(current)
        elif text is None:
            index.skipped.setdefault(f"no label ({label.text})", []).append(current)
        else:
            index.keys.append(f"{current}.{image[2]}")  # the sample's name: its key and its image's extension
            index.offsets.append(image[0])
            index.sizes.append(image[1])
            index.labels.append(text)
        seen.add(current)

    for member in tar:
        if not member.isfile():
            continue
        match = _KEY.match(member.name)
        if match is None:
            continue
        key, extension_text = match.group(1), match.group(2).lower()
        extensions.add(extension_text)
        if key != current:
            close()
            current, image, text = key, None, None
        last = extension_text.rsplit(".", 1)[-1]
        if image is None and last in IMAGE_EXTENSIONS:
            image = (member.offset_data, member.size, last)
        elif label.wants(extension_text) and member.size <= 1 << 20:  # a label is short: a larger member is not one
            handle = tar.extractfile(member)
            text = label.read(handle.read()) if handle is not None else None
    close()
    index.extensions = sorted(extensions)
    return index


class _Hashing(io.RawIOBase):
    """A file read through: the SHA-1 and count of every byte the tar reader takes."""

    def __init__(self, raw):
        self.raw, self.digest, self.count = raw, hashlib.sha1(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        buffer[: len(data)] = data
        self.digest.update(data)
        self.count += len(data)
        return len(data)

    def drain(self) -> None:
        """What the tar reader left after its end-of-archive blocks: part of the file's bytes all the same."""
        for block in iter(lambda: self.raw.read(1 << 20), b""):
            self.digest.update(block)
            self.count += len(block)

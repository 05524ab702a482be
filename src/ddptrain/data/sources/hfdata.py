"""Hugging Face `datasets` as a source of data: a dataset saved with `save_to_disk` (one split or a DatasetDict), a
folder of Parquet files with an image column (the `imagefolder`/hub layout), or `hf:NAME` — a hub dataset already in
the library's cache (never downloaded here: the error says how to fetch it). Read through the library itself
(memory-mapped Arrow), images as their stored bytes (or the file their `path` names), never decoded twice.

The image column is the first `Image` feature (else `image`/`img`); the label column the first `ClassLabel` feature
(its names are the classes, in its order) or `label`/`labels`, unless `--label-key COLUMN` names it. The split: the
dataset's own `train` and `validation` (or `val`/`valid`) when present, else `train` split by --val-split and --seed.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import DataError
from ...util import counted
from ..images import ImageLimits, check_size, read_image_file
from ..index import LABEL_SEPARATOR
from ..split import Split, held_out, stratified_split
from .manifest import canonical_labels, numeric_order
from .reading import Reading

log = logging.getLogger("ddptrain")
PREFIX = "hf:"
VALIDATION = ("validation", "val", "valid")
HINT = "the Hugging Face dataset's image column has rows without bytes or with a path that does not exist"


class HFSource:
    keyed_labels = "column"  # --label-key names the column its labels are read from
    multilabel = True  # --task multilabel: a list column (Sequence of ClassLabel, names, values) or a|b|c text
    name = "Hugging Face dataset"

    def recognises(self, location: str) -> bool:
        if location.startswith(PREFIX):
            return True
        if "://" in location:
            return False
        folder = Path(location)
        return folder.is_dir() and (_saved(folder) or bool(_parquet_files(folder)))

    def check(self, location: str, reading: Reading) -> None:
        tables = load(location)
        for name, table in tables.items():
            image_column(table, location, name)
            label_column(table, location, name, reading.label_key)

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        tables = load(location)
        if "train" not in tables:
            raise DataError(f"--data {location}: the dataset has no train split (it has {', '.join(tables)})")
        val_name = next((name for name in VALIDATION if name in tables), None)
        parts = {
            name: Part.of(tables[name], location, name, reading.label_key, reading.multilabel)
            for name in ("train", val_name)
            if name
        }
        classes = _classes([parts[name] for name in parts])
        train = parts["train"].samples(classes)
        made: Dict = {}
        if val_name is not None:
            val = parts[val_name].samples(classes)
        elif reading.multilabel:
            train, val = _held_out(train, val_split, seed)
            made = {"seed": seed, "val_split": val_split}
        else:
            train, val = _stratified(train, classes, val_split, seed)
            made = {"seed": seed, "val_split": val_split}
        source = f"Hugging Face dataset {location}"
        by_data = val_name is not None
        return Split(
            classes, train, val, "hf dataset", location, made, source=source, hint=HINT, fixed=True, by_data=by_data
        )

    def all_images(self, location: str, classes: Sequence[str], reading: Reading):
        tables = load(location)
        parts = [
            Part.of(table, location, name, reading.label_key, reading.multilabel) for name, table in tables.items()
        ]
        unknown = sorted(set(_classes(parts)) - set(classes))
        if unknown:
            raise DataError(f"{location} has labels the model does not know: {', '.join(unknown)}")
        samples = [part.samples(list(classes)) for part in parts]
        return samples[0] if len(samples) == 1 else Joined(samples)


def _saved(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _parquet_files(folder: Path) -> List[Path]:
    return sorted(folder.glob("*.parquet")) + sorted(folder.glob("data/*.parquet"))


def load(location: str) -> Dict[str, object]:
    """The dataset's splits by name (datasets.Dataset each), from disk or the library's cache, never the network."""
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"--data {location}: reading a Hugging Face dataset needs `pip install 'ddptrain[hf]'`"
        ) from None
    datasets.disable_progress_bars()
    path = location[len(PREFIX) :] if location.startswith(PREFIX) else location
    folder = Path(path)
    with _Offline():
        found = _read(datasets, folder, path, location)
    return dict(found) if isinstance(found, datasets.DatasetDict) else {"train": found}


def _read(datasets, folder: Path, path: str, location: str):
    try:
        if folder.is_dir() and _saved(folder):
            found = datasets.load_from_disk(str(folder))
        elif folder.is_dir():
            found = datasets.load_dataset("parquet", data_dir=str(folder))
        else:
            found = datasets.load_dataset(path)
    except (FileNotFoundError, ConnectionError, ValueError, OSError) as error:
        raise _not_found(location, path, folder, error) from None
    return found


class _Offline:
    """The hub libraries told they are offline while a dataset is read (their switches are read once, at import:
    the environment alone cannot change them later), and told as before afterwards, so that a --pretrained
    download the user asked for still works."""

    SWITCHES = (("huggingface_hub.constants", "HF_HUB_OFFLINE"), ("datasets.config", "HF_HUB_OFFLINE"))

    def __enter__(self) -> None:
        import importlib

        self.saved = []
        for module_name, name in self.SWITCHES:
            module = importlib.import_module(module_name)
            if hasattr(module, name):
                self.saved.append((module, name, getattr(module, name)))
                setattr(module, name, True)

    def __exit__(self, *exc) -> None:
        for module, name, value in self.saved:
            setattr(module, name, value)


def _not_found(location: str, path: str, folder: Path, error: Exception) -> DataError:
    if folder.exists():
        return DataError(f"--data {location}: not a dataset the `datasets` library reads ({error})")
    return DataError(
        f"--data {location}: {path} is neither a folder nor a dataset in the Hugging Face cache (ddptrain does not "
        f"download data); fetch it once while online: python -c \"import datasets; datasets.load_dataset('{path}')\""
        " (or save it with save_to_disk and give that folder)"
    )


def image_column(table, location: str, split: str) -> str:
    from datasets import Image

    found = [name for name, feature in table.features.items() if isinstance(feature, Image)]
    found += [name for name in ("image", "img") if name in table.features]
    if not found:
        raise DataError(
            f"--data {location}: split {split} has no image column (an Image feature, or a column named image); "
            f"its columns: {', '.join(table.features)}"
        )
    return found[0]


def label_column(table, location: str, split: str, label_key: str) -> str:
    from datasets import ClassLabel

    if label_key != Reading().label_key:  # --label-key names the column
        found = [label_key] if label_key in table.features else []
    else:
        found = [name for name, feature in table.features.items() if isinstance(feature, ClassLabel)]
        found += [name for name in ("label", "labels") if name in table.features]
    if not found:
        raise DataError(
            f"--data {location}: split {split} has no label column (a ClassLabel feature, a column named label, or "
            f"--label-key COLUMN); its columns: {', '.join(table.features)}"
        )
    return found[0]


class Part:
    """One split of the dataset: its image column, and its labels as text (ClassLabel names, or values)."""

    def __init__(self, table, image: str, texts: List[str], names: Optional[List[str]], split: str, location: str):
        self.table, self.image, self.texts, self.names = table, image, texts, names
        self.split, self.location = split, location
        self.multilabel = False  # set by `of` for --task multilabel

    def _label_sets(self, classes: Sequence[str]) -> HFSamples:
        """--task multilabel: each row with its classes (rows with none left out, as unlabelled rows are)."""
        found = {t for text in self.texts for t in text.split(LABEL_SEPARATOR) if t}
        canonical = canonical_labels(found) if self.names is None else {n: n for n in self.names}
        label_of = {name: i for i, name in enumerate(classes)}
        sets = [sorted({label_of[canonical[t]] for t in text.split(LABEL_SEPARATOR) if t}) for text in self.texts]
        rows = [r for r, labels in enumerate(sets) if labels]
        targets = np.zeros((len(rows), len(classes)), dtype=np.uint8)
        for at, r in enumerate(rows):
            targets[at, sets[r]] = 1
        labels = np.asarray([sets[r][0] for r in rows], dtype=np.int32)
        samples = HFSamples(self.table, self.image, np.asarray(rows, dtype=np.int64), labels, self.split, self.location)
        samples.targets = targets
        return samples

    @classmethod
    def of(cls, table, location: str, split: str, label_key: str, multilabel: bool = False) -> Part:
        """`multilabel`: a row's labels are a list (of ClassLabel indices, names or values) or `a|b|c` text."""
        from datasets import ClassLabel, Image

        image = image_column(table, location, split)
        label = label_column(table, location, split, label_key)
        feature = table.features[label]
        values = table[label]
        inner = getattr(feature, "feature", None)  # a Sequence / List feature's element
        names: Optional[List[str]]
        if multilabel:
            names = list(inner.names) if isinstance(inner, ClassLabel) else None
            texts = [_joined(v, names) for v in values]
        elif isinstance(feature, ClassLabel):
            names = list(feature.names)
            texts = [feature.names[v] if v is not None and v >= 0 else "" for v in values]
        else:
            if inner is not None or any(isinstance(v, (list, tuple)) for v in values[:100]):
                raise DataError(
                    f"--data {location}: label column {label} of split {split} holds lists (several classes per "
                    "row): add --task multilabel, or name a one-class column with --label-key"
                )
            names = None
            texts = ["" if v is None else str(v) for v in values]
        if isinstance(table.features[image], Image):
            table = table.cast_column(image, Image(decode=False))
        part = cls(table.select_columns([image]), image, texts, names, split, location)
        part.multilabel = multilabel
        return part

    def samples(self, classes: Sequence[str]) -> HFSamples:
        if self.multilabel:
            return self._label_sets(classes)
        canonical = canonical_labels({t for t in self.texts if t}) if self.names is None else {n: n for n in self.names}
        label_of = {name: i for i, name in enumerate(classes)}
        rows = [r for r, text in enumerate(self.texts) if text and canonical[text] in label_of]
        if len(rows) < len(self.texts):
            log.warning(
                "%s: %s of split %s %s no label (empty, missing, or -1): left out",
                self.location,
                counted(len(self.texts) - len(rows), "row"),
                self.split,
                "has" if len(self.texts) - len(rows) == 1 else "have",
            )
        labels = np.asarray([label_of[canonical[self.texts[r]]] for r in rows], dtype=np.int32)
        return HFSamples(self.table, self.image, np.asarray(rows, dtype=np.int64), labels, self.split, self.location)


def _joined(value, names: Optional[List[str]]) -> str:
    """A multi-label row's labels as `a|b|c` ("" when it has none)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    items = value if isinstance(value, (list, tuple)) else [value]
    return LABEL_SEPARATOR.join(
        names[v] if names is not None and isinstance(v, int) and 0 <= v < len(names) else str(v) for v in items
    )


def _classes(parts: List[Part]) -> List[str]:
    named = [part.names for part in parts if part.names is not None]
    if named:
        return list(named[0])
    texts = {t for part in parts for text in part.texts for t in text.split(LABEL_SEPARATOR) if t}
    if not texts:
        raise DataError(f"--data {parts[0].location}: no row has a label")
    return numeric_order(set(canonical_labels(texts).values()))


class HFSamples:
    """Rows of one split of a `datasets.Dataset`, read by index: the image's stored bytes (or its file)."""

    def __init__(self, table, image: str, rows: np.ndarray, labels: np.ndarray, split: str, location: str):
        self.table, self.image, self.rows, self.labels = table, image, rows, labels
        self.split, self.location = split, location
        self.source, self.hint = f"Hugging Face dataset {location}", HINT
        self.targets: Optional[np.ndarray] = None  # --task multilabel: each row's classes, 0/1

    def __len__(self) -> int:
        return len(self.rows)

    def relative(self, index: int) -> str:
        return f"{self.split}/{int(self.rows[index]):09d}"

    def name(self, index: int) -> str:
        return f"{self.location}:{self.relative(index)}"

    def __getitem__(self, index: int) -> Tuple[str, int]:
        return self.name(index), int(self.labels[index])

    def read(self, index: int, limits: ImageLimits) -> bytes:
        value = self.table[int(self.rows[index])][self.image]
        if isinstance(value, dict) and value.get("bytes"):
            data = value["bytes"]
        elif isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        else:
            path = value.get("path") if isinstance(value, dict) else value
            if not isinstance(path, str) or not path:
                raise DataError(f"{self.name(index)}: the row has no image bytes and no path")
            return read_image_file(path, limits)
        check_size(len(data), limits)
        return data

    def subset(self, positions: np.ndarray) -> HFSamples:
        part = HFSamples(
            self.table, self.image, self.rows[positions], self.labels[positions], self.split, self.location
        )
        part.targets = self.targets[positions] if self.targets is not None else None
        return part

    def digest(self) -> str:
        digest = hashlib.sha1(f"{self.split}\0{getattr(self.table, '_fingerprint', '')}".encode())
        digest.update(self.rows.tobytes())
        digest.update(self.labels.tobytes())
        if self.targets is not None:
            digest.update(self.targets.tobytes())
        return digest.hexdigest()[:16]


class Joined:
    """Several splits read as one (`eval --split all`)."""

    def __init__(self, parts: List[HFSamples]):
        self.parts = parts
        self.labels = np.concatenate([p.labels for p in parts])
        sets = [p.targets for p in parts if p.targets is not None]
        self.targets: Optional[np.ndarray] = np.concatenate(sets) if len(sets) == len(parts) else None
        self.starts = np.cumsum([0] + [len(p) for p in parts])
        self.source, self.hint = parts[0].source, HINT

    def _at(self, index: int) -> Tuple[HFSamples, int]:
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        return self.parts[part], index - int(self.starts[part])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def relative(self, index: int) -> str:
        part, at = self._at(index)
        return part.relative(at)

    def name(self, index: int) -> str:
        part, at = self._at(index)
        return part.name(at)

    def __getitem__(self, index: int) -> Tuple[str, int]:
        return self.name(index), int(self.labels[index])

    def read(self, index: int, limits: ImageLimits) -> bytes:
        part, at = self._at(index)
        return part.read(at, limits)

    def digest(self) -> str:
        return hashlib.sha1("".join(p.digest() for p in self.parts).encode()).hexdigest()[:16]


def _held_out(train: HFSamples, val_split: float, seed: int):
    """--task multilabel: round(n x val_split) rows held out at random by the seed (as a manifest's)."""
    held = held_out(len(train), val_split, seed)
    picks = [np.asarray([i for i in range(len(train)) if (i in held) == bool(part)], dtype=np.int64) for part in (0, 1)]
    return train.subset(picks[0]), train.subset(picks[1])


def _stratified(train: HFSamples, classes: List[str], val_split: float, seed: int):
    """The train split divided as a folder's would be, by row names (stratified, a function of the seed)."""
    by_class: Dict[str, List[str]] = {name: [] for name in classes}
    position = {}
    for i in range(len(train)):
        name = train.relative(i)
        by_class[classes[train.labels[i]]].append(name)
        position[name] = i
    kept = {name: paths for name, paths in by_class.items() if paths}
    order = [name for name in classes if name in kept]
    parts = stratified_split(kept, order, val_split, seed, Path(""))
    picks = [np.asarray(sorted(position[p.relative(i)] for i in range(len(p))), dtype=np.int64) for p in parts]
    return train.subset(picks[0]), train.subset(picks[1])

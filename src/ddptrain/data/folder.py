"""Find the images under a data root (a folder of class folders, or a `path,label` CSV manifest), name the
classes and split train/validation deterministically.

The result is a pure function of the sorted relative paths and the seed: two machines that list the same
files agree without talking. The trainer lists once (rank 0) and shares the result (see ddptrain.train.trainer).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import DataError, missing_data_folder
from . import splitfile
from .images import is_image_file
from .index import Sample, SampleIndex, Samples, read_manifest, scan_images
from .remote import DEFAULT_DEADLINE_S
from .shards import is_remote, is_shard_set, open_shard_set, read_index


@dataclass
class Split:
    """The classes and the two parts of --data; `describe()` names the source in messages."""

    classes: List[str]
    train: Samples
    val: Samples
    layout: str  # "folders" (split by --val-split), "train/val" (given by the user), "manifest" or "shards"
    root: Any  # a Path; a URL string for remote shards
    made_with: Dict[str, Any] = field(default_factory=dict)  # a shard set: the --seed and --val-split it was split by
    source: str = ""  # "folder /d", "CSV manifest /d/list.csv", "shard set URL"

    def __post_init__(self) -> None:
        for part in (self.train, self.val):
            if isinstance(part, SampleIndex) and self.source:
                part.source = self.source


def list_class_images(class_dir: Path) -> List[str]:
    """Absolute paths of the images under `class_dir`, sorted by their path inside it."""
    prefix = str(class_dir) + "/"
    return [prefix + relative for relative in scan_images(class_dir)]


def class_folders(root: Path) -> List[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def scan_classes(root: Path, classes: Optional[Sequence[str]] = None) -> Tuple[List[str], Dict[str, List[str]]]:
    """Classes are the sorted sub-folders of `root` (or the given list); return their image paths."""
    if not root.is_dir():
        raise missing_data_folder(root)
    found = class_folders(root)
    if not found:
        raise DataError(f"{root} has no class sub-folders; expected {root}/<class name>/<images>")
    classes = list(classes) if classes is not None else found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise DataError(f"{root} has class folders the model does not know: {', '.join(unknown)}")
    images = {name: list_class_images(root / name) if (root / name).is_dir() else [] for name in classes}
    return classes, images


def check_layout(
    root: str | Path, manifest_rows_checked: int = 20, fetch_timeout_s: float = DEFAULT_DEADLINE_S
) -> None:
    """What can be known about --data quickly, before any process starts: a folder has two or more class folders,
    each with at least one image (found without listing it all); a CSV manifest parses, names two or more labels
    and its first rows name files that exist; a shard set's index (local, or fetched from its URL) reads and checks."""
    text = str(root)
    if is_remote(text):
        read_index(text, fetch_timeout_s)
        return
    if is_manifest(text):
        manifest = read_manifest(Path(text))
        if len(manifest.classes) < 2:
            raise DataError(f"{text} has one label ({manifest.classes[0]}); a classifier needs at least two")
        _check_manifest_paths(Path(text), manifest, manifest_rows_checked)
        return
    folder = Path(text)
    if is_shard_set(text):
        open_shard_set(text)
        return
    parts = [folder / "train", folder / "val"] if is_train_val_layout(folder) else [folder]
    for part in parts:
        classes = class_folders(part)
        if not classes:
            raise DataError(f"{part} has no class sub-folders; expected {part}/<class name>/<images>")
        if len(classes) < 2 and part == folder:
            raise DataError(f"{part} has one class folder ({classes[0]}); a classifier needs at least two")
        for name in classes:
            if part.name != "val" and not _has_image(part / name):
                raise DataError(
                    f"class folder '{name}' in {part} has no images (extensions: jpg jpeg png bmp webp tif tiff)"
                )


def _has_image(folder: Path) -> bool:
    """Whether `folder` holds an image somewhere below it, stopping at the first one found."""
    pending, seen = [folder], set()
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_file() and is_image_file(entry.name):
                        return True
                    if entry.is_dir():
                        key = (entry.stat().st_dev, entry.stat().st_ino)
                        if key not in seen:
                            seen.add(key)
                            pending.append(Path(entry.path))
        except OSError:
            continue
    return False


def _check_manifest_paths(path: Path, manifest, rows: int) -> None:
    """When none of the first rows names an existing file, the paths are wrong for every row: say so before launch
    (a relative path is relative to the CSV's folder)."""
    first = [p for name in manifest.classes for p in manifest.by_class[name][:rows]][:rows]
    if first and not any(os.path.isfile(p) for p in first):
        raise DataError(
            f"{path}: none of the {len(first)} paths checked names a file, e.g. {first[0]}; relative paths in a "
            f"manifest are relative to its folder ({path.resolve().parent}), or give absolute paths"
        )


def stratified_split(
    images: Dict[str, List[str]], classes: Sequence[str], val_split: float, seed: int, root: Path
) -> Tuple[SampleIndex, SampleIndex]:
    """Hold out round(n * val_split) images of every class (at least one when val_split > 0 and n > 1)."""
    train: List[Sample] = []
    val: List[Sample] = []
    for label, name in enumerate(classes):
        paths = list(images[name])
        if not paths:
            raise DataError(f"class folder '{name}' has no images (extensions: jpg jpeg png bmp webp tif tiff)")
        # Python's Random with an int seed gives the same sequence on every platform.
        random.Random(f"{seed}:{name}").shuffle(paths)
        n_val = round(len(paths) * val_split)
        if val_split > 0 and n_val == 0 and len(paths) > 1:
            n_val = 1
        val += [(p, label) for p in sorted(paths[:n_val])]
        train += [(p, label) for p in sorted(paths[n_val:])]
    return SampleIndex.from_pairs(root, train), SampleIndex.from_pairs(root, val)


def is_train_val_layout(root: Path) -> bool:
    return (root / "train").is_dir() and (root / "val").is_dir()


def is_manifest(path: str | Path) -> bool:
    return str(path).lower().endswith(".csv")


def load_split(root: str | Path, val_split: float, seed: int, fetch_timeout_s: float = DEFAULT_DEADLINE_S) -> Split:
    """The classes and the train/validation samples of --data: a shard set, a CSV manifest or a folder."""
    if is_shard_set(str(root)):
        classes, train, val, index = open_shard_set(str(root), deadline_s=fetch_timeout_s)
        where = root if is_remote(str(root)) else Path(root).resolve()
        made_with = {key: index[key] for key in ("seed", "val_split") if index.get(key) is not None}
        return Split(classes, train, val, "shards", where, made_with)
    if is_manifest(root):
        return load_manifest_split(Path(root), val_split, seed)
    root = Path(root).resolve()
    if is_train_val_layout(root):
        classes, train_images = scan_classes(root / "train")
        _, val_images = scan_classes(root / "val", classes)
        train, _ = stratified_split(train_images, classes, 0.0, seed, root)
        val = SampleIndex.from_pairs(root, ((p, label) for label, name in enumerate(classes) for p in val_images[name]))
        return Split(classes, train, val, "train/val", root, source=f"folder {root}")
    classes, images = scan_classes(root)
    if len(classes) < 2:
        raise DataError(f"{root} has one class folder ({classes[0]}); a classifier needs at least two")
    train, val = stratified_split(images, classes, val_split, seed, root)
    return Split(classes, train, val, "folders", root, source=f"folder {root}")


def load_manifest_split(path: Path, val_split: float, seed: int) -> Split:
    """A `path,label[,split]` CSV: split like a folder of class folders (or as its `split` column says)."""
    if not path.is_file():
        raise DataError(f"--data {path}: no such manifest file (a CSV with the columns path,label)")
    manifest = read_manifest(path)
    manifest.warn_repeats(path)
    classes, images, given = manifest.classes, manifest.by_class, manifest.splits
    root = path.resolve().parent
    if len(classes) < 2:
        raise DataError(f"{path} has one label ({classes[0]}); a classifier needs at least two")
    if given:
        pairs = [(p, label) for label, name in enumerate(classes) for p in images[name]]
        train = SampleIndex.from_pairs(root, ((p, c) for p, c in pairs if given[p] == "train"))
        val = SampleIndex.from_pairs(root, ((p, c) for p, c in pairs if given[p] == "val"))
    else:
        train, val = stratified_split(images, classes, val_split, seed, root)
    return Split(classes, train, val, "manifest", root, source=f"CSV manifest {path}")


def classes_without_validation(split: Split) -> List[str]:
    present = set(split.val.labels.tolist())
    return [name for i, name in enumerate(split.classes) if i not in present]


def all_images(root: str | Path, classes: Sequence[str]) -> SampleIndex:
    """Every image under root/<class>/ (or listed in a CSV manifest), labelled by its position in `classes` (for
    evaluating a test set)."""
    if is_shard_set(str(root)):
        raise DataError(
            f"{root} is a shard set: its images are split into train and val parts for good; evaluate its val part "
            "with --split val"
        )
    if is_manifest(root):
        manifest = read_manifest(Path(root))
        manifest.warn_repeats(Path(root))
        found, images = manifest.classes, manifest.by_class
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise DataError(f"{root} has labels the model does not know: {', '.join(unknown)}")
        base = Path(root).resolve().parent
        images = {name: images.get(name, []) for name in classes}
    else:
        base = Path(root).resolve()
        _, images = scan_classes(base, classes)
    return SampleIndex.from_pairs(base, ((p, label) for label, name in enumerate(classes) for p in images[name]))


def split_entries(split: Split) -> Dict[str, List[Tuple[str, str]]]:
    """The split as its files hold it: (relative path, class name) per image, for train and for val."""
    return {
        name: [(samples.relative(i), split.classes[samples.labels[i]]) for i in range(len(samples))]
        for name, samples in (("train", split.train), ("val", split.val))
    }


def samples_digest(part) -> str:
    """A digest of a part's relative paths and labels, from its arrays (no per-sample work)."""
    names = getattr(part, "names", part)  # shards keep the names of the files they were made from
    digest = hashlib.sha1()
    for array in (names.blob, names.offsets, part.labels):
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


SPLIT_DIGEST_VERSION = 2


def split_summary(split: Split) -> Dict[str, object]:
    """What a checkpoint keeps of its split: a digest of which images are in each part (not of their order: a folder
    and the shards made from it with the same seed and --val-split have the same split) and the parts' sizes."""
    return {**split_digest(split, SPLIT_DIGEST_VERSION), "train": len(split.train), "val": len(split.val)}


def split_digest(split: Split, version: int) -> Dict[str, object]:
    """The split's digest as version `version` computes it (1: the lines in the order listed, as checkpoints written
    before version 2 hold it)."""
    entries = split_entries(split)
    if version == 1:
        lines = [[f"{relative}\t{name}" for relative, name in entries[part]] for part in ("train", "val")]
    else:
        lines = [sorted(splitfile.line(*entry) for entry in entries[part]) for part in ("train", "val")]
    text = "\n".join([*lines[0], "--", *lines[1]])
    digest = hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return {"digest": digest} if version == 1 else {"digest": digest, "digest_version": version}


def same_split(split: Split, saved: Dict[str, object]) -> bool:
    """Whether `split` is the split a checkpoint's `split` entry describes (digest of either version)."""
    version = int(str(saved.get("digest_version", 1)))
    if version > SPLIT_DIGEST_VERSION:
        return True  # a newer ddptrain's digest cannot be compared here
    here = {**split_digest(split, version), "train": len(split.train), "val": len(split.val)}
    return all(saved.get(key) == value for key, value in here.items())


def write_split_files(split: Split, run_dir: Path) -> None:
    """class_indices.json and the two split lists, relative to the data root (rank 0 only)."""
    indices = {str(i): name for i, name in enumerate(split.classes)}
    (run_dir / "class_indices.json").write_text(json.dumps(indices, indent=2) + "\n")
    split_dir = run_dir / "splits"
    split_dir.mkdir(parents=True, exist_ok=True)
    for name, entries in split_entries(split).items():
        splitfile.write(split_dir / f"{name}.txt", entries)


def describe_added(added: List[str], root: Path, where: str) -> str:
    """The warning for images found in the folder but not in the run's split: they are left out of `where`."""
    shown = ", ".join(added[:5]) + (" ..." if len(added) > 5 else "")
    return f"{len(added)} image(s) added to {root} since the run's split was written are left out of {where}: {shown}"


def read_run_split(run_dir: Path, scanned: Split) -> Optional[Tuple[Split, List[str]]]:
    """The run's own split, read back from RUN_DIR/splits (the source of truth once written), checked against
    what the data folder holds now (`scanned`): (split, files added to the folder since). A file of the split
    that is gone, or a class folder the run does not know, is an error naming them. None: no split written."""
    split_dir = run_dir / "splits"
    files = [run_dir / "class_indices.json", split_dir / "train.txt", split_dir / "val.txt"]
    if not all(f.is_file() for f in files):
        return None
    indices = json.loads(files[0].read_text())
    classes = [indices[str(i)] for i in range(len(indices))]
    unknown = sorted(set(scanned.classes) - set(classes))
    if unknown:
        raise DataError(
            f"cannot resume or evaluate this run on {scanned.root}: it has class folder(s) "
            f"{', '.join(repr(c) for c in unknown)} that the run's split ({split_dir}) does not know; "
            "a model trained on the run's classes cannot learn or score them. Start another run (another "
            "--out, or --overwrite) for another class list"
        )
    train, val = (_read_samples(f, scanned.root, classes) for f in files[1:])
    stored = Split(classes, train, val, scanned.layout, scanned.root, source=scanned.source)
    listed = {scanned.train.relative(i) for i in range(len(scanned.train))}
    listed.update(scanned.val.relative(i) for i in range(len(scanned.val)))
    known = [part.relative(i) for part in (train, val) for i in range(len(part))]
    missing = sorted(stored.root / relative for relative in set(known) - listed)
    if missing:
        raise DataError(
            f"{len(missing)} image(s) of the run's split ({split_dir}) are gone from {scanned.root}: "
            f"{', '.join(map(str, missing[:5]))}{' ...' if len(missing) > 5 else ''}; put them back, or start "
            "another run (another --out, or --overwrite)"
        )
    added = sorted(str(scanned.root / relative) for relative in listed - set(known))
    return stored, added


def _read_samples(path: Path, root: Path, classes: List[str]) -> SampleIndex:
    label_of = {name: i for i, name in enumerate(classes)}
    samples = []
    for number, relative, name in splitfile.read(path):
        if name not in label_of:
            raise DataError(
                f"{path}:{number} names class {name!r}, which is not in the run's class_indices.json; the run's "
                "split files were changed or damaged"
            )
        samples.append((relative, label_of[name]))
    return SampleIndex.from_pairs(root, samples)

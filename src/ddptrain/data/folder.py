"""Find the images under a data root (a folder of class folders, or a `path,label` CSV manifest), name the
classes and split train/validation deterministically.

The result is a pure function of the sorted relative paths and the seed: two machines that list the same
files agree without talking. The trainer lists once (rank 0) and shares the result (see ddptrain.train.trainer).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import DataError, missing_data_folder
from .index import Sample, SampleIndex, Samples, read_manifest, scan_images
from .shards import is_remote, is_shard_set, open_shard_set


@dataclass
class Split:
    classes: List[str]
    train: Samples
    val: Samples
    layout: str  # "folders" (split by --val-split), "train/val" (given by the user), "manifest" or "shards"
    root: Any  # a Path; a URL string for remote shards


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


def load_split(root: str | Path, val_split: float, seed: int) -> Split:
    """The classes and the train/validation samples of --data: a shard set, a CSV manifest or a folder."""
    if is_shard_set(str(root)):
        classes, train, val = open_shard_set(str(root))
        return Split(classes, train, val, "shards", root if is_remote(str(root)) else Path(root).resolve())
    if is_manifest(root):
        return load_manifest_split(Path(root), val_split, seed)
    root = Path(root).resolve()
    if is_train_val_layout(root):
        classes, train_images = scan_classes(root / "train")
        _, val_images = scan_classes(root / "val", classes)
        train, _ = stratified_split(train_images, classes, 0.0, seed, root)
        val = SampleIndex.from_pairs(root, ((p, label) for label, name in enumerate(classes) for p in val_images[name]))
        return Split(classes, train, val, "train/val", root)
    classes, images = scan_classes(root)
    if len(classes) < 2:
        raise DataError(f"{root} has one class folder ({classes[0]}); a classifier needs at least two")
    train, val = stratified_split(images, classes, val_split, seed, root)
    return Split(classes, train, val, "folders", root)


def load_manifest_split(path: Path, val_split: float, seed: int) -> Split:
    """A `path,label[,split]` CSV: split like a folder of class folders (or as its `split` column says)."""
    if not path.is_file():
        raise DataError(f"--data {path}: no such manifest file (a CSV with the columns path,label)")
    classes, images, given = read_manifest(path)
    root = path.resolve().parent
    if len(classes) < 2:
        raise DataError(f"{path} has one label ({classes[0]}); a classifier needs at least two")
    if given:
        pairs = [(p, label) for label, name in enumerate(classes) for p in images[name]]
        train = SampleIndex.from_pairs(root, ((p, c) for p, c in pairs if given[p] == "train"))
        val = SampleIndex.from_pairs(root, ((p, c) for p, c in pairs if given[p] == "val"))
    else:
        train, val = stratified_split(images, classes, val_split, seed, root)
    return Split(classes, train, val, "manifest", root)


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
        found, images, _ = read_manifest(Path(root))
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise DataError(f"{root} has labels the model does not know: {', '.join(unknown)}")
        base = Path(root).resolve().parent
        images = {name: images.get(name, []) for name in classes}
    else:
        base = Path(root).resolve()
        _, images = scan_classes(base, classes)
    return SampleIndex.from_pairs(base, ((p, label) for label, name in enumerate(classes) for p in images[name]))


def split_lines(split: Split) -> Dict[str, List[str]]:
    """The split as its files hold it: `relative/path.jpg<TAB>class` per image, for train and for val."""
    return {
        name: [f"{samples.relative(i)}\t{split.classes[samples.labels[i]]}" for i in range(len(samples))]
        for name, samples in (("train", split.train), ("val", split.val))
    }


def samples_digest(part) -> str:
    """A digest of a part's relative paths and labels, from its arrays (no per-sample work)."""
    names = getattr(part, "names", part)  # shards keep the names of the files they were made from
    digest = hashlib.sha1()
    for array in (names.blob, names.offsets, part.labels):
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def split_summary(split: Split) -> Dict[str, object]:
    """What a checkpoint keeps of its split: a digest of both file lists and their sizes."""
    lines = split_lines(split)
    digest = hashlib.sha1("\n".join([*lines["train"], "--", *lines["val"]]).encode()).hexdigest()[:16]
    return {"digest": digest, "train": len(split.train), "val": len(split.val)}


def write_split_files(split: Split, run_dir: Path) -> None:
    """class_indices.json and the two split lists, relative to the data root (rank 0 only)."""
    indices = {str(i): name for i, name in enumerate(split.classes)}
    (run_dir / "class_indices.json").write_text(json.dumps(indices, indent=2) + "\n")
    split_dir = run_dir / "splits"
    split_dir.mkdir(parents=True, exist_ok=True)
    for name, lines in split_lines(split).items():
        (split_dir / f"{name}.txt").write_text("".join(line + "\n" for line in lines))


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
    stored = Split(classes, train, val, scanned.layout, scanned.root)
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
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            relative, _, name = line.rstrip("\n").rpartition("\t")
            if not relative or name not in label_of:
                raise DataError(
                    f"{path}:{number} is not a split line (relative/path<TAB>class name); the run's split files "
                    "were changed or damaged"
                )
            samples.append((relative, label_of[name]))
    return SampleIndex.from_pairs(root, samples)

"""Find the images under a data root, name the classes and split train/validation deterministically.

Every rank computes the same result on its own from sorted relative paths and the seed, so no
file list has to be broadcast and two machines agree without talking.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import DataError, missing_data_folder
from .images import is_image_file

Sample = Tuple[str, int]  # (absolute path, class index)


@dataclass
class Split:
    classes: List[str]
    train: List[Sample]
    val: List[Sample]
    layout: str  # "folders" (split by --val-split) or "train/val" (given by the user)
    root: Path


def list_class_images(class_dir: Path) -> List[Path]:
    return sorted(
        (p for p in class_dir.rglob("*") if p.is_file() and is_image_file(p)),
        key=lambda p: p.relative_to(class_dir).as_posix(),
    )


def class_folders(root: Path) -> List[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def scan_classes(root: Path, classes: Optional[Sequence[str]] = None) -> Tuple[List[str], Dict[str, List[Path]]]:
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
    images: Dict[str, List[Path]], classes: Sequence[str], val_split: float, seed: int
) -> Tuple[List[Sample], List[Sample]]:
    """Hold out round(n * val_split) images of every class (at least one when val_split > 0 and n > 1)."""
    train: List[Sample] = []
    val: List[Sample] = []
    for label, name in enumerate(classes):
        paths = [str(p) for p in images[name]]
        if not paths:
            raise DataError(f"class folder '{name}' has no images (extensions: jpg jpeg png bmp webp tif tiff)")
        # Python's Random with an int seed gives the same sequence on every platform.
        random.Random(f"{seed}:{name}").shuffle(paths)
        n_val = round(len(paths) * val_split)
        if val_split > 0 and n_val == 0 and len(paths) > 1:
            n_val = 1
        val += [(p, label) for p in sorted(paths[:n_val])]
        train += [(p, label) for p in sorted(paths[n_val:])]
    return train, val


def is_train_val_layout(root: Path) -> bool:
    return (root / "train").is_dir() and (root / "val").is_dir()


def load_split(root: str | Path, val_split: float, seed: int) -> Split:
    root = Path(root).resolve()
    if is_train_val_layout(root):
        classes, train_images = scan_classes(root / "train")
        _, val_images = scan_classes(root / "val", classes)
        train, _ = stratified_split(train_images, classes, 0.0, seed)
        val = [(str(p), label) for label, name in enumerate(classes) for p in val_images[name]]
        return Split(classes, train, val, "train/val", root)
    classes, images = scan_classes(root)
    if len(classes) < 2:
        raise DataError(f"{root} has one class folder ({classes[0]}); a classifier needs at least two")
    train, val = stratified_split(images, classes, val_split, seed)
    return Split(classes, train, val, "folders", root)


def classes_without_validation(split: Split) -> List[str]:
    present = {label for _, label in split.val}
    return [name for i, name in enumerate(split.classes) if i not in present]


def all_images(root: str | Path, classes: Sequence[str]) -> List[Sample]:
    """Every image under root/<class>/, labelled by its position in `classes` (for evaluating a test folder)."""
    _, images = scan_classes(Path(root).resolve(), classes)
    return [(str(p), label) for label, name in enumerate(classes) for p in images[name]]


def split_lines(split: Split) -> Dict[str, List[str]]:
    """The split as its files hold it: `relative/path.jpg<TAB>class` per image, for train and for val."""
    return {
        name: [f"{Path(p).relative_to(split.root).as_posix()}\t{split.classes[label]}" for p, label in samples]
        for name, samples in (("train", split.train), ("val", split.val))
    }


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
    missing = sorted(p for p, _ in train + val if not Path(p).is_file())
    if missing:
        raise DataError(
            f"{len(missing)} image(s) of the run's split ({split_dir}) are gone from {scanned.root}: "
            f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}; put them back, or start another "
            "run (another --out, or --overwrite)"
        )
    known = {p for p, _ in train + val}
    added = sorted(p for p, _ in scanned.train + scanned.val if p not in known)
    return stored, added


def _read_samples(path: Path, root: Path, classes: List[str]) -> List[Sample]:
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        relative, _, name = line.rpartition("\t")
        if not relative or name not in classes:
            raise DataError(
                f"{path}:{number} is not a split line (relative/path<TAB>class name); the run's split files "
                "were changed or damaged"
            )
        samples.append((str(root / relative), classes.index(name)))
    return samples

"""A folder as a source of data (`--data DIR`): one sub-folder per class (`DIR/<class>/<images>`), split into
train/validation by --val-split (stratified, deterministic given --seed), or `DIR/train/` and `DIR/val/` holding
class folders when the split is given."""

from __future__ import annotations

import logging
import os
import unicodedata
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ...errors import DataError, missing_data_folder
from ...logs import RANK_0_SAYS
from ...util import counted
from ..images import EXTENSIONS_NAMED, is_image_file, left_out_pictures
from ..index import SampleIndex, scan_images
from ..split import Split, stratified_split
from .jsonl import JsonLinesManifestSource
from .manifest import ManifestSource, warn_case_twins
from .parquet import ParquetManifestSource
from .reading import Reading

HINT = "check the data folder"
log = logging.getLogger("ddptrain")


class FolderSource:
    name = "folder"

    def recognises(self, location: str) -> bool:
        return "://" not in location  # the last one asked: any other local path

    def check(self, location: str, reading: Reading) -> None:
        """Two class folders or more, each with an image (found without listing them all)."""
        folder = Path(location)
        if not folder.is_dir():
            raise missing_data_folder(location)
        parts = split_parts(folder)
        if parts is not None:
            _refuse_validation_on_training_images(parts)
        for part in parts or (folder,):
            classes = class_folders(part)
            if not classes:
                raise DataError(no_class_folders(part))
            _refuse_one_folder_twice(part, classes)
            if part == folder:
                _refuse_splits_as_classes(folder, classes)
            if len(classes) < 2 and part == folder:
                raise DataError(
                    f"{part} has one class folder ({classes[0]}); a classifier needs at least two"
                    + _one_level_down(part / classes[0])
                )
            for name in classes:
                if (parts is None or part == parts[0]) and not _has_image(part / name):
                    raise DataError(_no_images(part, name))

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        root = Path(location).resolve()
        parts = split_parts(root)
        if parts is not None:
            _refuse_validation_on_training_images(parts)
            _say_unread_parts(root, parts)
            classes, train_images = scan_classes(parts[0])
            warn_case_twins(parts[0], classes, "class folders")
            _, val_images = scan_classes(parts[1], classes, f"{parts[0]} (the training part) does not have")
            train, _ = stratified_split(train_images, classes, 0.0, seed, root)
            pairs = ((p, label) for label, name in enumerate(classes) for p in val_images[name])
            val = SampleIndex.from_pairs(root, pairs)
            return Split(classes, train, val, "train/val", root, source=f"folder {root}", hint=HINT, by_data=True)
        classes, images = scan_classes(root)
        _refuse_splits_as_classes(root, classes)
        warn_case_twins(root, classes, "class folders")
        if len(classes) < 2:
            raise DataError(f"{root} has one class folder ({classes[0]}); a classifier needs at least two")
        train, val = stratified_split(images, classes, val_split, seed, root)
        return Split(classes, train, val, "folders", root, source=f"folder {root}", hint=HINT)

    def all_images(self, location: str, classes: Sequence[str], reading: Reading) -> SampleIndex:
        base = Path(location).resolve()
        _, images = scan_classes(base, classes)
        samples = SampleIndex.from_pairs(base, ((p, label) for label, name in enumerate(classes) for p in images[name]))
        samples.source, samples.hint = f"folder {base}", HINT
        return samples


# A folder laid out by split: its training part and its validation part by the names datasets use for them
# (Roboflow's exports: train/, valid/, test/), in any case. Other split names are never classes either.
TRAIN_NAMES = ("train", "training")
VAL_NAMES = ("val", "valid", "validation")
SPLIT_NAMES = frozenset(TRAIN_NAMES + VAL_NAMES + ("test", "testing", "eval", "dev"))


def split_parts(root: Path) -> Optional[Tuple[Path, Path]]:
    """(training part, validation part) of a folder laid out by split; None for a folder of class folders."""
    try:
        folders = {p.name.lower(): p for p in sorted(root.iterdir()) if p.is_dir()}
    except OSError:
        return None
    train = next((folders[name] for name in TRAIN_NAMES if name in folders), None)
    val = next((folders[name] for name in VAL_NAMES if name in folders), None)
    return (train, val) if train is not None and val is not None else None


def is_train_val_layout(root: Path) -> bool:
    return split_parts(root) is not None


def _refuse_one_folder_twice(root: Path, classes: Sequence[str]) -> None:
    """Two class folders that are one folder (one a link to the other) would give each of its images both labels,
    and could put an image in training under one and in validation under the other: refused, naming them."""
    first: Dict[Tuple[int, int], str] = {}
    for name in classes:
        earlier = first.setdefault(_identity(root / name), name)
        if earlier != name:
            raise DataError(
                f"{root}: class folders {earlier} and {name} are one folder (a link to it): each of its images would "
                "carry both labels; remove the link, or give each class its own images"
            )


def _refuse_validation_on_training_images(parts: Tuple[Path, Path]) -> None:
    """A validation part that is the training part, or holds one of its class folders (a link made to fill val/),
    would measure the model on images it trained on: refused, naming the two."""
    train, val = parts
    pairs = [(train, val)] + [(train / name, val / name) for name in class_folders(val)]
    for trained, validated in pairs:
        if validated.is_dir() and _identity(trained) == _identity(validated):
            raise DataError(
                f"{validated} is {trained} (a link to it): validation would measure the images the model trains on; "
                "give the validation part images of its own, or give --data the training part alone to hold some out "
                "by --val-split"
            )


def _identity(folder: Path) -> Tuple[int, int]:
    try:
        info = os.stat(folder)
    except OSError:
        return (-1, id(folder))  # unreadable: unlike every other folder
    return info.st_dev, info.st_ino


def _refuse_splits_as_classes(root: Path, classes: Sequence[str]) -> None:
    """A folder whose class folders are named as splits and hold class folders themselves (train/ and test/, no
    val/) would train a classifier of splits: refused, naming the fix."""
    splits = [name for name in classes if name.lower() in SPLIT_NAMES and class_folders(root / name)]
    if len(splits) < 2:
        return
    inner = class_folders(root / splits[0])
    train = next((name for name in splits if name.lower() in TRAIN_NAMES), splits[0])
    raise DataError(
        f"{root}: its folders {', '.join(splits)} are splits, not classes (each holds class folders: "
        f"{', '.join(inner[:5])}{', ...' if len(inner) > 5 else ''}); ddptrain takes the training part from train/ "
        f"and the validation part from val/ (or valid/, validation/): name them so, or give --data {root / train} "
        "to split it by --val-split"
    )


def _say_unread_parts(root: Path, parts: Tuple[Path, Path]) -> None:
    """One line for the other split folders beside train/ and val/ (a test/ part): not read in training."""
    others = [name for name in class_folders(root) if name.lower() in SPLIT_NAMES and root / name not in parts]
    if others:
        log.info(
            "%s: %s not read in training (training from %s/, validation from %s/); evaluate on it with ddptrain "
            "eval --data %s --split all",
            root,
            ", ".join(f"{name}/" for name in others) + (" is" if len(others) == 1 else " are"),
            parts[0].name,
            parts[1].name,
            root / others[0],
            extra=RANK_0_SAYS,
        )


def list_class_images(class_dir: Path, other_pictures: Optional[List[str]] = None) -> List[str]:
    """Absolute paths of the images under `class_dir`, sorted by their path inside it; the pictures it holds in
    other formats are appended to `other_pictures` (paths from the folder above)."""
    prefix = str(class_dir) + "/"
    others: List[str] = []
    images = [prefix + relative for relative in scan_images(class_dir, others)]
    if other_pictures is not None:
        other_pictures += [f"{class_dir.name}/{relative}" for relative in others]
    return images


# Folders that archivers and file systems make beside the data, never a class: a Mac's zip (__MACOSX, holding a
# "._" copy of every file), a disk's lost+found, Windows' recycle bin and volume information, a Synology NAS's index.
NOT_CLASSES = frozenset({"__MACOSX", "lost+found", "$RECYCLE.BIN", "System Volume Information", "@eaDir"})


def class_folders(root: Path) -> List[str]:
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_CLASSES
    )


def _one_level_down(inner: Path) -> str:
    """The hint for a folder whose one sub-folder is the dataset itself (an archive unpacked into a folder of its
    own name): empty when it is not."""
    try:
        looks_like_data = is_train_val_layout(inner) or len(class_folders(inner)) >= 2
    except OSError:
        return ""
    if looks_like_data:
        return f"; {inner} looks like the dataset itself: --data {inner}"
    manifest = _labels_file(inner)
    return f"; {inner} {_labels_hint(inner, manifest)}" if manifest else ""


# Files beside the images that label them, as datasets ship them: a manifest ddptrain reads (a Hugging Face
# `imagefolder` keeps its labels in metadata.csv or metadata.jsonl).
MANIFEST_SUFFIXES = tuple(
    suffix for kind in (ManifestSource, JsonLinesManifestSource, ParquetManifestSource) for suffix in kind.suffixes
)


def no_class_folders(folder: Path) -> str:
    """Why `folder` gives no classes, and what to give instead: the labels file it holds (a Hugging Face
    imagefolder's metadata.csv), or, when it holds images itself (one class's folder given as the dataset), the
    folder above it where that one holds the class folders."""
    said = f"{folder} has no class sub-folders; expected {folder}/<class name>/<images>"
    manifest = _labels_file(folder)
    if manifest is not None:
        return f"{said}; it {_labels_hint(folder, manifest)}"
    try:
        images = sum(1 for entry in os.scandir(folder) if entry.is_file() and is_image_file(entry.name))
        above = len(class_folders(folder.parent)) >= 2
    except OSError:
        return said
    if not images:
        return said
    where = (
        f"give the folder above it, which holds one folder per class: --data {folder.parent}"
        if above
        else "put each class's images in a folder of its own, or list them in a path,label CSV and give that"
    )
    return f"{said}; it holds {counted(images, 'image')} itself, as one class's folder does: {where}"


def _labels_file(folder: Path) -> Optional[str]:
    """The name of the first file in `folder` that can label its images (MANIFEST_SUFFIXES)."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
    except OSError:
        return None
    return next((name for name in names if name.lower().endswith(MANIFEST_SUFFIXES)), None)


def _labels_hint(folder: Path, name: str) -> str:
    return f"holds {name}: to read the labels it lists, give --data {folder / name}"


def scan_classes(
    root: Path, classes: Optional[Sequence[str]] = None, unknown_to: str = "the model does not know"
) -> Tuple[List[str], Dict[str, List[str]]]:
    """Classes are the sorted sub-folders of `root` (or the given list); return their image paths."""
    if not root.is_dir():
        raise missing_data_folder(root)
    found = class_folders(root)
    if not found:
        raise DataError(no_class_folders(root))
    classes = list(classes) if classes is not None else found
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise DataError(f"{root} has class folders {unknown_to}: {', '.join(unknown)}" + _other_forms(unknown, classes))
    _refuse_one_folder_twice(root, classes)
    others: List[str] = []
    images = {name: list_class_images(root / name, others) if (root / name).is_dir() else [] for name in classes}
    if others:
        log.warning("%s", left_out_pictures(root, others), extra=RANK_0_SAYS)
    return classes, images


def _other_forms(unknown: Sequence[str], classes: Sequence[str]) -> str:
    """Where an unknown folder is a known class's name in another Unicode form (looks the same, is not): how to
    rename it."""
    known = {unicodedata.normalize("NFC", name): name for name in classes}
    twins = [(name, known[form]) for name in unknown if (form := unicodedata.normalize("NFC", name)) in known]
    if not twins:
        return ""
    name, ours = twins[0]
    return (
        f" ({ascii(name)} is {ascii(ours)} written in another Unicode form, as macOS writes names; rename the "
        "folders to one form, e.g. convmv -r -f utf8 -t utf8 --nfc --notest DIR)"
    )


def _no_images(part: Path, name: str) -> str:
    """Why a class folder gives no images: what it holds instead, when those are pictures in other formats."""
    others: List[str] = []
    try:
        scan_images(part / name, others)
    except OSError:
        others = []
    if others:
        return f"class folder '{name}' in {part} has no images ddptrain reads; {left_out_pictures(part / name, others)}"
    return f"class folder '{name}' in {part} has no images (extensions: {EXTENSIONS_NAMED})"


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

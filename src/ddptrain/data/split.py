"""A split of the data into training and validation: the classes, the two parts (`Samples`), and what a run keeps
of it — `splits/{train,val}.txt` (the source of truth once written: a resume and `eval --split val` read it back)
and a digest in every checkpoint. Listing and splitting each kind of data is its source's job (`data/sources/`);
`stratified_split` is the split every source that splits uses: a pure function of the sorted relative paths and the
seed, so two machines that list the same files agree without talking.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..errors import DataError
from ..util import counted
from . import copies, splitfile
from .images import EXTENSIONS_NAMED
from .index import LABEL_SEPARATOR, Sample, SampleIndex, Samples, label_text

log = logging.getLogger("ddptrain")


@dataclass
class Split:
    """The classes and the two parts of --data, how they were made (`layout`, for messages), where they come from
    (`root`, `source`, `hint`: what to check when many images cannot be read), and whether the split is fixed by
    the data itself (a shard set's: a run never reads its own split files back over it)."""

    classes: List[str]
    train: Samples
    val: Samples
    layout: str  # "folders" (split by --val-split), "train/val" (given by the user), "manifest" or "shards"
    root: Any  # a Path; a URL string for remote shards
    made_with: Dict[str, Any] = field(default_factory=dict)  # a shard set: the --seed and --val-split it was split by
    source: str = ""  # "folder /d", "CSV manifest /d/list.csv", "shard set URL"
    hint: str = ""
    fixed: bool = False
    by_data: bool = False  # the data gives the split itself (train/ and val/, a split column, its own validation part)

    def __post_init__(self) -> None:
        for part in (self.train, self.val):
            if isinstance(part, SampleIndex):
                part.source = part.source or self.source
                part.hint = part.hint or self.hint


def stratified_split(
    images: Dict[str, List[str]], classes: Sequence[str], val_split: float, seed: int, root: Path
) -> Tuple[SampleIndex, SampleIndex]:
    """Hold out round(n * val_split) images of every class (at least one when val_split > 0 and n > 1)."""
    train: List[Sample] = []
    val: List[Sample] = []
    for label, name in enumerate(classes):
        paths = list(images[name])
        if not paths:
            raise DataError(f"class folder '{name}' has no images (extensions: {EXTENSIONS_NAMED})")
        # Python's Random with an int seed gives the same sequence on every platform.
        random.Random(f"{seed}:{name}").shuffle(paths)
        n_val = round(len(paths) * val_split)
        if val_split > 0 and n_val == 0 and len(paths) > 1:
            n_val = 1
        val += [(p, label) for p in sorted(paths[:n_val])]
        train += [(p, label) for p in sorted(paths[n_val:])]
    return SampleIndex.from_pairs(root, train), SampleIndex.from_pairs(root, val)


def held_out(count: int, val_split: float, seed: int) -> Set[int]:
    """--task multilabel (no class to stratify by): the positions of round(count x val_split) of `count` samples, at
    least one when val_split > 0 and count > 1, drawn by the seed — a function of the count and the seed alone."""
    order = list(range(count))
    random.Random(f"{seed}:multilabel").shuffle(order)
    n_val = round(count * val_split)
    return set(order[: max(n_val, 1 if val_split > 0 and count > 1 else 0)])


def classes_without_validation(split: Split) -> List[str]:
    present = set(split.val.labels.tolist())
    return [name for i, name in enumerate(split.classes) if i not in present]


def unvalidated_classes(split: Split, val_split: float) -> str:
    """The warning for classes the validation part holds no image of ('' when it holds every class): why, by how
    the split was made, and at most 8 of them by name."""
    missing = classes_without_validation(split)
    if not missing:
        return ""
    one = len(missing) == 1
    made_here = split.layout in ("folders", "manifest")  # a manifest's split column is rare: said as by --val-split
    why = f"too few images for --val-split {val_split}" if made_here else "the data's own split"
    named = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)" if len(missing) > 8 else "")
    return (
        f"no validation image for {'class' if one else 'classes'} {named} ({why}): {'its' if one else 'their'} "
        "accuracy is not measured"
    )


def split_entries(split: Split) -> Dict[str, List[Tuple[str, str]]]:
    """The split as its files hold it: (relative path, class name) per image, for train and for val."""
    return {
        name: [(samples.relative(i), label_text(samples, i, split.classes)) for i in range(len(samples))]
        for name, samples in (("train", split.train), ("val", split.val))
    }


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
    return f"{counted(len(added), 'image')} added to {root} since the run's split was written are left out of {where}: {shown}"


# What to do when images of a run's split are not in the folder given: resuming a run needs them all
RESUME_FIX = (
    "give --data the run's own folder (or put the images back), or start another run (another --out, or --overwrite)"
)


def read_run_split(run_dir: Path, scanned: Split, fix: str = RESUME_FIX) -> Optional[Tuple[Split, List[str]]]:
    """The run's own split, read back from RUN_DIR/splits (the source of truth once written), checked against
    what the data folder holds now (`scanned`): (split, files added to the folder since). A file of the split
    that is gone (`fix` says what to do), or a class folder the run does not know, is an error naming them.
    None: no split written."""
    split_dir = run_dir / "splits"
    files = [run_dir / "class_indices.json", split_dir / "train.txt", split_dir / "val.txt"]
    if not all(f.is_file() for f in files):
        return None
    indices = json.loads(files[0].read_text())
    classes = [indices[str(i)] for i in range(len(indices))]
    unknown = sorted(set(scanned.classes) - set(classes))
    if unknown:
        kind = "class folder" if scanned.layout in ("folders", "train/val") else "class"
        what = f"a {kind}" if len(unknown) == 1 else counted(len(unknown), kind).split(" ", 1)[1]
        raise DataError(
            f"cannot resume or evaluate this run on {scanned.root}: it has {what} "
            f"{', '.join(repr(c) for c in unknown)} that the run's split ({split_dir}) does not know; "
            "a model trained on the run's classes cannot learn or score them. Start another run (another "
            "--out, or --overwrite) for another class list"
        )
    multilabel = getattr(scanned.train, "targets", None) is not None
    train, val = (_read_samples(f, scanned.root, classes, multilabel) for f in files[1:])
    stored = Split(classes, train, val, scanned.layout, scanned.root, source=scanned.source, hint=scanned.hint)
    listed = {scanned.train.relative(i) for i in range(len(scanned.train))}
    listed.update(scanned.val.relative(i) for i in range(len(scanned.val)))
    known = [part.relative(i) for part in (train, val) for i in range(len(part))]
    missing = sorted(stored.root / relative for relative in set(known) - listed)
    if len(missing) == len(set(known)):
        raise DataError(
            f"none of the {counted(len(missing), 'image')} of the run's split ({split_dir}) is in {scanned.root}: "
            f"it is not the folder the run was trained on; {fix}"
        )
    if missing:
        raise DataError(
            f"{counted(len(missing), 'image')} of the run's split ({split_dir}) {'is' if len(missing) == 1 else 'are'} gone from {scanned.root}: "
            f"{', '.join(map(str, missing[:5]))}{' ...' if len(missing) > 5 else ''}; {fix}"
        )
    added = sorted(str(scanned.root / relative) for relative in listed - set(known))
    return stored, added


def _read_samples(path: Path, root: Path, classes: List[str], multilabel: bool = False) -> SampleIndex:
    """A split file's samples; with `multilabel`, each line's label is its classes joined by `|`."""
    label_of = {name: i for i, name in enumerate(classes)}
    samples: List[Tuple[str, List[int]]] = []
    for number, relative, name in splitfile.read(path):
        parts = name.split(LABEL_SEPARATOR) if multilabel else [name]
        if not all(part in label_of for part in parts):
            raise DataError(
                f"{path}:{number} names class {name!r}, which is not in the run's class_indices.json; the run's "
                "split files were changed or damaged"
            )
        samples.append((relative, [label_of[part] for part in parts]))
    if multilabel:
        return SampleIndex.from_label_sets(root, samples, len(classes))
    return SampleIndex.from_pairs(root, ((relative, labels[0]) for relative, labels in samples))


def run_split(
    listed: Split, run_dir: Optional[Path], where: str, say: bool, fix: str = RESUME_FIX
) -> Tuple[Split, bool]:
    """The split a run trains (or is evaluated) on: `listed` — what the data holds now, its validation copies of
    training pictures moved to training (data/copies.py) — unless the run in `run_dir`
    wrote its own, which is then read back (images added since are left out of `where`, said once when `say`; a
    fixed split, a shard set's, is always the data's own; images of it that are gone: `fix` says what to do).
    Whether it was read back."""
    found = read_run_split(run_dir, listed, fix) if run_dir is not None and not listed.fixed else None
    if found is None:
        return without_copies(listed, say), False
    split, added = found
    if added and say:
        log.warning("%s", describe_added(added, split.root, where))
    return split, True


def without_copies(split: Split, say: bool = True) -> Split:
    """`split` with its validation copies of training pictures (data/copies.py) moved to training, said; where the
    data gives the split, the copies said with the fix and the split kept."""
    if not copies.checkable(split.train, split.val):
        return split
    train, val = split.train, split.val
    assert isinstance(train, SampleIndex) and isinstance(val, SampleIndex)
    found = copies.copies_across(train, val)
    where = split.source or split.root
    if found is None:
        if say:
            log.info(
                "%s: not checked for copies of training images in validation: too many images share a size and "
                "their first 4 KiB to compare whole (more than %d MB to read)",
                where,
                copies.MAX_COMPARED_BYTES >> 20,
            )
        return split
    if not found:
        return split
    pairs = copies.described(val, train, found)
    if split.by_data:
        if say:
            log.warning(
                "%s: %d validation images are byte-identical copies of training images (%s): their scores measure "
                "memory, not generalisation; remove the copies from the validation part",
                where,
                len(found),
                pairs,
            )
        return split
    split.train, split.val = copies.moved_to_training(train, val, found)
    if say:
        log.warning(
            "%s: %d validation images were byte-identical copies of training images (%s); they were moved to "
            "training, so validation holds %d images%s",
            where,
            len(found),
            pairs,
            len(split.val),
            "" if len(split.val) else ": the run trains without validation (every validation image had a copy)",
        )
    return split

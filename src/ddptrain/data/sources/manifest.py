"""A `path,label[,split]` manifest as a source of data (`--data list.csv`): paths relative to the manifest's folder or
absolute, split like a folder of class folders unless a `split` column says train/val. Repeated rows are dropped with
a warning, an image with two labels or two splits is refused naming both lines, labels that write the same integer
are one class. `ManifestSource` reads CSV; a manifest in another file format is a subclass that says how its rows
are read (`rows`): every check above is `manifest_from_rows`'."""

from __future__ import annotations

import csv
import logging
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ...errors import DataError
from ..index import LABEL_SEPARATOR, SampleIndex
from ..split import Split, held_out, stratified_split
from .reading import DEFAULT_LABEL_KEY, Reading

log = logging.getLogger("ddptrain")
ROWS_CHECKED = 20  # before launch: when none of the first rows names a file, every row's path is wrong


Row = Tuple[int, str, str, Optional[str]]  # (line, path, label, split: None when the manifest has no split column)


class ManifestSource:
    keyed_labels = "column"  # --label-key names the column its labels are read from
    name = "manifest"
    kind = "CSV manifest"  # what messages call it
    suffixes: Tuple[str, ...] = (".csv",)
    multilabel = True  # --task multilabel: labels a|b|c

    def recognises(self, location: str) -> bool:
        return location.lower().endswith(self.suffixes) and "://" not in location

    def rows(self, path: Path, label: Optional[str] = None) -> Iterator[Row]:
        """The manifest's rows as they are written, numbered as a user finds them in the file; `label`: the column
        --label-key names (None: the label column found by name)."""
        return _csv_rows(path, label)

    def read(self, path: Path, reading: Reading = Reading()) -> Manifest:
        rows = self.rows(self._existing(path), label_column(reading))
        return manifest_from_rows(path, rows, reading.multilabel)

    def _existing(self, path: Path) -> Path:
        if not path.is_file():
            raise DataError(f"--data {path}: no such manifest file (a {self.kind} with the columns path,label)")
        return path

    def check(self, location: str, reading: Reading) -> None:
        path = Path(location)
        manifest = self.read(path, reading)
        first = [p for name in manifest.classes for p in manifest.by_class[name][:ROWS_CHECKED]][:ROWS_CHECKED]
        classes = label_sets(manifest)[0] if reading.multilabel else manifest.classes
        check_listed(path, classes, first)
        if reading.known and not reading.multilabel and any(LABEL_SEPARATOR in name for name in classes):
            log.warning(
                "%s: labels such as %r hold '|': each is one class here; for several classes per image add "
                "--task multilabel",
                path,
                next(name for name in classes if LABEL_SEPARATOR in name),
            )
        spaced = spaced_tag_lists(classes) if reading.multilabel else None
        if spaced is not None:
            log.warning(
                "%s: labels such as %r list names apart by spaces, not '|': each whole label is one class here (%s in "
                "all); for several classes per image write them as %r",
                path,
                spaced,
                len(classes),
                LABEL_SEPARATOR.join(spaced.split()),
            )

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        path = Path(location)
        manifest = self.read(path, reading)
        manifest.warn_repeats(path)
        if reading.multilabel:
            return self._multilabel_split(path, manifest, val_split, seed)
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
        return Split(
            classes, train, val, "manifest", root, source=f"{self.kind} {path}", hint=HINT, by_data=bool(given)
        )

    def _multilabel_split(self, path: Path, manifest: Manifest, val_split: float, seed: int) -> Split:
        """Each image with its classes; held out at random by the seed (round(n x val_split) images), or by the
        split column."""
        classes, pairs = label_sets(manifest)
        root = path.resolve().parent
        if len(classes) < 2:
            raise DataError(f"{path} has one label ({classes[0]}); a classifier needs at least two")
        if manifest.splits:
            val_paths = {p for p, _ in pairs if manifest.splits[p] == "val"}
        else:
            val_paths = {pairs[i][0] for i in held_out(len(pairs), val_split, seed)}
        train = SampleIndex.from_label_sets(root, [(p, c) for p, c in pairs if p not in val_paths], len(classes))
        val = SampleIndex.from_label_sets(root, [(p, c) for p, c in pairs if p in val_paths], len(classes))
        by_data = bool(manifest.splits)
        return Split(classes, train, val, "manifest", root, source=f"{self.kind} {path}", hint=HINT, by_data=by_data)

    def all_images(self, location: str, classes: Sequence[str], reading: Reading) -> SampleIndex:
        path = Path(location)
        manifest = self.read(path, reading)
        manifest.warn_repeats(path)
        if reading.multilabel:
            found, pairs = label_sets(manifest)
            unknown = sorted(set(found) - set(classes))
            if unknown:
                raise DataError(f"{location} has labels the model does not know: {', '.join(unknown)}")
            index_of = {name: i for i, name in enumerate(classes)}
            relabelled = [(p, [index_of[found[c]] for c in labels]) for p, labels in pairs]
            sets = SampleIndex.from_label_sets(path.resolve().parent, relabelled, len(classes))
            sets.source, sets.hint = f"{self.kind} {path}", HINT
            return sets
        unknown = sorted(set(manifest.classes) - set(classes))
        if unknown:
            raise DataError(f"{location} has labels the model does not know: {', '.join(unknown)}")
        labelled = ((p, label) for label, name in enumerate(classes) for p in manifest.by_class.get(name, []))
        samples = SampleIndex.from_pairs(path.resolve().parent, labelled)
        samples.source, samples.hint = f"{self.kind} {path}", HINT
        return samples


def check_listed(path: Path, classes: Sequence[str], first: Sequence[str]) -> None:
    """Before launch: two classes or more, and the first paths (one per class first) not all missing — when none of
    them names a file, every row's path is wrong. Objects in a store (`s3://`...) are fetched when read."""
    if len(classes) < 2:
        raise DataError(f"{path} has one label ({classes[0]}); a classifier needs at least two")
    files = [p for p in first if "://" not in p]
    if files and not any(os.path.isfile(p) for p in files):
        raise DataError(
            f"{path}: none of the {len(files)} paths checked names a file, e.g. {files[0]}; relative paths in a "
            f"manifest are relative to its folder ({path.resolve().parent}), or give absolute paths"
            + where_they_are(Path(files[0]), path.resolve().parent)
        )


def where_they_are(missing: Path, base: Path) -> str:
    """Where a manifest's first missing file is after all, as Kaggle's layouts have it: without its extension
    (`image_id` values), or in a sub-folder of the manifest's folder (`train_images/`). Empty when it is not found
    so: the manifest's folder and its sub-folders only, each looked at once."""
    named = next((ext for ext in (".jpg", ".jpeg", ".png") if missing.with_name(missing.name + ext).is_file()), None)
    if named:
        return f"; the files are named with {named} added ({missing.name}{named}): write the names whole"
    try:
        relative = missing.relative_to(base)
        subfolders = sorted(entry for entry in base.iterdir() if entry.is_dir())[:200]
    except (ValueError, OSError):
        return ""
    found = next((folder for folder in subfolders if (folder / relative).is_file()), None)
    if found is None:
        return ""
    return f"; {relative} is in {found}: write the paths as {found.name}/{relative}, or put the manifest in {found}"


HINT = "relative paths in a manifest are relative to its folder; check them, or give absolute ones"


def warn_repeats_dropped(path: Path, count: int, first: Sequence[str]) -> None:
    """The warning for `count` rows that repeat an earlier row exactly (dropped, so that no image is used twice);
    `first` names up to 5 of them, as "line 9 = line 2"."""
    if count:
        log.warning(
            "%s: %s an earlier row exactly and %s dropped (%s%s); each image is used once",
            path,
            "1 row repeats" if count == 1 else f"{count} rows repeat",
            "was" if count == 1 else "were",
            ", ".join(first[:5]),
            " ..." if count > 5 else "",
        )


@dataclass
class Manifest:
    """A `path,label[,split]` CSV, read and checked: its classes, its image paths by class, the split of each path
    when a `split` column gives one, and the line numbers of exact repeats that were dropped."""

    classes: List[str]
    by_class: Dict[str, List[str]]
    splits: Dict[str, str]
    repeated: List[Tuple[int, int]] = field(default_factory=list)  # (line, the line it repeats)

    def warn_repeats(self, path: Path) -> None:
        shown = [f"line {line} = line {first}" for line, first in self.repeated[:5]]
        warn_repeats_dropped(path, len(self.repeated), shown)


def canonical_labels(labels: Iterable[str]) -> Dict[str, str]:
    """Each label text -> its class name: the text itself (Unicode NFC), or, when every label is a whole number,
    that number written plainly, so `1`, `01`, `+1` and `1.0` (pandas writes an integer column that had a gap as
    floats; a JSONL manifest's 1.0 is 1 too) are one class."""
    texts = {label: unicodedata.normalize("NFC", label) for label in labels}
    wholes = {label: _WHOLE.match(text) for label, text in texts.items()}
    if texts and all(wholes.values()):
        return {label: str(int(whole.group(1))) for label, whole in wholes.items() if whole}
    return texts


_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_WHOLE = re.compile(r"^([+-]?[0-9]+)(?:\.0*)?$")  # a whole number, with or without a zero fraction


def numeric_order(names: Iterable[str]) -> List[str]:
    """Class names sorted: as numbers when every one is an integer, else as text."""
    names = list(names)
    numeric = all(_INTEGER.match(name) for name in names)
    return sorted(names, key=(lambda c: (int(c), c)) if numeric else None)


def spaced_tag_lists(classes: Sequence[str]) -> Optional[str]:
    """A label that looks like tags listed apart by spaces (Kaggle's Planet: 'haze primary') where --task multilabel
    reads '|': one whose every word is itself a class, or is a word of another label. None when no label looks so."""
    words = [name.split() for name in classes]
    known = {word for split in words if len(split) == 1 for word in split}
    counts = Counter(word for split in words for word in set(split))
    for name, split in zip(classes, words):
        if len(split) > 1 and all(word in known or counts[word] > 1 for word in split):
            return name
    return None


def label_sets(manifest: Manifest) -> Tuple[List[str], List[Tuple[str, List[int]]]]:
    """--task multilabel: the classes (every name in any a|b|c label, `1`/`01` one class) and each image with its
    class indices, sorted by path."""
    parts = {text: text.split(LABEL_SEPARATOR) for text in manifest.by_class}
    names = canonical_labels({part for split_parts in parts.values() for part in split_parts})
    classes = numeric_order(set(names.values()))
    index_of = {name: i for i, name in enumerate(classes)}
    pairs = [
        (image, sorted({index_of[names[part]] for part in parts[text]}))
        for text, images in manifest.by_class.items()
        for image in images
    ]
    return classes, sorted(pairs)


def read_manifest(path: Path) -> Manifest:
    """A `path,label[,split]` CSV, read and checked (see `manifest_from_rows`)."""
    return manifest_from_rows(path, _csv_rows(path))


def manifest_from_rows(path: Path, rows: Iterable[Row], multilabel: bool = False) -> Manifest:
    """A manifest from its rows. Paths are relative to the manifest's folder or absolute; classes are the labels
    sorted (as numbers when every label is an integer). A row that repeats an earlier one exactly is dropped (and
    counted); an image given two labels or two splits is an error naming both lines, so no image can land in
    training and validation at once."""
    found: Dict[str, Tuple[str, str, int]] = {}  # full path -> (label, split, line)
    repeated: List[Tuple[int, int]] = []
    base = path.resolve().parent
    windows: Optional[bool] = None  # whether a backslash separates folders: decided at the first path holding one
    for number, image, label, which in rows:
        image, label = image.strip(), label.strip()
        if "\\" in image and "://" not in image:
            if windows is None:
                windows = _windows_paths(path, base, image)
            if windows:
                image = image.replace("\\", "/")
        if multilabel:  # a|b|c: the same set however it is written
            label = LABEL_SEPARATOR.join(sorted({part.strip() for part in label.split(LABEL_SEPARATOR)} - {""}))
        if not image or not label:
            raise DataError(f"{path}:{number}: a row needs a path and a label")
        if which is None:
            which = ""
        else:
            which = which.strip().lower()
            if which not in ("train", "val"):
                raise DataError(f"{path}:{number}: split must be train or val, not {which!r}")
        full = image if "://" in image else os.path.normpath(os.path.join(base, image))
        earlier = found.get(full)
        if earlier is None:
            found[full] = (label, which, number)
        elif earlier[:2] == (label, which):
            repeated.append((number, earlier[2]))
        else:
            _conflict(path, image, number, (label, which), earlier)
    if not found:
        raise DataError(f"{path} lists no images")
    return _manifest(path, found, repeated)


def _windows_paths(path: Path, base: Path, image: str) -> bool:
    """Whether a manifest written on Windows separates folders with backslashes (`train\\ants\\1.jpg`, as
    os.path.join writes there): its first such path names no file as written, and one with '/' instead."""
    if os.path.exists(os.path.join(base, image)):
        return False
    if not os.path.exists(os.path.join(base, image.replace("\\", "/"))):
        return False
    log.info("%s: its paths separate folders with '\\' (written on Windows): read with '/'", path)
    return True


def _csv_rows(path: Path, label: Optional[str] = None) -> Iterator[Row]:
    try:
        yield from _csv_rows_unchecked(path, label)
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}:{_first_undecodable_line(path)} is not UTF-8 text ({error.reason}); save the manifest as UTF-8"
        ) from None
    except csv.Error as error:
        raise DataError(f"{path} is not a CSV file ({error})") from None


# The column of each role, by the names manifests are written with (Kaggle's, pandas exports): the first found.
COLUMN_NAMES = {
    "path": (
        *("path", "filepath", "file_path", "filename", "file_name", "file"),
        *("image", "image_path", "image_name", "image_file", "image_id", "img", "img_path"),
    ),
    "label": ("label", "class", "class_name", "category", "target", "labels", "tags"),
    "split": ("split", "subset"),
}


def manifest_columns(path: Path, names: Sequence[str], label: Optional[str] = None) -> Dict[str, str]:
    """The column each role (path, label, split) is read from, among a manifest's column `names` (any case); one
    line says which were taken by another name. `label`: the column --label-key names, refused when there is none
    of that name. Without a path and a label column: refused, naming the columns."""
    lowered = {name.strip().lower(): name for name in names}
    if label is not None and label.strip().lower() not in lowered:
        raise DataError(f"--label-key {label}: {path} has no column of that name (it has {', '.join(names)})")
    chosen = {role: next((lowered[c] for c in choices if c in lowered), None) for role, choices in COLUMN_NAMES.items()}
    if label is not None:
        chosen["label"] = lowered[label.strip().lower()]
    found = {role: name for role, name in chosen.items() if name is not None}
    if "path" not in found or "label" not in found:
        taken = "; ".join(f"{role}: {' '.join(choices)}" for role, choices in COLUMN_NAMES.items())
        raise DataError(
            f"{path} is not a manifest: it needs a path and a label column, e.g. a first line `path,label` "
            f"(found {','.join(names) or 'nothing'}; the names taken, any case: {taken})"
        )
    renamed = [f"{role} from '{name}'" for role, name in found.items() if name.strip().lower() != role]
    if renamed:
        log.info("%s: %s", path, ", ".join(renamed))
    return found


def label_column(reading: Reading) -> Optional[str]:
    """The manifest column --label-key names, when it names one (its default, `cls`, is a tar set's member)."""
    return None if reading.label_key == DEFAULT_LABEL_KEY else reading.label_key


def _csv_rows_unchecked(path: Path, label: Optional[str] = None) -> Iterator[Row]:
    # utf-8-sig: Excel's "CSV UTF-8" starts the file with a byte-order mark, which would stick to the first name
    with open(path, newline="", encoding="utf-8-sig") as handle:
        delimiter = field_separator(handle.readline())
        handle.seek(0)
        reader = csv.DictReader(handle, delimiter=delimiter)
        columns = manifest_columns(path, reader.fieldnames or [], label)
        for number, row in _numbered_rows(reader):
            which = (row.get(columns["split"]) or "") if "split" in columns else None
            yield number, row.get(columns["path"]) or "", row.get(columns["label"]) or "", which


def field_separator(header: str) -> str:
    """A comma; or, in a header line without one, a semicolon (Excel's CSV where the decimal mark is a comma) or a
    tab (a tab-separated export), whichever it holds."""
    if "," in header:
        return ","
    return next((separator for separator in (";", "\t") if separator in header), ",")


def _first_undecodable_line(path: Path) -> int:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0


def _numbered_rows(reader) -> Iterator[Tuple[int, Dict]]:
    """(the line a row starts on, the row): a quoted field may span lines."""
    for row in reader:
        yield reader.line_num - _extra_lines(row), row


def _extra_lines(row: Dict) -> int:
    return sum(str(value).count("\n") for value in row.values() if isinstance(value, str))


def _conflict(path: Path, image: str, number: int, given: Tuple[str, str], earlier: Tuple[str, str, int]) -> None:
    what = "label" if given[0] != earlier[0] else "split"
    values = (given[0], earlier[0]) if what == "label" else (given[1], earlier[1])
    raise DataError(
        f"{path}:{number}: {image} has {what} {values[0]!r} here and {values[1]!r} on line {earlier[2]}; "
        f"give each image one {what} (one row per image)"
    )


def _manifest(path: Path, rows: Dict[str, Tuple[str, str, int]], repeated: List[Tuple[int, int]]) -> Manifest:
    names = canonical_labels({label for label, _, _ in rows.values()})
    by_class: Dict[str, List[str]] = {}
    splits: Dict[str, str] = {}
    for full, (label, which, _) in rows.items():
        by_class.setdefault(names[label], []).append(full)
        if which:
            splits[full] = which
    if splits and len(splits) != len(rows):
        raise DataError(f"{path}: give every row a split (train or val), or none")
    classes = numeric_order(by_class)
    warn_case_twins(path, classes)
    return Manifest(classes, {name: sorted(by_class[name]) for name in classes}, splits, repeated)


def warn_case_twins(where: Path, classes: Sequence[str], what: str = "labels") -> None:
    """Classes whose names differ only in case ('Cat', 'cat': two sources merged, or a folder a case-insensitive
    disk would merge) or in Unicode form (a folder named on a Mac: 'café' decomposed beside 'café' composed) stay two
    classes, said once per pair."""
    folded: Dict[str, str] = {}
    for name in classes:
        other = folded.setdefault(unicodedata.normalize("NFC", name).casefold(), name)
        if other != name:
            forms = unicodedata.normalize("NFC", other) == unicodedata.normalize("NFC", name)
            shown = ascii if forms else repr  # escaped only where the difference is invisible
            log.warning(
                "%s: %s %s and %s %s; they are two classes (rename one if they are the same)",
                where,
                what,
                shown(other),
                shown(name),
                UNICODE_FORMS if forms else CASE,
            )


CASE = "differ only in case"
UNICODE_FORMS = "are one name written in two Unicode forms (composed, and decomposed as macOS writes names)"

"""A `path,label[,split]` Parquet manifest as a source of data (`--data list.parquet`): the CSV manifest's rules
(paths relative to the manifest's folder or absolute, exact repeats dropped with a warning, an image with two labels
or two splits refused naming both rows, labels that write the same integer one class) and the same split for the
same rows, but column-wise with pyarrow: ten million rows are listed in seconds, straight into the compact arrays
every source gives (no Python object per row).
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import DataError
from ..index import LABEL_SEPARATOR, SampleIndex
from ..split import Split
from .manifest import (
    HINT,
    ROWS_CHECKED,
    ManifestSource,
    Row,
    canonical_labels,
    check_listed,
    label_column,
    manifest_columns,
    numeric_order,
    warn_repeats_dropped,
)
from .reading import Reading

log = logging.getLogger("ddptrain")
KIND = "Parquet manifest"


class ParquetManifestSource(ManifestSource):
    multilabel = True  # --task multilabel: row by row through the CSV manifest's reading (labels a|b|c or lists)
    name = "Parquet manifest"
    kind = KIND
    suffixes = (".parquet", ".pq")

    def rows(self, path: Path, label: Optional[str] = None) -> Iterator[Row]:
        """The rows one by one (--task multilabel): a label written a|b|c, or a list of labels."""
        import pyarrow.parquet as pq

        pa, _ = _arrow(path)
        try:
            wanted = manifest_columns(path, pq.read_schema(path).names, label)
            table = pq.read_table(path, columns=list(wanted.values()))
        except (OSError, pa.ArrowException) as error:
            raise DataError(f"{path} is not a Parquet file ({error})") from None
        columns = {role: table.column(name).to_pylist() for role, name in wanted.items()}
        splits = columns.get("split")
        for row, (image, label) in enumerate(zip(columns["path"], columns["label"])):
            text = LABEL_SEPARATOR.join(map(str, label)) if isinstance(label, list) else str(label or "")
            which = None if splits is None else str(splits[row] or "")
            yield row + 1, str(image or ""), text, which

    def check(self, location: str, reading: Reading) -> None:
        if reading.multilabel:
            return super().check(location, reading)
        listed = Listed.read(Path(location), label_column(reading))
        check_listed(Path(location), listed.classes, listed.first_paths(ROWS_CHECKED))

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        if reading.multilabel:
            return super().split(location, val_split, seed, reading)
        path = Path(location)
        listed = Listed.read(path, label_column(reading))
        if len(listed.classes) < 2:
            raise DataError(f"{path} has one label ({listed.classes[0]}); a classifier needs at least two")
        train, val = listed.parts(val_split, seed)
        source, by_data = f"{KIND} {path}", listed.given is not None
        return Split(listed.classes, train, val, "manifest", listed.root, source=source, hint=HINT, by_data=by_data)

    def all_images(self, location: str, classes: Sequence[str], reading: Reading) -> SampleIndex:
        if reading.multilabel:
            return super().all_images(location, classes, reading)
        listed = Listed.read(Path(location), label_column(reading))
        unknown = sorted(set(listed.classes) - set(classes))
        if unknown:
            raise DataError(f"{location} has labels the model does not know: {', '.join(unknown)}")
        listed.relabel(list(classes))
        samples = listed.index(np.arange(len(listed.label)))
        samples.source, samples.hint = f"{KIND} {location}", HINT
        return samples


class Listed:
    """A Parquet manifest's rows, checked and sorted by (class, full path) as the CSV manifest's `by_class` is:
    the full paths (an Arrow string array), each row's class index, and its split when a column gives one."""

    def __init__(self, path: Path, full, label: np.ndarray, classes: List[str], split):
        self.path, self.full, self.label, self.classes, self.given = path, full, label, classes, split
        self.root = path.resolve().parent

    @classmethod
    def read(cls, path: Path, label_key: Optional[str] = None) -> Listed:
        """`label_key`: the column --label-key names (None: the label column found by name)."""
        pa, pc = _arrow(path)
        table = _columns(path, pa, label_key)
        full = _full_paths(table.column("path"), path, pa, pc)
        by_path = pc.sort_indices(full)  # repeats of a path become neighbours; the split needs paths sorted anyway
        full = full.take(by_path)
        rows = by_path.to_numpy()  # each sorted row's place in the file
        codes = {name: _codes(table.column(name).take(by_path), pc) for name in table.column_names if name != "path"}
        keep = _drop_repeats(path, full, rows, codes, pc)
        unique, label_codes = codes["label"]
        names = canonical_labels(unique)
        classes = numeric_order(set(names.values()))
        class_of = {name: i for i, name in enumerate(classes)}
        label = np.asarray([class_of[names[text]] for text in unique], dtype=np.int32)[label_codes[keep]]
        order = keep[np.argsort(label, kind="stable")]  # by class, then path: the CSV manifest's order
        split = None
        if "split" in codes:
            split = _split_column(path, codes["split"], order)
        return cls(path, full.take(pa.array(order)), label[np.argsort(label, kind="stable")], classes, split)

    def first_paths(self, count: int) -> List[str]:
        starts = np.searchsorted(self.label, np.arange(len(self.classes)))
        rows = [int(s) for s in starts[:count] if s < len(self.label)]
        return [self.full[r].as_py() for r in rows][:count]

    def relabel(self, classes: List[str]) -> None:
        """Class indices by `classes` (a model's list) instead of the manifest's own."""
        position = np.asarray([classes.index(name) for name in self.classes], dtype=np.int32)
        self.label, self.classes = position[self.label], classes

    def parts(self, val_split: float, seed: int) -> Tuple[SampleIndex, SampleIndex]:
        if self.given is not None:
            which = self.given
            return self.index(np.flatnonzero(which == "train")), self.index(np.flatnonzero(which == "val"))
        return self._stratified(val_split, seed)

    def _stratified(self, val_split: float, seed: int) -> Tuple[SampleIndex, SampleIndex]:
        """The CSV manifest's split (data/split.stratified_split) for the same rows: each class's sorted paths
        shuffled by Random(f"{seed}:{class}") — a permutation that depends only on their number — its first
        round(n * val_split) held out."""
        is_val = np.zeros(len(self.label), dtype=bool)
        starts = np.searchsorted(self.label, np.arange(len(self.classes) + 1))
        for i, name in enumerate(self.classes):
            n = int(starts[i + 1] - starts[i])
            if n == 0:
                raise DataError(f"class '{name}' has no images")
            n_val = round(n * val_split)
            if val_split > 0 and n_val == 0 and n > 1:
                n_val = 1
            order = list(range(n))
            random.Random(f"{seed}:{name}").shuffle(order)
            is_val[starts[i] + np.asarray(order[:n_val], dtype=np.int64)] = True
        return self.index(np.flatnonzero(~is_val)), self.index(np.flatnonzero(is_val))

    def index(self, rows: np.ndarray) -> SampleIndex:
        """The rows (in their sorted order) as a SampleIndex: paths under the manifest's folder kept relative."""
        import pyarrow as pa
        import pyarrow.compute as pc

        chosen = self.full.take(pa.array(rows, pa.int64()))
        prefix = str(self.root).rstrip("/") + "/"
        inside = pc.starts_with(chosen, prefix)
        relative = pc.if_else(inside, pc.utf8_slice_codeunits(chosen, len(prefix)), chosen)
        blob, offsets = _buffers(relative.cast(pa.large_string()), pa)
        return SampleIndex(str(self.root), blob, offsets, self.label[rows].astype(np.int32))


def _arrow(path: Path):
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        raise DataError(f"--data {path}: a Parquet manifest needs pyarrow: pip install 'ddptrain[parquet]'") from None
    return pa, pc


def _columns(path: Path, pa, label: Optional[str] = None):
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DataError(f"--data {path}: no such manifest file (a {KIND} with the columns path,label)")
    try:
        wanted = manifest_columns(path, pq.read_schema(path).names, label)
        table = pq.read_table(path, columns=list(wanted.values()))
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path} is not a Parquet file ({error})") from None
    role_of = {name: role for role, name in wanted.items()}
    table = table.rename_columns([role_of[name] for name in table.column_names])
    columns = [_text(path, table, name, pa) for name in table.column_names]
    table = pa.table(dict(zip(table.column_names, columns)))
    if table.num_rows == 0:
        raise DataError(f"{path} lists no images")
    return table


def _text(path: Path, table, name: str, pa):
    """A column as stripped text; a missing path or label is an error naming the first such row."""
    import pyarrow.compute as pc

    try:
        column = pc.utf8_trim_whitespace(table.column(name).cast(pa.string()))
    except pa.ArrowException as error:
        raise DataError(
            f"{path}: column {name} is not UTF-8 text ({error}); write paths and labels as strings"
        ) from None
    if name == "split":
        column = pc.utf8_lower(pc.fill_null(column, ""))
        bad = pc.invert(pc.is_in(column, value_set=pa.array(["train", "val"])))
        if pc.any(bad).as_py():
            row = int(pc.index(bad, True).as_py())
            raise DataError(f"{path}: row {row + 1}: split must be train or val, not {column[row].as_py()!r}")
        return column
    empty = pc.or_(pc.is_null(column), pc.equal(pc.fill_null(column, ""), ""))
    if pc.any(empty).as_py():
        raise DataError(f"{path}: row {int(pc.index(empty, True).as_py()) + 1}: a row needs a path and a label")
    return column


def _full_paths(column, path: Path, pa, pc):
    """Paths joined to the manifest's folder when relative, normalised as os.path.normpath does (in Python only
    for the rare rows that need it)."""
    base = str(path.resolve().parent).rstrip("/") + "/"
    url = pc.match_substring(column, "://")  # an object in a store (s3://, https://): kept as written
    absolute = pc.or_(pc.starts_with(column, "/"), url)
    joined = pc.if_else(absolute, column, pc.binary_join_element_wise(base, column, ""))
    odd = pc.and_not(
        pc.match_substring_regex(column, r"/\.|//|^\.|/$"), url
    )  # the base is normalised: only the written part can be odd
    joined = joined.combine_chunks() if hasattr(joined, "combine_chunks") else joined
    if not pc.any(odd).as_py():
        return joined
    odd = odd.combine_chunks() if hasattr(odd, "combine_chunks") else odd
    fixed = [os.path.normpath(text) for text in joined.filter(odd).to_pylist()]
    return pc.replace_with_mask(joined, odd, pa.array(fixed, pa.string()))


def _codes(column, pc) -> Tuple[List[str], np.ndarray]:
    """A text column as (its distinct values, each row's index among them)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _drop_repeats(path: Path, full, rows: np.ndarray, codes: Dict, pc) -> np.ndarray:
    """The sorted rows to keep: of each run of rows with the same path, the one written first. A repeat with the
    same label (and split) is dropped with one warning naming the rows; one with another label or split is an error
    naming both rows, so no image can land in training and validation at once."""
    same = np.zeros(len(rows), dtype=bool)
    if len(rows) > 1:
        same[1:] = pc.equal(full.slice(1), full.slice(0, len(full) - 1)).to_numpy(zero_copy_only=False)
    if not same.any():
        return np.arange(len(rows))
    run = np.cumsum(~same) - 1
    starts = np.flatnonzero(~same)
    first = np.minimum.reduceat(rows, starts)[run]  # the file row each run keeps
    position_of_first = np.empty(len(starts), dtype=np.int64)
    is_first = rows == first
    position_of_first[run[is_first]] = np.flatnonzero(is_first)
    for what, (values, index) in codes.items():
        differs = index != index[position_of_first[run]]
        if differs.any():
            at = int(np.flatnonzero(differs)[np.argmin(rows[differs])])
            keeper = int(position_of_first[run[at]])
            raise DataError(
                f"{path}: row {rows[at] + 1}: {full[at].as_py()} has {what} {values[index[at]]!r} here and "
                f"{values[index[keeper]]!r} on row {rows[keeper] + 1}; give each image one {what} (one row per image)"
            )
    dropped = np.flatnonzero(~is_first)
    dropped = dropped[np.argsort(rows[dropped])]
    warn_repeats_dropped(path, len(dropped), [f"row {rows[d] + 1} = row {first[d] + 1}" for d in dropped[:5]])
    return np.flatnonzero(is_first)


def _split_column(path: Path, codes: Tuple[List[str], np.ndarray], order: np.ndarray):
    """Each kept row's split (train or val), in the final order."""
    values, index = codes
    return np.asarray(values, dtype=object)[index[order]] if values else None


def _buffers(strings, pa) -> Tuple[np.ndarray, np.ndarray]:
    """A large_string array's UTF-8 bytes and offsets as numpy arrays (SampleIndex's blob and offsets)."""
    strings = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    _, offsets_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[strings.offset : strings.offset + len(strings) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    blob = data[offsets[0] : offsets[-1]].copy()
    return blob, (offsets - offsets[0]).astype(np.int64)

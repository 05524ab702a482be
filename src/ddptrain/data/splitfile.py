"""The text format of a run's `splits/train.txt` and `splits/val.txt`: one image per line, its path relative to the
data root and its class name, separated by a tab.

Any name a file system can hold must come back unchanged — a newline, a tab or a backslash in it, bytes that are
not UTF-8, leading or trailing spaces — or a run that trained would refuse to resume. Version 2 (a first line
`# ddptrain splits 2`) writes every such character as an escape, so each line is printable UTF-8 with exactly one
raw tab: `\\\\` for a backslash, `\\xHH` for a byte that is not UTF-8, `\\uHHHH` / `\\UHHHHHHHH` for a character that
is not printable (tab, newline, carriage return, line separators, controls). Version 1 (no first line; what
ddptrain wrote before) is still read. A file of a newer version is refused, naming both versions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List, Tuple

from ..errors import DataError
from ..version import __version__

VERSION = 2
HEADER = f"# ddptrain splits {VERSION}"
_HEADER = re.compile(r"^# ddptrain splits (\d+)$")
_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def escape(text: str) -> str:
    """`text` (a str from the file system: undecodable bytes held as surrogates) as printable UTF-8 without tabs."""
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable() and not 0xD800 <= code <= 0xDFFF:
            out.append(char)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)


def unescape(text: str) -> str:
    """The inverse of `escape`."""

    def one(match: re.Match) -> str:
        code = match.group(1)
        if code == "\\":
            return "\\"
        if code[0] == "x":
            return chr(0xDC00 + int(code[1:], 16))
        return chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


def line(relative: str, class_name: str) -> str:
    return f"{escape(relative)}\t{escape(class_name)}"


def write(path: Path, entries: Iterable[Tuple[str, str]]) -> None:
    """(relative path, class name) per image, in order."""
    text = "".join(line(relative, name) + "\n" for relative, name in entries)
    path.write_text(f"{HEADER}\n{text}", encoding="utf-8")


def read(path: Path) -> List[Tuple[int, str, str]]:
    """(line number, relative path, class name) per image, of a file of version 1 or 2."""
    try:
        with open(path, encoding="utf-8", newline="\n") as handle:
            lines = handle.read().split("\n")
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text; the run's split files were changed or damaged") from None
    if lines and lines[-1] == "":
        lines.pop()
    version, first = 1, 1
    found = _HEADER.match(lines[0]) if lines else None
    if found:
        version, first = int(found.group(1)), 2
        lines = lines[1:]
    if version > VERSION:
        raise DataError(
            f"{path} is a split file of format {version}; this ddptrain ({__version__}) reads formats up to {VERSION}: "
            "use the newer ddptrain that wrote it"
        )
    entries = []
    for number, text in enumerate(lines, first):
        relative, tab, name = text.rpartition("\t") if version == 1 else text.partition("\t")
        if not tab or not relative or "\t" in name:
            raise DataError(
                f"{path}:{number} is not a split line (relative/path<TAB>class name); the run's split files "
                "were changed or damaged"
            )
        entries.append((number, *((relative, name) if version == 1 else (unescape(relative), unescape(name)))))
    return entries

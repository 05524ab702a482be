"""What lint found in a repository, kept between calls (a pre-commit hook lints the same unchanged repository over
and over): one entry per group of paths that read nothing of one another (discover.independent_groups), used only
where everything that group's report could depend on is unchanged, compared by content, never by time stamps.

An entry's key names what was asked: the paths as given and the repository root each lies in, the current folder
(findings show paths relative to it), the rules chosen and the linter's own code (a hash of its source files, so an
upgrade or an edited rule never reads an old report). An entry holds the report and the folders it read: every
folder an import was looked for in (the given folders, each file's repository, the folders its modules put on
sys.path). Before it is used, those folders and the repository root above each entry point as it is found now
(configuration files, DDP011; a marker file added above moves it) are listed and hashed again — the Python files in each (shell scripts too in the folders given, which say
what runs), only below names an import can spell (an identifier) where the folder was not given, and the YAML and
JSON files configs.py would read — and compared with the fingerprint stored with it: a file edited, added,
removed or renamed there makes it a miss, and the report is made again.

The folder: --cache-dir, else $DDPTRAIN_LINT_CACHE ("off" for none), else $XDG_CACHE_HOME/ddptrain/lint (default
~/.cache/ddptrain/lint). Entries are written whole (a temporary file renamed into place) and are files named
`ddptrain-lint-<key>.json`; only such files are ever deleted, the oldest first past MAX_ENTRIES. An entry that
cannot be read, is over MAX_ENTRY_BYTES, is not a regular file or does not hold what an entry holds is a miss;
a folder that cannot be written costs the cache, never the report.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from . import configs
from .discover import SHELL_SUFFIXES, repository_root, root_of
from .rules import Finding, Rule

CACHE_ENV = "DDPTRAIN_LINT_CACHE"
OFF = ("", "off", "0", "none", "no")
FORMAT = 1
PREFIX = "ddptrain-lint-"
MAX_ENTRIES = 2048
MAX_ENTRY_BYTES = 32 << 20


def default_folder() -> Optional[Path]:
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in OFF else Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ddptrain" / "lint"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of lint's own source files: another version, or an edited rule, is another key."""
    digest = hashlib.blake2b(digest_size=16)
    for file in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def group_key(paths: Sequence[str], rules: Sequence[Rule]) -> str:
    asked = [(raw, str(root_of(Path(raw)))) for raw in paths]
    text = json.dumps([FORMAT, code_version(), os.getcwd(), asked, sorted(r.id for r in rules)])
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


def _files(programs: Sequence[Sequence[str]], given: Sequence[str]) -> List[str]:
    """The files a group read: its programs' modules, and the paths given (a file that does not parse is in no
    program)."""
    return sorted({file for files in programs for file in files} | set(given))


def config_roots(programs: Iterable[Sequence[str]]) -> List[str]:
    """The repository root above each program's entry point: where DDP011 reads configuration files."""
    return sorted({str(repository_root(Path(files[0]).resolve().parent)) for files in programs if files})


def fingerprint(scope: Sequence[str], given: Sequence[str], roots: Sequence[str], read: Sequence[str]) -> str:
    """A hash of every file a group's report may have read under these folders: names and contents. Below a folder
    that was not given, only what an import can reach is listed: the folders of the files read (`read`: an
    import is looked for beside its importer and in the folders above it) and, below those, names an import can
    spell."""
    digest = hashlib.blake2b(digest_size=32)
    whole = {str(Path(raw).resolve()) for raw in given if Path(raw).is_dir()}
    near = {str(folder) for file in read for folder in Path(file).resolve().parents}
    for top in scope:
        digest.update(b"\1" + top.encode("utf-8", "surrogateescape"))
        every = top in whole
        suffixes = (".py", *SHELL_SUFFIXES) if every else (".py",)
        for folder, subfolders, names in os.walk(top, followlinks=False):
            subfolders[:] = sorted(
                d for d in subfolders if every or d.isidentifier() or os.path.join(folder, d) in near
            )
            for name in sorted(names):
                if name.endswith(suffixes):
                    _add_file(digest, os.path.join(folder, name))
    for root in roots:
        digest.update(b"\2" + root.encode("utf-8", "surrogateescape"))
        for file in configs.candidate_files(Path(root)):
            _add_file(digest, str(file), configs.MAX_BYTES)
    return digest.hexdigest()


def _add_file(digest, path: str, most: Optional[int] = None) -> None:
    """A file's name and content; for a file lint does not read (not a regular file, a configuration file over
    `most` bytes or behind a link: configs.py skips those), only what it is."""
    digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
    try:
        if most is not None and os.path.islink(path):
            digest.update(b"link")
            return
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
        with os.fdopen(handle, "rb") as opened:
            info = os.fstat(opened.fileno())
            if not stat.S_ISREG(info.st_mode):
                digest.update(b"not a regular file")
            elif most is not None and info.st_size > most:
                digest.update(b"over the size read")
            else:
                digest.update(hashlib.blake2b(opened.read()).digest())
    except OSError as error:
        digest.update(f"unreadable {error.errno}".encode())


class Cache:
    def __init__(self, folder: Path):
        self.folder = folder
        self.hits = 0
        self.problem: Optional[str] = None  # the first reason the cache could not be used, said once

    def entry(self, key: str) -> Path:
        return self.folder / f"{PREFIX}{key}.json"

    def get(self, key: str, given: Sequence[str]) -> Optional[Tuple[List[Finding], List[str], int, List[List[str]]]]:
        """The stored report for this group, where nothing it read has changed since; else None."""
        data = self._load(self.entry(key))
        if data is None:
            return None
        try:
            programs = data["programs"]
            roots = config_roots(programs)  # where they are now: a marker file added above moves them
            if data["format"] != FORMAT or data["fingerprint"] != fingerprint(
                data["scope"], given, roots, _files(programs, given)
            ):
                return None
            found = [Finding(**f) for f in data["findings"]]
            report = (found, [str(p) for p in data["problems"]], int(data["files"]), data["programs"])
            if not all(isinstance(f.line, int) and isinstance(f.file, str) for f in found):
                return None
            if not all(isinstance(p, list) and all(isinstance(m, str) for m in p) for p in report[3]):
                return None
        except (KeyError, TypeError, ValueError):
            return None
        self.hits += 1
        return report

    def put(self, key: str, given: Sequence[str], scope: Sequence[str], report) -> None:
        roots = config_roots(report.programs)
        data = {
            "format": FORMAT,
            "scope": list(scope),
            "fingerprint": fingerprint(scope, given, roots, _files(report.programs, given)),
            "findings": [asdict(f) for f in report.findings],
            "problems": report.problems,
            "files": report.files,
            "programs": report.programs,
        }
        temporary = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".part", dir=self.folder)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(temporary, self.entry(key))
        except (OSError, ValueError) as error:
            self.problem = self.problem or f"lint cache {self.folder}: not written ({error}); linting without it"
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            return
        self._prune()

    def _load(self, path: Path):
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put in its place opens without waiting
            with os.fdopen(handle, "rb") as opened:
                info = os.fstat(opened.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
                    return None
                data = json.loads(opened.read().decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def _prune(self) -> None:
        """Past MAX_ENTRIES entries, the least recently written go, and temporary files a killed writer left over an
        hour ago (only files named as this cache names its own)."""
        try:
            listed = list(os.scandir(self.folder))
            entries = [e for e in listed if e.name.startswith(PREFIX) and e.name.endswith(".json")]
            stale = time.time() - 3600
            for left in listed:
                if left.name.startswith("." + PREFIX) and left.name.endswith(".part"):
                    with contextlib.suppress(OSError):
                        if left.stat(follow_symlinks=False).st_mtime < stale:
                            os.unlink(left.path)
            if len(entries) <= MAX_ENTRIES:
                return
            entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
            for old in entries[: len(entries) - MAX_ENTRIES]:
                with contextlib.suppress(OSError):
                    os.unlink(old.path)
        except OSError:
            pass

"""Which programs a set of files holds. A folder is rarely one program: tutorial series, `examples/` and `tools/`
keep independent scripts side by side, and a function in one must not be taken for its namesake in another.

Entry points — a file with a `__main__` guard, one that a shell script in the folder launches, or one that no
other file given imports — are each read with the modules they import, transitively, found where Python would find
them: beside the importing file (a script's folder is first on `sys.path`), in its package (relative imports), or
in a folder above it up to the repository's root (a repository run from its root). A module that several entry
points import is parsed once and read in each of their programs. A file given alone is an entry point too: the
modules it imports from its repository are read with it.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from . import configs
from .program import Module, has_main_guard, last_name
from .syspath import path_additions

SHELL_SUFFIXES = configs.SHELL_SUFFIXES
SCRIPT_ARGUMENT = configs.PY_FILE
MODULE_ARGUMENT = re.compile(r"(?:^|\s)-m\s+([\w.]+)")
REPOSITORY_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
# What the top of a repository downloaded without its history (GitHub's "Download ZIP", `git archive`) still holds
# where it has no marker above: asked only where none of the markers is found.
DOWNLOAD_MARKERS = (".gitignore", ".github", "LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING")
MAX_LEVELS_UP = 4  # how far above a given file its repository's root is looked for


@dataclass
class Program:
    entry: Module
    modules: List[Module]


@dataclass
class Sources:
    """The files given, and the files their imports reach (read when first imported), each parsed once."""

    given: List[Module] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    shell_scripts: List[Path] = field(default_factory=list)
    scope: List[Path] = field(default_factory=list)  # folders an import may be found in
    given_relative: Dict[Path, bool] = field(default_factory=dict)  # scope folder -> named by a relative path
    _parsed: Dict[Path, Optional[Module]] = field(default_factory=dict)
    _in_scope: Dict[str, bool] = field(default_factory=dict)
    _absolute: Dict[Tuple[Path, str, int, bool], List[Path]] = field(default_factory=dict)
    added: List[Path] = field(default_factory=list)  # folders the modules read put on sys.path (syspath.py)
    named: Set[Path] = field(default_factory=set)  # files the user named themselves (not found in a folder)
    _resolved: Dict[Path, Path] = field(default_factory=dict)

    def resolved(self, path: Path) -> Path:
        if path not in self._resolved:
            self._resolved[path] = path.resolve()
        return self._resolved[path]

    def read(self, path: Path) -> Optional[Module]:
        """A file an import reaches: parsed once; one that does not parse is left out (Python would fail there,
        not the linter)."""
        path = self.resolved(path)
        if path not in self._parsed:
            self._parsed[path] = None
            try:
                self._parsed[path] = Module(self.shown(path), path.read_text(encoding="utf-8-sig"), path)
            except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
                pass
        return self._parsed[path]

    def add_named(self, folder: Path, given: Path) -> None:
        """A folder the user named (or the repository of a file they named), remembering in which form."""
        self.scope.append(folder)
        self.given_relative.setdefault(folder, not given.is_absolute())

    def shown(self, path: Path) -> str:
        """How findings name a file an import reached: the way the user named the folder or file it lies beside
        (`../repo/utils.py` for `lint ../repo/train.py`, absolute for an absolute path), else relative to the
        current folder where it is below it."""
        for top, relative in self.given_relative.items():
            if path == top or top in path.parents:
                return os.path.relpath(path) if relative else str(path)
        return _shown(path)

    def in_scope(self, path: Path) -> bool:
        text = str(path)
        if text not in self._in_scope:
            tops = [str(top) for top in self.scope]
            self._in_scope[text] = any(t == text or text.startswith(t.rstrip(os.sep) + os.sep) for t in tops)
        return self._in_scope[text]


def gather(paths: Sequence[str]) -> Sources:
    """Parse the files given (a folder: every .py file under it) and note the shell scripts beside them."""
    forget_listings()  # what the folders held at the last call (in this process) may have changed
    configs.clear()
    sources = Sources()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            sources.add_named(repository_root(path.resolve()), path)  # imports resolve as for a file in it
            for file in sorted(p for p in _files_below(path) if p.is_file()):
                if file.suffix == ".py":
                    _add(sources, file, str(Path(raw) / file.relative_to(path)))
                elif file.suffix in SHELL_SUFFIXES:
                    sources.shell_scripts.append(file)
        elif path.is_file():
            sources.add_named(repository_root(path.resolve().parent), path)
            sources.named.add(path.resolve())
            _add(sources, path, str(path))
        else:
            sources.problems.append(f"{raw}: no such file or folder")
    return sources


def _files_below(folder: Path) -> List[Path]:
    """The files below a folder the user named, not those in folders no program runs from: hidden ones (Jupyter's
    autosaved `.ipynb_checkpoints/` copies, `.git`, `.venv`), virtual environments and caches. Links to folders are
    not followed."""
    found: List[Path] = []
    for here, subfolders, names in os.walk(folder, followlinks=False):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in configs.SKIPPED_FOLDERS]
        found += [Path(here) / name for name in names]
    return found


def independent_groups(paths: Sequence[str]) -> List[List[str]]:
    """The paths in groups that cannot import from one another — one per repository (a group's folders, where
    its imports are looked for, do not overlap another's) — each in the order given, the groups in the order of
    their first path. Each group is read as if it were linted alone, so groups can be read in parallel."""
    groups: List[Tuple[List[Path], List[str]]] = []
    for raw in paths:
        root = root_of(Path(raw))
        roots = [root] if root is not None else []  # a missing path: a group of its own, for its message
        joined = [g for g in groups if any(_overlap(r, other) for r in roots for other in g[0])]
        if not joined:
            groups.append((roots, [raw]))
            continue
        first = joined[0]
        for other in joined[1:]:  # a path whose folders hold two groups' joins them
            first[0].extend(other[0])
            first[1].extend(other[1])
            groups = [g for g in groups if g is not other]
        first[0].extend(roots)
        first[1].append(raw)
    order = {raw: index for index, raw in enumerate(paths)}
    return [sorted(members, key=order.__getitem__) for _, members in groups]


def root_of(path: Path) -> Optional[Path]:
    """The folder a path's imports are looked for in: its repository's (a folder inside one, `tools/`, imports
    the repository's package as the scripts in it do when run from the repository)."""
    if path.is_dir():
        return repository_root(path.resolve())
    if path.is_file():
        return repository_root(path.resolve().parent)
    return None


def _overlap(one: Path, other: Path) -> bool:
    return one == other or one in other.parents or other in one.parents


def _shown(path: Path) -> str:
    """A path as findings show it: relative to the current folder where it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _add(sources: Sources, path: Path, shown: str) -> None:
    resolved = path.resolve()
    if resolved in sources._parsed:
        return
    try:
        module = Module(shown, path.read_text(encoding="utf-8-sig"), resolved)
    except SyntaxError as error:  # (QCMLForge's f-string, valid from Python 3.12 on, read by 3.11)
        running = f"{sys.version_info.major}.{sys.version_info.minor}"
        sources.problems.append(
            f"{shown}: cannot parse: {error} — lint reads files with the Python it runs under ({running}); "
            "run it under the Python the file is written for"
        )
        sources._parsed[resolved] = None
        return
    except (UnicodeDecodeError, ValueError, OSError) as error:
        sources.problems.append(f"{shown}: cannot parse: {error}")
        sources._parsed[resolved] = None
        return
    sources._parsed[resolved] = module
    sources.given.append(module)


def forget_listings() -> None:
    """Forget what folders held: a new call looks again."""
    _listing.cache_clear()
    _module_files.cache_clear()
    _namespace_folder.cache_clear()


@functools.lru_cache(maxsize=16384)
def _listing(folder: str) -> Dict[str, str]:
    """A folder's entries, each 'f' (a file), 'd' (a folder), 'o' (something else) or '' (a broken link), read in
    one listing: looking up imports asks the same few folders about hundreds of names."""
    kinds: Dict[str, str] = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    is_dir, is_file = entry.is_dir(), entry.is_file()
                    kinds[entry.name] = "d" if is_dir else "f" if is_file else "o" if os.path.exists(entry.path) else ""
                except OSError:
                    kinds[entry.name] = ""
    except OSError:
        pass
    return kinds


def _kind(path: Path) -> str:
    return _listing(os.path.dirname(str(path)) or ".").get(path.name, "")


def _is_file(path: Path) -> bool:
    return _kind(path) == "f"


def _is_dir(path: Path) -> bool:
    return _kind(path) == "d"


def repository_root(folder: Path) -> Path:
    """The folder above `folder` that holds a repository marker (at most a few levels up); where none does, the
    nearest that holds what a downloaded repository keeps at its top (a `.gitignore`, a LICENSE); else `folder`."""
    return _marked_above(folder, REPOSITORY_MARKERS) or _marked_above(folder, DOWNLOAD_MARKERS) or folder


def _marked_above(folder: Path, markers: Tuple[str, ...]) -> Optional[Path]:
    here = folder
    for _ in range(MAX_LEVELS_UP + 1):
        if any(_kind(here / marker) for marker in markers):
            return here
        if here.parent == here:
            break
        here = here.parent
    return None


# ---- imports ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=65536)
def _module_files(name: str, base: Path) -> List[Path]:
    """The files `import name` runs when `base` is on sys.path: each package's __init__.py, then the module;
    [] where its first part is not in `base`."""
    found: List[Path] = []
    here = base
    parts = name.split(".")
    for index, part in enumerate(parts):
        package, single = here / part, here / f"{part}.py"
        if _is_file(package / "__init__.py"):  # Python's order: a package, a module, a namespace folder
            found.append(package / "__init__.py")
            here = package
        elif _is_file(single):
            found.append(single)
            break  # what follows is an attribute of the module
        elif _is_dir(package):
            here = package
        elif index == 0:
            return []
        else:
            break
    return found


@functools.lru_cache(maxsize=65536)
def _namespace_folder(name: str, base: Path) -> Optional[Path]:
    """The folder `name` names below `base` when it is a namespace package (a folder of modules without an
    __init__.py, as research repositories often keep `utils/`): `from utils import utils_image` runs
    utils/utils_image.py."""
    folder = base.joinpath(*name.split("."))
    return folder if _is_dir(folder) and not _is_file(folder / "__init__.py") else None


def _bases(sources: Sources, importer: Path) -> Iterator[Path]:
    """Where an absolute import is looked for: the importer's folder, then the folders above it within scope,
    then the folders the program put on sys.path."""
    here = importer.parent
    while sources.in_scope(here):
        yield here
        if here.parent == here:
            break
        here = here.parent
    yield from sources.added


def _note_path_additions(sources: Sources, module: Module) -> None:
    """The folders a module read puts on sys.path (`import _init_paths`) are where later imports are looked
    for too, as in Python, when they lie in the importer's repository (at most a few levels above it) and not
    among installed packages."""
    for folder in module.memo(("sys.path",), lambda: path_additions(module)):
        near = any(folder == top or top in folder.parents for top in list(module.file.parents)[1:MAX_LEVELS_UP])
        installed = any(part in ("site-packages", "dist-packages") for part in folder.parts)
        if near and not installed and folder not in sources.added:
            sources.added.append(folder)
            sources.scope.append(folder)
            sources._in_scope.clear()


def imported_files(sources: Sources, module: Module, path: Path) -> List[Path]:
    files: List[Path] = []
    tops: Set[str] = set()  # `import wandb` found no file of the program: the library, whatever its folders hold
    _note_path_additions(sources, module)
    for node in module.imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found = _absolute(sources, path, alias.name)
                files += found
                if any(sources.in_scope(sources.resolved(f)) for f in found):
                    tops.add(alias.name.split(".")[0])
                for file in found:  # `import _init_paths` puts lib/ on sys.path before the next import
                    imported = sources.read(file) if sources.in_scope(sources.resolved(file)) else None
                    if imported is not None:
                        _note_path_additions(sources, imported)
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "*"]
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                target = base.joinpath(*node.module.split(".")) if node.module else base
                files += _relative(target, names)
            elif node.module:
                found = _absolute(sources, path, node.module)
                files += found
                if any(sources.in_scope(sources.resolved(f)) for f in found):
                    tops.add(node.module.split(".")[0])
                last = node.module.rsplit(".", 1)[-1]
                if found and found[-1].name == "__init__.py" and found[-1].parent.name == last:
                    files += _relative(found[-1].parent, names)  # a package: its modules named
                elif not found or found[-1].name != f"{last}.py":  # not a module: a namespace folder?
                    spaced = _namespace_modules(sources, path, node.module, names)
                    files += spaced
                    if spaced:
                        tops.add(node.module.split(".")[0])
    for name in module.memo(("imported by name",), lambda: _imported_by_name(module)):
        files += _absolute(sources, path, name)
    module.found_tops = tops
    return [f for f in (sources.resolved(f) for f in files) if sources.in_scope(f)]


def _imported_by_name(module: Module) -> List[str]:
    """`importlib.import_module("recbole.trainer")` or `__import__("models.resnet")`: a module named by a literal
    string, imported as an `import` statement would (not a name computed at run time, nor one relative to a
    `package=`)."""
    if "import_module" not in module.source and "__import__" not in module.source:
        return []
    names = []
    for call in module.calls:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in ("import_module", "__import__") or len(call.args) != 1 or call.keywords:
            continue
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
            names.append(first.value)
    return names


def _absolute(sources: Sources, path: Path, name: str) -> List[Path]:
    itself = name.split(".")[0] == path.stem  # `from sevenn import __version__` in sevenn/main/sevenn.py
    key = (path.parent, name, len(sources.added), itself)  # every module of a folder looks an import up alike
    if key not in sources._absolute:
        sources._absolute[key] = []
        for base in _bases(sources, path):
            found = _module_files(name, base)
            if found and itself and found[0] == path.parent / path.name:
                continue  # a module importing itself by name means the package of that name (run as a module)
            if found:
                sources._absolute[key] = found
                break
        else:
            sources._absolute[key] = _own_package(sources, name) or _src_layout(sources, name)
    return list(sources._absolute[key])


def _src_layout(sources: Sources, name: str) -> List[Path]:
    """A repository whose package lies in `src/` (`where = ["src"]`, installed with `pip install -e .`): its
    scripts import `trnr.trainer` from src/trnr/trainer."""
    first = name.split(".")[0]
    for top in sources.scope:
        if _is_file(top / "src" / first / "__init__.py"):
            return _module_files(name, top / "src")
        if "." in name and _is_dir(top / "src" / first):  # a namespace package: src/fairchem/core/__init__.py
            found = _module_files(name, top / "src")
            if found:
                return found
    return []


def _own_package(sources: Sources, name: str) -> List[Path]:
    """A repository that is itself a package (an `__init__.py` at its root) imported by its own name from its
    scripts (`from pseudoESM.trainer import Trainer` in pseudoESM/train.py, run from the folder above): its modules.
    Only that name is looked up above the root, never a neighbouring folder's."""
    first = name.split(".")[0]
    for top in sources.scope:
        if top.name == first and _is_file(top / "__init__.py"):
            return _module_files(name, top.parent)
    return []


def _namespace_modules(sources: Sources, path: Path, name: str, names: Sequence[str]) -> List[Path]:
    """`from folder import a, b` where `folder` has no __init__.py: a.py and b.py (or packages a/, b/), from the
    first base that holds the folder."""
    for base in _bases(sources, path):
        folder = _namespace_folder(name, base)
        if folder is not None:
            return [f for f in _relative(folder, names) if f.name != "__init__.py" or f.parent != folder]
    return []


def _relative(target: Path, names: Sequence[str]) -> List[Path]:
    files = []
    if _is_file(target / "__init__.py"):
        files.append(target / "__init__.py")
    elif target.name and _is_file(target.with_suffix(".py")):
        files.append(target.with_suffix(".py"))
    files += [target / f"{n}.py" for n in names if _is_file(target / f"{n}.py")]
    files += [target / n / "__init__.py" for n in names if _is_file(target / n / "__init__.py")]
    return files


# ---- entry points and their programs ---------------------------------------------------------------
def _launched(sources: Sources) -> Set[Path]:
    """Files the folder's shell scripts run (`python x.py`, `torchrun ... x.py`, `python -m pkg.mod`)."""
    wanted_files, wanted_modules = set(), set()
    for script in sources.shell_scripts:
        text = configs.small_text(script)
        if text is None:
            continue
        wanted_files |= {m.replace("\\", "/").lstrip("./") for m in SCRIPT_ARGUMENT.findall(text)}
        wanted_modules |= {m.replace(".", "/") + ".py" for m in MODULE_ARGUMENT.findall(text)}
    launched = set()
    for module in sources.given:
        path = module.file.as_posix()
        if any(w and (path.endswith("/" + w) or path == w) for w in wanted_files | wanted_modules):
            launched.add(module.file)
    return launched


def programs(sources: Sources) -> List[Program]:
    """One program per entry point: the entry and what it imports, transitively, in import order."""
    imports: Dict[Path, List[Path]] = {}

    def imports_of(path: Path) -> List[Path]:
        if path not in imports:
            module = sources.read(path)
            imports[path] = imported_files(sources, module, path) if module is not None else []
        return imports[path]

    given = {m.file: m for m in sources.given}
    imported_by_others = {f for path in given for f in imports_of(path) if f != path}
    launched = _launched(sources)
    tests = {p for p, m in given.items() if p not in launched and p not in sources.named and _pytest_module(m)}
    entries = [
        p
        for p, m in given.items()
        if p not in tests and (has_main_guard(m) or p in launched or p not in imported_by_others)
    ]
    unused = _unused_library_modules(sources, entries, launched, imports_of)
    entries = [p for p in entries if p not in unused]
    found: List[Program] = []
    covered: Set[Path] = set(tests) | unused
    pending = list(entries)
    while pending or len(covered) < len(given):
        if not pending:  # modules only reachable from each other (an import cycle): each is an entry too
            pending = [next(p for p in given if p not in covered)]
        entry = pending.pop(0)
        order = _closure(entry, imports_of)
        covered |= set(order)
        modules = [m for m in (given.get(p) or sources.read(p) for p in order) if m is not None]
        found.append(Program(given[entry], modules))
    return found


def _unused_library_modules(sources: Sources, entries: List[Path], launched: Set[Path], imports_of) -> Set[Path]:
    """Modules of definitions only (no `__main__` guard, no statement at the top that does anything), launched by
    no shell script and imported by no file given, in a folder whose other modules the folder's programs do
    import: a model file the repository no longer uses (EfficientConformer's `models/model_s2s.py` beside the
    `models/transducer.py` its `main.py` builds) is no program — nothing runs it. Kept as programs where any
    module given imports by a computed name (`importlib.import_module(f"models.{name}")`): it may be that one."""
    given = {m.file: m for m in sources.given}
    dynamic = {repository_root(p.parent) for p, m in given.items() if _imports_by_a_computed_name(m)}
    scripts = [p for p in entries if has_main_guard(given[p]) or p in launched]
    used_folders = {f.parent for p in scripts for f in _closure(p, imports_of) if f != p}
    return {
        p
        for p in entries
        if p not in scripts
        and p.parent in used_folders
        and _definitions_only(given[p])
        and p.name != "__init__.py"
        and repository_root(p.parent) not in dynamic  # (each repository given is judged by its own imports)
    }


def _definitions_only(module: Module) -> bool:
    """Nothing at the module's top level runs code of its own: imports, definitions, assignments, docstrings."""
    return not any(
        isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith))
        or (isinstance(s, ast.Expr) and isinstance(s.value, (ast.Call, ast.Await)))
        for s in module.tree.body
    )


def _imports_by_a_computed_name(module: Module) -> bool:
    if "import_module" not in module.source and "__import__" not in module.source:
        return False
    return any(
        last_name(call) in ("import_module", "__import__")
        and not (call.args and isinstance(call.args[0], ast.Constant))
        for call in module.calls
    )


def _pytest_module(module: Module) -> bool:
    """A test module pytest collects (`tests/test_utils.py`: `def test_unwrap(): ...`, no `__main__` guard): its
    functions run one by one under pytest, none of them a training program, so a folder's programs leave it out
    (named alone, it is read as any file is)."""
    name = module.file.name
    if not (name.startswith("test_") or name.endswith("_test.py")) or has_main_guard(module):
        return False
    return any(
        (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith("test"))
        or (isinstance(s, ast.ClassDef) and s.name.startswith("Test"))
        for s in module.tree.body
    )


def _closure(entry: Path, imports_of) -> List[Path]:
    order, seen, stack = [], {entry}, [entry]
    while stack:
        path = stack.pop(0)
        order.append(path)
        for other in imports_of(path):
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return order

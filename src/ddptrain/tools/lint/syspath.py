"""The folders a module puts on `sys.path` when it is imported, read without running it.

Research repositories often keep their code in `lib/` or `src/` and make it importable from `tools/train.py`
with a few lines run first (`import _init_paths`): `sys.path.insert(0, osp.join(osp.dirname(__file__), '..',
'lib'))`, through a helper (`add_path(lib_path)`), or with pathlib (`Path(__file__).resolve().parents[1] /
'src'`). Only paths computed from `__file__` (and constants and names assigned from them) are followed, and
`sys.path[0]` in a script (a file with a `__main__` block: run as the program, Python puts its folder there,
`sys.path.append(os.path.dirname(sys.path[0]))`). A path relative to the current folder depends on where the program
is started: in a script (`sys.path.append('..')` before `from src.utils import ...`), it is read as relative to the
script's own folder, where such a script must be started for its imports to work; in an imported module, not at all.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Dict, List, Optional

from .program import Module, call_name, has_main_guard, last_name

PATH_FUNCTIONS = ("dirname", "abspath", "realpath", "normpath", "join")
SCRIPT_FOLDER = "sys.path[0]"  # env key: what a script finds at sys.path[0]
INSERTS = ("sys.path.insert", "sys.path.append", "os.sys.path.insert", "os.sys.path.append")


def path_additions(module: Module) -> List[Path]:
    """The existing folders the module's top level (not its functions, unless it calls them there) adds to
    `sys.path`, in the order it adds them."""
    if "sys.path" not in module.source:
        return []
    adders = _adders(module)
    env: Dict[str, str] = {}
    if has_main_guard(module):
        env[SCRIPT_FOLDER] = os.path.dirname(str(module.file))
    found: List[Path] = []
    for statement in _top_level(module.tree.body):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            value = _value(statement.value, env, module.file)
            if isinstance(target, ast.Name) and value is not None:
                env[target.id] = value
            continue
        for call in (n for n in ast.walk(statement) if isinstance(n, ast.Call)):
            added = _added(call, env, module.file, adders)
            if added is not None and not os.path.isabs(added) and SCRIPT_FOLDER in env:
                added = os.path.join(env[SCRIPT_FOLDER], added)  # `sys.path.append('..')`: run from its folder
            if added is not None and os.path.isabs(added):
                folder = Path(os.path.normpath(added))
                if folder.is_dir() and folder not in found:
                    found.append(folder)
    return found


def _top_level(body: List[ast.stmt]) -> List[ast.stmt]:
    """The statements run at import, in order: into `if` and `try` blocks, not into functions or classes."""
    found: List[ast.stmt] = []
    for statement in body:
        if isinstance(statement, (ast.If, ast.Try)):
            found += _top_level(statement.body)
            found += _top_level(statement.orelse)
            if isinstance(statement, ast.Try):
                found += _top_level([s for handler in statement.handlers for s in handler.body])
        elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append(statement)
    return found


def _adders(module: Module) -> Dict[str, int]:
    """Module functions that add one of their parameters to sys.path (`def add_path(path): sys.path.insert(0,
    path)`): name -> that parameter's position."""
    adders: Dict[str, int] = {}
    for function in module.functions:
        parameters = [a.arg for a in function.args.args]
        for call in module.calls_in(function):
            value = _inserted(call)
            if isinstance(value, ast.Name) and value.id in parameters:
                adders[function.name] = parameters.index(value.id)
    return adders


def _inserted(call: ast.Call) -> Optional[ast.expr]:
    name = call_name(call)
    if name not in INSERTS:
        return None
    if name.endswith("insert"):
        return call.args[1] if len(call.args) > 1 else None
    return call.args[0] if call.args else None


def _added(call: ast.Call, env: Dict[str, str], file: Path, adders: Dict[str, int]) -> Optional[str]:
    value = _inserted(call)
    if value is None and isinstance(call.func, ast.Name) and call.func.id in adders:
        position = adders[call.func.id]
        value = call.args[position] if len(call.args) > position else None
    return _value(value, env, file) if value is not None else None


def _value(node: ast.expr, env: Dict[str, str], file: Path) -> Optional[str]:
    """A path expression's value where it depends on `__file__` only; None otherwise."""
    if isinstance(node, ast.Name):
        return str(file) if node.id == "__file__" else env.get(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # Path(...) / "src"
        left, right = _value(node.left, env, file), _value(node.right, env, file)
        return os.path.join(left, right) if left is not None and right is not None else None
    if isinstance(node, ast.Attribute) and node.attr in ("pardir", "curdir") and call_name(node).startswith("os"):
        return os.pardir if node.attr == "pardir" else os.curdir
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _value(node.value, env, file)
        return os.path.dirname(inner) if inner is not None else None
    if isinstance(node, ast.Subscript) and call_name(node.value) == "sys.path" and is_zero(node.slice):
        return env.get(SCRIPT_FOLDER)  # the running script's folder
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and last_name(node.value) == "split":
        return _split_head(node, env, file)  # os.path.split(path)[0]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        inner = _value(node.value.value, env, file)
        index = node.slice
        if inner is None or not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
            return None
        for _ in range(index.value + 1):
            inner = os.path.dirname(inner)
        return inner
    if isinstance(node, ast.Call):
        return _call_value(node, env, file)
    return None


def is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _split_head(node: ast.Subscript, env: Dict[str, str], file: Path) -> Optional[str]:
    call = node.value
    assert isinstance(call, ast.Call)
    if not call_name(call).startswith(("os.", "osp.", "path.")) or len(call.args) != 1 or call.keywords:
        return None
    if not (isinstance(node.slice, ast.Constant) and node.slice.value == 0):
        return None
    inner = _value(call.args[0], env, file)
    return os.path.split(inner)[0] if inner is not None else None


def _call_value(node: ast.Call, env: Dict[str, str], file: Path) -> Optional[str]:
    name = last_name(node)
    if isinstance(node.func, ast.Attribute) and name in ("resolve", "absolute") and not node.args:
        return _value(node.func.value, env, file)  # the file's path is already absolute and resolved
    args = [_value(a, env, file) for a in node.args]
    if node.keywords or any(a is None for a in args) or not args:
        return None
    if name in ("str", "Path", "PurePath"):
        return os.path.join(*args)  # type: ignore[arg-type]
    if (
        name not in PATH_FUNCTIONS
        or "." in call_name(node)
        and not call_name(node).startswith(("os.", "osp.", "path."))
    ):
        return None  # os.path.join, osp.join, or join imported from os.path
    if name == "join":
        return os.path.join(*args)  # type: ignore[arg-type]
    if len(args) != 1:
        return None
    if name == "dirname":
        return os.path.dirname(args[0])  # type: ignore[type-var]
    return os.path.normpath(args[0])  # type: ignore[type-var]

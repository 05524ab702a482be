"""`ddptrain lint --fix` / `--diff`: the mechanical fixes, for the rules that have exactly one safe one.

A fix is a list of edits to one file's text, computed from its syntax tree; it is kept only if the fixed file still
parses and the program linted again no longer has that finding, nor any finding the file did not have before — so
a fix changes nothing but what it fixes. Everything else is left as it was, byte for byte (line endings, encoding
declaration, comments). Where a fix cannot be made safely (the epoch loop is in another function, the sampler has
no name, a module is not imported) the finding stays, reported as before.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .program import Module, call_name, is_const, keyword, last_name
from .rules import _global_rank, _last_assignment, _loader_beside_an_unused_sampler, _scaled_backward

NEWLINE = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Edit:
    """Replace (line, col)..(end_line, end_col) — 1-based lines, byte columns as `ast` gives them — with `text`."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


def insert_before(statement: ast.stmt, text: str, source_lines: Sequence[bytes]) -> Edit:
    """A new line `text` before `statement`, indented as it is."""
    indent = source_lines[statement.lineno - 1][: statement.col_offset].decode("utf-8")
    newline = _newline(source_lines[statement.lineno - 1])
    return Edit(statement.lineno, 0, statement.lineno, 0, f"{indent}{text}{newline}")


def replace(node: ast.AST, text: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text)  # type: ignore[attr-defined]


def _newline(line: bytes) -> str:
    match = NEWLINE.search(line)
    return match.group(0).decode() if match else "\n"


def split_lines(data: bytes) -> List[bytes]:
    """Lines with their own endings kept, split where Python's tokenizer splits them."""
    lines, start = [], 0
    for match in NEWLINE.finditer(data):
        lines.append(data[start : match.end()])
        start = match.end()
    if start < len(data):
        lines.append(data[start:])
    return lines


def apply(data: bytes, edits: Sequence[Edit]) -> bytes:
    lines = split_lines(data)
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        first, last = lines[edit.line - 1], lines[edit.end_line - 1]
        merged = first[: edit.col] + edit.text.encode("utf-8") + last[edit.end_col :]
        lines[edit.line - 1 : edit.end_line] = [merged]
    return b"".join(lines)


# ---- what each fix needs to know --------------------------------------------------------------------
def _statement(module: Module, node: ast.AST) -> Optional[ast.stmt]:
    for parent in [node, *module.ancestors(node)]:
        if isinstance(parent, ast.stmt):
            return parent
    return None


def _calls_at(module: Module, line: int, *names: str) -> List[ast.Call]:
    return [c for c in module.calls if c.lineno == line and last_name(c) in names]


def _epoch_loop(module: Module, after: ast.stmt) -> Optional[ast.For]:
    """The one `for epoch in ...:` loop after `after`, in its scope, whose body starts on a line of its own."""
    scope = module.scope_of(after)
    loops = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.For)
        and node.lineno > after.lineno
        and module.scope_of(node) is scope
        and isinstance(node.target, ast.Name)
        and "epoch" in node.target.id.lower()
    ]
    if len(loops) != 1 or loops[0].body[0].lineno == loops[0].lineno:
        return None
    return loops[0]


def _set_epoch(module: Module, sampler: str, after: ast.stmt, lines: Sequence[bytes]) -> Optional[Edit]:
    loop = _epoch_loop(module, after)
    if loop is None:
        return None
    assert isinstance(loop.target, ast.Name)
    return insert_before(loop.body[0], f"{sampler}.set_epoch({loop.target.id})", lines)


def _source(module: Module, node: ast.AST) -> str:
    return ast.get_source_segment(module.source, node) or ""


# ---- the fixes --------------------------------------------------------------------------------------
def fix_set_epoch(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP002: `SAMPLER.set_epoch(epoch)` first in the epoch loop (the sampler named, the loop in its scope)."""
    for call in _calls_at(module, line, "DistributedSampler"):
        statement = _statement(module, call)
        parent = module.parents.get(call)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and call_name(parent.targets[0]):
            edit = _set_epoch(module, call_name(parent.targets[0]), parent, lines)
            return [edit] if edit else None
        if isinstance(parent, ast.keyword) and isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            name = call_name(statement.targets[0])  # DataLoader(ds, sampler=DistributedSampler(ds)) -> loader.sampler
            edit = _set_epoch(module, f"{name}.sampler", statement, lines) if name else None
            return [edit] if edit else None
    return None


def fix_wrapped_state(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP007: `model.state_dict()` -> `model.module.state_dict()` (`torch.save(model, ...)` -> `torch.save(model.module,
    ...)`) where the DDP-wrapped model is saved."""
    for call in _calls_at(module, line, "state_dict"):
        owner = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(owner, (ast.Name, ast.Attribute)):
            return None if _loaded_back(module, owner) else [replace(owner, _unwrapped(module, owner))]
    for call in _calls_at(module, line, "save"):  # torch.save(model, path): the wrapped model whole
        whole = call.args[0] if call.args else None
        if isinstance(whole, (ast.Name, ast.Attribute)):
            return None if _loaded_back(module, whole) else [replace(whole, _unwrapped(module, whole))]
    return None


def _loaded_back(module: Module, owner: ast.expr) -> bool:
    """The file loads checkpoints into the same model (`model.load_state_dict(...)`, `load_checkpoint(args, model)`):
    its resume expects the 'module.' keys, so changing the save alone would break it — no mechanical fix."""
    text = _source(module, owner)
    for call in module.calls:
        name = last_name(call)
        if (
            name == "load_state_dict"
            and isinstance(call.func, ast.Attribute)
            and _source(module, call.func.value) == text
        ):
            return True
        if "load" in name.lower() and any(_source(module, a) == text for a in call.args):
            return True
    return False


def _unwrapped(module: Module, owner: ast.expr) -> str:
    """`model.module` where `model = DDP(...)` is the name's last assignment before, on every path of the same
    function; `getattr(model, "module", model)` where it may be the plain model (wrapped under `if distributed:`, by
    a helper, or in another method): the wrapped module, or the model itself."""
    text = _source(module, owner)
    scope = module.scope_of(owner)
    assigns = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign)
        and node.lineno < owner.lineno
        and any(_source(module, target) == text for target in node.targets)
    ]
    last = [max(assigns, key=lambda node: node.lineno)] if assigns else []
    if not assigns and text.startswith("self."):  # `self.model = DDP(...)` in another method of the class
        owner_class = next((p for p in module.ancestors(owner) if isinstance(p, ast.ClassDef)), None)
        everywhere = list(ast.walk(owner_class)) if owner_class is not None else []
        last = [
            node
            for node in everywhere
            if isinstance(node, ast.Assign) and any(_source(module, target) == text for target in node.targets)
        ]
    if last and all(_always_wrapped(module, node) for node in last):
        return f"{text}.module"
    return f'getattr({text}, "module", {text})'


def _always_wrapped(module: Module, assign: ast.Assign) -> bool:
    """`x = DDP(...)` on every path of its function (no branch, loop or `try` around it)."""
    if not (isinstance(assign.value, ast.Call) and last_name(assign.value) in DDP_CLASSES):
        return False
    branches = (ast.If, ast.Try, ast.For, ast.While, ast.IfExp)  # (a `with` block always runs its body)
    return not any(isinstance(p, branches) for p in _between(module, assign, module.scope_of(assign)))


DDP_CLASSES = ("DistributedDataParallel", "DDP")


def _between(module: Module, node: ast.AST, scope: ast.AST) -> List[ast.AST]:
    found = []
    for parent in module.ancestors(node):
        if parent is scope:
            break
        found.append(parent)
    return found


def fix_unscale(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP009: `SCALER.unscale_(OPTIMIZER)` right before the clip (or the helper that clips), the names taken from
    the same function's `SCALER.scale(loss).backward()` and `SCALER.step(OPTIMIZER)`."""
    for call in module.calls:
        if call.lineno != line:
            continue
        function = module.function_of(call)
        statement = _statement(module, call)
        if function is None or statement is None or statement.lineno != line:
            continue
        calls = module.calls_in(function)
        scalers = {_source(module, c.func.value.func.value) for c in calls if _scaled_backward(c)}  # type: ignore[attr-defined]
        steps = [c for c in calls if last_name(c) == "step" and isinstance(c.func, ast.Attribute) and c.args]
        optimizers = {_source(module, c.args[0]) for c in steps if _source(module, c.func.value) in scalers}  # type: ignore[attr-defined]
        if len(scalers) != 1 or len(optimizers) != 1:
            return None
        unscale = f"{scalers.pop()}.unscale_({optimizers.pop()})"
        later = [  # an unscale_ already there, after the clip: moved, not repeated (a second one raises)
            c for c in calls if last_name(c) == "unscale_" and c.lineno > line and _own_line(module, c, lines)
        ]
        if len(later) > 1:
            return None
        edits = [insert_before(statement, unscale, lines)]
        if later:
            moved = _statement(module, later[0])
            assert moved is not None
            edits.append(
                Edit(moved.lineno, 0, moved.lineno + 1, 0, "")
                if moved.lineno < len(lines)
                else Edit(moved.lineno, 0, moved.lineno, len(lines[moved.lineno - 1]), "")
            )
        return edits
    return None


def _own_line(module: Module, call: ast.Call, lines: Sequence[bytes]) -> bool:
    """`call` is a whole statement alone on its line (no comment after it either)."""
    statement = _statement(module, call)
    if not isinstance(statement, ast.Expr) or statement.value is not call or statement.end_lineno != call.lineno:
        return False
    line = lines[call.lineno - 1]
    return line[: statement.col_offset].strip() == b"" and line[statement.end_col_offset :].strip() == b""


def fix_port(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP011: `os.environ["MASTER_PORT"] = P` -> `os.environ.setdefault("MASTER_PORT", P)`: the launcher's port,
    when it gives one, wins."""
    for node in module.nodes:
        if isinstance(node, ast.Assign) and node.lineno == line and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Subscript) and is_const(target.slice, "MASTER_PORT"):
                if _port_used_elsewhere(module, node):
                    return None  # the same fixed port also goes to a TCPStore or an address: no fix covers both
                environ = _source(module, target.value)
                return [replace(node, f'{environ}.setdefault("MASTER_PORT", {_source(module, node.value)})')]
    return None


def _port_used_elsewhere(module: Module, assign: ast.Assign) -> bool:
    """`os.environ["MASTER_PORT"] = str(port)` where the function also gives `port` to `dist.TCPStore(...)` or
    `init_process_group(...)` (sc23-dl-tutorial's MPI wire-up): the environment's port would not reach those."""
    names = {n.id for n in ast.walk(assign.value) if isinstance(n, ast.Name)} - {"str", "int", "os", "args"}
    if not names:
        return False
    scope = module.scope_of(assign)
    return any(
        last_name(call) in ("TCPStore", "init_process_group")
        and names & {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
        for call in module.calls_in(scope)
    )


def fix_local_device(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP013: the device index `RANK` -> `RANK % torch.cuda.device_count()` (the local rank where each node runs
    one process per GPU, as torchrun and SLURM place them)."""
    if "torch" not in module.imported:
        return None
    edits: List[Edit] = []
    for call in module.calls:  # every move of the line: `data.cuda(args.rank), target.cuda(args.rank)`
        if call.lineno != line:
            continue
        name = last_name(call)
        if name == "set_device" and call.args:
            candidates = [call.args[0]]
        elif name in ("DistributedDataParallel", "DDP") and isinstance(keyword(call, "device_ids"), ast.List):
            candidates = list(keyword(call, "device_ids").elts)  # type: ignore[union-attr]
            output = keyword(call, "output_device")  # `output_device=rank` beside it: the same device
            candidates += [output] if output is not None else []
        elif name == "device" and len(call.args) == 2 and is_const(call.args[0], "cuda"):
            candidates = [call.args[1]]
        elif name in ("to", "cuda") and len(call.args) == 1 and not call.keywords:  # the model moved before the wrap
            candidates = [call.args[0]]
        else:
            continue
        edits += [
            replace(c, f"{_wrapped(module, c)} % torch.cuda.device_count()")
            for c in candidates
            if _global_rank(module, call, c) or _a_parameter(module, call, c)
        ]
    return edits or None


def _a_parameter(module: Module, at: ast.AST, node: ast.expr) -> bool:
    """`rank` as the function received it (lint found its callers pass the global rank)."""
    function = module.function_of(at)
    return (
        isinstance(node, ast.Name)
        and function is not None
        and node.id in {a.arg for a in [*function.args.posonlyargs, *function.args.args]}
        and _last_assignment(module, at, node) is node
    )


def _wrapped(module: Module, node: ast.expr) -> str:
    text = _source(module, node)
    return text if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({text})"


def fix_sampler(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP018: a named DistributedSampler for the loader's dataset (shuffling), passed as `sampler=` in place of
    `shuffle=True`, and its `set_epoch(epoch)` first in the epoch loop — all three, or no fix."""
    for call in _calls_at(module, line, "DataLoader"):
        statement = _statement(module, call)
        shuffle = next((k for k in call.keywords if k.arg == "shuffle"), None)
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        if statement is None or shuffle is None or dataset is None or statement.lineno != call.lineno:
            continue
        if "DistributedSampler" in module.imported:
            factory = "DistributedSampler"
        elif "torch" in module.imported:
            factory = "torch.utils.data.distributed.DistributedSampler"
        else:
            return None
        loader = call_name(statement.targets[0]) if isinstance(statement, ast.Assign) else ""
        base = loader.rsplit(".", 1)[-1] if loader else "train"
        name = base.replace("loader", "sampler") if "loader" in base else f"{base}_sampler"
        if name in {n.id for n in ast.walk(module.tree) if isinstance(n, ast.Name)}:
            return None
        epoch = _set_epoch(module, name, statement, lines)
        if epoch is None:
            return None
        data = _source(module, dataset)
        return [
            insert_before(statement, f"{name} = {factory}({data}, shuffle=True)", lines),
            replace(shuffle, f"sampler={name}"),
            epoch,
        ]
    return None


def fix_unused_sampler(module: Module, line: int, lines: Sequence[bytes]) -> Optional[List[Edit]]:
    """DDP030: the loader given the DistributedSampler made beside it (`sampler=train_sampler`, in place of
    `shuffle=True` where it has one), and the sampler's `set_epoch(epoch)` first in the epoch loop where nothing
    calls it yet — all of it, or no fix."""
    for call in _calls_at(module, line, "DataLoader"):
        made = [
            (sampler, module.parents[sampler])
            for sampler in module.calls
            if last_name(sampler) == "DistributedSampler" and _loader_beside_an_unused_sampler(module, sampler) is call
        ]
        if len(made) != 1 or not isinstance(made[0][1], ast.Assign):
            return None
        name = call_name(made[0][1].targets[0])
        shuffle = next((k for k in call.keywords if k.arg == "shuffle"), None)
        if shuffle is not None:
            edits = [replace(shuffle, f"sampler={name}")]
        else:
            last = max([*call.args, *call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset))  # type: ignore
            edits = [replace(last, f"{_source(module, last)}, sampler={name}")]
        told = any(last_name(c) == "set_epoch" and call_name(c.func).startswith(f"{name}.") for c in module.calls)
        if not told:
            epoch = _set_epoch(module, name, made[0][1], lines)
            if epoch is None:
                return None
            edits.append(epoch)
        return edits
    return None


FIXES: Dict[str, Callable[[Module, int, Sequence[bytes]], Optional[List[Edit]]]] = {
    "DDP002": fix_set_epoch,
    "DDP007": fix_wrapped_state,
    "DDP009": fix_unscale,
    "DDP011": fix_port,
    "DDP013": fix_local_device,
    "DDP018": fix_sampler,
    "DDP030": fix_unused_sampler,
}


def edits_for(module: Module, rule: str, line: int, data: bytes) -> Optional[List[Edit]]:
    fixer = FIXES.get(rule)
    return fixer(module, line, split_lines(data)) if fixer else None


def line_key(data: bytes, line: int, rule: str) -> Tuple[str, bytes]:
    """A finding by its rule and its line's text: line numbers move as fixes insert lines."""
    lines = split_lines(data)
    return rule, (lines[line - 1].strip() if 0 < line <= len(lines) else b"")

"""`ddptrain lint`: a static (AST) check of a user's own DDP training script for the mistakes that
make multi-process training wrong, hang or crash. Each finding reads `file:line RULE message -> fix`.

The checks read one file at a time and follow plain names (`sampler = DistributedSampler(...)`,
`model = DDP(model)`); they favour missing a convoluted case over flagging correct code.
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set

COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "all_gather_object",
    "all_gather_into_tensor",
    "broadcast",
    "broadcast_object_list",
    "reduce",
    "reduce_scatter",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "all_to_all",
    "barrier",
    "monitored_barrier",
}
MAIN_RANK_NAMES = {
    "rank",
    "local_rank",
    "global_rank",
    "is_main",
    "is_main_process",
    "is_master",
    "main_process",
    "get_rank",
    "is_rank_zero",
    "rank0",
}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    rule: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.rule} {self.message} -> {self.fix}"


@dataclass(frozen=True)
class Rule:
    id: str
    message: str
    fix: str
    check: Callable[[Script], Iterable[int]]  # yields line numbers


# ---- helpers over the syntax tree -----------------------------------------------------------------
def call_name(node: ast.AST) -> str:
    """'torch.nn.DataParallel' for a call or attribute chain; '' for anything else."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def last_name(node: ast.AST) -> str:
    return call_name(node).rsplit(".", 1)[-1]


def keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def is_const(node: Optional[ast.AST], value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def names_in(node: ast.AST) -> Set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


class Script:
    """One parsed file plus the facts several rules share."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.tree = ast.parse(source, filename=path)
        self.calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]
        self.parents: Dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def calls_named(self, *names: str) -> List[ast.Call]:
        return [c for c in self.calls if last_name(c) in names]

    def assigned_from(self, *constructors: str) -> Dict[str, int]:
        """Plain names bound to a call of one of `constructors` -> line of the first such binding."""
        bound: Dict[str, int] = {}
        for node in ast.walk(self.tree):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and last_name(node.value) in constructors
            ):
                for target in node.targets:
                    if isinstance(target, (ast.Name, ast.Attribute)):
                        bound.setdefault(call_name(target), node.lineno)
        return bound

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def enclosing_function(self, node: ast.AST) -> ast.AST:
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return parent
        return self.tree

    @property
    def is_distributed(self) -> bool:
        return any(
            last_name(c) in ("init_process_group", "DistributedDataParallel", "DDP", "DistributedSampler")
            for c in self.calls
        )


# ---- the rules ------------------------------------------------------------------------------------
def _data_parallel(script: Script) -> Iterator[int]:
    for node in ast.walk(script.tree):
        if isinstance(node, ast.Call) and last_name(node) == "DataParallel":
            yield node.lineno


def _sampler_calls(script: Script) -> List[ast.Call]:
    return script.calls_named("DistributedSampler")


def _set_epoch_missing(script: Script) -> Iterator[int]:
    samplers = _sampler_calls(script)
    if not samplers:
        return
    for call in script.calls_named("set_epoch"):
        if any(isinstance(a, (ast.For, ast.While)) for a in script.ancestors(call)):
            return
    yield samplers[0].lineno


def _loader_calls(script: Script) -> List[ast.Call]:
    return script.calls_named("DataLoader")


def _shuffle_with_sampler(script: Script) -> Iterator[int]:
    for call in _loader_calls(script):
        if keyword(call, "sampler") is not None and is_const(keyword(call, "shuffle"), True):
            yield call.lineno


def _distributed_sampler_of(script: Script, loader: ast.Call) -> Optional[ast.Call]:
    sampler = keyword(loader, "sampler")
    if isinstance(sampler, ast.Call) and last_name(sampler) == "DistributedSampler":
        return sampler
    if sampler is not None and call_name(sampler):
        for node in ast.walk(script.tree):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and last_name(node.value) == "DistributedSampler"
                and any(call_name(t) == call_name(sampler) for t in node.targets)
            ):
                return node.value
    return None


def _no_drop_last(script: Script) -> Iterator[int]:
    for loader in _loader_calls(script):
        sampler = _distributed_sampler_of(script, loader)
        if sampler is None or is_const(keyword(sampler, "shuffle"), False):
            continue  # not a training loader (evaluation samplers do not shuffle)
        if not is_const(keyword(loader, "drop_last"), True) and not is_const(keyword(sampler, "drop_last"), True):
            yield loader.lineno


def _nccl_without_set_device(script: Script) -> Iterator[int]:
    if script.calls_named("set_device"):
        return
    for call in script.calls_named("init_process_group"):
        backend = keyword(call, "backend") or (call.args[0] if call.args else None)
        if is_const(backend, "nccl") and keyword(call, "device_id") is None:
            yield call.lineno


def _hard_coded_device(script: Script) -> Iterator[int]:
    if not script.is_distributed:
        return
    for node in ast.walk(script.tree):
        if isinstance(node, ast.Constant) and node.value == "cuda:0":
            yield node.lineno
        elif isinstance(node, ast.Call) and last_name(node) in ("DistributedDataParallel", "DDP"):
            ids = keyword(node, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)) and any(isinstance(e, ast.Constant) for e in ids.elts):
                yield node.lineno


def _saves_wrapped_state(script: Script) -> Iterator[int]:
    wrapped = set(script.assigned_from("DistributedDataParallel", "DDP"))
    if not wrapped:
        return
    for save in script.calls_named("save"):
        if not call_name(save).startswith(("torch.", "save")):
            continue
        for node in ast.walk(save):
            if (
                isinstance(node, ast.Call)
                and last_name(node) == "state_dict"
                and isinstance(node.func, ast.Attribute)
                and call_name(node.func.value) in wrapped
            ):
                yield save.lineno
                break


def _unsafe_torch_load(script: Script) -> Iterator[int]:
    for call in script.calls_named("load"):
        if call_name(call) == "torch.load" and (
            keyword(call, "weights_only") is None or keyword(call, "map_location") is None
        ):
            yield call.lineno


def _clip_before_unscale(script: Script) -> Iterator[int]:
    for clip in script.calls_named("clip_grad_norm_", "clip_grad_value_"):
        scope = script.enclosing_function(clip)
        calls = [c for c in ast.walk(scope) if isinstance(c, ast.Call)]
        uses_scaler = any(last_name(c) == "scale" and isinstance(c.func, ast.Attribute) for c in calls)
        unscaled_before = any(last_name(c) == "unscale_" and c.lineno <= clip.lineno for c in calls)
        if uses_scaler and not unscaled_before:
            yield clip.lineno


def _is_main_rank_test(test: ast.expr) -> bool:
    names = names_in(test)
    return bool(names & MAIN_RANK_NAMES)


def _collective_in_rank_branch(script: Script) -> Iterator[int]:
    for call in script.calls:
        if last_name(call) not in COLLECTIVES or not call_name(call).startswith(("dist.", "torch.distributed.")):
            continue
        for parent in script.ancestors(call):
            if isinstance(parent, ast.If) and _is_main_rank_test(parent.test):
                yield call.lineno
                break


def _hard_coded_port(script: Script) -> Iterator[int]:
    for node in ast.walk(script.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and call_name(target.value).endswith("environ")
                    and is_const(target.slice, "MASTER_PORT")
                ):
                    yield node.lineno
        elif isinstance(node, ast.Call) and last_name(node) == "init_process_group":
            method = keyword(node, "init_method")
            if isinstance(method, ast.Constant) and str(method.value).startswith("tcp://"):
                yield node.lineno


def _sqrt_world_clip(script: Script) -> Iterator[int]:
    for clip in script.calls_named("clip_grad_norm_"):
        limit = keyword(clip, "max_norm") or (clip.args[1] if len(clip.args) > 1 else None)
        if limit is None:
            continue
        expression = _resolve(script, clip, limit)
        names = names_in(expression)
        if "sqrt" in names and names & {"world_size", "get_world_size", "nprocs", "num_gpus", "WORLD_SIZE"}:
            yield clip.lineno


def _resolve(script: Script, at: ast.expr, expression: ast.expr) -> ast.expr:
    """A name used as an argument: the expression it was last assigned before `at` (same scope)."""
    if not isinstance(expression, ast.Name):
        return expression
    scope = script.enclosing_function(at)
    best: Optional[ast.Assign] = None
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Assign)
            and node.lineno <= at.lineno
            and any(isinstance(t, ast.Name) and t.id == expression.id for t in node.targets)
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    return best.value if best is not None else expression


RULES: List[Rule] = [
    Rule(
        "DDP001",
        "nn.DataParallel: one process drives every GPU, gathers outputs on GPU 0 and cannot span nodes",
        "use DistributedDataParallel with one process per GPU (e.g. `ddptrain train --nproc N`)",
        _data_parallel,
    ),
    Rule(
        "DDP002",
        "DistributedSampler is never set_epoch()-ed inside the epoch loop: every epoch repeats the same order",
        "call sampler.set_epoch(epoch) at the start of each epoch",
        _set_epoch_missing,
    ),
    Rule(
        "DDP003",
        "DataLoader has both shuffle=True and a sampler (DataLoader raises ValueError)",
        "drop shuffle=True; shuffle in the sampler: DistributedSampler(dataset, shuffle=True)",
        _shuffle_with_sampler,
    ),
    Rule(
        "DDP004",
        "training DataLoader with a DistributedSampler but no drop_last=True: the last batch differs "
        "in size between ranks (BatchNorm errors, uneven step counts)",
        "pass drop_last=True to the training DataLoader",
        _no_drop_last,
    ),
    Rule(
        "DDP005",
        "NCCL process group without torch.cuda.set_device: every process uses GPU 0 (device "
        "mismatch, out of memory, or a hang)",
        "call torch.cuda.set_device(local_rank) before init_process_group",
        _nccl_without_set_device,
    ),
    Rule(
        "DDP006",
        "device hard-coded to GPU 0 in a multi-process script ('cuda:0' or device_ids=[0])",
        "use torch.device('cuda', local_rank) and device_ids=[local_rank]",
        _hard_coded_device,
    ),
    Rule(
        "DDP007",
        "saves state_dict() of the DDP-wrapped model: every key gets a 'module.' prefix",
        "save model.module.state_dict() (the unwrapped model)",
        _saves_wrapped_state,
    ),
    Rule(
        "DDP008",
        "torch.load without map_location and weights_only: every rank loads onto the saving GPU, and "
        "unpickling can run arbitrary code",
        "torch.load(path, map_location='cpu', weights_only=True)",
        _unsafe_torch_load,
    ),
    Rule(
        "DDP009",
        "gradient clipping on loss-scaled gradients (clip before scaler.unscale_)",
        "call scaler.unscale_(optimizer) before clip_grad_norm_",
        _clip_before_unscale,
    ),
    Rule(
        "DDP010",
        "collective reached only inside a rank-0 branch: the other ranks never join and the job hangs",
        "call the collective on every rank, outside `if rank == 0:`",
        _collective_in_rank_branch,
    ),
    Rule(
        "DDP011",
        "hard-coded rendezvous port: a second job on the node fails with 'Address already in use'",
        "let the launcher choose (torchrun --master-port / --rdzv-endpoint, or ddptrain's free port)",
        _hard_coded_port,
    ),
    Rule(
        "DDP012",
        "clip norm scaled by sqrt(world size): DDP averages gradients, so the global-batch norm needs no factor",
        "use the same max_norm as on one GPU",
        _sqrt_world_clip,
    ),
]


def lint_source(path: str, source: str) -> List[Finding]:
    script = Script(path, source)
    findings = []
    for rule in RULES:
        for line in sorted(set(rule.check(script))):
            findings.append(Finding(path, line, rule.id, rule.message, rule.fix))
    return sorted(findings, key=lambda f: (f.line, f.rule))


def python_files(paths: Sequence[str], problems: List[str]) -> List[Path]:
    files: List[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            problems.append(f"{raw}: no such file or folder")
    return files


def run_lint(paths: Sequence[str], as_json: bool, out=None) -> int:
    """Exit status: 0 clean, 1 findings, 2 a file that cannot be read or parsed."""
    out = out or sys.stdout
    findings: List[Finding] = []
    problems: List[str] = []
    files = python_files(paths, problems)
    for path in files:
        try:
            findings.extend(lint_source(str(path), path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, OSError) as error:
            problems.append(f"{path}: cannot parse: {error}")
    if as_json:
        json.dump({"findings": [asdict(f) for f in findings], "errors": problems, "files": len(files)}, out)
        out.write("\n")
    else:
        for finding in findings:
            print(finding, file=out)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{len(findings)} finding(s) in {len(files)} file(s)", file=sys.stderr)
    return 2 if problems else (1 if findings else 0)

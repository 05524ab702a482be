"""The program `ddptrain lint` reads: every file given (a folder: its whole package) parsed once, with what the
rules share — parents of each node, functions and module constants by name across files, call sites, which code
runs on some ranks only, and statement order. Standard library only: the linter never imports torch.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar, cast

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
    # MPI (mpi4py) collectives, as in MPI-launched code
    "bcast",
    "Bcast",
    "allreduce",
    "Allreduce",
    "allgather",
    "Allgather",
    "Barrier",
}
DISTRIBUTED_CALLS = ("init_process_group", "DistributedDataParallel", "DDP", "DistributedSampler")
COLLECTIVE_OWNERS = ("dist", "torch.distributed", "comm", "MPI.COMM_WORLD", "COMM_WORLD")
RANK_NAMES = {
    "rank",
    "local_rank",
    "global_rank",
    "node_rank",
    "is_main",
    "is_main_process",
    "is_master",
    "main_process",
    "get_rank",
    "get_local_rank",
    "is_rank_zero",
    "rank0",
    "is_primary",
    "is_global_zero",
    "master_process",
    "RANK",
    "LOCAL_RANK",
    "Get_rank",  # mpi4py
    "gpu_id",
    "WORLD_RANK",  # read from the environment's RANK by scripts launched under several launchers
    "world_rank",
    "proc_rank",  # NATSpeech's trainer
    "process_rank",
    "gpu_rank",  # PreSumm's trainer: `gpu_ranks[device_id]`, the rank given to init_process_group
}
MULTIPROCESS_IMPORTS = (
    "distributed",
    "DistributedDataParallel",
    "mpi4py",
    "horovod",
    "accelerate",
    "deepspeed",
    "lightning",
)
IGNORE = re.compile(r"#\s*ddptrain:\s*ignore(?:\[([A-Z0-9, ]+)\])?")
FunctionNode = ast.FunctionDef  # (async functions are read the same way)


# Fields never walked: names and flags, and the leaves the parser shares between parents (`ctx`: Load/Store, `op`,
# `ops`: Add, Eq...), which are no one node's children and no rule asks for
NOT_CHILDREN = frozenset(
    (
        "ctx",
        "op",
        "ops",
        "id",
        "attr",
        "name",
        "arg",
        "module",
        "type_comment",
        "kind",
        "level",
        "is_async",
        "conversion",
    )
)
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _child_fields(cls: type) -> Tuple[str, ...]:
    """The fields of a node class that may hold child nodes (`Constant.value` is a Python value, never a node)."""
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        names: Tuple[str, ...] = getattr(cls, "_fields", ())
        fields = tuple(n for n in names if n not in NOT_CHILDREN and not (cls is ast.Constant and n == "value"))
        _CHILD_FIELDS[cls] = fields
    return fields


def _child_nodes(node: ast.AST) -> List[ast.AST]:
    """ast.iter_child_nodes without the shared leaves, as a list: reading a large folder spends most of its time
    here, hence a loop over each class's child fields only."""
    found: List[ast.AST] = []
    for name in _CHILD_FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, name, None)
        if type(value) is list:
            found.extend(item for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


# Every indexed module's nodes, each before its children (preorder): a subtree is a contiguous run, from its node
# to its last descendant (the last child's last child ...), so `walk` is a slice.
_PREORDER: List[ast.AST] = []
_POSITION: Dict[ast.AST, int] = {}  # a node's position in _PREORDER


def _index(tree: ast.Module, parents: Dict[ast.AST, ast.AST]) -> List[ast.AST]:
    """Every node of the tree, each before its children and those in their fields' order (a subtree's nodes
    together), without the shared leaves, each child's parent noted on the way."""
    nodes: List[ast.AST] = []
    stack: List[ast.AST] = [tree]
    pop, push, append, node_class = stack.pop, stack.append, nodes.append, ast.AST
    while stack:  # _child_nodes inlined: this loop visits every node of every module once
        node = pop()
        append(node)
        kind = type(node)
        for name in _REVERSED_FIELDS.get(kind) or _reversed_fields(kind):  # pushed last to first: popped in order
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if isinstance(item, node_class):
                        parents[item] = node
                        push(item)
            elif isinstance(value, node_class):
                parents[value] = node
                push(value)
    base = len(_PREORDER)
    _PREORDER.extend(nodes)
    _POSITION.update(zip(nodes, range(base, base + len(nodes))))
    return nodes


_REVERSED_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _reversed_fields(cls: type) -> Tuple[str, ...]:
    fields = _REVERSED_FIELDS[cls] = tuple(reversed(_child_fields(cls)))
    return fields


_NODE_CACHES: List[Any] = []
F = TypeVar("F", bound=Callable[..., Any])


def node_cache(maxsize: int) -> Callable[[F], F]:
    """`functools.lru_cache` for a function of syntax-tree nodes, registered so that `forget_trees` empties it."""

    def wrap(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _NODE_CACHES.append(cached)
        return cast(F, cached)

    return wrap


@node_cache(1 << 15)
def walk(node: ast.AST) -> Tuple[ast.AST, ...]:
    """The node and every node under it, as the module index orders them (each before its children), without the shared
    leaves (`Load`, `Eq`): the rules walk subtrees thousands of times on a large program (a function's body for
    each of its calls, a test for each rule), hence a slice of its module's index, and kept."""
    position = _POSITION.get(node)
    if position is not None:
        last = node
        while True:  # the subtree ends at its last descendant
            children = _child_nodes(last)
            if not children:
                break
            last = children[-1]
        return tuple(_PREORDER[position : _POSITION[last] + 1])
    found: List[ast.AST] = []
    stack = [node]  # a node no module indexed
    while stack:
        sub = stack.pop()
        found.append(sub)
        stack.extend(reversed(_child_nodes(sub)))
    return tuple(found)


@node_cache(1 << 18)
def call_name(node: ast.AST) -> str:
    """'torch.nn.DataParallel' for a call or attribute chain; '' for anything else."""
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call) or (isinstance(node, ast.Subscript) and parts):  # get_rank().x, loaders[0].sampler
        inner = call_name(node.value if isinstance(node, ast.Subscript) else node)
        return ".".join([inner, *reversed(parts)]) if inner else ".".join(reversed(parts))
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


@node_cache(1 << 18)
def last_name(node: ast.AST) -> str:
    return call_name(node).rsplit(".", 1)[-1]


def keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def argument(call: ast.Call, position: Optional[int], name: str) -> Optional[ast.expr]:
    """What a call passes for a parameter: by its name, else at its position (None: keyword-only)."""
    return keyword(call, name) or (
        call.args[position] if position is not None and 0 <= position < len(call.args) else None
    )


def call_position(function: ast.FunctionDef, name: str) -> Optional[int]:
    """Where a caller passes the parameter `name` positionally: its index among the positional parameters, less a
    leading `self`/`cls` (a method is called on its object); None where it is not a positional parameter."""
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if name not in positional:
        return None
    return positional.index(name) - (1 if positional[:1] in (["self"], ["cls"]) else 0)


def is_const(node: Optional[ast.AST], value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


@node_cache(1 << 17)
def names_in(node: ast.AST) -> FrozenSet[str]:
    found = set()
    for sub in walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value in RANK_NAMES:
            found.add(sub.value)  # os.environ["RANK"]
    return frozenset(found)


def is_collective(call: ast.Call, module: Module) -> bool:
    """A call every rank of the process group must make (`dist.barrier()`, `comm.bcast(...)` of MPI) — not
    `torch.cuda.comm`'s, which copy between the GPUs of one process (DataParallel, old SyncBatchNorm)."""
    name = call_name(call)
    owner, _, last = name.rpartition(".")
    if last == "state_dict" and "FULL_STATE_DICT" in module.source:
        return _in_a_full_state_dict_block(call, module)
    if last not in COLLECTIVES or owner.endswith("cuda.comm"):
        return False
    root = owner.split(".")[0]
    if module.imported.get(root) == "comm" and module.import_tops.get(root) == "torch":
        return False  # import torch.cuda.comm as comm / from torch.cuda import comm
    return owner in COLLECTIVE_OWNERS or owner.endswith(("distributed", "comm", "COMM_WORLD"))


def _in_a_full_state_dict_block(call: ast.Call, module: Module) -> bool:
    """`with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, ...): model.state_dict()`: FSDP gathers
    every rank's shards into the full state, so every rank must make the call (`rank0_only=True` keeps the result on
    rank 0; the gather is still everyone's)."""
    owner = call_name(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    return any(
        isinstance(parent, ast.With)
        and any(
            isinstance(item.context_expr, ast.Call)
            and last_name(item.context_expr) == "state_dict_type"
            and "FULL_STATE_DICT" in names_in(item.context_expr)
            and bool(item.context_expr.args)
            and call_name(item.context_expr.args[0]) == owner  # the model's, not the optimizer's
            for item in parent.items
        )
        for parent in module.ancestors(call)
    )


@node_cache(1 << 16)
def selects_ranks(test: ast.expr) -> bool:
    """A condition that holds on some ranks only (`rank == 0`, `is_main_process()`, `local_rank in [-1, 0]`), as
    opposed to one that tells distributed from single-process runs (`local_rank != -1`, `world_size > 1`)."""
    if not names_in(test) & RANK_NAMES and not _rank_like(test):
        return False
    if _asks_for_a_variable(test):
        return False  # `"LOCAL_RANK" in os.environ`: whether a launcher set it, the same on every rank
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `args.do_train and (args.local_rank == -1 or dist.get_rank() == 0)`: where one part picks ranks, the
        # whole does
        return any(selects_ranks(value) for value in test.values)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        # `rank == 0 or args.save_all`: maybe every rank; `device == 0 or not args.distributed`: one rank wherever
        # there are several (the other arm holds only in a single-process run)
        chosen = [value for value in test.values if selects_ranks(value)]
        return bool(chosen) and all(value in chosen or _single_process_only(value) for value in test.values)
    for node in walk(test):
        if isinstance(node, ast.Compare) and any(
            isinstance(c, ast.UnaryOp) and isinstance(c.op, ast.USub) for c in [node.left, *node.comparators]
        ):
            return False  # `rank != -1`, `RANK > -1`: distributed or not, the same on every rank
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.GtE) and is_const(node.comparators[0], 0):
            return False  # `local_rank >= 0`: the same
    return True


LAUNCHER_VARIABLES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}


def _asks_for_a_variable(test: ast.expr) -> bool:
    """`"LOCAL_RANK" in os.environ` (or `not in`): a name looked up, not a rank compared."""
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.In, ast.NotIn))
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
    )


SINGLE_PROCESS_FLAGS = {
    "distributed",
    "is_distributed",
    "use_distributed",
    "ddp",
    "use_ddp",
    "is_initialized",
    "multi_gpu",
    "multigpu",
}


PROCESS_COUNT_NAMES = {"world_size", "num_gpus", "n_gpu", "n_gpus", "ngpus", "num_processes"}


def _single_process_only(test: ast.expr) -> bool:
    """A condition that holds only when the run is not distributed: `not args.distributed`, `not
    dist.is_initialized()`, `world_size == 1`, `world_size < 2`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):  # (not `multiprocessing_distributed`: the
        # ImageNet example runs distributed without it, one process per node)
        inner = test.operand
        if isinstance(inner, ast.BoolOp) and isinstance(inner.op, ast.And):  # `not (dist.is_available() and
            return all(_single_process_only(ast.UnaryOp(op=ast.Not(), operand=v)) for v in inner.values)  # rank != -1)`
        if _unset_rank(inner, ast.NotEq):
            return True  # `not args.local_rank != -1`
        names = {name.lower() for name in names_in(inner)}
        return bool(names & SINGLE_PROCESS_FLAGS) or {"dist", "is_available"} <= names  # `not dist.is_available()`
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_single_process_only(v) for v in test.values)  # `args.parallel and not args.distributed`
    if _unset_rank(test, ast.Eq):
        return True  # `args.local_rank == -1`: the launchers' "not distributed"
    if _asks_for_a_variable(test) and isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.NotIn):
        return cast(ast.Constant, test.left).value in LAUNCHER_VARIABLES  # `"RANK" not in os.environ`: no launcher
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and is_const(test.comparators[0], None)
        and names_in(test.left) & {"rank", "local_rank", "world_size"}
    ):
        return True  # `self.rank is None`: no rank given, no process group
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and names_in(test.left) & PROCESS_COUNT_NAMES:
        op, right = test.ops[0], test.comparators[0]
        return isinstance(right, ast.Constant) and (
            (isinstance(op, (ast.Eq, ast.LtE)) and right.value == 1) or (isinstance(op, ast.Lt) and right.value == 2)
        )
    return False


def _switch_flag(test: ast.expr) -> str:
    """The last name of the flag `if parallel:`, `if parallel == True:` or `if self.parallel is True:` tests; for a
    count of processes, the test itself (`if GPU_NUM > 1:`, QMedSAM, which makes the group in that `if`)."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, (ast.Name, ast.Attribute))
        and (
            (isinstance(test.ops[0], ast.Gt) and is_const(test.comparators[0], 1))
            or (isinstance(test.ops[0], ast.GtE) and is_const(test.comparators[0], 2))
        )
    ):
        return call_name(test.left) + " > 1"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        if not is_const(test.comparators[0], True):
            return ""
        test = test.left
    return call_name(test).rpartition(".")[2] if isinstance(test, (ast.Name, ast.Attribute)) else ""


def switched_on(module: Module, test: ast.expr) -> bool:
    """A test that holds where one of the module's distributed switches is on."""
    flag = _switch_flag(test)
    return bool(flag) and flag in module.distributed_switches()


def _unset_rank(test: ast.expr, op: type) -> bool:
    """`local_rank == -1` (with `op` Eq) or `local_rank != -1` (NotEq)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op)):
        return False
    right = test.comparators[0]
    minus_one = isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and is_const(right.operand, 1)
    return minus_one and bool({n.rpartition(".")[2] for n in names_in(test.left)} & {"local_rank", "rank"})


def _tested_for_none(test: ast.expr) -> ast.expr:
    """`run is not None` (or `run is None`) asks what `if run:` (`if not run:`) asks of an object that is either
    made or None: the object."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and is_const(test.comparators[0], None)
    ):
        return test.left
    return test


def _tests_for_presence(test: ast.expr) -> bool:
    """`x is not None` or a plain `x` (not `x is None`, `not x`: those arms run where it is absent)."""
    if isinstance(test, ast.Compare):
        return len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) and is_const(test.comparators[0], None)
    return isinstance(test, (ast.Name, ast.Attribute))


def _holds_on_some_ranks(value: ast.expr) -> bool:
    """A value that holds on some ranks only: a rank test, or a call of one (`is_main_process()`,
    `bool(rank == 0)`) — not a call that is merely given the rank (UniAug's `valid_loader =
    get_dist_dataloader(..., rank=rank)`, None where the split is missing: the same on every rank)."""
    if isinstance(value, ast.Call):
        return selects_ranks(value.func) or any(
            isinstance(a, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and selects_ranks(a) for a in value.args
        )
    return selects_ranks(value)


def _made_on_some_ranks(value: ast.expr) -> bool:
    """`setup_wandb() if local_rank == 0 else None` (or `None if rank != 0 else SummaryWriter()`): an object on the
    ranks a rank test picks and None on the others, so testing it for truth tests the rank."""
    return (
        isinstance(value, ast.IfExp)
        and selects_ranks(value.test)
        and (_false_constant(value.body) or _false_constant(value.orelse))
    )


def forget_trees() -> None:
    """Empty the caches keyed by syntax-tree nodes (`walk`, `call_name`, ...): each entry keeps its node's subtree
    alive, so after a large folder they hold millions of nodes (a gigabyte for the four corpora of docs/lint.md) for
    as long as the process lives. Freeing them costs time too (2-3 s there), which a process about to exit skips."""
    for cached in _NODE_CACHES:
        cached.cache_clear()
    _PREORDER.clear()
    _POSITION.clear()


@dataclass
class Module:
    path: str  # as findings show it
    source: str
    file: Path = Path()  # where it was read from (resolved), for finding what it imports
    tree: ast.Module = field(init=False)
    parents: Dict[ast.AST, ast.AST] = field(init=False, default_factory=dict)
    calls: List[ast.Call] = field(init=False, default_factory=list)
    ignored: Dict[int, Optional[Set[str]]] = field(init=False, default_factory=dict)
    imported: Dict[str, str] = field(init=False, default_factory=dict)  # local name -> what it names, last part
    import_names: Set[str] = field(init=False, default_factory=set)  # every dotted name imported
    import_tops: Dict[str, str] = field(init=False, default_factory=dict)  # local name -> top package ('' relative)
    found_tops: Optional[Set[str]] = field(init=False, default=None)  # tops whose imports found the program's files
    nodes: List[ast.AST] = field(init=False, default_factory=list)  # every node, each before its children (see _index)
    functions: List[ast.FunctionDef] = field(init=False, default_factory=list)
    imports: List[ast.stmt] = field(init=False, default_factory=list)  # Import and ImportFrom, in `nodes` order
    _calls_of: Optional[Dict[ast.AST, List[ast.Call]]] = field(init=False, default=None)
    _assignments: Optional[Dict[str, List[ast.Assign]]] = field(init=False, default=None)
    _branches: Dict[ast.AST, Optional[ast.If]] = field(init=False, default_factory=dict)
    _of_type: Dict[tuple, list] = field(init=False, default_factory=dict)
    _by_class: Optional[Dict[type, list]] = field(init=False, default=None)
    _mentions: Dict[tuple, Set[str]] = field(init=False, default_factory=dict)
    _memo: Dict[tuple, Any] = field(init=False, default_factory=dict)

    @property
    def stem(self) -> str:
        return self.path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")

    def __post_init__(self) -> None:
        self.tree = ast.parse(self.source, filename=self.path)
        self.nodes = _index(self.tree, self.parents)
        for node in self.nodes:
            kind = type(node)
            if kind is ast.Call:
                self.calls.append(node)  # type: ignore[arg-type]
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                self.functions.append(node)  # type: ignore[arg-type]
            elif kind is ast.Import or kind is ast.ImportFrom:
                self.imports.append(node)  # type: ignore[arg-type]
                for alias in node.names:  # type: ignore[attr-defined]
                    self.imported[alias.asname or alias.name.split(".")[0]] = alias.name.rsplit(".", 1)[-1]
                    owner = node.module + "." if isinstance(node, ast.ImportFrom) and node.module else ""
                    self.import_names.add(owner + alias.name)
                    relative = isinstance(node, ast.ImportFrom) and node.level > 0
                    self.import_tops[alias.asname or alias.name.split(".")[0]] = (
                        "" if relative else (owner + alias.name).split(".")[0]
                    )
        lines = self.source.splitlines() if "ddptrain" in self.source else []
        for number, line in enumerate(lines, start=1):
            match = IGNORE.search(line)
            if match:
                self.ignored[number] = {r.strip() for r in match.group(1).split(",")} if match.group(1) else None

    def of_type(self, *types: type) -> list:
        """The module's nodes of these types, in `nodes` order: one pass per module, however many programs and
        rules ask."""
        if types not in self._of_type:
            if len(types) == 1 and not types[0].__subclasses__():  # one concrete class (not `ast.stmt`): every node
                if self._by_class is None:  # grouped by its class in one pass, then looked up
                    self._by_class = {}
                    for node in self.nodes:
                        self._by_class.setdefault(type(node), []).append(node)
                self._of_type[types] = self._by_class.get(types[0], [])
            else:
                self._of_type[types] = [node for node in self.nodes if isinstance(node, types)]
        return self._of_type[types]

    def spells(self, *words: str) -> bool:
        """Whether the module's text holds any of the words: kept, as rules ask it for each function."""
        key = ("spells", words)
        if key not in self._memo:
            self._memo[key] = any(word in self.source for word in words)
        return bool(self._memo[key])

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """A rule's result about this module (or a function in it), computed once however many programs read it."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @functools.cached_property
    def words(self) -> FrozenSet[str]:
        """Every name, attribute and string constant in the module."""
        found: Set[str] = {node.id for node in self.of_type(ast.Name)}
        found.update(node.attr for node in self.of_type(ast.Attribute))
        found.update(node.value for node in self.of_type(ast.Constant) if type(node.value) is str)
        return frozenset(found)

    def mentions(self, function: ast.AST, libraries: FrozenSet[str]) -> Set[str]:
        """The names a function mentions (not attributes of `libraries`), kept for the next program that reads
        this module: the walk is done once per function, only the libraries' filter once per program."""
        key = (id(function), libraries)
        if key not in self._mentions:
            names, attributes = self.memo(("mentioned", id(function)), lambda: _mentioned(function, self.own_functions))
            found = (names - libraries) | {  # (`init_process_group` imported from torch is torch's, not a namesake's)
                _attribute_mention(attr, root, self.module_roots) for attr, root in attributes if root not in libraries
            }
            self._mentions[key] = found | self._originals(found)
        return self._mentions[key]

    def at_import(self, libraries: FrozenSet[str], main: bool) -> Set[str]:
        key = ("import", libraries, main)
        if key not in self._mentions:
            found = _mentioned_at_import(self.tree, libraries, main, self.module_roots, self.own_functions)
            self._mentions[key] = found | self._originals(found)
        return self._mentions[key]

    @functools.cached_property
    def own_functions(self) -> FrozenSet[str]:
        """The module-level functions the module defines: `save_checkpoint(...)` called by its bare name here
        runs that function, never a method of that name (`PrivacyEngine.save_checkpoint` of a library module)."""
        return frozenset(
            s.name
            for s in self.tree.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name not in self.imported
        )

    @functools.cached_property
    def module_roots(self) -> FrozenSet[str]:
        """Names that may stand for a module where an attribute chain starts with them (`utils.train()`): what
        the module imports and never assigns (`trainer = trainer.BaseTrainer(...)` makes `trainer` an object)."""
        assigned = {node.id for node in self.of_type(ast.Name) if isinstance(node.ctx, ast.Store)}
        return frozenset(name for name in self.imported if name not in assigned)

    def _originals(self, names: Set[str]) -> Set[str]:
        """What the aliases among `names` name: `from train import main as app_main`; `app_main()` runs `main`."""
        return {self.imported[n] for n in names if n in self.imported}

    def is_ignored(self, line: int, rule: str) -> bool:
        if line not in self.ignored:
            return False
        rules = self.ignored[line]
        return rules is None or rule in rules

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def calls_in(self, function: ast.AST) -> List[ast.Call]:
        """The calls a function's own body makes (not those of functions defined inside it), in source order."""
        if self._calls_of is None:
            self._calls_of = {}
            for call in self.calls:
                self._calls_of.setdefault(self.function_of(call) or self.tree, []).append(call)
            for calls in self._calls_of.values():
                calls.sort(key=lambda c: (c.lineno, c.col_offset))
        return self._calls_of.get(function, [])

    def function_of(self, node: ast.AST) -> Optional[ast.FunctionDef]:
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return parent  # type: ignore[return-value]
        return None

    def scope_of(self, node: ast.AST) -> ast.AST:
        return self.function_of(node) or self.tree

    def rank_branch(self, node: ast.AST, stop: Optional[ast.AST] = None) -> Optional[ast.If]:
        """The innermost `if` (below `stop`) on a rank-selecting condition whose body or else holds `node`; the
        module's own fact, asked of every call by several rules and programs: kept."""
        if stop is not None:
            return self._rank_branch(node, stop)
        if node not in self._branches:
            self._branches[node] = self._rank_branch(node, None)
        return self._branches[node]

    def _rank_branch(self, node: ast.AST, stop: Optional[ast.AST]) -> Optional[ast.If]:
        child = node
        for parent in self.ancestors(node):
            if parent is stop:
                return None
            if isinstance(parent, ast.If) and child is not parent.test and self.selects_ranks_at(parent):
                return parent
            if isinstance(parent, ast.IfExp) and child is not parent.test and selects_ranks(parent.test):
                return None  # an expression: both arms are evaluated alike for collectives
            child = parent
        return None

    def selects_ranks_at(self, branch: ast.If) -> bool:
        """The `if`'s condition holds on some ranks only, also through a flag set to such a condition:
        `save_cp = local_rank in [-1, 0]` ... `if save_cp:`, or `self.save_to_disk = get_rank() == 0` in the class.
        The module's own fact, asked for each call inside the `if` by several rules: kept."""
        key = ("selects ranks at", id(branch))
        if key not in self._memo:
            self._memo[key] = self._selects_ranks_at(branch)
        return bool(self._memo[key])

    def _selects_ranks_at(self, branch: ast.If) -> bool:
        if selects_ranks(branch.test) or self._compares_a_given_rank(branch.test):
            return True
        if isinstance(branch.test, ast.BoolOp) and isinstance(branch.test.op, ast.Or):
            return self._one_rank_or_one_process(branch.test, branch)
        test = branch.test.operand if isinstance(branch.test, ast.UnaryOp) else branch.test
        flags = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        if test is branch.test and any(
            isinstance(f, ast.BoolOp) and isinstance(f.op, ast.Or) and self._one_rank_or_one_process(f, branch)
            for f in flags
        ):
            return True  # `step % n == 0 and (not self.dist_train or global_rank == 0)`
        flags = [_tested_for_none(flag) for flag in flags]
        return any(
            self._flag_selects_ranks(flag, branch) for flag in flags if isinstance(flag, (ast.Name, ast.Attribute))
        )

    def _compares_a_given_rank(self, test: ast.expr) -> bool:
        """`if self.replicate_rank == 0:` where the module gives `rank=self.replicate_rank` to
        `init_process_group`: whatever a process group is told is the rank, is one (also as a part of an `and`)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self._compares_a_given_rank(value) for value in test.values)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)):
            return False
        given = self.memo(
            ("ranks given to the group",),
            lambda: {
                call_name(value).rpartition(".")[2]
                for call in self.calls
                if last_name(call) == "init_process_group"
                for value in [keyword(call, "rank")]
                if isinstance(value, (ast.Name, ast.Attribute))
            },
        )
        return isinstance(test.left, (ast.Name, ast.Attribute)) and call_name(test.left).rpartition(".")[2] in given

    def _one_rank_or_one_process(self, test: ast.BoolOp, at: ast.AST) -> bool:
        """`(not cfg.cuda) or main_gpu` (Yolact): a rank flag, or a condition that holds only where the module runs
        one process — `not X` where `if X:` is what makes the process group or the DDP wrap."""
        flags = [  # (also `(self.dist_train and global_rank == 0)`, UER-py's: a rank test of its own)
            v
            for v in test.values
            if isinstance(v, (ast.Name, ast.Attribute)) and self._flag_selects_ranks(v, at) or selects_ranks(v)
        ]
        return bool(flags) and all(
            value in flags or _single_process_only(value) or self._off_the_distributed_switch(value)
            for value in test.values
        )

    def _off_the_distributed_switch(self, test: ast.expr) -> bool:
        """`not X` where `if X:` is what makes the process group, the DDP wrap or a distributed sampler."""
        return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and switched_on(self, test.operand)

    def _flag_selects_ranks(self, flag: ast.expr, at: ast.AST) -> bool:
        """Every value the flag is set to is a rank test, or an object made on some ranks only (`run = wandb.init()
        if rank == 0 else None` ... `if run:`) — or a false constant, with the other values set inside a
        rank-selecting `if` (`if get_rank() == 0: self.print_log = print_log` / `else: self.print_log = False`)."""
        if self._given_by_the_caller(flag, at):
            return False  # tacotron2's `train(..., checkpoint_path, ...)`: set on rank 0 only further down, later
        values = self.flag_values(flag, at)
        if not values or all(_holds_on_some_ranks(value) or _made_on_some_ranks(value) for value in values):
            return bool(values)
        kept = [
            node
            for node in self.flag_assignments(flag, at)
            if not _false_constant(node.value) and not self.on_a_single_process_arm(node)
        ]
        return bool(kept) and all(_holds_on_some_ranks(n.value) or self._under_rank_test(n) for n in kept)

    def _given_by_the_caller(self, flag: ast.expr, at: ast.AST) -> bool:
        """A parameter of the function around `at` that nothing assigns before `at` nor in a loop around it: what
        it holds there is what the caller gave."""
        function = self.function_of(at)
        if not isinstance(flag, ast.Name) or function is None:
            return False
        arguments = function.args
        if flag.id not in {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}:
            return False
        loops = [
            p for p in self.ancestors(at) if isinstance(p, (ast.For, ast.While)) and self.function_of(p) is function
        ]
        return not any(
            node.lineno < at.lineno or any(loop in self.ancestors(node) for loop in loops)  # type: ignore[attr-defined]
            for node in self.flag_assignments(flag, at)
        )

    def on_a_single_process_arm(self, node: ast.AST) -> bool:
        """In the body of `if num_gpus == 1:` (`not args.distributed`, ...), or the `else` of `if self.distributed:`:
        set in a single-process run only."""
        lineage = {id(node), *map(id, self.ancestors(node))}
        for p in self.ancestors(node):
            if not isinstance(p, ast.If):
                continue
            if _single_process_only(p.test) and any(id(s) in lineage for s in p.body):
                return True
            plain = not (isinstance(p.test, ast.UnaryOp) and isinstance(p.test.op, ast.Not))
            negated = ast.UnaryOp(op=ast.Not(), operand=p.test)
            switch = plain and switched_on(self, p.test)  # the `else` of `if parallel == True:`
            if (switch or plain and _single_process_only(negated)) and any(id(s) in lineage for s in p.orelse):
                return True
        return False

    def distributed_switches(self) -> FrozenSet[str]:
        """The last names of the flags whose `if` makes the process group or the DDP wrapper in its body
        (`parallel = bool(args.parallel_training)` ... `if parallel == True: dist.init_process_group(...)`): a test
        of one tells a distributed run from a single-process one, wherever in the module it is asked."""
        return cast(FrozenSet[str], self.memo(("switches",), self._distributed_switches))

    def _distributed_switches(self) -> FrozenSet[str]:
        found: Set[str] = set()
        if not any(name in self.source for name in DISTRIBUTED_CALLS):
            return frozenset()
        for branch in self.of_type(ast.If):
            flag = _switch_flag(branch.test)
            if flag and any(
                isinstance(n, ast.Call) and last_name(n) in DISTRIBUTED_CALLS
                for statement in branch.body
                for n in walk(statement)
            ):
                found.add(flag)
        return frozenset(found)

    def _under_rank_test(self, node: ast.AST) -> bool:
        """Inside an `if` whose own condition selects ranks (not through a flag: flags set under flags would loop)."""
        return any(isinstance(p, ast.If) and node is not p.test and selects_ranks(p.test) for p in self.ancestors(node))

    def flag_values(self, flag: ast.expr, at: ast.AST) -> List[ast.expr]:
        """What a name is set to in the function around `at` (`self.x`: anywhere in the class around it)."""
        key = ("flag", call_name(flag), id(self.scope_of(at)))
        return self.memo(key, lambda: self._flag_values(flag, at))

    def _flag_values(self, flag: ast.expr, at: ast.AST) -> List[ast.expr]:
        return [node.value for node in self.flag_assignments(flag, at)]

    def flag_assignments(self, flag: ast.expr, at: ast.AST) -> List[ast.Assign]:
        """The assignments to a name in the function around `at` (`self.x`: anywhere in the class around it)."""
        name = call_name(flag)
        scope: Optional[ast.AST] = None
        if isinstance(flag, ast.Attribute) and name.startswith("self."):
            scope = next((p for p in self.ancestors(at) if isinstance(p, ast.ClassDef)), None)
        elif isinstance(flag, ast.Name) or (isinstance(flag, ast.Attribute) and name):
            scope = self.scope_of(at)  # `save_cp = ...`, or `args.save_logs = ... and is_master(args)`
        else:
            return []
        if scope is None:
            return []
        return [node for node in self.assignments(name) if scope is self.tree or scope in self.ancestors(node)]

    def assignments(self, name: str) -> List[ast.Assign]:
        """The module's assignments to `name` (`x`, `self.x`), in `nodes` order: looked up, not walked, for each
        flag a rank test may hide behind."""
        if self._assignments is None:
            self._assignments = {}
            for node in self.of_type(ast.Assign):
                for target in {call_name(t) for t in node.targets}:
                    self._assignments.setdefault(target, []).append(node)
        return self._assignments.get(name, [])

    def is_multiprocess(self) -> bool:
        """Imports what multi-process training is written with (torch.distributed, DDP, a distributed sampler,
        MPI, Horovod, Accelerate, DeepSpeed, Lightning): a single-process script does not."""
        return bool(
            self.memo(
                ("multiprocess",),
                lambda: (
                    self.is_distributed()
                    or any(any(word in name for word in MULTIPROCESS_IMPORTS) for name in self.import_names)
                ),
            )
        )

    def is_distributed(self) -> bool:
        return bool(self.distributed_calls())

    def distributed_calls(self) -> List[ast.Call]:
        """The module's calls that make a process group, wrap a model in DDP or shard data by rank (kept)."""
        return self.memo(("distributed calls",), lambda: [c for c in self.calls if last_name(c) in DISTRIBUTED_CALLS])


def _program_index(
    module: Module,
) -> Tuple[Dict[str, List[ast.FunctionDef]], List[Tuple[str, ast.Constant]], Dict[str, List[ast.Call]]]:
    """A module's functions and calls by name and its module-level constants, in source order: what each program
    that reads the module merges into its own index (a module shared by many programs is indexed once)."""
    functions: Dict[str, List[ast.FunctionDef]] = {}
    for function in module.functions:
        functions.setdefault(function.name, []).append(function)
    constants = [
        (target.id, statement.value)
        for statement in module.tree.body
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
        for target in statement.targets
        if isinstance(target, ast.Name)
    ]
    calls: Dict[str, List[ast.Call]] = {}
    for call in module.calls:
        name = last_name(call)
        if name:
            calls.setdefault(name, []).append(call)
    return functions, constants, calls


class Program:
    """Several modules read together: a call to `helper(...)` resolves to a function named `helper` in any of them
    (same-file first), a NAME to a module-level constant."""

    def __init__(self, modules: Sequence[Module]):
        self.modules = list(modules)
        self.functions: Dict[str, List[Tuple[Module, ast.FunctionDef]]] = {}
        self.constants: Dict[str, ast.expr] = {}
        self.call_sites: Dict[str, List[Tuple[Module, ast.Call]]] = {}
        for module in self.modules:
            functions, constants, calls = module.memo(("program index",), functools.partial(_program_index, module))
            for name, found in functions.items():
                self.functions.setdefault(name, []).extend((module, function) for function in found)
            for name, value in constants:
                self.constants.setdefault(name, value)
            for name, found in calls.items():
                self.call_sites.setdefault(name, []).extend((module, call) for call in found)
        self.multiprocess = any(m.is_multiprocess() for m in self.modules)
        self._reaches: Dict[int, Optional[str]] = {}
        self._memo: Dict[tuple, Any] = {}
        self._mentioned_in: Dict[int, Set[str]] = {}  # names each module's running code mentions (see used_names)

    @functools.cached_property
    def distributed(self) -> bool:
        """The program makes a process group, wraps a model in DDP or builds a distributed sampler in code it runs:
        a script of a repository whose library does (an evaluation, a toy trainer beside the real one, both
        importing the same package) is a single-process program."""
        entry = self.modules[0]
        if any(entry.function_of(call) is None for call in entry.distributed_calls()):
            return True  # the entry point's own top level (most scripts): no need to work out what runs
        running = [
            (m, call)
            for m in self.modules
            for call in m.distributed_calls()
            if (m is entry or self.runs(m, call.lineno)) and not self.branches_away(m, call)
        ]
        if any(name.split(".")[0] in GROUP_MAKERS for m in self.modules for name in m.import_names):
            return bool(running)  # a framework may make the process group the wrap below waits for
        return any(not _waits_for_a_group(m, call) for m, call in running)

    def branches_away(self, module: Module, node: ast.AST) -> bool:
        """Every call the program makes of the function around `node` takes another branch: `load_dataset(...)`
        leaving `rank=-1` for `DistributedSampler(ds) if rank != -1 else None`, `build_loader(multi_gpu=False)`,
        `Trainer(ddp=False)` whose `__init__` passes `ddp` on to the helper that wraps the model under `if ddp:`."""
        function = module.function_of(node)
        if function is None:
            return False
        sites = self.running_sites(module, function)
        if sites and all(
            branch_not_taken(module, function, node, call, functools.partial(self._constant_for, m, call))
            for m, call in sites
        ):
            return True
        return self._kept_flag_away(module, function, node)

    def _kept_flag_away(self, module: Module, function: ast.FunctionDef, node: ast.AST) -> bool:
        """`node` sits in a branch on `self.ddp` that no construction takes: `self.ddp = ddp` kept from an
        `__init__` parameter that every construction the program runs leaves at `False` (`Trainer(config, model)`,
        torch-atom's single-process `main.py` beside `main_ddp.py`'s `Trainer(..., ddp=True)`)."""
        lineage = {id(node), *map(id, module.ancestors(node))}
        for branch in module.ancestors(node):
            if branch is function:
                break
            if not isinstance(branch, (ast.If, ast.IfExp)) or id(branch.test) in lineage:
                continue
            flag = _tested(branch.test)
            if not isinstance(flag, ast.Attribute) or call_name(flag.value) != "self":
                continue
            given = self.constructions_give(module, node, flag)
            decided = {_takes(branch.test, value) for value in given}
            if not given or len(decided) != 1 or None in decided:
                continue
            body = branch.body if isinstance(branch, ast.If) else [branch.body]
            if any(id(statement) in lineage for statement in body) != decided.pop():
                return True
        return False

    def sites_of_function(self, module: Module, function: ast.FunctionDef) -> List[Tuple[Module, ast.Call]]:
        """The calls of a function, also by the name it is imported as (`from loaders import build as
        make_loaders`); of a class's `__init__`, the calls of the class."""
        name = function.name
        owner = next((p for p in module.ancestors(function) if isinstance(p, ast.ClassDef)), None)
        if name == "__init__":
            if owner is None:
                return []
            name = owner.name
        elif owner is not None and _private(name):  # `self.__save()` is its own class's (Python mangles the name)
            return [(m, c) for m, c in self.sites_of(name) if m is module and owner in m.ancestors(c)]
        sites = [  # `main()` in a module that defines its own `main` runs that one (NVAE's fid/fid_score.py)
            (m, c)
            for m, c in self.sites_of(name)
            if m is module or owner is not None or not isinstance(c.func, ast.Name) or name not in m.own_functions
        ]
        for other in self.modules:
            for alias in [a for a, original in other.imported.items() if original == name and a != name]:
                sites += [
                    (m, c) for m, c in self.call_sites.get(alias, []) if m is other and isinstance(c.func, ast.Name)
                ]
        return sites

    def running_sites(
        self, module: Module, function: ast.FunctionDef, handed: bool = False
    ) -> List[Tuple[Module, ast.Call]]:
        """The calls of `function` that the program runs (with `handed`, also the calls it is handed to by name:
        `mp.spawn(train, ...)`), less its calls of itself (a recursion, its own `super().name()`), which bring no
        caller of their own."""
        named = self.sites_of_function(module, function)
        sites = [*named, *self.handed_over(module, function)] if handed else named
        return [
            (m, call)
            for m, call in sites
            if self.runs(m, call.lineno) and not (m is module and function in m.ancestors(call))
        ]

    def _constant_for(self, module: Module, call: ast.Call, name: ast.Name) -> Optional[ast.expr]:
        """The constant that `name`, passed by `call`, stands for: a parameter of the caller that every call of the
        caller the program runs gives the same constant (one level up)."""
        caller = module.function_of(call)
        if caller is None:
            return None
        sites = self.running_sites(module, caller)
        values = [given_value(caller, c, name.id) for _, c in sites]
        if not values or not all(isinstance(v, ast.Constant) for v in values):
            return None
        if len({repr(v.value) for v in values if isinstance(v, ast.Constant)}) != 1:
            return None
        return values[0]

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """A rule's result that depends on the whole program (what calls resolve to), computed once per program."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # ---- what the program runs -------------------------------------------------------------------------
    @functools.cached_property
    def used_names(self) -> Set[str]:
        """Names the program may run: what its entry module mentions (a script with a `__main__` guard: its top
        level and that block; a file without one: all of it), what imported modules do at import (not their
        `__main__` blocks), then, to a fixed point, what each reachable function mentions — a module-level function
        whose name is mentioned, a method whose name and class's name both are. An attribute of a library
        (`torch.save`, `np.load`) mentions nothing of the program's own."""
        found: Set[str] = set()
        for index, module in enumerate(self.modules):
            libraries = self._libraries(module)
            whole = index == 0 and not self.entry_is_script
            mentioned = module.mentions(module.tree, libraries) if whole else module.at_import(libraries, index == 0)
            self._mentioned_in[id(module)] = set(mentioned)
            found |= mentioned
        walked: Set[int] = set()
        waiting: Dict[int, Tuple[Module, ast.FunctionDef]] = {}  # not reachable yet: asked again when names are new
        pending = set(found)
        while pending:  # a function may become reachable only when a name it waits for is new
            candidates = {id(f): (m, f) for name in pending for m, f in self._waiting_for.get(name.lstrip(".="), ())}
            candidates.update(waiting)
            pending = set()
            for key, (module, function) in candidates.items():
                if key in walked:
                    continue
                if not self._reachable(module, function, found):
                    waiting[key] = (module, function)
                    continue
                waiting.pop(key, None)
                walked.add(key)
                mentioned = module.mentions(function, self._libraries(module))
                self._mentioned_in[id(module)] |= mentioned
                new = mentioned - found
                found |= new
                pending |= new
        return found

    @functools.cached_property
    def _namesakes(self) -> Set[str]:
        """Names of module-level functions that more than one module of the program defines (`main`, `parse_args`)."""
        seen: Set[str] = set()
        twice: Set[str] = set()
        for module in self.modules:
            for statement in module.tree.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    (twice if statement.name in seen else seen).add(statement.name)
        return twice

    def _namesake_used(self, module: Module, name: str) -> bool:
        """A module-level function whose name another module's function shares runs where its own module's running
        code mentions it, or where a module imports it (or its module, and an attribute of that name is read) — not
        because a namesake is called (SUEF's `main.py` calls its own `create_data_loaders`, not `utils.utils`'s)."""
        if {name, "=" + name} & self._mentioned_in.get(id(module), set()):
            return True
        sources = {module.stem, module.file.parent.name if module.stem == "__init__" else module.stem}
        for other in self.modules:
            if other is module:
                continue
            for imported in other.import_names:
                source, _, last = imported.rpartition(".")
                star = last == "*" and name not in other.own_functions  # (its own `def name` shadows the star's)
                if (last == name or star) and source.rpartition(".")[2] in sources:
                    return True
                if last in sources and name in self._mentioned_in.get(id(other), set()):
                    return True  # the module imported whole, and `module.name(...)` run in the importer
        return False

    @functools.cached_property
    def _waiting_for(self) -> Dict[str, List[Tuple[Module, ast.FunctionDef]]]:
        """For each name, the functions its first mention may make reachable: those of that name, and the methods
        of a class that name (or a subclass's, four levels down) puts in use."""
        users: Dict[str, Set[str]] = {}
        waiting: Dict[str, List[Tuple[Module, ast.FunctionDef]]] = {}
        for module in self._filtered_modules:
            for function in module.functions:
                waiting.setdefault(function.name, []).append((module, function))
                owner = module.parents.get(function)
                if isinstance(owner, ast.ClassDef):
                    if owner.name not in users:
                        users[owner.name] = _with_subclasses(owner.name, self._subclasses, 4)
                    for name in users[owner.name]:
                        waiting.setdefault(name, []).append((module, function))
        return waiting

    @functools.cached_property
    def entry_is_script(self) -> bool:
        """The entry module has a `__main__` guard: what runs is its top level and that block; a function it defines
        and nothing mentions is dead code. (A file without one may be a library linted alone: read whole.)"""
        return has_main_guard(self.modules[0])

    def _library_package_holds(self, module: Module) -> bool:
        entry = self.modules[0]
        return (
            not self.entry_is_script and entry.file.name == "__init__.py" and entry.file.parent in module.file.parents
        )

    @property
    def _filtered_modules(self) -> List[Module]:
        return self.modules if self.entry_is_script else self.modules[1:]

    @functools.cached_property
    def _local_tops(self) -> Set[str]:
        """Top-level names an absolute import of the program's own code starts with: its modules' and folders'."""
        tops: Set[str] = set()
        for module in self.modules:
            parts = module.path.replace("\\", "/").removesuffix(".py").split("/")
            tops.update(part for part in parts if part not in ("", ".", ".."))
        return tops

    def _libraries(self, module: Module) -> FrozenSet[str]:
        """Local names a module binds to imports from outside the program (`torch`, `np`, `dist`)."""
        local = self._local_tops if module.found_tops is None else module.found_tops  # (as discovery found them)
        return frozenset(name for name, top in module.import_tops.items() if top and top not in local)

    def _reachable(self, module: Module, function: ast.FunctionDef, names: Set[str]) -> bool:
        owner = module.parents.get(function)
        if isinstance(owner, ast.ClassDef):
            used = self._class_used(owner.name, names, 4)
            if function.name in CONTEXT_METHODS:
                entered = self._with_items
                return used and (entered is None or self._class_used(owner.name, entered, 4))
            return (
                used
                and (_called_implicitly(function.name) or _named(function.name, names))
                and not self._overridden_wherever_used(owner.name, function.name, names, 4)
            )
        mentioned = function.name in names or "=" + function.name in names
        if mentioned and owner is module.tree and function.name in self._namesakes:
            return self._namesake_used(module, function.name)
        return mentioned

    def _overridden_wherever_used(self, name: str, method: str, names: Set[str], depth: int) -> bool:
        """Only subclasses of the class are used, and each defines the method again without `super().method(...)`:
        the class's own method never runs (`NafsTrainer(BaseTrainer)` made, its own `train_or_val` run; the base's
        `train_or_val`, which makes the process group, not)."""
        if _named(name, names) or depth == 0 or (method.startswith("__") and method != "__init__"):
            return False  # (an `__init__` overridden without `super().__init__()`: CodeBERT's TextDataset's)
        used = [sub for sub in self._subclasses.get(name, ()) if self._class_used(sub, names, depth - 1)]
        return bool(used) and all(
            self._defines_without_super(sub, method) or self._overridden_wherever_used(sub, method, names, depth - 1)
            for sub in used
        )

    def redefines(self, name: str, method: str) -> bool:
        """The class of that name defines the method again without calling its base's (`super().method(...)`)."""
        return self._defines_without_super(name, method)

    def subclasses_of(self, name: str) -> Set[str]:
        """The program's classes that derive from the class of that name, at any depth."""
        found: Set[str] = set()
        frontier = [name]
        while frontier:
            for sub in self._subclasses.get(frontier.pop(), ()):
                if sub not in found:
                    found.add(sub)
                    frontier.append(sub)
        return found

    def _defines_without_super(self, name: str, method: str) -> bool:
        found = self.classes.get(name, [])
        for _, node in found:
            own = [f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == method]
            if not own or any(
                isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr == method
                and (last_name(c.func.value) == "super" or isinstance(c.func.value, ast.Name))
                for f in own
                for c in walk(f)
            ):
                return False
        return bool(found)

    @functools.cached_property
    def _with_items(self) -> Optional[Set[str]]:
        """What the program's `with` statements enter: the class names called there (`with Logger(...) as log:`);
        None where one enters an object by name (`with logger:`), which could be of any class."""
        found: Set[str] = set()
        for module in self.modules:
            for node in module.of_type(ast.With, ast.AsyncWith):
                for item in node.items:
                    entered = [item.context_expr]
                    if isinstance(item.context_expr, (ast.Name, ast.Attribute)):  # `with self._lock:`, set to
                        entered = module.flag_values(item.context_expr, node)  # `threading.Lock()` in the class
                    if not entered or not all(isinstance(e, ast.Call) for e in entered):
                        return None
                    found.update(last_name(e) for e in entered if isinstance(e, ast.Call))
        return found

    def _class_used(self, name: str, names: Set[str], depth: int) -> bool:
        """A class is used where its name is mentioned (not as another class's base), or a subclass of it is, or
        where it is registered (`@TRAINERS.register_module()`) with a registry whose `build` the program calls
        (`TRAINERS.build(dict(type=cfg.train.type))`: the configuration picks the class)."""
        if _named(name, names):
            return True
        if ("build" in names or ".build" in names) and self._registries.get(name, set()) & names:
            return True
        return depth > 0 and any(self._class_used(sub, names, depth - 1) for sub in self._subclasses.get(name, ()))

    @functools.cached_property
    def _registries(self) -> Dict[str, Set[str]]:
        """For each class of the program, the registries it is registered with by a decorator
        (`@MODELS.register_module()`, `@TRAINERS.register("name")`): class name -> registry names."""
        found: Dict[str, Set[str]] = {}
        for module in self.modules:
            if "register" not in module.source:
                continue
            for node in module.of_type(ast.ClassDef):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if isinstance(target, ast.Attribute) and target.attr.startswith("register"):
                        found.setdefault(node.name, set()).add(call_name(target.value).split(".")[0])
        return found

    @functools.cached_property
    def _subclasses(self) -> Dict[str, Set[str]]:
        found: Dict[str, Set[str]] = {}
        for module in self.modules:
            for node in module.of_type(ast.ClassDef):
                for base in node.bases:
                    found.setdefault(last_name(base), set()).add(node.name)
        return found

    def runs(self, module: Module, line: int) -> bool:
        """Whether `line` can run in this program: not in an imported module's `__main__` block, and every function
        around it reachable (`used_names`). An entry module without a `__main__` guard is read whole, and so is each
        module of the package whose `__init__.py` is such an entry (a library linted: its users may call any of it)."""
        if module is self.modules[0]:
            if not self.entry_is_script:
                return True
        else:
            for statement in module.tree.body:
                if is_main_guard(statement) and statement.lineno <= line <= (statement.end_lineno or line):
                    return False
            if self._library_package_holds(module):
                return True
        names = self.used_names
        around = [f for f in module.functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
        return all(self._reachable(module, f, names) and not self.dispatched_away(f) for f in around)

    def dispatched_away(self, function: ast.FunctionDef) -> bool:
        """Called only under `if launcher == 'slurm':` in a function every caller gives another constant
        (`init_dist('pytorch')`): it never runs."""
        return bool(self.memo(("dispatched away", id(function)), lambda: self._dispatched_away(function)))

    def _dispatched_away(self, function: ast.FunctionDef) -> bool:
        sites = self.sites_of(function.name)
        if not sites:
            return False
        for module, site in sites:
            caller = module.function_of(site)
            branch = next((p for p in module.ancestors(site) if isinstance(p, ast.If)), None)
            if caller is None or branch is None or not any(site in walk(s) for s in branch.body):
                return False
            test = branch.test
            if not (
                isinstance(test, ast.Compare)
                and isinstance(test.left, ast.Name)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)
                and isinstance(test.comparators[0], ast.Constant)
            ):
                return False
            position = call_position(caller, test.left.id)
            if position is None:
                return False
            callers = self.sites_of(caller.name)
            given = [argument(call, position, test.left.id) for _, call in callers]
            wanted = test.comparators[0].value
            if not callers or any(not self._never_equal(value, wanted) for value in given):
                return False
        return True

    def _never_equal(self, value: Optional[ast.expr], wanted: Any) -> bool:
        """`value` is a constant other than `wanted`, or an option whose `choices` leave it out (`init_dist(
        args.launcher)` with `--launcher` limited to `['none', 'pytorch']` never asks for 'slurm')."""
        if isinstance(value, ast.Constant):
            return value.value != wanted
        if not isinstance(value, ast.Attribute):
            return False
        choices = self.option_choices(value.attr)
        return bool(choices) and all(c is not None and wanted not in c for c in choices)

    def option_choices(self, dest: str) -> List[Optional[Set[Any]]]:
        """For each command-line option of the program stored as `dest`, the constants its `choices=` allows (None
        where it has none, or they are not all constants)."""
        found: List[Optional[Set[Any]]] = []
        for call in self.options(dest):
            allowed = keyword(call, "choices")
            constants = isinstance(allowed, (ast.List, ast.Tuple, ast.Set)) and all(
                isinstance(e, ast.Constant) for e in allowed.elts
            )
            found.append({e.value for e in allowed.elts} if constants else None)  # type: ignore[union-attr]
        return found

    def options(self, dest: str) -> List[ast.Call]:
        """The program's `parser.add_argument(...)` calls whose value is stored as `dest` (`--dist-backend`,
        `dest="dist_backend"`)."""
        return [
            call
            for module in self.modules
            if dest in module.words
            for call in module.calls
            if last_name(call) == "add_argument" and call.args and option_dest(call) == dest
        ]

    def calls(self) -> Iterator[Tuple[Module, ast.Call]]:
        for module in self.modules:
            for call in module.calls:
                yield module, call

    def calls_named(self, *names: str) -> List[Tuple[Module, ast.Call]]:
        """The calls whose last name is one of `names`, in the order calls() yields them: looked up in the call
        sites, not found by going through every call of every module once per rule."""
        if len(names) == 1:
            return self.call_sites.get(names[0], [])
        found = [site for name in dict.fromkeys(names) for site in self.call_sites.get(name, [])]
        return sorted(found, key=lambda site: self._call_order[id(site[1])])

    @functools.cached_property
    def _call_order(self) -> Dict[int, int]:
        return {id(call): index for index, (_, call) in enumerate(self.calls())}

    def resolve(self, call: ast.Call, module: Module) -> List[Tuple[Module, ast.FunctionDef]]:
        """The program's functions a call may run: `f()` defined in this module or imported by name, `self.f()` a
        method of this module, `mod.f()` from a module of the program imported as `mod`; nothing for calls into
        libraries (`torch.save`) or methods of other objects (`self.model.load_state_dict`)."""
        found = self.functions.get(last_name(call), [])
        if not found:
            return []
        func = call.func
        if isinstance(func, ast.Name):
            own = [(m, f) for m, f in found if m is module]
            if own or func.id in module.imported:
                return own or found
            starred = self._star_sources(module)  # from core.utils.distributed import *
            return [(m, f) for m, f in found if m.stem in starred and self._top_level(m, f)]
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if owner in ("self", "cls"):
                return [(m, f) for m, f in found if m is module]
            if owner in module.imported:  # a module, or a package whose __init__ re-exports its modules' names
                target = module.imported[owner]
                return [(m, f) for m, f in found if m.stem == target or (m.file.parent.name == target and m.file.name)]
        if isinstance(func, ast.Attribute) and isinstance(
            func.value, ast.Attribute
        ):  # encoding.utils.save_checkpoint()
            root = call_name(func.value).split(".", 1)[0]
            if root in module.imported and root not in ("self", "cls"):
                path = "/" + call_name(func.value).replace(".", "/")  # `import utils.train`: utils/train.py
                named = [
                    (m, f)
                    for m, f in found
                    if m.file.as_posix().removesuffix(".py").endswith(path)
                    or (m.file.name == "__init__.py" and m.file.parent.as_posix().endswith(path))
                ]
                if named:
                    return named
                package, target = module.imported[root], func.value.attr
                return [
                    (m, f)
                    for m, f in found
                    if package in m.file.parts and (m.stem == target or m.file.parent.name == target)
                ]
        return []

    @staticmethod
    def _star_sources(module: Module) -> Set[str]:
        """The modules (last part of the name) a module imports everything from."""
        return {name[:-2].rsplit(".", 1)[-1] for name in module.import_names if name.endswith(".*")}

    @staticmethod
    def _top_level(module: Module, function: ast.FunctionDef) -> bool:
        return module.parents.get(function) is module.tree

    @functools.cached_property
    def classes(self) -> Dict[str, List[Tuple[Module, ast.ClassDef]]]:
        found: Dict[str, List[Tuple[Module, ast.ClassDef]]] = {}
        for module in self.modules:
            for node in module.of_type(ast.ClassDef):
                found.setdefault(node.name, []).append((module, node))
        return found

    @functools.cached_property
    def method_names(self) -> Set[str]:
        return {
            statement.name
            for found in self.classes.values()
            for _, node in found
            for statement in node.body
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
        }

    def methods(self, class_name: str, name: str, depth: int = 2) -> List[Tuple[Module, ast.FunctionDef]]:
        """A program class's method of that name, or its program base class's (`depth` levels up)."""
        found: List[Tuple[Module, ast.FunctionDef]] = []
        for module, node in self.classes.get(class_name, []):
            own = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name]
            found += [(module, f) for f in own]  # type: ignore[misc]
            if not own and depth > 0:
                for base in node.bases:
                    found += self.methods(last_name(base), name, depth - 1)
        return found

    def bound_methods(self, call: ast.Call, module: Module) -> List[Tuple[Module, ast.FunctionDef]]:
        """`self.metric.update(...)` or `metric.update(...)` where that name is assigned an instance of one of the
        program's classes in this module (`self.metric = SegmentationMetric(n)`): that class's method."""
        func = call.func
        if not isinstance(func, ast.Attribute) or isinstance(func.value, ast.Call):
            return []
        if func.attr not in self.method_names:
            return []  # (most calls: .to(), .item(), .append() — no class of the program defines them)
        receiver = call_name(func.value)
        if not receiver:
            return []
        found: List[Tuple[Module, ast.FunctionDef]] = []
        for assign in module.assignments(receiver):
            made = assign.value
            while (  # `MACELoss(loss_fn).to(device)`: the instance moved is the instance made
                isinstance(made, ast.Call)
                and isinstance(made.func, ast.Attribute)
                and made.func.attr in ("to", "cuda", "cpu")
                and isinstance(made.func.value, ast.Call)
            ):
                made = made.func.value
            if isinstance(made, ast.Call):
                found += self.methods(last_name(made), func.attr)
        return found

    def constant(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id]
        return node

    def any_call(self, *names: str) -> bool:
        return any(name in self.call_sites for name in names)

    # ---- code that runs on some ranks only ------------------------------------------------------
    def guarded(self, module: Module, node: ast.AST, depth: int = 3) -> bool:
        """Whether `node` runs on some ranks only: inside a rank-selecting `if`, after a rank-selecting early return
        at the top of its function, or in a function whose every call site in the program is itself guarded."""
        if module.rank_branch(node) is not None or self._under_a_flag_set_on_some_ranks(module, node):
            return True
        if depth > 0 and self.under_an_object_given_on_some_ranks(module, node, depth - 1):
            return True
        function = module.function_of(node)
        if function is None:
            return False
        if self.returns_early_off_main(function, getattr(node, "lineno", 0), module):
            return True
        if self.returns_early_on_a_passed_flag(module, function, getattr(node, "lineno", 0)):
            return True
        if depth == 0:
            return False
        sites = self.sites_of_function(module, function)  # less those whose constant arguments take another branch, and
        reaching = [  # those in code the program never runs (a converter's own `main()` beside its `run()`)
            (m, call)
            for m, call in sites
            if not branch_not_taken(module, function, node, call) and self.runs(m, call.lineno)
        ]
        if not reaching:  # never called by name where the program runs: run where it is handed over
            handed = [(m, call) for m, call in self.handed_over(module, function) if self.runs(m, call.lineno)]
            sites, reaching = (
                (handed, handed) if handed or not sites else (sites, reaching)
            )  # (`Thread(target=_write)`,
            # `Process(target=init_processes, args=(rank, size, main, args))`)
        return bool(sites) and all(self.guarded(m, call, depth - 1) for m, call in reaching)

    def _under_a_flag_set_on_some_ranks(self, module: Module, node: ast.AST) -> bool:
        """In the body of `if opt.log:` where the program sets `.log = True` only under a rank test, in any of its
        modules (HybrIK's `init_dist`: `if opt.rank % opt.ngpus_per_node == 0: opt.log = True else: opt.log =
        False`)."""
        child = node
        for parent in module.ancestors(node):
            if (
                isinstance(parent, ast.If)
                and any(child is s for s in parent.body)
                and isinstance(parent.test, ast.Attribute)
                and parent.test.attr in self._flags_set_on_some_ranks
            ):
                return True
            child = parent
        return False

    @functools.cached_property
    def _flags_set_on_some_ranks(self) -> Set[str]:
        """Attribute names the program sets to True only under a rank test (and to nothing else but False)."""
        verdicts: Dict[str, bool] = {}
        for module in self.modules:
            for assign in module.of_type(ast.Assign):
                if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Attribute):
                    continue
                name = assign.targets[0].attr
                if is_const(assign.value, False):
                    continue
                ranked = is_const(assign.value, True) and module.rank_branch(assign) is not None
                verdicts[name] = verdicts.get(name, True) and ranked
        return {name for name, ranked in verdicts.items() if ranked}

    def handed_over(self, module: Module, function: ast.FunctionDef) -> List[Tuple[Module, ast.Call]]:
        """The calls that are given a module-level function itself, to run it (`threading.Thread(target=_write)`,
        `executor.submit(_write, state)`, `mp.spawn(train, ...)`): in its module, or where it is imported by name."""
        if module.function_of(function) is not None or any(
            isinstance(p, ast.ClassDef) for p in module.ancestors(function)
        ):
            return []
        found = []
        for other in self.modules:
            if other is not module and not {function.name, module.stem} & set(other.imported.values()):
                continue
            names = {function.name} | {a for a, original in other.imported.items() if original == function.name}
            for call in other.calls:
                given = [*call.args, *(k.value for k in call.keywords)]
                given += [e for v in given if isinstance(v, (ast.Tuple, ast.List)) for e in v.elts]  # `args=(.., main)`
                if any(
                    (isinstance(value, ast.Name) and value.id in names)
                    or (  # `mp.spawn(loader.load_worker, ...)`: the function through its module's name
                        isinstance(value, ast.Attribute)
                        and value.attr == function.name
                        and isinstance(value.value, ast.Name)
                        and value.value.id in other.module_roots
                    )
                    for value in given
                ):
                    found.append((other, call))
        return found

    def only_called_guarded(self, function_name: str, depth: int = 2) -> bool:
        sites = self.sites_of(function_name)
        return bool(sites) and all(self.guarded(m, call, depth) for m, call in sites)

    def sites_of(self, function_name: str) -> List[Tuple[Module, ast.Call]]:
        """The calls that may run the program's function of that name: not a library's namesake (`torch.save` is
        no call of a `save` method)."""
        return [
            (m, call)
            for m, call in self.call_sites.get(function_name, [])
            if not (isinstance(call.func, ast.Attribute) and _root(call.func) in self._libraries(m))
        ]

    @staticmethod
    def returns_early_off_main(function: ast.FunctionDef, before: int = 0, module: Optional[Module] = None) -> bool:
        """`if not is_main_process(): return` at the top (or anywhere before line `before`): the rest runs on some
        ranks only. With the function's `module`, also through a flag set to a rank test (`if not
        self.local_master: return`, with `self.local_master = config["local_rank"] == 0` in the class)."""
        for statement in function.body if before else function.body[:3]:
            if before and statement.lineno >= before:
                break
            if not isinstance(statement, ast.If) or not any(isinstance(s, ast.Return) for s in statement.body):
                continue
            if selects_ranks(statement.test) or (module is not None and module.selects_ranks_at(statement)):
                return True
        return False

    def returns_early_on_a_passed_flag(self, module: Module, function: ast.FunctionDef, before: int) -> bool:
        """`if not self.save_to_disk: return` before `before`, the flag set in `__init__` from a parameter that every
        construction of the class in the program gives a rank test or False (`Checkpointer(...,
        save_to_disk=get_rank() == 0)`, also through the caller's own name for it or a subclass's `__init__`)."""
        for statement in function.body:
            if statement.lineno >= before:
                break
            if not isinstance(statement, ast.If) or not any(isinstance(s, ast.Return) for s in statement.body):
                continue
            test = statement.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            values = module.flag_values(test, statement) if isinstance(test, ast.Attribute) else []
            init = _init_of(module, statement)
            if (
                call_name(test).startswith("self.")
                and init is not None
                and values
                and all(isinstance(v, ast.Name) and self._given_rank_test(module, init, v.id) for v in values)
            ):
                return True
        return False

    def under_an_object_given_on_some_ranks(self, module: Module, node: ast.AST, depth: int) -> bool:
        """Inside `if self.logger is not None:` (or `if model.logger:` with `model = XMemTrainer(...)`) where the
        class's `__init__` keeps a parameter that defaults to None and only constructions that run on some ranks give
        it (`XMemTrainer(config, logger=logger)` under `if local_rank == 0:`, `XMemTrainer(config)` in the `else`)."""
        child: ast.AST = node
        for parent in module.ancestors(node):
            if isinstance(parent, ast.If) and any(child is s for s in parent.body):
                test = parent.test
                flags = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
                for flag in flags:
                    held = _tested_for_none(flag)
                    if not (_tests_for_presence(flag) and isinstance(held, ast.Attribute)):
                        continue
                    for owner, init in self.inits_of(module, parent, call_name(held.value)):
                        if self._given_on_some_ranks(owner, init, held.attr, depth):
                            return True
            child = parent
        return False

    def inits_of(self, module: Module, at: ast.AST, name: str) -> List[Tuple[Module, ast.FunctionDef]]:
        """The `__init__` of the object a name holds: `self` in a method, or a name assigned an instance of one of
        the program's classes in this module (`model = XMemTrainer(...).train()`)."""
        if name == "self":
            init = _init_of(module, at)
            return [(module, init)] if init is not None else []
        found: List[Tuple[Module, ast.FunctionDef]] = []
        for assign in module.assignments(name):
            made = assign.value
            while (
                isinstance(made, ast.Call)
                and isinstance(made.func, ast.Attribute)
                and isinstance(made.func.value, ast.Call)
            ):
                made = made.func.value  # `.train()`, `.to(device)`: the instance made
            if isinstance(made, ast.Call):
                found += self.methods(last_name(made), "__init__")
        return found

    def constructions_give(self, module: Module, at: ast.AST, attribute: ast.Attribute) -> List[Optional[ast.expr]]:
        """What the program's constructions of the class give the `__init__` parameter `self.x` keeps (`self.shuffle
        = shuffle`, `Loader(path, 64, shuffle=True)`): one value per construction (None where unknown); empty where
        the attribute is not kept from a parameter or nothing constructs the class."""
        if call_name(attribute.value) != "self":
            return []
        found: List[Optional[ast.expr]] = []
        for owner, init in self.inits_of(module, at, "self"):
            kept = self._constructions_of_kept(owner, init, attribute.attr)
            if kept is None:
                return []
            parameter, sites = kept
            found += [given_value(init, c, parameter) for _, c in sites]
        return found

    def _constructions_of_kept(
        self, module: Module, init: ast.FunctionDef, attribute: str
    ) -> Optional[Tuple[str, List[Tuple[Module, ast.Call]]]]:
        """(the `__init__` parameter `self.<attribute> = parameter` keeps, the constructions the program runs), or
        None where the attribute is set otherwise or more than once."""
        kept = ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=attribute, ctx=ast.Load())
        values = module.flag_values(kept, init)
        if len(values) != 1 or not isinstance(values[0], ast.Name):
            return None
        sites = self.running_sites(module, init)
        return values[0].id, sites

    def _given_on_some_ranks(self, module: Module, init: ast.FunctionDef, attribute: str, depth: int) -> bool:
        kept = self._constructions_of_kept(module, init, attribute)
        if kept is None:
            return False
        parameter, sites = kept
        given = [(m, c) for m, c in sites if not is_const(given_value(init, c, parameter), None)]
        if not sites or len(given) == len(sites) or any(given_value(init, c, parameter) is None for _, c in given):
            return False  # (every construction gives it, or one may through **kwargs)
        return all(self.guarded(m, c, depth) for m, c in given)

    def _given_rank_test(self, module: Module, init: ast.FunctionDef, parameter: str, depth: int = 2) -> bool:
        """Every construction the program runs gives `init`'s `parameter` False or a rank test (directly, through
        the caller's name for it, or through a subclass's `__init__` that hands its own parameter to `super()`)."""
        sites = self.running_sites(module, init)
        sites += self._super_calls(module, init)
        if not sites:
            return False
        for m, call in sites:
            given = given_value(init, call, parameter)
            if given is None or not isinstance(call.func, ast.Attribute) or call.func.attr != "__init__":
                if not _a_rank_test(m, call, given):
                    return False
                continue
            outer = m.function_of(call)  # `super().__init__(..., save_to_disk, ...)` in a subclass
            if not (
                depth > 0
                and isinstance(given, ast.Name)
                and outer is not None
                and outer.name == "__init__"
                and self._given_rank_test(m, outer, given.id, depth - 1)
            ):
                return False
        return True

    def _super_calls(self, module: Module, init: ast.FunctionDef) -> List[Tuple[Module, ast.Call]]:
        """`super().__init__(...)` (or `Base.__init__(self, ...)`) in the subclasses' `__init__`s of `init`'s class."""
        owner = next((p for p in module.ancestors(init) if isinstance(p, ast.ClassDef)), None)
        if owner is None:
            return []
        found = []
        for m, call in self.call_sites.get("__init__", []):
            outer = m.function_of(call)
            subclass = next((p for p in m.ancestors(call) if isinstance(p, ast.ClassDef)), None)
            if outer is None or outer.name != "__init__" or subclass is None or subclass is owner:
                continue
            if subclass.name in self._subclasses.get(owner.name, ()):
                found.append((m, _without_self(call)))
        return found

    def reaches_collective(self, module: Module, function: ast.FunctionDef, depth: int = 3) -> Optional[str]:
        """The collective a function reaches on every path it takes, directly or through the program's functions
        (not one it reaches inside its own rank-selecting branch or one guarded by `is_initialized()`)."""
        key = id(function) * 8 + depth
        if key not in self._reaches:
            self._reaches[key] = None  # a recursive call reaches nothing new
            self._reaches[key] = self._reaches_collective(module, function, depth)
        return self._reaches[key]

    def _reaches_collective(self, module: Module, function: ast.FunctionDef, depth: int) -> Optional[str]:
        for call in module.calls_in(function):
            branch = module.rank_branch(call, stop=function)
            if branch is not None and not (is_collective(call, module) and both_arms_call(branch, last_name(call))):
                continue
            if _under_initialized_check(module, call, function) or under_type_test(module, call, function):
                continue
            if is_collective(call, module):
                return call_name(call)
            if depth > 0:
                for other_module, callee in self.resolve(call, module):
                    if callee is not function:
                        name = self.reaches_collective(other_module, callee, depth - 1)
                        if name:
                            return f"{name} (in {callee.name})"
        return None


RANK_PREFIXES = ("is_main", "is_master", "is_primary", "is_rank0", "is_rank_zero")


def _rank_like(test: ast.expr) -> bool:
    """Names the rank lists do not hold that still pick some ranks: `is_main_dev`, `primary()`, `args.gpu == 0`."""
    names = names_in(test)
    if any(
        n.startswith(RANK_PREFIXES)
        or n in ("primary", "master")  # `if distenv.master:` (a DistEnv made with `master=(dist.get_rank() == 0)`)
        or (n.startswith("is_") and ("rank" in n or "master" in n))
        for n in names
    ):
        return True  # (`is_base_rank`, `is_rank_zero`, `is_local_rank0`, `is_local_master`)
    return any(
        isinstance(node, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value == 0 or _names_gpu_0(c) for c in node.comparators)
        and any(n in ("gpu", "device_id", "dev", "device", "gpu_id") for n in names_in(node.left))
        for node in walk(test)
    )


def _names_gpu_0(node: ast.expr) -> bool:
    """`torch.device('cuda:0')` or `'cuda:0'`: `model.device == torch.device('cuda:0')` picks the process on GPU 0."""
    return any(is_const(n, "cuda:0") for n in walk(node))


def _private(name: str) -> bool:
    """A class-private name (`__save`, not `__init__`), which Python mangles with its class's name."""
    return name.startswith("__") and not name.endswith("__")


CONTEXT_METHODS = {"__enter__", "__exit__", "__aenter__", "__aexit__"}  # run only by a `with` of their object


def option_dest(option: ast.Call) -> str:
    """Where argparse stores an option's value: its `dest=`, else its first long flag (`'-P', '--dist-port'`:
    `dist_port`), else its first flag."""
    stored = keyword(option, "dest")
    if isinstance(stored, ast.Constant) and isinstance(stored.value, str):
        return stored.value
    flags = [a.value for a in option.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [f for f in flags if f.startswith("--")] or flags
    return longs[0].lstrip("-").replace("-", "_") if longs else ""


def _called_implicitly(name: str) -> bool:
    """Methods that run without their name in the program: dunders, `forward` (through `__call__`), and the hooks
    frameworks call (`training_step`, `on_train_epoch_end`, `configure_optimizers`)."""
    return (
        (name.startswith("__") and name.endswith("__"))
        or name == "forward"
        or name.startswith(("on_", "configure_"))
        or name.endswith(("_step", "_epoch_end", "_hook"))
    )


def is_main_guard(statement: ast.AST) -> bool:
    """`if __name__ == "__main__":` in any spelling that names both (`"__main__" == __name__`, `in ("__main__",)`)."""
    if not isinstance(statement, ast.If):
        return False
    names = constants = False
    for node in ast.walk(statement.test):
        if isinstance(node, ast.Name) and node.id == "__name__":
            names = True
        elif isinstance(node, ast.Constant) and node.value == "__main__":
            constants = True
    return names and constants


def has_main_guard(module: Module) -> bool:
    """The module's top level has a `__main__` block: run as a script, not (only) imported."""
    return any(is_main_guard(s) for s in module.tree.body)


def _with_subclasses(name: str, subclasses: Dict[str, Set[str]], depth: int) -> Set[str]:
    """A class's name and its subclasses' to `depth` levels down. (A function of the module, not one nested in the
    program's method: a recursive closure is a reference cycle that would keep the program and its trees alive
    until the next full collection.)"""
    found = {name}
    if depth > 0:
        for sub in subclasses.get(name, ()):
            found |= _with_subclasses(sub, subclasses, depth - 1)
    return found


def _mentioned(node: ast.AST, own: FrozenSet[str] = frozenset()) -> Tuple[FrozenSet[str], FrozenSet[Tuple[str, str]]]:
    """The names under a node, and its attributes read with the name each chain starts from (`torch.save`: save,
    torch). One of the module's `own` functions by its bare name, called or handed on (`partial(save, self=e)`), is
    `=name`: that function, no method. In a
    function, its parameters and the names it assigns (not those it declares `global`) are its own variables
    throughout its body (`init = "svd"` ... `tucker(m, init=init)`): they name no module-level function."""
    loaded: List[ast.Name] = []
    stored: Set[str] = set()
    declared: Set[str] = set()
    attributes: Set[Tuple[str, str]] = set()
    for sub in walk(node):
        kind = type(sub)
        if kind is ast.Name:
            if type(sub.ctx) is ast.Store:  # type: ignore[attr-defined]
                stored.add(sub.id)  # type: ignore[attr-defined]
            loaded.append(sub)  # type: ignore[arg-type]
        elif kind is ast.Attribute:
            if type(sub.ctx) is ast.Load:  # type: ignore[attr-defined]  # (`engine.save_checkpoint = partial(...)`
                attributes.add((sub.attr, _root(sub)))  # type: ignore[attr-defined,arg-type]  # sets, runs nothing)
        elif kind is ast.Call:
            if _getattr_by_literal(sub):  # type: ignore[arg-type]  # `getattr(module, "Trainer")` reads the
                owner = sub.args[0]  # type: ignore[attr-defined]  # attribute as `module.Trainer` would
                root = _root(owner) if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                attributes.add((sub.args[1].value, root))  # type: ignore[attr-defined]
        elif kind is ast.Subscript and _dict_entry_by_literal(sub):  # type: ignore[arg-type]
            owner = sub.value.value  # type: ignore[attr-defined]  # `core.__dict__[v].__dict__['Trainer']`: the
            attributes.add((sub.slice.value, _root(owner) if isinstance(owner, ast.Attribute) else ""))  # type: ignore
        elif kind is ast.Global or kind is ast.Nonlocal:
            declared.update(sub.names)  # type: ignore[attr-defined]
    local: Set[str] = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = node.args
        local = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        local |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
        local = (local | stored) - declared
    names = {"=" + sub.id if sub.id in own else sub.id for sub in loaded if sub.id not in local}
    return frozenset(names), frozenset(attributes)


def _dict_entry_by_literal(node: ast.Subscript) -> bool:
    """`module.__dict__['Trainer']`: the module's attribute by its literal name (ProPainter's trainer lookup)."""
    return (
        isinstance(node.value, ast.Attribute)
        and node.value.attr == "__dict__"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    )


def _getattr_by_literal(call: ast.Call) -> bool:
    return (
        isinstance(call.func, ast.Name)
        and call.func.id == "getattr"
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Constant)
        and isinstance(call.args[1].value, str)
    )


def _attribute_mention(attr: str, root: str, module_roots: FrozenSet[str]) -> str:
    """How `root.….attr` mentions `attr`: by its name where the chain may start at a module of the program
    (`utils.train`, `get_module().train`); as `.attr`, a method's name only, where it starts at an object
    (`self.train`, `trainer.train` with `trainer` an instance): no module-level function runs through it."""
    return attr if not root or root in module_roots else "." + attr


def _named(name: str, names: Set[str]) -> bool:
    """A method or class is used where its name is mentioned, alone or as an attribute."""
    return name in names or "." + name in names


def _root(node: ast.Attribute) -> str:
    value: ast.AST = node
    while isinstance(value, ast.Attribute):
        value = value.value
    return value.id if isinstance(value, ast.Name) else ""


def _mentioned_at_import(
    tree: ast.Module,
    libraries: FrozenSet[str] = frozenset(),
    main: bool = False,
    module_roots: FrozenSet[str] = frozenset(),
    own: FrozenSet[str] = frozenset(),
) -> Set[str]:
    """What a module's top level mentions when it is imported (or run, with `main`: its `__main__` block too); not
    function bodies (a class body runs; its methods only when called)."""
    found: Set[str] = set()
    pending: List[ast.AST] = [s for s in tree.body if main or not is_main_guard(s)]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend([*node.decorator_list, *node.args.defaults])
            continue
        if isinstance(node, ast.ClassDef):  # a base named here is not used yet: the subclass may never be
            pending.extend([*node.decorator_list, *node.keywords, *node.body])
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own:
            found.add("=" + node.func.id)  # `main()` in the `__main__` block: the module's own function
            pending.extend(_child_nodes(node)[1:])
            continue
        if isinstance(node, ast.Name) and node.id not in libraries:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and _root(node) not in libraries:
            found.add(_attribute_mention(node.attr, _root(node), module_roots))
        pending.extend(_child_nodes(node))
    return found


def both_arms_call(branch: ast.If, name: str) -> bool:
    """`if rank == 0: bcast(x) else: y = bcast(None)`: every rank reaches the collective."""

    def calls(statements: List[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Call) and last_name(n) == name for s in statements for n in walk(s))

    return calls(branch.body) and calls(branch.orelse)


def under_type_test(module: Module, node: ast.AST, function: ast.FunctionDef) -> bool:
    """Inside `if isinstance(value, torch.Tensor):` (or `type(value) == ...`) on one of the function's parameters:
    whether the call reaches it depends on what its caller passes (a helper that gathers tensors and keeps floats
    as they are), so no call site is said to reach it."""
    parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    for parent in module.ancestors(node):
        if parent is function:
            return False
        if isinstance(parent, ast.If) and any(
            isinstance(n, ast.Call)
            and last_name(n) in ("isinstance", "type")
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id in parameters
            for n in walk(parent.test)
        ):
            return True
    return False


# Libraries that make the process group themselves (`Accelerator()`, `deepspeed.init_distributed()`, a Lightning
# Trainer, detectron2's `launch`): a DDP wrap behind `dist.is_initialized()` in such a program does run distributed.
GROUP_MAKERS = ("accelerate", "deepspeed", "lightning", "horovod", "colossalai", "detectron2", "mmengine", "mmcv")


def _waits_for_a_group(module: Module, call: ast.Call) -> bool:
    """A DDP wrap or sampler made only `if dist.is_initialized():` (directly, or through a flag set to it in the same
    function): in a program that makes no process group of its own, that branch never runs (a library's `fit()`
    that wraps when a caller has initialised, called from a single-process demo)."""
    if last_name(call) == "init_process_group":
        return False
    for parent in module.ancestors(call):
        if isinstance(parent, (ast.If, ast.IfExp)) and _tests_initialized(module, parent.test, call):
            return True
    return False


def _tests_initialized(module: Module, test: ast.expr, at: ast.AST) -> bool:
    if any(isinstance(n, ast.Call) and last_name(n) == "is_initialized" for n in walk(test)):
        return True
    if isinstance(test, ast.Name):
        values = module.flag_values(test, at)
        return bool(values) and all(
            any(isinstance(n, ast.Call) and last_name(n) == "is_initialized" for n in walk(v)) for v in values
        )
    return False


def _init_of(module: Module, node: ast.AST) -> Optional[ast.FunctionDef]:
    owner = next((p for p in module.ancestors(node) if isinstance(p, ast.ClassDef)), None)
    if owner is None:
        return None
    return next((f for f in owner.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)


def _a_rank_test(module: Module, at: ast.AST, given: Optional[ast.expr]) -> bool:
    """`given` is False, a rank test, or a name the caller set to one of those."""
    if given is None:
        return False
    if _false_constant(given) or selects_ranks(given):
        return True
    if isinstance(given, ast.Name):
        values = module.flag_values(given, at)
        return bool(values) and all(_false_constant(v) or selects_ranks(v) for v in values)
    return False


def _without_self(call: ast.Call) -> ast.Call:
    """`Base.__init__(self, a, b)` as the call `(a, b)` it makes of `__init__`'s parameters after `self`;
    `super().__init__(a, b)` as it is."""
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and call.args:
        first = call.args[0]
        if isinstance(first, ast.Name) and first.id == "self":
            return ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords, lineno=call.lineno)
    return call


def _under_initialized_check(module: Module, node: ast.AST, stop: ast.AST) -> bool:
    for parent in module.ancestors(node):
        if parent is stop:
            return False
        if isinstance(parent, ast.If) and names_in(parent.test) & {"is_initialized", "is_available", "world_size"}:
            return True
    return False


def _false_constant(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and not value.value


def branch_not_taken(
    module: Module,
    function: ast.FunctionDef,
    node: ast.AST,
    call: ast.Call,
    resolve: Optional[Callable[[ast.Name], Optional[ast.expr]]] = None,
) -> bool:
    """`node` sits in a branch of `function` that `call` cannot take: `if save_cur:` ... `else:` (or `elif`) with
    `node` in the else and the call passing `save_cur=True` — or in the if, with a false constant (or default);
    also a test comparing the parameter with constants (`rank != -1`, `multi_gpu is True`, `rank in [-1, 0]`) and a
    conditional expression (`DistributedSampler(ds) if rank != -1 else None`). `resolve` gives the constant a name
    the call passes stands for (the caller's own parameter, where its callers all give one)."""
    lineage = {id(node), *map(id, module.ancestors(node))}

    def taken(test: ast.expr) -> Optional[bool]:
        return _call_takes(function, call, test, resolve)

    for branch in module.ancestors(node):
        if branch is function:
            break
        if isinstance(branch, (ast.If, ast.IfExp)) and id(branch.test) not in lineage:
            decided = taken(branch.test)
            if decided is None:
                continue
            body = branch.body if isinstance(branch, ast.If) else [branch.body]
            in_body = any(id(statement) in lineage for statement in body)
            if in_body != decided:
                return True
    # `if return_model: return model` before it, with the call leaving `return_model=True`: never reached
    return any(
        isinstance(statement, ast.If)
        and statement.end_lineno is not None
        and statement.end_lineno < getattr(node, "lineno", 0)
        and isinstance(statement.body[-1], ast.Return)
        and taken(statement.test) is True
        for statement in function.body
    )


def _call_takes(
    function: ast.FunctionDef,
    call: ast.Call,
    test: ast.expr,
    resolve: Optional[Callable[[ast.Name], Optional[ast.expr]]],
) -> Optional[bool]:
    """Whether `call` takes a branch of `function` whose test is one of its parameters (or a comparison of one with
    constants) that the call gives a constant, or leaves at one; None where the test depends on anything else."""
    tested = _tested(test)
    if not isinstance(tested, ast.Name) or tested.id not in _parameters_given(function, call):
        return None
    given = given_value(function, call, tested.id)
    if isinstance(given, ast.Name) and resolve is not None:
        given = resolve(given)
    elif isinstance(given, ast.Compare) and resolve is not None:  # `multinode=(local_rank >= 0)`, the caller's
        inner = _tested(given)  # `local_rank` left at -1 by every call of the caller
        outcome = _takes(given, resolve(inner)) if isinstance(inner, ast.Name) else None
        given = ast.Constant(outcome) if outcome is not None else None
    return _takes(test, given)


def _tested(test: ast.expr) -> ast.expr:
    """What a branch tests: `flag` in `if flag:`, `if not flag:` and `if flag == 'x':` (one comparison)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return test.left
    return test


def _takes(test: ast.expr, given: Optional[ast.expr]) -> Optional[bool]:
    """Whether the test is true where what it tests holds the constant `given`; None where that is not known."""
    if not isinstance(given, ast.Constant):
        return None
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if negated:
        test = test.operand  # type: ignore[attr-defined]
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return bool(given.value) != negated
    outcome = _compared(given.value, test.ops[0], test.comparators[0])
    return None if outcome is None else outcome != negated


def _compared(given: Any, op: ast.cmpop, against: ast.expr) -> Optional[bool]:
    """`given OP against` where `against` is a constant or a list, tuple or set of constants; None otherwise."""
    try:
        other = ast.literal_eval(against)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    try:
        if isinstance(op, ast.Eq):
            return bool(given == other)
        if isinstance(op, ast.NotEq):
            return bool(given != other)
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(other, (bool, type(None))):
            return (given is other) == isinstance(op, ast.Is)
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(other, (list, tuple, set, frozenset)):
            return (given in other) == isinstance(op, ast.In)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (given, other))
        orders = {ast.Lt: given < other, ast.LtE: given <= other, ast.Gt: given > other, ast.GtE: given >= other}
        if numbers and type(op) in orders:
            return orders[type(op)]
    except TypeError:
        return None
    return None


def _parameters_given(function: ast.FunctionDef, call: ast.Call) -> List[str]:
    """The parameters a call fills by position: without `self` for a method called on an object or a class."""
    parameters = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if parameters[:1] in (["self"], ["cls"]) and (isinstance(call.func, ast.Attribute) or function.name == "__init__"):
        return parameters[1:]
    return parameters


def given_value(function: ast.FunctionDef, call: ast.Call, name: str) -> Optional[ast.expr]:
    """What `call` gives `function`'s parameter `name`: by keyword, by position, or its default where the call
    leaves it (None where a `*args`/`**kwargs` may hold it, or there is no default)."""
    parameters = _parameters_given(function, call)
    if name not in parameters:
        return None
    given = next((k.value for k in call.keywords if k.arg == name), None)
    position = parameters.index(name)
    if given is None and position < len(call.args):
        given = call.args[position]
    if (
        given is None
        and not any(isinstance(a, ast.Starred) for a in call.args)
        and not any(k.arg is None for k in call.keywords)
    ):
        every = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
        given = dict(zip(reversed(every), reversed(function.args.defaults))).get(name)
    if isinstance(given, ast.UnaryOp) and isinstance(given.op, ast.USub) and isinstance(given.operand, ast.Constant):
        number = given.operand.value
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return ast.Constant(-number)  # `rank=-1`
    return given

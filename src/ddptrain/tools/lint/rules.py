"""The rules: each names the hang, crash or corruption it prevents and the fix. `error`: will hang, crash or corrupt
results; `warning`: risky. Each reads the whole program (see program.py) and favours missing a convoluted case over
flagging correct code. DDP004 (no drop_last: DistributedSampler pads, every rank gets the same batches) is retired.
"""

from __future__ import annotations

import ast
import functools
import re
import symtable
from dataclasses import dataclass
from pathlib import Path
from typing import (
    AbstractSet,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from .configs import (
    CUT_KEY,
    Setting,
    commands_launching,
    fixed_settings,
    launched_on_one_node,
    scripts_spell_the_prefix,
)
from .discover import repository_root
from .program import (
    COLLECTIVES,
    GROUP_MAKERS,
    PROCESS_COUNT_NAMES,
    RANK_NAMES,
    Module,
    Program,
    argument,
    both_arms_call,
    branch_not_taken,
    call_name,
    call_position,
    given_value,
    is_collective,
    is_const,
    is_main_guard,
    keyword,
    last_name,
    names_in,
    option_dest,
    selects_ranks,
    switched_on,
    under_type_test,
    walk,
)

ERROR, WARNING = "error", "warning"
Hit = Tuple[Module, int]
EVAL_WORDS = ("val", "test", "eval")
DEV_PART = "dev"  # a development split (`dev_data`, `dev_sampler`) when a whole part of a name, not `device`
DISTRIBUTED_WORDS = {
    "distributed",
    "ddp",
    "world_size",
    "is_initialized",
    "local_rank",
    "rank",
    "gpu",
    "gpus",
    "ngpus",
    "n_gpu",
    "device_count",
    "multiprocessing_distributed",
    "RANK",
    "LOCAL_RANK",
}
GLOBAL_RANK = {"rank", "global_rank", "RANK", "get_rank", "WORLD_RANK", "world_rank"}


DDP, SECURITY = "ddp", "security"
# ddp rules that also read single-process programs: a hard-coded port (the group is made by a library the program
# calls), DataLoader's own error, and clipping before unscale_ (wrong with one process as with many)
ANY_PROGRAM = {"DDP003", "DDP009", "DDP011"}
CATEGORIES = {
    DDP: "mistakes that make multi-process training hang, crash or give wrong results (reported by default)",
    SECURITY: "unsafe loading of files (off by default: --select security)",
}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    rule: str
    severity: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.rule} {self.severity} {self.message} -> {self.fix}"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    message: str
    fix: str
    check: Callable[[Program], Iterable[Hit]]
    category: str = DDP


# ---- DDP001 ---------------------------------------------------------------------------------------
def data_parallel(program: Program) -> Iterator[Hit]:
    wraps = program.calls_named(*_data_parallel_classes(program))
    if not wraps or not program.distributed:
        return  # a single-process script (a baseline beside DDP ones): DataParallel is its multi-GPU path
    for module, call in wraps:
        fallback = any(
            isinstance(parent, ast.If) and _tells_distributed(parent.test)  # (also `cfg.DISTRIBUTED`, `if dist:`)
            for parent in module.ancestors(call)
        )
        if fallback and _in_the_multi_process_arm(module, call):
            fallback = False  # StudioGAN's `if world_size > 1: DataParallel(...)` inside each DDP process
        if fallback or _after_distributed_return(module, call) or _beside_the_wrapping_arm(module, call):
            continue  # in the else of `if args.distributed:` (or after its `return`) it is the single-process path
        function = module.function_of(call)
        if function is not None and under_type_test(module, call, function):
            continue  # `if isinstance(module, DataParallel):` re-wrapping what the caller already made DataParallel
        if _wrapped_to_load_only(module, call) or _in_a_single_process_function(program, module, call):
            continue  # (in a function only the program's single-process runs call: its multi-GPU path)
        yield module, call.lineno


def _wrapped_to_load_only(module: Module, call: ast.Call) -> bool:
    """`model = torch.nn.DataParallel(RAFT(args))`, `model.load_state_dict(torch.load(path))`, `model = model.module`
    (RAFT's loader, copied into many repositories): the wrapper only gives the checkpoint's 'module.' keys a home,
    and nothing runs through it."""
    assign = module.parents.get(call)
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1):
        return False
    unwrap = _unwrapped_after(module, assign, assign.targets[0])
    if unwrap is None:
        return False
    held = call_name(assign.targets[0])
    between = [c for c in module.calls_in(module.scope_of(call)) if assign.lineno < c.lineno < unwrap.lineno]
    return all(
        isinstance(c.func, ast.Attribute) and call_name(c.func.value) == held and c.func.attr in NOT_A_FORWARD
        for c in between
        if held in call_name(c.func) or any(call_name(a) == held for a in c.args)
    )


def _in_the_multi_process_arm(module: Module, node: ast.AST) -> bool:
    """In the body of `if world_size > 1:` / `if args.distributed:` (the arm that runs several processes) and on
    no single-process arm: not a GPU count (`if n_gpu > 1:` is DataParallel's own single-process test)."""
    if _on_single_process_path(module, node):
        return False
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, ast.If) and any(child is s for s in parent.body) and not _negative(parent.test):
            names = {name.lower() for name in names_in(parent.test)}
            if "world_size" in names or any("distributed" in name or "ddp" in name for name in names):
                return True
        child = parent
    return False


def _beside_the_wrapping_arm(module: Module, node: ast.AST) -> bool:
    """In the `elif`/`else` of an `if` whose test is the one that makes the process group (PVD's `if
    opt.distribution_type == 'multi':` makes it and wraps in DDP, `elif opt.distribution_type == 'single':` wraps in
    DataParallel): the run that takes this arm makes no process group; it is the program's single-process mode. (Not
    a switch of its own, `if cfg.SYNC_BN: DDP(...) else: DataParallel(...)`, taken inside every DDP process.)"""
    grouping = module.memo(("tests that make the group",), lambda: _tests_making_the_group(module))
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, ast.If) and any(child is s for s in parent.orelse) and ast.dump(parent.test) in grouping:
            return True
        child = parent
    return False


def _tests_making_the_group(module: Module, makers: Tuple[str, ...] = ("init_process_group",)) -> Set[str]:
    """The tests of the module's `if`s whose body calls one of `makers` (the process group's, by default)."""
    return {
        ast.dump(branch.test)
        for branch in module.of_type(ast.If)
        if any(isinstance(n, ast.Call) and last_name(n) in makers for statement in branch.body for n in walk(statement))
    }


def _after_distributed_return(module: Module, node: ast.AST) -> bool:
    """After `if is_distributed(): return DDP(...)` in the same function: only a single-process run gets here."""
    function = module.function_of(node)
    if function is None:
        return False
    line = getattr(node, "lineno", 0)
    return any(
        isinstance(statement, ast.If)
        and statement.lineno < line
        and not statement.orelse
        and _tells_distributed(statement.test)
        and not _negative(statement.test)
        and isinstance(statement.body[-1], ast.Return)
        for statement in function.body
    )


def _data_parallel_classes(program: Program) -> List[str]:
    """DataParallel and the program's subclasses of it, three levels down (`DataParallelWithCallback` of the
    synchronized-BatchNorm code many GAN repositories copy): each is DataParallel."""
    found, pending = ["DataParallel"], ["DataParallel"]
    for _ in range(3):
        pending = sorted({sub for name in pending for sub in program._subclasses.get(name, ())} - set(found))
        found += pending
    return found


def _tells_distributed(test: ast.expr) -> bool:
    """A condition on whether the run is distributed: `args.distributed`, `use_ddp`, `world_size > 1`, `mode ==
    "ddp"`, `multi_gpu` in a program that runs DDP..."""
    words = [
        *names_in(test),
        *(n.value for n in walk(test) if isinstance(n, ast.Constant) and isinstance(n.value, str)),
    ]
    switch = (  # `args.dist == "ON"` / `args.dist == "OFF"`: a switch named `dist` set to a word
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and isinstance(test.comparators[0].value, str)
        and call_name(test.left).rpartition(".")[2].lower() == "dist"
    )
    bare = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    last = call_name(bare).rpartition(".")[2].lower() if isinstance(bare, (ast.Name, ast.Attribute)) else ""
    flag = last == "dist" or (last.startswith("dist_") and "dist" in last.split("_"))  # also `cfg.MODEL.DIST_TRAIN`
    return (
        switch  # (and `if dist:` / `if args.dist:`: a flag named `dist`; the torch.distributed module is no test)
        or flag
        or any(
            n in DISTRIBUTED_WORDS or n in ("multi_gpu", "multigpu") or "ddp" in n.lower() or "distributed" in n.lower()
            for n in words
        )
    )


# ---- DDP002 ---------------------------------------------------------------------------------------
def _is_eval_name(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in EVAL_WORDS)


def _sampler_target(module: Module, call: ast.Call) -> str:
    """The name a sampler is kept in (`valid_sampler = DistributedSampler(...)`, also `... if args.distributed else
    None`), or that of the loader it is given to."""
    parent = module.parents.get(call)
    if isinstance(parent, ast.IfExp) and parent.test is not call:
        parent = module.parents.get(parent)
    if isinstance(parent, ast.Assign):
        return " ".join(call_name(t) for t in parent.targets)
    if isinstance(parent, ast.keyword):
        loader = module.parents.get(parent)
        holder = module.parents.get(loader) if loader is not None else None
        if isinstance(holder, ast.Assign):
            return " ".join(call_name(t) for t in holder.targets)
    return ""


def training_samplers(program: Program) -> Iterator[Tuple[Module, ast.Call]]:
    """DistributedSamplers that shuffle and are not named or built for evaluation."""
    for module, call in program.calls_named("DistributedSampler"):
        if is_const(keyword(call, "shuffle"), False):
            continue
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        names = _sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")
        if not _is_eval_name(names) and not _callers_never_shuffle(program, module, call):
            yield module, call


def _callers_never_shuffle(program: Program, module: Module, call: ast.Call) -> bool:
    """`def create_sampler(datasets, shuffles, ...): for dataset, shuffle in zip(datasets, shuffles):
    DistributedSampler(dataset, shuffle=shuffle)`, called by this program only with `[False, False]`."""
    values = _shuffles_given(program, module, call)
    return values is not None and all(_all_false(value) for value in values)


def _some_caller_does_not_shuffle(program: Program, module: Module, call: ast.Call) -> bool:
    """The same helper called with `[True, False, False]`: it also makes the evaluation splits' samplers."""
    values = _shuffles_given(program, module, call)
    return values is not None and any(
        is_const(e, False)
        for value in values
        for e in (value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    )


def _shuffles_given(program: Program, module: Module, call: ast.Call) -> Optional[List[Optional[ast.expr]]]:
    """What the callers of the sampler's helper give for a shuffle flag the helper zips with its datasets (None
    where the flag comes from elsewhere or the helper has no callers)."""
    shuffle = keyword(call, "shuffle")
    function = module.function_of(call)
    if not isinstance(shuffle, ast.Name) or function is None:
        return None
    parameters = [a.arg for a in function.args.args]
    source = shuffle.id
    for loop in (n for n in walk(function) if isinstance(n, ast.For)):
        zipped = loop.iter
        if isinstance(zipped, ast.Call) and last_name(zipped) == "zip" and isinstance(loop.target, ast.Tuple):
            targets = [t.id if isinstance(t, ast.Name) else "" for t in loop.target.elts]
            if shuffle.id in targets and len(zipped.args) == len(targets):
                flags = zipped.args[targets.index(shuffle.id)]
                source = flags.id if isinstance(flags, ast.Name) else ""
    if source not in parameters:
        return None
    position = parameters.index(source)
    sites = program.sites_of(function.name)
    return [argument(site, position, source) for _, site in sites] or None


def _all_false(value: Optional[ast.expr]) -> bool:
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts) and all(is_const(e, False) for e in value.elts)
    return is_const(value, False)


def _repeats_epochs(program: Program) -> bool:
    """A loop that can run more than once around a loop over batches or an epoch's function (`for epoch in
    range(1)` and a single pass over the loader never reshuffle, so they need no set_epoch)."""
    for module in program.modules:
        for loop in module.of_type(ast.For, ast.While):
            if _once(loop) or _over_a_loader(loop):
                continue
            inner = [n for n in walk(loop) if n is not loop]
            if any(isinstance(n, (ast.For, ast.While)) for n in inner) or any(
                isinstance(n, ast.Call) and ("epoch" in last_name(n).lower() or "train" in last_name(n).lower())
                for n in inner
            ):
                return True
    return False


def _over_a_loader(loop: ast.AST) -> bool:
    """`for batch_idx, (x, y) in enumerate(train_loader):` — a pass over batches, whatever loops run inside it (a
    hand-written all_reduce over the parameters), not a loop of epochs."""
    return isinstance(loop, ast.For) and any("loader" in name.lower() for name in names_in(loop.iter))


def _iterates_a_loader(module: Module, loop: ast.For) -> bool:
    """`for x, y in loader:`, also through a name the same function set from one (`bar = tqdm(self.val_loader)`)."""
    if _over_a_loader(loop):
        return True
    names = {n.id for n in walk(loop.iter) if isinstance(n, ast.Name)}
    scope = module.scope_of(loop)
    return any(
        isinstance(node, ast.Assign)
        and node.lineno < loop.lineno
        and module.scope_of(node) is scope
        and {call_name(t) for t in node.targets} & names
        and any("loader" in name.lower() for name in names_in(node.value))
        for node in module.of_type(ast.Assign)
    )


def _trains(program: Program) -> bool:
    """Back-propagates, steps, or calls something named for training (`train_one_epoch`, `run_epoch`, `fit`; not
    `from_pretrained`, which loads weights)."""
    return any(
        name in ("backward", "fit")
        or any(word in name.lower().replace("pretrained", "") for word in ("train", "step", "epoch"))
        for name in program.call_sites
    )


def _once(loop: ast.AST) -> bool:
    """`for ... in range(1):`"""
    return (
        isinstance(loop, ast.For)
        and isinstance(loop.iter, ast.Call)
        and last_name(loop.iter) == "range"
        and len(loop.iter.args) == 1
        and is_const(loop.iter.args[0], 1)
    )


# Training loops of libraries that call set_epoch on the loader's sampler themselves
EPOCH_LOOP_LIBRARIES = ("catalyst", "lightning", "accelerate")


def set_epoch_missing(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return  # its samplers sit in branches the program never takes (`if ddp:` with `ddp=False`)
    if any(
        not _a_datasets(call) and not program.branches_away(m, call) for m, call in program.calls_named("set_epoch")
    ):
        return  # anywhere in the program: a helper the epoch loop calls counts (not `loader.dataset.set_epoch(e)`)
    if any(word in name for m in program.modules for name in m.import_names for word in EPOCH_LOOP_LIBRARIES):
        return  # the library's runner reshuffles
    if not _repeats_epochs(program) or not _trains(program):
        return  # one pass, or a program that only evaluates: no order to repeat
    for module, call in training_samplers(program):
        if program.branches_away(module, call):
            continue  # made only on a path no call takes (`if multinode:` with `multinode=(local_rank >= 0)`)
        if _read_in_one_pass(module, call):
            continue  # GOTHAM's loader read once to copy the rank's shard onto the GPU: no epoch repeats its order
        if _loader_beside_an_unused_sampler(module, call) is not None:
            continue  # the sampler reaches no loader (DDP030): telling it the epoch changes nothing
        yield module, call.lineno  # each of them: none is ever told its epoch


def _read_in_one_pass(module: Module, sampler: ast.Call) -> bool:
    """Every loader given this sampler is a plain name of the sampler's function that is only ever iterated, by a
    `for` outside any loop of that function: the order is drawn once."""
    function = module.function_of(sampler)
    parent = module.parents.get(sampler)
    if function is None or not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return False
    kept = parent.targets[0]
    if not isinstance(kept, ast.Name):
        return False
    loaders = [
        node.targets[0].id
        for node in walk(function)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Call)
        and last_name(node.value) == "DataLoader"
        and any(call_name(v) == kept.id for v in [*node.value.args, *(k.value for k in node.value.keywords)])
    ]
    if not loaders:
        return False
    for node in walk(function):
        if isinstance(node, ast.Name) and node.id in loaders and isinstance(node.ctx, ast.Load):
            loop = module.parents.get(node)
            if not (isinstance(loop, ast.For) and loop.iter is node):
                return False  # handed on, wrapped, measured: read elsewhere
            if any(isinstance(p, (ast.For, ast.While)) for p in _ancestors_within(module, loop, function)):
                return False  # inside an epoch loop (or any loop): read again each time round
    return True


def _ancestors_within(module: Module, node: ast.AST, scope: ast.AST) -> Iterator[ast.AST]:
    for parent in module.ancestors(node):
        if parent is scope:
            return
        yield parent


def _a_datasets(call: ast.Call) -> bool:
    """`train_loader.dataset.set_epoch(epoch)`: the dataset's own epoch (its augmentation), not the sampler's."""
    return isinstance(call.func, ast.Attribute) and last_name(call.func.value) in ("dataset", "train_dataset")


# ---- DDP003 ---------------------------------------------------------------------------------------
def shuffle_with_sampler(program: Program) -> Iterator[Hit]:
    for module, call in program.calls_named("DataLoader"):
        if _sampler_given(call, "sampler") and is_const(keyword(call, "shuffle"), True):
            yield module, call.lineno


def _sampler_given(call: ast.Call, name: str) -> bool:
    """The loader is given a sampler by that keyword: `sampler=None` (the default, written out) gives none."""
    value = keyword(call, name)
    return value is not None and not is_const(value, None)


# ---- DDP018 ---------------------------------------------------------------------------------------
# Libraries that give a loader its distributed sampler themselves (Accelerate, Lightning Fabric, DeepSpeed, Horovod's
# examples through their own helpers): a shuffling DataLoader handed to them is right.
SAMPLER_INJECTORS = {  # an import of the library, and a call that hands it the loader
    "accelerate": ("prepare", "prepare_data_loader"),
    "lightning": ("setup_dataloaders", "Trainer"),
    "deepspeed": ("initialize",),
    "catalyst": ("train", "run"),
}
RANK_PARTITIONERS = ("partition_dataset", "split_dataset_by_node")  # MONAI's, Hugging Face datasets'
SHARDING_WORDS = {"world_size", "num_replicas", "num_shards", "shard", "split_dataset_by_node", "get_world_size"}


def shuffled_without_sampler(program: Program) -> Iterator[Hit]:
    if not program.distributed or _library_gives_sampler(program) or program.any_call(*RANK_PARTITIONERS):
        return  # a library gives the loader its sampler, or the program splits its data by rank itself
    for module, call in program.calls_named("DataLoader"):
        random = _random_sampler(module, call)
        if not (random or _shuffles(program, module, call)):
            continue
        if not random and (_sampler_given(call, "sampler") or _sampler_given(call, "batch_sampler")):
            continue
        if is_const(keyword(call, "use_ddp"), True):
            continue  # DGL's DataLoader, which splits its seeds over the ranks itself
        if _on_single_process_path(module, call):
            continue  # the single-process path of `if args.distributed: ... else: ...`
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        if dataset is not None and _derived_names(module, call, dataset) & (SHARDING_WORDS | RANK_NAMES):
            continue  # the dataset is already this rank's part (`ds[idx]` with `idx = all_idx.split(n)[rank]`)
        if _is_eval_name(_sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")):
            continue  # every rank evaluating the whole set in its own order: slow, not wrong
        if _without_gradients(module, call) or _only_read_without_gradients(module, call):
            continue  # made or read where no gradient is taken (`@torch.no_grad()`: predictions, calibration)
        if program.branches_away(module, call):
            continue  # every call of the helper returns before it (`if return_datasets: return ...`, passed True)
        if _one_batch_looked_at(module, call) or _replaced_by_a_sharded_loader(module, call):
            continue
        if _handed_to_a_sharding_rebuild(program, module, call):
            continue
        if _kept_by_the_launcher(program, module, call):
            continue
        if any(_loader_beside_an_unused_sampler(module, s) is call for s in module.calls_in(module.scope_of(call))):
            continue  # the sampler made for it beside it and never given: DDP030 says so
        yield module, call.lineno


# ---- DDP030 ---------------------------------------------------------------------------------------
def sampler_never_given(program: Program) -> Iterator[Hit]:
    """`train_sampler = DistributedSampler(train_ds, ...)`, then `DataLoader(train_ds, batch_size=...)` in the same
    function with no sampler, and the sampler's name never read again but for `set_epoch` (STAR's `train_dist.py`):
    the split is made and thrown away — every rank reads the whole dataset."""
    if not program.distributed:
        return
    for module, call in program.calls_named("DistributedSampler"):
        loader = _loader_beside_an_unused_sampler(module, call)
        if loader is not None and not program.branches_away(module, loader):
            yield module, loader.lineno


def _dataset_of(loader: ast.Call) -> str:
    given = loader.args[0] if loader.args else keyword(loader, "dataset")
    return call_name(given) if given is not None else ""


def _loader_beside_an_unused_sampler(module: Module, sampler: ast.Call) -> Optional[ast.Call]:
    """The first loader of the sampler's dataset made after it in its scope with no sampler, where the sampler is
    kept in a plain name that nothing reads but `name.set_epoch(...)`; not an evaluation's sampler (`shuffle=False`,
    `val_sampler`)."""
    parent = module.parents.get(sampler)
    if last_name(sampler) != "DistributedSampler":
        return None
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return None
    held, scope = parent.targets[0].id, module.scope_of(sampler)
    dataset = sampler.args[0] if sampler.args else keyword(sampler, "dataset")
    if not isinstance(dataset, ast.Name):
        return None
    if is_const(keyword(sampler, "shuffle"), False) or _is_eval_name(f"{held} {dataset.id}"):
        return None  # an evaluation's: every rank reading the whole set is slow, not wrong (DDP016's lessons)
    for node in walk(scope):
        if isinstance(node, ast.Name) and node.id == held and isinstance(node.ctx, ast.Load):
            used = module.parents.get(node)
            if not (isinstance(used, ast.Attribute) and used.attr == "set_epoch"):
                return None  # given to a loader, a helper, a list: used
    return next(
        (
            call
            for call in walk(scope)
            if isinstance(call, ast.Call)
            and last_name(call) == "DataLoader"
            and call.lineno > sampler.lineno
            and module.scope_of(call) is scope
            and _dataset_of(call) == dataset.id
            and not (_sampler_given(call, "sampler") or _sampler_given(call, "batch_sampler"))
            and not any(k.arg is None for k in call.keywords)
        ),
        None,
    )


def _handed_to_a_sharding_rebuild(program: Program, module: Module, call: ast.Call, depth: int = 3) -> bool:
    """The function that makes the loader, or (through its return, for every caller) one that calls it, goes on to
    call a helper of the program that rebuilds loaders with `DistributedSampler(loader.dataset, ...)` (SpikeReg's
    `_wrap_loaders_for_distributed(train_loader, val_loader, ...)`, given the loaders `create_oasis_loaders`
    returns): the shuffling loader is what a single-process run keeps."""
    rebuilds = program.memo(("sharding rebuilds",), lambda: _sharding_rebuilds(program))
    if not rebuilds:
        return False
    function = module.function_of(call)
    if function is None:
        return False
    if any(
        c.lineno > call.lineno and any(id(f) in rebuilds for _, f in program.resolve(c, module))
        for c in module.calls_in(function)
    ):
        return True
    returned = any(isinstance(n, ast.Return) and n.value is not None for n in walk(function))
    sites = program.running_sites(module, function)
    return (
        depth > 0
        and returned
        and bool(sites)
        and all(_handed_to_a_sharding_rebuild(program, caller, site, depth - 1) for caller, site in sites)
    )


def _sharding_rebuilds(program: Program) -> Set[int]:
    """The program's functions that make `DistributedSampler(loader.dataset, ...)` of a parameter of theirs or of a
    function inside them."""
    found: Set[int] = set()
    for module in program.modules:
        if "DistributedSampler" not in module.source:
            continue
        for function in module.functions:
            parameters: Set[str] = set().union(
                *(_parameter_names(f) for f in walk(function) if isinstance(f, ast.FunctionDef))
            )
            if any(
                isinstance(c, ast.Call)
                and last_name(c) == "DistributedSampler"
                and isinstance(given := (c.args[0] if c.args else keyword(c, "dataset")), ast.Attribute)
                and given.attr == "dataset"
                and call_name(given.value) in parameters
                for c in walk(function)
            ):
                found.add(id(function))
    return found


def _kept_by_the_launcher(program: Program, module: Module, call: ast.Call) -> bool:
    """A loader made in the process that spawns the ranks and not handed to them (GrainGraphNN's `dummy_loader`,
    a warm-up pass in the `__main__` block before `mp.spawn(dist_train, args=(..., train_list, ...))`): one
    process reads it, no rank trains on it."""
    assign = module.parents.get(call)
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
        return False
    held = assign.targets[0].id
    starts = [c for c in module.calls if last_name(c) in (*PROCESS_STARTERS, "Process")]
    return _in_the_launcher_only(program, module, call) and not any(held in names_in(c) for c in starts)


DDP_MAKERS = ("init_process_group", "DistributedDataParallel", "DDP")


def _replaced_by_a_sharded_loader(module: Module, call: ast.Call) -> bool:
    """`train_loader = DataLoader(ds, shuffle=True)`, then, later in the same function, `train_loader =
    DataLoader(ds, sampler=DistributedSampler(ds))` under the very test whose `if` makes the process group or the
    DDP wrapper (DFC2025's `if torch.cuda.device_count() > 1 and args.use_ddp == 1:`): the shuffling loader is what a
    run without DDP keeps. (Replaced under another test — `if len(args.gpu_ids) > 1:` where DDP is made under `if
    torch.cuda.device_count() > 1:` — a DDP run may keep it.)"""
    assign = module.parents.get(call)
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1):
        return False
    held, scope = call_name(assign.targets[0]), module.scope_of(call)
    making = module.memo(("tests that make DDP",), lambda: _tests_making_the_group(module, DDP_MAKERS))
    return bool(held) and any(
        node.lineno > call.lineno
        and any(call_name(t) == held for t in node.targets)
        and isinstance(node.value, ast.Call)
        and last_name(node.value) == "DataLoader"
        and (_sampler_given(node.value, "sampler") or _sampler_given(node.value, "batch_sampler"))
        and not _random_sampler(module, node.value)
        and _replaces_under(module, call, node, scope, making)
        for node in walk(scope)
        if isinstance(node, ast.Assign) and module.scope_of(node) is scope
    )


def _replaces_under(module: Module, first: ast.AST, node: ast.AST, scope: ast.AST, making: Set[str]) -> bool:
    """Every `if` around `node` that is not around `first` holds it in its body, under a test that makes the
    process group or the wrapper (not an `else`: `if args.mini_run: DataLoader(shuffle=True)` / `else:
    DataLoader(batch_sampler=...)` are two arms, not a replacement)."""
    around_first = {id(p) for p in module.ancestors(first)}
    child = node
    for parent in module.ancestors(node):
        if parent is scope:
            return True
        if isinstance(parent, ast.If) and child is not parent.test:
            if id(parent) in around_first or not any(child is s for s in parent.body):
                return False
            if ast.dump(parent.test) not in making:
                return False
        child = parent
    return True


def _random_sampler(module: Module, call: ast.Call) -> bool:
    """`sampler=RandomSampler(dataset)` — also through a name, `sampler = data.RandomSampler(dataset) if mode ==
    'train' else data.SequentialSampler(dataset)` (hyperfuture): every rank draws from the whole dataset (not in a
    module that reads a file named by the rank)."""
    given = keyword(call, "sampler")
    if given is None or any(_is_eval_name(call_name(k.value)) for k in call.keywords):
        return False  # (`batch_size=args.eval_batch_size`: an evaluation's loader, every rank reading it all)
    if _reads_a_file_per_rank(module):
        return False  # the data is this rank's own part (MetaICL: `open(tensorize_path % self.local_rank, "rb")`)
    values: List[ast.AST] = [given]
    if isinstance(given, ast.Name):  # every assignment of the name before the loader, on every arm
        values = [
            node.value
            for node in walk(module.scope_of(call))
            if isinstance(node, ast.Assign)
            and node.lineno < call.lineno
            and any(isinstance(t, ast.Name) and t.id == given.id for t in node.targets)
            and not _on_single_process_path(module, node)
        ]
    names = {last_name(n) for value in values for n in walk(value) if isinstance(n, ast.Call)}
    return "RandomSampler" in names and not any(name.endswith("DistributedSampler") for name in names)


def _reads_a_file_per_rank(module: Module) -> bool:
    """The module opens or loads a file named by the rank: each rank reads its own shard of the data."""
    return bool(
        module.memo(
            ("reads a file per rank",),
            lambda: any(
                (last_name(call) == "open" or "load" in last_name(call).lower() or last_name(call).startswith("read"))
                and call.args
                and {n.rpartition(".")[2] for n in names_in(call.args[0])} & RANK_NAMES
                for call in module.calls
            ),
        )
    )


def _loader_reads(module: Module, call: ast.Call) -> List[ast.Name]:
    """Where the function (or script) around `loader = DataLoader(...)` reads `loader`; empty where the loader is
    not kept in a plain name."""
    parent = module.parents.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return []
    name = parent.targets[0].id
    return [
        n
        for n in walk(module.scope_of(call))
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]


def _only_read_without_gradients(module: Module, call: ast.Call) -> bool:
    """`calib_loader = DataLoader(db, shuffle=True)`, read only inside `with torch.no_grad():`: nothing trained on
    it."""
    reads = [r for r in _loader_reads(module, call) if not _counted_only(module, r)]
    return bool(reads) and all(_without_gradients(module, read) for read in reads)


def _counted_only(module: Module, name: ast.Name) -> bool:
    """`len(calib_loader)`: the loader's length, no batch drawn."""
    parent = module.parents.get(name)
    return isinstance(parent, ast.Call) and call_name(parent) == "len" and parent.args == [name]


def _one_batch_looked_at(module: Module, call: ast.Call) -> bool:
    """`tr_dataloader = DataLoader(ds, shuffle=True)`, then `for ... in tr_dataloader:` ending in a bare `break` as
    its only use (MedSAM's sanity check of its dataset before the real loader): one batch drawn, nothing trained."""
    uses = _loader_reads(module, call)
    for use in uses:
        loop = next((p for p in module.ancestors(use) if isinstance(p, ast.For)), None)
        if loop is None or not any(n is use for n in walk(loop.iter)) or not isinstance(loop.body[-1], ast.Break):
            return False
    return bool(uses)


def _shuffles(program: Program, module: Module, call: ast.Call) -> bool:
    """`shuffle=True`; a name the function sets to True on some arm; or `shuffle=self.shuffle` kept from a parameter
    every construction gives True (a loader class made with `CIFAR10Loader(path, 64, shuffle=True)`)."""
    shuffle = keyword(call, "shuffle")
    if is_const(shuffle, True):
        return True
    if isinstance(shuffle, ast.Name):  # `shuffle_flag = True` on the training arm, `shuffle=shuffle_flag`
        return any(
            is_const(node.value, True) and any(isinstance(t, ast.Name) and t.id == shuffle.id for t in node.targets)
            for node in walk(module.scope_of(call))
            if isinstance(node, ast.Assign)
        )
    if not isinstance(shuffle, ast.Attribute):
        return False
    given = [value for value in program.constructions_give(module, call, shuffle) if value is not None]
    return bool(given) and all(is_const(value, True) for value in given)  # (unknown values left out)


def _without_gradients(module: Module, node: ast.AST) -> bool:
    """Inside `with torch.no_grad():` (or `inference_mode()`), or in a function decorated with either."""
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.With, ast.AsyncWith)) and any(
            isinstance(item.context_expr, ast.Call) and last_name(item.context_expr) in NO_GRADIENT
            for item in parent.items
        ):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            call_name(d.func if isinstance(d, ast.Call) else d).rpartition(".")[2] in NO_GRADIENT
            for d in parent.decorator_list
        ):
            return True
    return False


NO_GRADIENT = {"no_grad", "inference_mode"}


def _derived_names(module: Module, at: ast.AST, expression: ast.expr, depth: int = 2) -> Set[str]:
    """The names an expression is computed from: its own, and those its names were last assigned from, `depth`
    assignments back in the same scope."""
    value = _last_assignment(module, at, expression)
    found = set(names_in(value))
    if depth > 0:
        for node in walk(value):
            if isinstance(node, ast.Name) and node is not expression:
                found |= _derived_names(module, at, node, depth - 1)
    return found


def _on_single_process_path(module: Module, node: ast.AST) -> bool:
    """In the arm of an `if` on whether the run is distributed that runs without it: the else of `if
    args.distributed:` / `if world_size > 1:` / `if mode == "ddp":`, the body of `if not args.distributed:` /
    `if local_rank == -1:`."""
    child = node
    for parent in module.ancestors(node):
        if (
            isinstance(parent, ast.If)
            and child is not parent.test
            and (_tells_distributed(parent.test) or switched_on(module, parent.test))
        ):
            either = (  # `not args.distributed or rank % ngpus == 0`: one process, or rank 0 of several
                isinstance(parent.test, ast.BoolOp)
                and isinstance(parent.test.op, ast.Or)
                and any(selects_ranks(v) for v in parent.test.values)
            )
            in_body = any(child is s for s in parent.body)
            if not either and in_body == _negative(parent.test):
                return True
        child = parent
    return False


def _runs_single_process_only(program: Program, module: Module, node: ast.AST, depth: int = 3) -> bool:
    """Code that only a run without the process group reaches: on the single-process arm of `if args.distributed:`,
    or in a function every running call of which is; for a method, in a class made only there whose every subclass
    defines the method again (OpenP5's `SingleRunner.test_dataset_task`: `SingleRunner(...)` is made in
    `single_main()`, called in the `else` of `if args.distributed and ngpus_per_node > 1:`, and
    `DistributedRunner(SingleRunner)` has its own `test_dataset_task`)."""
    if _on_single_process_path(module, node) or module.on_a_single_process_arm(node):
        return True
    function = module.function_of(node)
    if function is None or depth == 0:
        return False
    key = ("single process only", id(function), depth)
    return bool(program.memo(key, lambda: _single_process_function(program, module, function, depth)))


def _in_a_single_process_function(program: Program, module: Module, node: ast.AST, depth: int = 3) -> bool:
    """In a function every running call of which is on a single-process arm (not the arms around `node` in its own
    function: DDP001 reads those itself, `if cfg.SYNC_BN: DDP(...)` / `else: DataParallel(...)` being no
    single-process arm there)."""
    function = module.function_of(node)
    if function is None:
        return False
    key = ("single process only", id(function), depth)
    return bool(program.memo(key, lambda: _single_process_function(program, module, function, depth)))


def _single_process_function(program: Program, module: Module, function: ast.FunctionDef, depth: int) -> bool:
    owner = module.parents.get(function)
    sites = program.running_sites(module, function, handed=True)
    if isinstance(owner, ast.ClassDef) and all(
        program.redefines(sub, function.name) for sub in program.subclasses_of(owner.name)
    ):  # (a subclass's instances run this method too, unless each has its own)
        made = [(m, c) for m, c in program.sites_of(owner.name) if program.runs(m, c.lineno)]  # where it is made
        if _only_single_process_runs(program, made, depth):
            return True
    # a function, or a method by the calls of its name (EfficientConformer's `model.parallel_strategy()`, called
    # only under `if args.parallel and not args.distributed:`)
    return _only_single_process_runs(program, sites, depth)


def _only_single_process_runs(program: Program, running: List[Tuple[Module, ast.Call]], depth: int) -> bool:
    return bool(running) and all(_runs_single_process_only(program, m, call, depth - 1) for m, call in running)


NOT_A_CONSTANT = object()


def _negative(test: ast.expr) -> bool:
    """A condition that holds when the run is NOT distributed (`not args.distributed`, `world_size == 1`,
    `local_rank == -1`, `mode != "ddp"`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.BoolOp):
        return _negative(test.values[0])
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        value = right.value if isinstance(right, ast.Constant) else NOT_A_CONSTANT
        if (
            isinstance(right, ast.UnaryOp)
            and isinstance(right.op, ast.USub)
            and isinstance(right.operand, ast.Constant)
        ):
            value = -right.operand.value  # type: ignore[operator]
        if isinstance(op, ast.Eq):  # (`local_rank == 0` picks a rank: 0 is not False here)
            return (
                value is False
                or value is None
                or (type(value) is int and value in (1, -1))
                or (isinstance(value, str) and value.lower() in ("cpu", "single", "dp", "off", "false", "no", "none"))
            )
        if isinstance(op, (ast.Lt, ast.LtE)):
            return type(value) is int and value in (1, 2)
        if isinstance(op, ast.NotEq):
            return isinstance(value, str)
        if isinstance(op, ast.Is):
            return value in (None, False)
    return False


def _library_gives_sampler(program: Program) -> bool:
    imported = {name for module in program.modules for name in module.import_names}
    return any(
        any(library in name for name in imported) and program.any_call(*calls)
        for library, calls in SAMPLER_INJECTORS.items()
    )


# ---- DDP005 ---------------------------------------------------------------------------------------
GPU_WORK = ("DistributedDataParallel", "DDP", "cuda", "to", "send", "recv", "isend", "irecv", *sorted(COLLECTIVES))


def nccl_without_set_device(program: Program) -> Iterator[Hit]:
    if _each_process_sees_its_own_gpus(program):
        return
    if not program.any_call(*GPU_WORK) or _several_devices_per_process(program):
        return  # a group made and destroyed with no GPU work, or one process driving several GPUs by design
    found = [
        (module, call)
        for module, call in program.calls_named("init_process_group")
        if keyword(call, "device_id") is None and _nccl(program, argument(call, 0, "backend"))
    ]
    if found and not _sets_device(program):  # (what the program runs is worked out only where it matters)
        for module, call in found:
            yield module, call.lineno


def _nccl(program: Program, backend: Optional[ast.expr]) -> bool:
    return is_const(backend, "nccl") or (backend is not None and _maybe_nccl(program, backend))


def _each_process_sees_its_own_gpus(program: Program) -> bool:
    """The program sets (or reads) `CUDA_VISIBLE_DEVICES`, which may give each process one GPU — unless every mention
    sets it to a fixed list of several (`os.environ["CUDA_VISIBLE_DEVICES"] = "2, 3"` before `mp.spawn`): every
    process then sees both, and makes its context on the first."""
    for module in program.modules:
        if "CUDA_VISIBLE_DEVICES" not in module.source:
            continue
        mentions = 0
        for node in module.of_type(ast.Constant):
            if node.value != "CUDA_VISIBLE_DEVICES":
                continue
            mentions += 1
            assign = next((p for p in module.ancestors(node) if isinstance(p, ast.stmt)), None)
            value = assign.value if isinstance(assign, ast.Assign) else None
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str) and "," in value.value):
                return True
        if mentions == 0 and not _lists_several_devices_in_text(module.source):
            return True  # named otherwise (a shell line in a string, a comment): as before, trusted
    return False


def _lists_several_devices_in_text(source: str) -> bool:
    """Every mention outside the code's strings is a fixed list of several GPUs (`# CUDA_VISIBLE_DEVICES=0,1
    torchrun --nproc_per_node=2 train.py`): each process sees them all."""
    values = re.findall(r"CUDA_VISIBLE_DEVICES\s*=\s*['\"]?([^\s'\"]*)", source)
    return bool(values) and all(re.fullmatch(r"\d+(,\d+)+", value) for value in values)


def _sets_device(program: Program) -> bool:
    """A `set_device` call the program can run (one in a SLURM helper it never calls sets nothing) — torch's, not a
    helper of the program's own that only builds a `torch.device` (`def set_device(local_rank): return
    torch.device(...)`)."""
    return any(
        program.runs(module, call.lineno) and _sets_the_current_device(program, module, call, depth=2)
        for module, call in program.calls_named("set_device")
    )


def _sets_the_current_device(program: Program, module: Module, call: ast.Call, depth: int) -> bool:
    helpers = program.resolve(call, module)
    if not helpers or depth == 0:
        return True  # torch.cuda.set_device, or a library's
    return any(
        _sets_the_current_device(program, other, inner, depth - 1)
        for other, helper in helpers
        for inner in other.calls_in(helper)
        if last_name(inner) == "set_device" and inner is not call
    )


def _several_devices_per_process(program: Program) -> bool:
    """`DDP(model, device_ids=None)`: a model split over several GPUs of one process, which has no one device."""
    return any(
        is_const(keyword(call, "device_ids"), None) for _, call in program.calls_named("DistributedDataParallel", "DDP")
    )


def _maybe_nccl(program: Program, backend: ast.expr) -> bool:
    """A backend from options or a config (`args.dist_backend`, `cfg["backend"]`) in a program that runs on CUDA:
    NCCL in practice."""
    if isinstance(backend, ast.Constant):
        return False
    if isinstance(backend, ast.Attribute) and _option_defaults(program, backend.attr) - {"nccl"}:
        return False  # `--dist_backend` defaulting to "gloo": NCCL only where the user asks for it
    words = {word.lower() for module in program.modules for word in module.words}
    return "nccl" in words or "cuda" in words


def _option_defaults(program: Program, dest: str) -> Set[str]:
    """The string defaults of the program's command-line options stored as `dest`."""
    defaults = [keyword(call, "default") for call in program.options(dest)]
    return {str(d.value).lower() for d in defaults if isinstance(d, ast.Constant)}


# ---- DDP006 ---------------------------------------------------------------------------------------
def hard_coded_device(program: Program) -> Iterator[Hit]:
    if not program.distributed or _groups_of_one(program):
        return
    yield from _one_gpu_shown_to_every_process(program)
    if _one_visible_device_per_process(program):
        return
    for module, call in program.calls_named("DistributedDataParallel", "DDP", "to", "device", "cuda", "set_device"):
        if last_name(call) in ("DistributedDataParallel", "DDP"):
            ids = keyword(call, "device_ids") or (call.args[1] if len(call.args) > 1 else None)
            ids = _last_assignment(module, call, ids) if ids is not None else None
            if isinstance(ids, (ast.List, ast.Tuple)) and any(is_const(e, 0) for e in ids.elts):
                yield module, call.lineno
        elif (
            any(is_const(n, "cuda:0") for a in call.args for n in walk(a))
            or _gpu_0_by_index(call)
            or _gpu_0_by_name(module, call)
        ):
            function = module.function_of(call)
            if function is None and last_name(call) == "device" and module is not program.modules[0]:
                continue  # a device object an imported module defines: it moves nothing unless used
            if any(isinstance(parent, ast.Compare) for parent in module.ancestors(call)):
                continue  # `model.device == torch.device('cuda:0')`: a test, nothing placed
            scope = function or _top_statement(module, call)
            reads_local_rank = names_in(scope) & LOCAL_DEVICE_NAMES and not _gpu_0_by_name(module, call)
            if reads_local_rank or program.guarded(module, call, depth=5):
                continue  # reads the local rank; or runs on one rank only (rank 0's device is GPU 0)
            if module.on_a_single_process_arm(call) or _on_single_process_path(module, call):
                continue  # the `else` of `if config.distributed.use_distributed:`: one process, GPU 0 is its own
            if function is not None and _replaced_by_local_device(program, module, call, function):
                continue
            if function is not None and _default_every_caller_replaces(program, module, call, function):
                continue
            yield module, call.lineno


LOCAL_DEVICE_NAMES = {"local_rank", "LOCAL_RANK", "gpu", "device_id"}


def _one_gpu_shown_to_every_process(program: Program) -> Iterator[Hit]:
    """`os.environ['CUDA_VISIBLE_DEVICES'] = '0'` where every process runs it (a script's first lines, before
    torchrun's processes pick their GPUs): each sees GPU 0 alone, so all train on it, or `set_device(local_rank)`
    fails on every rank but 0."""
    for module in program.modules:
        if "CUDA_VISIBLE_DEVICES" not in module.source:
            continue
        for node in module.of_type(ast.Assign):
            value = node.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.strip().isdigit()):
                continue
            if not any(
                isinstance(t, ast.Subscript) and is_const(t.slice, "CUDA_VISIBLE_DEVICES") for t in node.targets
            ):
                continue
            if program.guarded(module, node) or module.on_a_single_process_arm(node):
                continue
            if program.runs(module, node.lineno):
                yield module, node.lineno


def _gpu_0_by_index(call: ast.Call) -> bool:
    """`torch.cuda.set_device(0)`, `model.cuda(0)`: GPU 0 by its index."""
    first = call.args[0] if call.args else keyword(call, "device")
    if last_name(call) == "set_device":
        return call_name(call).endswith("cuda.set_device") and is_const(first, 0)
    return last_name(call) == "cuda" and isinstance(call.func, ast.Attribute) and is_const(first, 0)


def _gpu_0_by_name(module: Module, call: ast.Call) -> bool:
    """`local_rank = 0` in the function's own body, then `.to(local_rank)` (CodeBERT's evaluation helper): a name
    that holds GPU 0 whatever the rank."""
    if last_name(call) not in ("to", "cuda") or not isinstance(call.func, ast.Attribute) or len(call.args) != 1:
        return False
    value = _last_assignment(module, call, call.args[0])
    if value is call.args[0] or not is_const(value, 0):
        return False
    assignment = module.parents.get(value)
    return assignment is not None and module.parents.get(assignment) is module.function_of(call)


def _replaced_by_local_device(program: Program, module: Module, call: ast.Call, function: ast.FunctionDef) -> bool:
    """`return torch.device('cuda:0' if cuda else 'cpu')` in a helper (`select_device`) whose callers in the
    program's distributed modules keep the result in a name they set again from the local rank on the distributed
    path (`device = torch.device('cuda', opt.local_rank)`): the helper's `cuda:0` is the single-process device
    (also where a module that never makes a process group, an evaluation script, calls it)."""
    if not any(isinstance(parent, ast.Return) for parent in module.ancestors(call)):
        return False
    sites = [
        (caller, site)
        for caller, site in program.sites_of(function.name)
        if caller.is_distributed() and program.runs(caller, site.lineno)
    ]
    return bool(sites) and all(_set_again_from_local_rank(caller, site) for caller, site in sites)


def _default_every_caller_replaces(program: Program, module: Module, call: ast.Call, function: ast.FunctionDef) -> bool:
    """`device = device if device is not None else torch.device("cuda:0")` (or `if device is None: device = ...`) in a
    helper every call of which in the program passes a device: the GPU-0 default is never used."""
    parameter = _none_default_of(module, call, function)
    sites = program.running_sites(module, function)
    return (
        parameter is not None
        and bool(sites)
        and all(
            (given := given_value(function, site, parameter)) is not None and not is_const(given, None)
            for _, site in sites
        )
    )


def _none_default_of(module: Module, call: ast.Call, function: ast.FunctionDef) -> Optional[str]:
    """The parameter `call` stands in for when it is None: the `else` of `P if P is not None else call`, or the
    body of `if P is None:`."""
    parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    for parent in module.ancestors(call):
        if parent is function:
            break
        if not isinstance(parent, (ast.IfExp, ast.If)):
            continue
        test = parent.test
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id in parameters):
            continue
        if not (len(test.ops) == 1 and is_const(test.comparators[0], None)):
            continue
        taken_when_none = parent.orelse if isinstance(test.ops[0], ast.IsNot) else parent.body
        if isinstance(test.ops[0], (ast.Is, ast.IsNot)) and _holds(taken_when_none, call):
            return test.left.id
    return None


def _holds(part: Union[ast.AST, List[ast.stmt]], node: ast.AST) -> bool:
    return any(node is n for piece in (part if isinstance(part, list) else [part]) for n in walk(piece))


def _set_again_from_local_rank(module: Module, site: ast.Call) -> bool:
    kept = next((p for p in module.ancestors(site) if isinstance(p, ast.Assign)), None)
    value = kept.value if kept is not None else None
    if value is not site and not (isinstance(value, ast.IfExp) and site in (value.body, value.orelse)):
        return False  # `device = select_device(...)`, also `... if not cfg.DEBUG else select_device('cpu')`
    assert kept is not None
    names = {call_name(target) for target in kept.targets}
    scope = module.scope_of(site)
    return any(
        later.lineno > site.lineno
        and {call_name(target) for target in later.targets} & names
        and names_in(later.value) & LOCAL_DEVICE_NAMES
        for later in module.of_type(ast.Assign)
        if module.scope_of(later) is scope
    )


def _one_visible_device_per_process(program: Program) -> bool:
    """`os.environ['CUDA_VISIBLE_DEVICES'] = str(devices[rank])` in each process: there, `cuda:0` is its own GPU —
    in a worker function, or at the top of a script each process runs (tgl's `str(args.local_rank)` before `import
    torch`, under `torch.distributed.launch`)."""
    for module in program.modules:
        if "CUDA_VISIBLE_DEVICES" not in module.source:
            continue
        for node in module.of_type(ast.Assign):
            visible = any(
                isinstance(t, ast.Subscript) and is_const(t.slice, "CUDA_VISIBLE_DEVICES") for t in node.targets
            )
            names = names_in(node.value)
            if visible and (names & RANK_NAMES or (module.function_of(node) is not None and "gpu" in names)):
                return True
    return False


def _top_statement(module: Module, node: ast.AST) -> ast.AST:
    """The module-level statement that holds `node`."""
    top = node
    for parent in module.ancestors(node):
        if parent is module.tree:
            return top
        top = parent
    return top


# ---- DDP007 ---------------------------------------------------------------------------------------
def _wraps(module: Module, program: Program) -> List[Tuple[str, int, ast.AST]]:
    """(name, line, scope) of each `name = DDP(...)`, also through a helper of the program that returns the
    wrapper (`model = wrap_ddp(model, local_rank)`) or a tuple holding it (`model, opt = distributed_opt(...)`),
    and `self.model = model` in the `__init__` of a class the program makes with the wrapper (`Trainer(model=ddp_model)`)."""
    return program.memo(
        ("wraps", id(module)), lambda: _assigned_wraps(module, program) + _wraps_kept_by_objects(module, program)
    )


def _wraps_kept_by_objects(module: Module, program: Program) -> List[Tuple[str, int, ast.AST]]:
    found: List[Tuple[str, int, ast.AST]] = []
    for function, kept in _parameters_kept(module):
        for site_module, site in program.sites_of_function(module, function):
            wraps = _assigned_wraps(site_module, program)
            for node, parameter in kept:
                given = given_value(function, site, parameter)
                if isinstance(given, (ast.Name, ast.Attribute)) and _is_wrapper(
                    site_module, site, call_name(given), wraps
                ):
                    found += [
                        (call_name(t), node.lineno, function) for t in node.targets if call_name(t).startswith("self.")
                    ]
    return found


def _parameters_kept(module: Module) -> List[Tuple[ast.FunctionDef, List[Tuple[ast.Assign, str]]]]:
    """Each `__init__` of the module with its `self.x = name` assignments (the module's own fact: kept)."""

    def find() -> List[Tuple[ast.FunctionDef, List[Tuple[ast.Assign, str]]]]:
        found = []
        for function in module.functions:
            if function.name != "__init__":
                continue
            kept = [
                (node, node.value.id)
                for node in walk(function)
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and any(call_name(t).startswith("self.") for t in node.targets)
            ]
            if kept:
                found.append((function, kept))
        return found

    return module.memo(("parameters kept",), find)


def _assigned_wraps(module: Module, program: Program) -> List[Tuple[str, int, ast.AST]]:
    """(name, line, scope) of each assignment of a wrapper in the module; asked for every site of every `__init__`
    that keeps a parameter: kept per program."""
    return program.memo(("assigned wraps", id(module)), lambda: _find_assigned_wraps(module, program))


def _find_assigned_wraps(module: Module, program: Program) -> List[Tuple[str, int, ast.AST]]:
    found = []
    assigns = [n for n in module.of_type(ast.Assign) if isinstance(n.value, ast.Call)]
    makers = _wrapper_makers(program)
    for node in assigns:
        value = node.value
        assert isinstance(value, ast.Call)
        value = _unmoved(value)  # `DDP(model, ...).to(device)`: the wrapper, moved
        positions: Set[Optional[int]] = {WHOLE}
        if last_name(value) not in ("DistributedDataParallel", "DDP"):
            if last_name(value) not in makers:
                continue  # no function of that name returns a wrapper
            positions = {
                _wrapper_returned(other, callee)
                for other, callee in program.resolve(value, module)
                if not _wrap_not_taken(other, callee, value)
            }
        for target in node.targets:
            if isinstance(target, ast.Tuple):
                named = [(i, t) for i, t in enumerate(target.elts) if i in positions]
            else:
                named = [(WHOLE, target)] if WHOLE in positions else []
            for _, name in named:
                if isinstance(name, (ast.Name, ast.Attribute)) and _unwrapped_after(module, node, name) is None:
                    found.append((call_name(name), node.lineno, module.scope_of(node)))
    return found + _aliases_of(module, found)


def _aliases_of(module: Module, wraps: List[Tuple[str, int, ast.AST]]) -> List[Tuple[str, int, ast.AST]]:
    """`net_train = ddp_net` after `ddp_net = DDP(net, ...)` in the same scope (deepcam): the other name holds the
    same wrapper."""
    found: List[Tuple[str, int, ast.AST]] = []
    if not wraps:
        return found
    for node in module.of_type(ast.Assign):
        if not isinstance(node.value, (ast.Name, ast.Attribute)) or len(node.targets) != 1:
            continue
        target, held, scope = node.targets[0], call_name(node.value), module.scope_of(node)
        if isinstance(target, (ast.Name, ast.Attribute)) and any(
            held == name and line < node.lineno and scope is where for name, line, where in wraps
        ):
            found.append((call_name(target), node.lineno, scope))
    return found


def _unwrapped_after(module: Module, wrap: ast.Assign, name: ast.expr) -> Optional[ast.Assign]:
    """`model = DDP(model, ...)` then `model = model.module` in the same scope: the name holds the inner model
    again (the wrapper is thrown away), so what it saves has no `module.` prefix (see DDP020)."""
    scope, held = module.scope_of(wrap), call_name(name)
    for node in module.of_type(ast.Assign):
        if node.lineno <= wrap.lineno or module.scope_of(node) is not scope:
            continue
        value = node.value
        if (
            any(call_name(t) == held for t in node.targets)
            and isinstance(value, ast.Attribute)
            and value.attr == "module"
            and call_name(value.value) == held
        ):
            return node
    return None


WHOLE = -1  # a function returns the wrapper itself (not an element of a tuple)


def _wrap_not_taken(module: Module, function: ast.FunctionDef, call: ast.Call) -> bool:
    """Every DDP(...) of the helper sits in a branch this call cannot take: fast-autoaugment's `get_model(conf,
    n, local_rank=-1)` for its EMA copy, where `get_model` wraps only `if local_rank >= 0:`."""
    wraps = [c for c in module.calls_in(function) if last_name(c) in ("DistributedDataParallel", "DDP")]
    return bool(wraps) and all(branch_not_taken(module, function, wrap, call) for wrap in wraps)


def _wrapper_makers(program: Program) -> Set[str]:
    """The names of the program's functions that return a wrapper (or a tuple holding one)."""
    return program.memo(
        ("wrapper makers",),
        lambda: {
            function.name
            for module in program.modules
            for function in module.functions
            if _wrapper_returned(module, function) is not None
        },
    )


def _wrapper_returned(module: Module, function: ast.FunctionDef) -> Optional[int]:
    """Where every `return` of the function gives a DDP(...) call or a name last assigned one: WHOLE, or its
    position in the returned tuple (`return model, opt`); None otherwise (kept per function)."""
    return module.memo(("returns_wrapper", id(function)), lambda: _position_returned(module, function))


def _position_returned(module: Module, function: ast.FunctionDef) -> Optional[int]:
    if not module.spells("DistributedDataParallel", "DDP"):
        return None
    returns = [n for n in walk(function) if isinstance(n, ast.Return) and module.function_of(n) is function]
    positions = {_wrapper_position(module, node) for node in returns}
    return positions.pop() if len(positions) == 1 else None


def _wrapper_position(module: Module, node: ast.Return) -> Optional[int]:
    """Where the returned value is the wrapper: a DDP(...) call, or a name the function sets to one on some path
    (`if distributed: model = DDP(model)` / `else: model = model.to(device)`, then `return model`: the wrapper
    wherever the run is distributed)."""
    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
    scope = module.scope_of(node)
    for position, value in enumerate(values):
        candidates = [value]
        if isinstance(value, ast.Name):
            candidates = [
                n.value
                for n in walk(scope)
                if isinstance(n, ast.Assign)
                and n.lineno <= node.lineno
                and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
            ]
        if any(isinstance(c, ast.Call) and last_name(c) in ("DistributedDataParallel", "DDP") for c in candidates):
            return position if isinstance(node.value, ast.Tuple) else WHOLE
    return None


# ---- DDP020 ---------------------------------------------------------------------------------------
def wrapper_thrown_away(program: Program) -> Iterator[Hit]:
    """`model = DDP(model, ...)` then `model = model.module`: the only reference to the wrapper is gone, so its
    forward never runs, its gradient hooks never fire and every rank trains its own copy of the model."""
    if not program.any_call("backward"):
        return  # nothing back-propagates here: a wrapper made and dropped trains nothing either way
    for module in program.modules:
        if not module.spells("DistributedDataParallel", "DDP"):
            continue
        for node in module.of_type(ast.Assign, ast.Expr):
            value = _unmoved(node.value) if isinstance(node.value, ast.Call) else node.value
            if not (isinstance(value, ast.Call) and last_name(value) in ("DistributedDataParallel", "DDP")):
                continue
            if program.resolve(value, module):
                continue  # the program's own `def DDP(address, port, ...)`, a set-up helper
            if isinstance(node, ast.Expr):
                yield module, node.lineno  # `DDP(model, ...)` kept nowhere
                continue
            if len(node.targets) != 1 or not isinstance(node.targets[0], (ast.Name, ast.Attribute)):
                continue  # `ddp_model = model = DDP(model)`: another name still holds the wrapper
            if isinstance(node.targets[0], ast.Name) and _never_read_after(module, node, node.targets[0].id):
                yield module, node.lineno  # `model = DDP(Model)`, then `Model` trained
                continue
            unwrap = _unwrapped_after(module, node, node.targets[0])
            if unwrap is not None and not _trains_between(module, node, unwrap):
                yield module, unwrap.lineno
    if not _groups_of_one(program):  # (one process: nothing to all-reduce)
        for module in program.modules:
            yield from _forward_through_the_inner_model(module)
            yield from _forward_through_an_unwrapped_parameter(program, module)


def _forward_through_an_unwrapped_parameter(program: Program, module: Module) -> Iterator[Hit]:
    """A loss helper that unwraps what it is given and runs it: DistillASR's `distill_loss(..., proj_layers)` does
    `if isinstance(proj_layers, DDP): proj_layers = proj_layers.module`, then `proj_layers[str(i)](hidden)`, and
    the training step that calls it back-propagates the result — the wrapper's forward never runs, so its
    parameters' gradients are never all-reduced."""
    if ".module" not in module.source:
        return
    for function in module.functions:
        parameters = _parameter_names(function)
        for node in walk(function):
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in parameters
                and _unwrapped_name(node.value) == node.targets[0].id
                and _under_a_wrapper_test(module, node)
            ):
                continue
            name = node.targets[0].id
            if _runs_after(module, function, node, name) and _a_loss_of_a_training_step(program, module, function):
                yield module, node.lineno


def _runs_after(module: Module, function: ast.FunctionDef, unwrap: ast.Assign, name: str) -> bool:
    """A forward of the unwrapped model after the unwrap: `name(x)`, `name[key](x)`, or a method of it that is not
    nn.Module's bookkeeping — outside `no_grad`."""
    for call in module.calls_in(function):
        if call.lineno <= unwrap.lineno or _without_gradients(module, call):
            continue
        func = call.func
        while isinstance(func, ast.Subscript):
            func = func.value
        if isinstance(func, ast.Name) and func.id == name:
            return True
        if isinstance(func, ast.Attribute) and func.attr not in NOT_A_FORWARD and call_name(func.value) == name:
            return True
    return False


def _a_loss_of_a_training_step(program: Program, module: Module, function: ast.FunctionDef) -> bool:
    """A loss helper (named for a loss, or its result kept as one: `loss = compute(...)`) that puts nothing in
    `eval()` mode, called by a function that calls `backward` (not CodeBERT's `eval_bleu_epoch`, which unwraps to
    `generate`)."""
    if any(last_name(c) == "eval" for c in module.calls_in(function)):
        return False
    for caller, site in program.sites_of(function.name):
        around = caller.function_of(site) or caller.tree
        if not any(last_name(c) == "backward" for c in caller.calls_in(around)):
            continue
        kept = caller.parents.get(site)
        while isinstance(kept, (ast.BinOp, ast.UnaryOp)):
            kept = caller.parents.get(kept)
        targets = [kept.target] if isinstance(kept, ast.AugAssign) else getattr(kept, "targets", [])
        if "loss" in function.name.lower() or any("loss" in call_name(t).lower() for t in targets):
            return True
    return False


# what a training step may ask of the inner model without running a forward past the wrapper
NOT_A_FORWARD = {
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "modules",
    "named_modules",
    "children",
    "state_dict",
    "load_state_dict",
    "train",
    "eval",
    "to",
    "cuda",
    "cpu",
    "zero_grad",
    "apply",
    "requires_grad_",
    "half",
    "float",
}


def _forward_through_the_inner_model(module: Module) -> Iterator[Hit]:
    """A training step that computes what it back-propagates through the wrapper's inner model and never calls
    the wrapper: `core = agent.module if hasattr(agent, 'module') else agent`, `core.get_action_and_value(x)`,
    then `loss.backward()` (Tensor_PPO_2048) — DDP's forward, which readies the gradient all-reduce, never runs."""
    if ".module" not in module.source:
        return
    for function in [module.tree, *module.functions]:
        calls = module.calls_in(function)
        backward = [c for c in calls if last_name(c) == "backward"]
        if not backward:
            continue
        inner = _inner_model_names(function)
        owner = module.parents.get(function)
        if isinstance(owner, ast.ClassDef):  # `self._policy_module = self.policy.module` in another method
            kept = module.memo(("inner models kept", id(owner)), functools.partial(_inner_model_names, owner))
            inner.update({name: wrapper for name, wrapper in kept.items() if name.startswith("self.")})
        for call in calls:
            func = call.func
            if not isinstance(func, ast.Attribute) or func.attr in NOT_A_FORWARD or call.lineno > backward[0].lineno:
                continue
            if _without_gradients(module, call):
                continue  # under no_grad: a forward nothing back-propagates through
            receiver = func.value
            wrapper = _unwrapped_name(receiver) or inner.get(call_name(receiver), "")
            if func.attr == "module":  # `self.model.module(input_ids=...)` (OpenP5): the inner model called
                wrapper = call_name(receiver)
            if wrapper and not any(call_name(c.func) == wrapper for c in calls):
                yield module, call.lineno
                break


def _unwrapped_name(node: ast.expr) -> str:
    """`model` for `model.module` (`self.model` for `self.model.module`)."""
    if isinstance(node, ast.Attribute) and node.attr == "module":
        return call_name(node.value)
    return ""


def _inner_model_names(function: ast.AST) -> Dict[str, str]:
    """Names the function (or class) assigns the inner model to: `core = agent.module if hasattr(agent, 'module') else
    agent` (or plainly `core = agent.module`) -> {'core': 'agent'}; `self._policy_module = self.policy.module` ->
    {'self._policy_module': 'self.policy'}."""
    found: Dict[str, str] = {}
    for node in walk(function):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], (ast.Name, ast.Attribute))
        ):
            continue
        value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
        wrapper = _unwrapped_name(value)
        if wrapper and call_name(node.targets[0]):
            found[call_name(node.targets[0])] = wrapper
    return found


def _never_read_after(module: Module, node: ast.Assign, name: str) -> bool:
    """Nothing in the assignment's scope (its nested functions included) reads `name` after it, and no `global`
    statement hands it to other functions: the object assigned is dropped."""
    scope = module.scope_of(node)
    for sub in walk(scope):
        if isinstance(sub, (ast.Global, ast.Nonlocal)) and name in sub.names:
            return False
        if not (isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load)):
            continue
        if sub.lineno > node.lineno or module.function_of(sub) is not module.function_of(node):
            return False
    return scope is not module.tree  # (a module-level name may be read by any module that imports this one)


def _trains_between(module: Module, first: ast.stmt, last: ast.stmt) -> bool:
    """A loop or a training call between the wrap and the unwrap: the wrapper trained, then the inner model is
    taken out (to save it, say) — not DDP020's mistake."""
    scope = module.scope_of(first)
    for node in walk(scope):
        if not (first.lineno < getattr(node, "lineno", 0) < last.lineno):
            continue
        if isinstance(node, (ast.For, ast.While)):
            return True
        if isinstance(node, ast.Call) and any(
            w in last_name(node).lower() for w in ("train", "fit", "epoch", "backward")
        ):
            return True
    return False


def _before_in_the_same_method(module: Module, call: ast.Call, scope: ast.AST, line: int) -> bool:
    """`self.G_model.short_summary()` in the `__init__` that wraps `self.G_model = DDP(self.G_model)` further down
    (srgan_cosmo2d's Trainer), or in a method that `__init__` alone calls before it wraps (the DDP tutorial's
    `self._load_snapshot(path)` ahead of `self.model = DDP(self.model, ...)`): the attribute still holds the plain
    model there."""
    if module.scope_of(call) is scope:
        return _before(module, call, line)
    method = module.function_of(call)
    if method is None or module.parents.get(method) is not module.parents.get(scope):
        return False
    sites = [c for c in module.calls if call_name(c.func) == "self." + method.name]
    return bool(sites) and all(module.scope_of(c) is scope and _before(module, c, line) for c in sites)


def _before(module: Module, node: ast.AST, line: int) -> bool:
    return getattr(node, "lineno", line) < line and not any(
        isinstance(p, (ast.For, ast.While)) for p in module.ancestors(node)
    )


def _same_instance(module: Module, call: ast.AST, scope: ast.AST, name: str) -> bool:
    """`self.model = DDP(...)` in one method and `self.model.state_dict()` in another of the same class."""
    if not name.startswith("self."):
        return False
    classes = [p for p in module.ancestors(call) if isinstance(p, ast.ClassDef)]
    return bool(classes) and any(p is classes[0] for p in module.ancestors(scope))


def saves_wrapped_state(program: Program) -> Iterator[Hit]:
    if any(_handles_the_prefix(m) for m in program.modules):
        return  # the program strips (or adds) the 'module.' prefix where it loads its files (`name = k[7:]`)
    hits = list(_wrapped_state_saves(program))
    if hits and not _prefix_handled_beside(program) and not _loads_into_the_wrapper(program):
        yield from hits


def _loads_into_the_wrapper(program: Program) -> bool:
    """The program loads its state dictionaries into the wrapper itself (`model = DDP(...)`, then
    `model.load_state_dict(torch.load(args.ckpt))` to resume): its files keep the wrapper's keys, which is what it
    reads back (and what `--fix` leaves alone)."""
    for module in program.modules:
        wraps = _wraps(module, program) if module.spells("load_state_dict") else []
        for call in module.calls if wraps else []:
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict"):
                continue
            if program.runs(module, call.lineno) and _is_wrapper(module, call, call_name(func.value), wraps):
                return True
    return False


def _handles_the_prefix(module: Module) -> bool:
    """The module spells the 'module.' prefix in a string or cuts a key's first seven characters (`k[7:]`); kept
    per module, which many programs read."""
    return bool(
        module.memo(
            ("handles the prefix",),
            lambda: (
                ("module." in module.source and any(_names_the_prefix(word) for word in module.words))
                or ("7" in module.source and CUT_KEY.search(module.source) is not None)
            ),
        )
    )


def _prefix_handled_beside(program: Program) -> bool:
    """A script beside the entry point, at the repository's root or in its `utils/`, `tools/` or `scripts/` folder
    spells the 'module.' prefix (`rename.py`: `if key.startswith('module.'):`; MedSAM's `utils/ckpt_convert.py`):
    the repository converts the files it saves."""
    entry = program.modules[0].file if program.modules else Path()
    if entry == Path() or not entry.is_absolute():
        return False
    root = repository_root(entry.parent)
    folders = dict.fromkeys([entry.parent, root, *(root / name for name in CONVERTER_FOLDERS)])
    return any(folder.is_dir() and scripts_spell_the_prefix(folder) for folder in folders)


# where a repository keeps its checkpoint converters (MedSAM's `utils/ckpt_convert.py`)
CONVERTER_FOLDERS = ("utils", "util", "tools", "scripts", "script")


def _wrapped_state_saves(program: Program) -> Iterator[Hit]:
    for module in program.modules:
        wraps = _wraps(module, program)
        if not wraps:
            continue
        for call in module.calls:  # `save_model(args, model)` whose helper saves `model.state_dict()`: pass .module
            for other, callee, parameter in _wrapper_passed(program, module, call, wraps):
                saved = list(_saves_state_of(other, other.calls_in(callee), {parameter}))
                if saved and "save" in last_name(call).lower():
                    yield module, call.lineno
                else:  # `train(model, ...)` that saves `model.state_dict()` among other work: found where it saves
                    yield from saved
        for hit in _saves_state_of(module, module.calls, wraps):
            saves = [c for c in module.calls if c.lineno == hit[1]]
            if not any(_on_single_process_path(module, c) for c in saves):
                yield hit  # (not in the else of `if args.distributed:`, where the model is the plain one)


def _names_the_prefix(text: str) -> bool:
    """A string that spells the wrapper's key prefix (`"module."`, `f"module.{k}"`, `r"^module\\."`), not a
    sentence that ends on the word (a docstring's "... of the embedding module.")."""
    return text.lstrip("^").startswith(("module.", "module\\."))


def _is_wrapper(module: Module, call: ast.Call, owner: str, wraps) -> bool:
    """`owner` names the DDP wrapper at `call`: after `owner = DDP(...)` in the same scope, or the same `self.x` of
    the class; (a set of names: a helper's parameter the wrapper was passed to)."""
    if isinstance(wraps, set):
        return owner in wraps
    return any(
        owner == name
        and (
            (_same_instance(module, call, scope, name) and not _before_in_the_same_method(module, call, scope, line))
            or (call.lineno > line and module.scope_of(call) is scope)
            or _global_seen_in_function(module, call, scope, name)
        )
        for name, line, scope in wraps
    )


def _global_seen_in_function(module: Module, call: ast.AST, scope: ast.AST, name: str) -> bool:
    """`model = DDP(...)` at the script's top level, and `model.state_dict()` in a function of the script that never
    assigns `model` itself: the function reads the global."""
    if scope is not module.tree or "." in name:
        return False
    function = module.function_of(call)
    if function is None:
        return False
    arguments = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    assigned = any(
        isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Name) and t.id == name for t in getattr(node, "targets", [getattr(node, "target", None)])
        )
        for node in walk(function)
    )
    return name not in arguments and not assigned


def _saves_state_of(module: Module, calls: List[ast.Call], wraps) -> Iterator[Hit]:
    for call in calls:
        whole = call_name(call) == "torch.save" and bool(call.args)  # the wrapper pickled whole
        if not whole and (last_name(call) != "state_dict" or not isinstance(call.func, ast.Attribute)):
            continue
        owner = call_name(call.args[0] if whole else call.func.value)  # type: ignore[attr-defined]
        if isinstance(wraps, set) and _unwrapped_before(module, call, owner):
            continue  # `if args.distributed: model = model.module` in the helper, then `model.state_dict()`
        if _the_other_arm_unwraps(module, call) or _beside_an_arm_that_unwraps(module, call, owner):
            continue  # `model.module.state_dict() if num_gpus > 1 else model.state_dict()`, also as statements
        if _is_wrapper(module, call, owner, wraps) and (
            whole
            or any(isinstance(p, ast.Call) and "save" in last_name(p).lower() for p in module.ancestors(call))
            or _saved_later(module, call)
        ):
            yield module, call.lineno


def _the_other_arm_unwraps(module: Module, call: ast.Call) -> bool:
    """The call is one arm of `A if test else B` whose other arm reads `.module`: the arms are the distributed and
    the single-process saves."""
    child: ast.AST = call
    for parent in module.ancestors(call):
        if isinstance(parent, ast.IfExp) and child is not parent.test:
            other = parent.orelse if child is parent.body else parent.body
            return any(isinstance(n, ast.Attribute) and n.attr == "module" for n in walk(other))
        if isinstance(parent, ast.stmt):
            return False
        child = parent
    return False


def _beside_an_arm_that_unwraps(module: Module, call: ast.Call, owner: str) -> bool:
    """The call is in one arm of an `if` statement whose other arm reads `owner.module` (A-LLMRec's `if
    args.multi_gpu: model.module.save_model(...)` / `else: model.save_model(...)`): the program tells the wrapper
    from the plain model there, and this arm has the plain one."""
    child: ast.AST = call
    for parent in module.ancestors(call):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        if isinstance(parent, ast.If) and child is not parent.test and not _tells_data_parallel_only(parent.test):
            other = parent.orelse if any(child is s for s in parent.body) else parent.body
            if any(
                isinstance(n, ast.Attribute) and n.attr == "module" and call_name(n.value) == owner
                for statement in other
                for n in walk(statement)
            ):
                return True
        child = parent
    return False


def _tells_data_parallel_only(test: ast.expr) -> bool:
    """`isinstance(model, nn.DataParallel)`: false for the DDP wrapper, whose state the other arm then saves."""
    names = names_in(test)
    return "DataParallel" in names and not names & {"DistributedDataParallel", "DDP"}


def _unwrapped_before(module: Module, call: ast.Call, name: str) -> bool:
    """`name = name.module` (or `getattr(name, "module", name)`, `de_parallel(name)`...) in the same function before
    `call`: what is saved is the model inside the wrapper."""
    scope = module.scope_of(call)
    return any(
        isinstance(node, ast.Assign)
        and node.lineno < call.lineno
        and any(call_name(t) == name for t in node.targets)
        and (
            "module" in names_in(node.value)
            or any(is_const(n, "module") for n in walk(node.value))
            or any("parallel" in w.lower() for w in names_in(node.value))
        )
        for node in walk(scope)
    )


def _wrapper_passed(
    program: Program, module: Module, call: ast.Call, wraps
) -> Iterator[Tuple[Module, ast.FunctionDef, str]]:
    """`save_model(args, model, optimizer)` or `train_validate(model, ...)` with `model` the wrapper: (the function's
    module, the function, the name its parameter gives the wrapper)."""
    for position, value in [*enumerate(call.args), *((k.arg, k.value) for k in call.keywords)]:
        if not isinstance(value, (ast.Name, ast.Attribute)) or not _is_wrapper(module, call, call_name(value), wraps):
            continue
        for other, callee in program.resolve(call, module):
            parameters = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
            if parameters[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
                parameters = parameters[1:]
            name = parameters[position] if isinstance(position, int) and position < len(parameters) else position
            if isinstance(name, str):
                yield other, callee, name


def _saved_later(module: Module, call: ast.Call) -> bool:
    """`ckp = model.state_dict()` (or `ckp = {"state_dict": model.state_dict(), ...}`) then `torch.save(ckp, path)`
    in the same function."""
    parent = module.parents.get(call)
    while isinstance(parent, (ast.Dict, ast.List, ast.Tuple, ast.keyword)) or (
        isinstance(parent, ast.Call) and call_name(parent) == "dict"
    ):
        parent = module.parents.get(parent)  # a value of the checkpoint dictionary
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    return any(
        "save" in last_name(c).lower() and c.lineno > call.lineno and name in names_in(c)
        for c in module.calls_in(module.scope_of(call))
    )


# ---- DDP008 -----------------------------------------------------------------------------------------
def weights_only_false(program: Program) -> Iterator[Hit]:
    for module, call in program.calls_named("load"):
        if is_const(keyword(call, "weights_only"), False):
            yield module, call.lineno


# ---- DDP009 ---------------------------------------------------------------------------------------
def _events(
    program: Program, module: Module, function: ast.AST, depth: int = 2, within: Tuple[ast.AST, ...] = ()
) -> List[Tuple[str, int]]:
    """('unscale' | 'clip' | 'step', line) in source order, a helper's events at the line that calls it (not a
    helper's call back into a function already being read: its events are that function's own)."""
    within = (*within, function)
    events: List[Tuple[str, int]] = []
    for call in module.calls_in(function):
        name = last_name(call)
        if name == "unscale_":
            events.append(("unscale", call.lineno))
        elif name in ("clip_grad_norm_", "clip_grad_value_"):
            events.append(("clip", call.lineno))
        elif name == "step" and "scaler" in call_name(call).lower():
            events.append(("step", call.lineno))
        else:
            helpers = (program.resolve(call, module) or _the_only_method(program, call)) if depth > 0 else []
            if not helpers and name.lower().startswith("clip_grad"):
                events.append(
                    ("clip", call.lineno)
                )  # `self.clip_grad_norm(params)`: a clipping object of unknown class
            for other, callee in helpers:  # a helper's events happen at the line that calls it, in its order
                if not any(callee is f for f in within):
                    found = _events(program, other, callee, depth - 1, within)
                    events.extend((kind, call.lineno) for kind, _ in found)
    return events


def _the_only_method(program: Program, call: ast.Call) -> List[Tuple[Module, ast.FunctionDef]]:
    """`task_ref.on_before_optimization(opt_idx)` on an object of unknown class: the program's one method of that
    name, where it defines exactly one (NATSpeech's hook, which clips). Not a name nn.Module answers itself:
    `self._model.train()` is the model's, not the trainer's `train` (LSR-MP)."""
    if not isinstance(call.func, ast.Attribute) or isinstance(call.func.value, ast.Call):
        return []
    if call.func.attr in MODULE_API:
        return []
    found = program.functions.get(call.func.attr, [])
    if len(found) != 1:
        return []
    module, method = found[0]
    return [(module, method)] if isinstance(module.parents.get(method), ast.ClassDef) else []


def _scaled_backward(call: ast.Call) -> bool:
    """`scaler.scale(loss).backward()` (torch.amp's GradScaler; apex's context manager unscales by itself)."""
    func = call.func
    return (
        last_name(call) == "backward"
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and last_name(func.value) == "scale"
    )


def clip_before_unscale(program: Program) -> Iterator[Hit]:
    for module in program.modules:
        through = _scaled_through_helpers(program, module)
        for function, scaled in [*_scaled_backwards(module), *through]:  # (where the scaled loss is back-propagated)
            unscaled = False
            helpers = {c.lineno for c in scaled if not _scaled_backward(c)}  # (a helper that back-propagates:
            for kind, line in _events(program, module, function):  # its own clipping is read where it is)
                if kind == "clip" and line in helpers:
                    continue
                if kind == "unscale":
                    unscaled = True
                elif kind == "step":
                    unscaled = False
                elif kind == "clip" and not unscaled and not _only_unscaled_path(module, function, line, scaled):
                    yield module, line


def _scaled_through_helpers(program: Program, module: Module) -> List[Tuple[ast.FunctionDef, List[ast.Call]]]:
    """Each function of the module that calls a helper of the program that back-propagates a scaled loss (UniTabE's
    `self.backward_loss(loss)`, then `self.gradient_clip()`), with those calls: its clipping after them is read
    as after the backward."""
    helpers = {id(f) for m in program.modules for f, _ in _scaled_backwards(m)}
    if not helpers:
        return []
    found = []
    for function in module.functions:
        if id(function) in helpers:
            continue
        calls = [c for c in module.calls_in(function) if any(id(f) in helpers for _, f in program.resolve(c, module))]
        if calls:
            found.append((function, calls))
    return found


def _scaled_backwards(module: Module) -> List[Tuple[ast.FunctionDef, List[ast.Call]]]:
    """Each function of the module that back-propagates a scaled loss, with those backward calls (kept)."""

    def find() -> List[Tuple[ast.FunctionDef, List[ast.Call]]]:
        if "scale" not in module.source:
            return []
        found = []
        for function in module.functions:
            scaled = [c for c in module.calls_in(function) if _scaled_backward(c)]
            if scaled:
                found.append((function, scaled))
        return found

    return module.memo(("scaled backwards",), find)


def _only_unscaled_path(module: Module, function: ast.AST, line: int, scaled: List[ast.Call]) -> bool:
    """The clip at `line` is in an arm of an `if` whose other arm holds every scaled backward: on its path no
    GradScaler is live (the fp32 or apex branch beside the torch.amp one)."""
    clips = [c for c in module.calls_in(function) if c.lineno == line]
    if not clips:
        return False
    if _where_the_scaler_is_absent(module, clips[0], scaled):
        return True
    return all(
        _exclusive(module, clips[0], backward) or _opposite_arms_of_one_test(module, clips[0], backward)
        for backward in scaled
    )


def _opposite_arms_of_one_test(module: Module, a: ast.AST, b: ast.AST) -> bool:
    """`a` and `b` sit in opposite arms of two `if`s of the same test (`if config.use_amp: ...scale(loss).backward()`,
    later `if config.use_amp: ... else: clip`): the same run never takes both."""
    return bool(
        _arms_by_test(module, a).items()
        & {(t, "orelse" if arm == "body" else "body") for t, arm in _arms_by_test(module, b).items()}
    )


def _arms_by_test(module: Module, node: ast.AST) -> Dict[str, str]:
    found: Dict[str, str] = {}
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, ast.If):
            arm = _arm(parent, child)
            if arm != "test":
                found.setdefault(ast.dump(parent.test), arm)
        child = parent
    return found


def _where_the_scaler_is_absent(module: Module, clip: ast.Call, scaled: List[ast.Call]) -> bool:
    """The clip sits in the arm of an `if` where the scaler its backward uses is None (`else:` of `if scaler is not
    None:`, or `if scaler is None:`), even where the scaled backward is under another `if` of the same test."""
    scalers = {call_name(b.func.value.func.value) for b in scaled if _scaled_backward(b)}  # type: ignore[attr-defined]
    scalers.discard("")
    child: ast.AST = clip
    for parent in module.ancestors(clip):
        if isinstance(parent, ast.If):
            present = _tests_presence(parent.test, scalers)
            if present is not None and _arm(parent, child) == ("orelse" if present else "body"):
                return True
        child = parent
    return False


def _tests_presence(test: ast.expr, names: Set[str]) -> Optional[bool]:
    """True where `test` holds when the object is there (`scaler`, `scaler is not None`), False where it holds when
    it is not (`not scaler`, `scaler is None`), None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _tests_presence(test.operand, names)
        return None if inner is None else not inner
    if isinstance(test, (ast.Name, ast.Attribute)) and call_name(test) in names:
        return True
    compared = isinstance(test, ast.Compare) and len(test.ops) == 1 and is_const(test.comparators[0], None)
    if compared and call_name(test.left) in names and isinstance(test.ops[0], (ast.Is, ast.IsNot)):  # type: ignore[attr-defined]
        return isinstance(test.ops[0], ast.IsNot)  # type: ignore[attr-defined]
    return None


def _arm(branch: ast.If, child: ast.AST) -> str:
    if any(child is s for s in branch.body):
        return "body"
    return "orelse" if any(child is s for s in branch.orelse) else "test"


def _exclusive(module: Module, a: ast.AST, b: ast.AST) -> bool:
    """`a` and `b` sit in different arms of one `if`."""
    a_path = {id(p): child for child, p in zip([a, *module.ancestors(a)], module.ancestors(a))}
    child_b = b
    for parent in module.ancestors(b):
        if id(parent) in a_path and isinstance(parent, ast.If):
            arms = [_arm(parent, a_path[id(parent)]), _arm(parent, child_b)]
            return sorted(arms) == ["body", "orelse"]
        if id(parent) in a_path:
            return False
        child_b = parent
    return False


# ---- DDP010 ---------------------------------------------------------------------------------------
def _paired(module: Module, call: ast.Call, branch: ast.If) -> bool:
    """`if rank != 0: barrier()` ... `if rank == 0: barrier()` (the "main process first" idiom), or a context
    manager yielding between them — also a class's `__enter__` and `__exit__`, one waiting on the other ranks, the
    other on the chosen one (pretraining_different_gpt's `prioritize_thread`): the same collective on the other ranks
    elsewhere in the function."""
    scope = module.scope_of(call)
    for other in [*walk(scope), *_context_partner_nodes(module, scope)]:
        if other is call or not isinstance(other, ast.Call) or last_name(other) != last_name(call):
            continue
        other_branch = module.rank_branch(other)
        if other_branch is not None and other_branch is not branch:
            return True
        if other_branch is None and branch is not None:
            return True  # also called on every rank: the rank-0 call pairs with a later one elsewhere
    return both_arms_call(branch, last_name(call))


def _context_partner_nodes(module: Module, scope: ast.AST) -> List[ast.AST]:
    """For a class's `__enter__`, the nodes of its `__exit__` (and the other way round)."""
    names = {"__enter__": "__exit__", "__exit__": "__enter__"}
    owner = module.parents.get(scope)
    if not (isinstance(scope, ast.FunctionDef) and scope.name in names and isinstance(owner, ast.ClassDef)):
        return []
    partner = next((s for s in owner.body if isinstance(s, ast.FunctionDef) and s.name == names[scope.name]), None)
    return list(walk(partner)) if partner is not None else []


def collective_on_some_ranks(program: Program) -> Iterator[Tuple[Module, int]]:
    wrappers: Dict[int, list] = {}
    for module in program.modules:
        for call, branch in _calls_on_some_ranks(module):
            yield from _collective_at(program, module, call, branch, wrappers)
        yield from _collectives_after_an_early_return(program, module)


def _collectives_after_an_early_return(program: Program, module: Module) -> Iterator[Hit]:
    """`if rank != 0: return` at the top of a function, then a collective (GeorgianTTS's `save_checkpoint`: FSDP's
    full `state_dict()` under `state_dict_type(FULL_STATE_DICT)`): only rank 0 gets there, and the others never
    join it — not where the early return's own branch makes the same call first."""
    for call in module.calls:
        function = module.function_of(call)
        if function is None or not is_collective(call, module) or module.rank_branch(call) is not None:
            continue
        if _on_a_group_of_its_own(call) or not program.runs(module, call.lineno):
            continue
        exit_branch = _early_return_off_main(program, module, function, call.lineno)
        if exit_branch is not None and not any(
            isinstance(n, ast.Call) and last_name(n) == last_name(call) for n in walk(exit_branch)
        ):
            yield module, call.lineno


def _early_return_off_main(program: Program, module: Module, function: ast.AST, line: int) -> Optional[ast.If]:
    """The `if not is_main: return` before `line` that makes the rest of the function rank 0's."""
    for statement in getattr(function, "body", []):
        if statement.lineno >= line:
            break
        if (
            isinstance(statement, ast.If)
            and any(isinstance(s, ast.Return) for s in statement.body)
            and not _compares_with_a_count(statement.test)
            and program.returns_early_off_main(function, statement.lineno + 1, module)  # type: ignore[arg-type]
        ):
            return statement
    return None


def _compares_with_a_count(test: ast.expr) -> bool:
    """`if rank >= size: return` (CAGNET): the ranks past a count leave — none where the count is the world's —
    not every rank but 0."""
    return any(
        isinstance(node, ast.Compare)
        and any(not isinstance(c, (ast.Constant, ast.List, ast.Tuple)) for c in node.comparators)
        for node in walk(test)
    )


def _calls_on_some_ranks(module: Module) -> List[Tuple[ast.Call, ast.If]]:
    """The module's calls inside a rank test, with the innermost such `if` (most calls are outside any): kept for
    every program that reads the module; not those on a single-process arm (`if args.local_rank == -1:
    evaluate(...)`: no other rank exists there)."""

    def find() -> List[Tuple[ast.Call, ast.If]]:
        if not any(module.selects_ranks_at(branch) for branch in module.of_type(ast.If)):
            return []  # (most modules: no call of theirs needs a walk up its ancestors)
        found = []
        for call in module.calls:
            branch = module.rank_branch(call)
            if branch is not None and not module.on_a_single_process_arm(call):
                found.append((call, branch))
        return found

    return module.memo(("calls on some ranks",), find)


def _collective_at(
    program: Program, module: Module, call: ast.Call, branch: ast.If, wrappers: Dict[int, list]
) -> Iterator[Hit]:
    """A call on some ranks only that is, or runs, a collective the other ranks never reach."""
    collective = is_collective(call, module)
    callees = [] if collective else program.resolve(call, module) or _bound_in_a_training_loop(program, module, call)
    if id(module) not in wrappers:
        wrappers[id(module)] = _broadcasting_wrappers(module, program)
    forward = not collective and _wrapper_forward(program, module, call, wrappers[id(module)])
    if not (collective or callees or _is_compute(call) or forward):
        return  # a library's call: no collective, whatever branch holds it
    if not collective and callees and both_arms_call(branch, last_name(call)):
        return  # `if rank == 0: train(...)` / `else: train(...)`: every rank runs the function
    if forward:
        yield module, call.lineno
        return
    if collective:
        if not _paired(module, call, branch) and not _on_a_group_of_its_own(call):
            yield module, call.lineno
        return
    if _metric_compute(module, call):
        yield module, call.lineno
        return
    for other, callee in callees:
        if callee.name.startswith(("is_", "get_")) or program.returns_early_off_main(callee):
            continue
        if program.reaches_collective(other, callee) or _runs_a_kept_wrapper(program, other, callee, wrappers):
            yield module, call.lineno
            return


def _bound_in_a_training_loop(program: Program, module: Module, call: ast.Call) -> List[Tuple[Module, ast.FunctionDef]]:
    """The method `trainer.evaluate(...)` runs (`trainer = SimpleDDPTrainer(ddp_model, ...)`, DIN_v2), where the
    innermost loop around the call also trains, outside any loop of its own (the epoch loop): there the method's
    forward is the first after a training step, the one that broadcasts rank 0's buffers."""
    loop = next((p for p in module.ancestors(call) if isinstance(p, (ast.For, ast.While))), None)
    if loop is None or not any(
        last_name(c) == "backward" or last_name(c).startswith("train") for c in _calls_of_the_loop(loop)
    ):
        return []
    return program.bound_methods(call, module)


def _calls_of_the_loop(loop: ast.AST) -> Iterator[ast.Call]:
    """The calls in the loop's body, not in a loop inside it."""
    for child in ast.iter_child_nodes(loop):
        if isinstance(child, (ast.For, ast.While)):
            continue
        if isinstance(child, ast.Call):
            yield child
        yield from _calls_of_the_loop(child)


def _on_a_group_of_its_own(call: ast.Call) -> bool:
    """A collective (or a DDP wrapper) given a process group the program made (`group=nccl_group`,
    `process_group=nccl_group` with `nccl_group = dist.new_group(ranks=...)`): meant for that group's members, which a
    rank test may be what selects (tgl's trainers `if args.local_rank < args.num_gpus:`)."""
    group = keyword(call, "group") or keyword(call, "process_group")
    if group is None and last_name(call) == "barrier" and call.args:
        group = call.args[0]  # `dist.barrier(group)` (CAGNET: the ranks past the group's size have left)
    return group is not None and not is_const(group, None) and "WORLD" not in call_name(group)


def _runs_a_kept_wrapper(
    program: Program, module: Module, function: ast.FunctionDef, wrappers: Dict[int, list]
) -> bool:
    """A method that runs the forward of the wrapper its object keeps (`self.model(images)` in `test()`, with
    `self.model` the DDP model the object was made with)."""
    if id(module) not in wrappers:
        wrappers[id(module)] = _broadcasting_wrappers(module, program)
    kept = [wrap for wrap in wrappers[id(module)] if wrap[0].startswith("self.")]
    return bool(kept) and any(
        isinstance(inner.func, ast.Attribute) and _is_wrapper(module, inner, call_name(inner.func), kept)
        for inner in module.calls_in(function)
    )


def _broadcasting_wrappers(module: Module, program: Program) -> list:
    """The module's DDP wrappers (see `_wraps`) made without `broadcast_buffers=False`: their forward broadcasts rank
    0's buffers (BatchNorm statistics) to every rank first, a collective no line of the program names."""
    if not module.spells("DistributedDataParallel", "DDP"):
        return []
    quiet = {
        node.lineno
        for node in module.of_type(ast.Assign)
        if isinstance(node.value, ast.Call)
        and (
            is_const(keyword(_unmoved(node.value), "broadcast_buffers"), False)
            or _apexs(module, _unmoved(node.value))  # apex's wrapper: its forward broadcasts nothing
            or _on_a_group_of_its_own(_unmoved(node.value))  # (its forward is that group's collective)
            or _wraps_a_model_without_buffers(program, module, node, node.value)
        )
    }
    return [wrap for wrap in _wraps(module, program) if wrap[1] not in quiet]


def _apexs(module: Module, made: ast.Call) -> bool:
    """`DDP(model, ...)` with `from apex.parallel import DistributedDataParallel as DDP` (or `apex.parallel.DDP`):
    apex all-reduces gradients in the backward, and its forward makes no collective call."""
    root = call_name(made).split(".")[0]
    return root == "apex" or module.import_tops.get(root) == "apex"


# torch.nn layers that hold no buffers (BatchNorm's running statistics are what DDP's forward broadcasts)
BUFFERLESS_LAYERS = {
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Linear", "Bilinear",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "ELU", "Tanh", "Sigmoid",
    "Softmax", "LogSoftmax", "Dropout", "Dropout2d", "Flatten", "Identity", "Embedding", "LayerNorm", "GroupNorm",
    "LSTM", "GRU", "RNN", "MultiheadAttention", "Sequential", "ModuleList", "ModuleDict", "Parameter", "Upsample",
}  # fmt: skip


def _unmoved(call: ast.Call) -> ast.Call:
    """`DDP(model, ...).to(device)` -> `DDP(model, ...)`: the object made, before `.to()`/`.cuda()` moved it."""
    while (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in ("to", "cuda")
        and isinstance(call.func.value, ast.Call)
    ):
        call = call.func.value
    return call


def _wraps_a_model_without_buffers(program: Program, module: Module, node: ast.Assign, wrap: ast.Call) -> bool:
    """`model = DDP(model, ...)` where `model = MnistCNN().to(device)` and the program's `MnistCNN` builds only
    layers without buffers (convolutions, linear layers, pooling, dropout; no BatchNorm, no `register_buffer`): its
    forward has nothing to broadcast, so no collective runs in it."""
    wrap = _unmoved(wrap)
    if last_name(wrap) not in ("DistributedDataParallel", "DDP") or not wrap.args:
        return False
    inner = wrap.args[0]
    made = [inner]
    if isinstance(inner, ast.Name):
        scope = module.scope_of(node)
        made = [
            a.value
            for a in module.assignments(inner.id)
            if a.lineno < node.lineno and module.scope_of(a) is scope and a is not node
        ]
    classes = []
    for value in made:
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Call)
        ):
            value = value.func.value  # `.to(device)`, `.cuda()`
        if not isinstance(value, ast.Call) or not program.classes.get(last_name(value)):
            return False  # made by a library or a function: its buffers are unknown
        classes.append(last_name(value))
    return bool(classes) and all(_builds_no_buffers(program, name, 3) for name in classes)


def _builds_no_buffers(program: Program, class_name: str, depth: int) -> bool:
    for other, owner in program.classes.get(class_name, []):
        init = next((f for f in owner.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None or depth == 0:
            return False
        for call in other.calls_in(init):
            name = last_name(call)
            if name in BUFFERLESS_LAYERS or name in ("__init__", "super", "zeros", "ones", "randn", "rand", "empty"):
                continue
            if program.classes.get(name) and _builds_no_buffers(program, name, depth - 1):
                continue
            return False  # BatchNorm, `register_buffer`, or something unknown
    return bool(program.classes.get(class_name))


def _wrapper_forward(program: Program, module: Module, call: ast.Call, wraps: list) -> bool:
    """`call` runs the wrapper's forward: `ddp_model(x)`, or `evaluate(model=ddp_model, ...)` whose function calls
    that parameter."""
    if not wraps:
        return False
    if isinstance(call.func, (ast.Name, ast.Attribute)) and _is_wrapper(module, call, call_name(call.func), wraps):
        return True
    return any(
        any(call_name(inner.func) == parameter for inner in other.calls_in(callee))
        for other, callee, parameter in _wrapper_passed(program, module, call, wraps)
    )


def _metric_compute(module: Module, call: ast.Call) -> bool:
    """`acc.compute()` on a torchmetrics metric (`acc = Accuracy(...)`, Accuracy from torchmetrics): compute()
    gathers every rank's state, a collective (not where the metric was made with `sync_on_compute=False`)."""
    if not _is_compute(call):
        return False
    owner = last_name(call.func.value)  # type: ignore[attr-defined]
    for node in module.of_type(ast.Assign):
        value = node.value
        if not isinstance(value, ast.Call) or not any(last_name(t) == owner for t in node.targets):
            continue
        made = call_name(value)
        library = made.startswith("torchmetrics.") or module.import_tops.get(made.split(".")[0]) == "torchmetrics"
        if library and not is_const(keyword(value, "sync_on_compute"), False):
            return True
    return False


def _is_compute(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "compute" and not call.args


# ---- DDP011 ---------------------------------------------------------------------------------------
TCP_ADDRESS = re.compile(r"^tcp://[^\s]*:\d{2,5}/?$")
# `--master-port`, `--port`, `--portNum`, `--ddp.dist-port` (the option's name says which port only with a prefix)
PORT_OPTIONS = re.compile(
    r"^--?(?:[a-z]+\.)?(master|dist|distributed|ddp|rdzv|tcp|main)?[_-]?port(?:[_-]?(?:num|number|no))?$", re.IGNORECASE
)


def hard_coded_port(program: Program) -> Iterator[Hit]:
    literals = [hit for m in program.modules if "tcp://" in m.source for hit in _tcp_literals(program, m)]
    yield from literals
    written = {(id(m), line) for m, line in literals}
    for module in program.modules:
        for node in _port_sites(module):
            if isinstance(node, ast.Assign):
                if not _may_make_a_group(program):
                    continue  # `os.environ['MASTER_PORT'] = '29500'` where nothing makes a process group to read it
                fixed = _fixed_port(program, module, node)
                if fixed is not None and not _only_when_unset(module, node):
                    yield fixed
            elif last_name(node) == "init_process_group":
                method = _port_value(program, module, node, keyword(node, "init_method") or ast.Constant(None))
                literal = isinstance(method, ast.Constant) and str(method.value).startswith("tcp://")
                literal = literal or _joined_with_a_fixed_port(method)
                if _reported_literal(program, method, written):
                    continue  # `init_method=url` with `url = 'tcp://localhost:10000'`: the port is reported there
                if literal or _configured(program, module, node, method, address=True):
                    yield module, node.lineno
                else:
                    yield from _field_with_a_fixed_port(program, method)
            elif last_name(node) == "TCPStore":
                port = _port_value(program, module, node, argument(node, 1, "port") or ast.Constant(None))
                if isinstance(port, ast.Constant) and isinstance(port.value, (int, str)) and port.value:
                    yield module, node.lineno
            elif _defines_an_option(node) and _option_with_a_fixed_port(program, node):
                yield module, node.lineno  # `--master-port` defaulting to a fixed number


def _may_make_a_group(program: Program) -> bool:
    """The program makes a process group or a DDP wrapper (also in code it is not seen to run: a notebook's
    `train_distributed_model()` spawning the worker that makes it), or imports a framework that may make one
    (KoGPT2-Summarization's single-process `train.py` sets `MASTER_PORT` and has no process group anywhere)."""
    return (
        program.distributed
        or bool(program.calls_named("init_process_group"))
        or any(name.split(".")[0] in GROUP_MAKERS for module in program.modules for name in module.import_names)
    )


def _field_with_a_fixed_port(program: Program, method: ast.expr) -> Iterator[Hit]:
    """`init_method=f"tcp://{self.config.master_addr}:{self.config.master_port}"` where a class of the program
    declares `master_port: str = "29500"` (a dataclass of settings, HagAli22's `DDPConfig`): the port is fixed unless
    a caller sets the field; reported where it is declared."""
    if not (isinstance(method, ast.JoinedStr) and method.values and is_const_str(method.values[0], "tcp://")):
        return
    last = method.values[-1]
    port = last.value if isinstance(last, ast.FormattedValue) else None
    if not (isinstance(port, ast.Attribute) and "port" in port.attr.lower()):
        return
    for found in program.classes.values():
        for module, node in found:
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id == port.attr
                    and isinstance(statement.value, ast.Constant)
                    and re.fullmatch(r"\d{2,5}", str(statement.value.value)) is not None
                ):
                    yield module, statement.lineno


def _reported_literal(program: Program, method: ast.AST, written: Set[Tuple[int, int]]) -> bool:
    """The address a process group is given is a `tcp://` literal written elsewhere in the program and reported
    where it is written."""
    for module in program.modules:
        if method in module.parents:
            return (id(module), getattr(method, "lineno", 0)) in written
    return False


def _port_sites(module: Module) -> List[Union[ast.Assign, ast.Call]]:
    """Where a module may fix a port: `os.environ["MASTER_PORT"] = ...`, `init_process_group`, `TCPStore` and
    option definitions (found once per module, asked by every program that reads it)."""

    def find() -> List[Union[ast.Assign, ast.Call]]:
        assigns = module.of_type(ast.Assign) if "MASTER_PORT" in module.source else []
        found: List[Union[ast.Assign, ast.Call]] = [node for node in assigns if _environ_port(node)]
        return found + [
            call
            for call in module.calls
            if last_name(call) in ("init_process_group", "TCPStore") or _defines_an_option(call)
        ]

    return module.memo(("port sites",), find)


def _fixed_port(program: Program, module: Module, node: ast.Assign) -> Optional[Hit]:
    """Where `os.environ["MASTER_PORT"] = ...` gets a fixed port: the assignment, for a literal, a default of its own
    function's parameter that a caller leaves, or a configured value that the repository's YAML or JSON files fix;
    the default itself where it is a caller's (the number to change is there); None for a port not fixed."""
    value = _port_value(program, module, node, node.value)
    if isinstance(value, ast.Constant) or _number_plus_a_fixed_parameter(program, module, value):
        return module, node.lineno
    if isinstance(value, ast.IfExp) and all(isinstance(arm, ast.Constant) for arm in (value.body, value.orelse)):
        return module, node.lineno  # `'8888' if args.backend == 'nccl' else '8989'` (RAMiT): fixed either way
    source = _default_used(program, module, value)
    if source is not None:
        return (module, node.lineno) if source[0] is module and source[1] in _lines_of(module, node) else source
    return (module, node.lineno) if _configured(program, module, node, value, address=False) else None


def _number_plus_a_fixed_parameter(program: Program, module: Module, value: ast.expr) -> bool:
    """`str(12355 + unique_num)` where every call the program runs gives `unique_num` a number, also through
    `mp.spawn(main, args=(world_size, cfg, 0))` and a caller's own such parameter (tauLDR): the port is fixed."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return False
    sides = [value.left, value.right]
    numbers = [side for side in sides if isinstance(side, ast.Constant) and _is_number(side.value)]
    names = [side for side in sides if isinstance(side, ast.Name)]
    return len(numbers) == 1 and len(names) == 1 and _always_a_number(program, module, names[0], 2)


def _is_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _always_a_number(program: Program, module: Module, name: ast.Name, depth: int) -> bool:
    """Every call the program runs of the function whose parameter `name` is gives it a number (a caller's own
    parameter followed `depth` levels up); False where no call is seen or one is not read."""
    return _every_caller_gives(
        program,
        module,
        name,
        name.id,
        lambda caller, _, given: (
            (isinstance(given, ast.Constant) and _is_number(given.value))
            or (isinstance(given, ast.Name) and depth > 0 and _always_a_number(program, caller, given, depth - 1))
        ),
        handed=True,
    )


def _every_caller_gives(
    program: Program,
    module: Module,
    at: ast.AST,
    name: str,
    fits: Callable[[Module, ast.Call, Optional[ast.expr]], bool],
    handed: bool = False,
) -> bool:
    """`name` is a parameter of the function around `at`, and every call of it the program runs gives it a value
    `fits(caller's module, call, value)` accepts — with `handed`, also `mp.spawn(function, args=(...))`'s tuple;
    False where no call is seen."""
    function = module.function_of(at)
    if function is None or name not in _parameter_names(function):
        return False
    sites = program.running_sites(module, function, handed=handed)
    return bool(sites) and all(
        fits(
            caller,
            site,
            _spawned_value(function, site, name) if _starts(site, function) else given_value(function, site, name),
        )
        for caller, site in sites
    )


def _starts(call: ast.Call, function: ast.FunctionDef) -> bool:
    """`call` is given `function` itself to run, not called as it."""
    return call_name(call) != function.name and last_name(call) != function.name


def _spawned_value(function: ast.FunctionDef, call: ast.Call, name: str) -> Optional[ast.expr]:
    """What `mp.spawn(function, args=(...))` gives the parameter `name`: the process index comes first, then the
    tuple's items; None for any other starter or a tuple not written out."""
    if last_name(call) not in PROCESS_STARTERS:
        return None
    given = argument(call, 1, "args")
    parameters = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    position = parameters.index(name) - 1 if name in parameters else -1
    if not isinstance(given, ast.Tuple) or not 0 <= position < len(given.elts):
        return None
    return given.elts[position]


def _lines_of(module: Module, node: ast.AST) -> range:
    function = module.function_of(node)
    return range(function.lineno, (function.end_lineno or function.lineno) + 1) if function else range(0)


def _default_used(program: Program, module: Module, value: ast.expr, depth: int = 3) -> Optional[Hit]:
    """`def init_distributed(port=40111): ... os.environ['MASTER_PORT'] = str(port)`, called somewhere without a
    port, or handed to a command-line maker (`fire.Fire(run)` makes `--port` an option with that default): the
    default is the port (its place is returned). Also a parameter without a default that the callers fill from their
    own such parameter (jukebox's `run(port=29500)` -> `setup_dist_from_mpi(port=port)` -> `_setup_dist_from_mpi(...,
    port, ...)`)."""
    function = module.function_of(value)
    if function is None or not isinstance(value, ast.Name) or value.id not in _parameter_names(function):
        return None
    parameters = function.args.args
    defaults = dict(
        zip([a.arg for a in parameters[len(parameters) - len(function.args.defaults) :]], function.args.defaults)
    )
    default = defaults.get(value.id)
    position = call_position(function, value.id)
    sites = program.sites_of(function.name)
    left = any(argument(site, position, value.id) is None for _, site in sites) or _made_a_command(program, function)
    if isinstance(default, ast.Constant) and str(default.value).isdigit() and left:
        return module, default.lineno
    for site_module, site in sites if depth > 0 else []:
        given = argument(site, position, value.id)
        found = _default_used(program, site_module, given, depth - 1) if isinstance(given, ast.Name) else None
        if found is not None:
            return found
    return None


def _parameter_names(function: ast.FunctionDef) -> Set[str]:
    return {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}


def _made_a_command(program: Program, function: ast.FunctionDef) -> bool:
    """`fire.Fire(run)`, `typer.run(main)`: the function's parameters are the command line's options."""
    return any(
        call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == function.name
        for _, call in program.calls_named("Fire", "run")
        if last_name(call) == "Fire" or call_name(call) == "typer.run"
    )


def _configured(program: Program, module: Module, at: ast.AST, value: ast.expr, address: bool) -> bool:
    """A port (`address`: an init_method) read from a configuration whose YAML or JSON files in the program's
    repository fix it: `init_method=hp.dist_config.dist_url` with `dist_url: "tcp://localhost:54321"` under `dist_config:`,
    or a `port` parameter filled from `**opt['dist_params']` with `port: 29500` under `dist_params:`."""
    return bool(_configured_settings(program, module, at, value, address))


def _configured_settings(
    program: Program, module: Module, at: ast.AST, value: ast.expr, address: bool
) -> List[Setting]:
    entry = program.modules[0].file if program.modules else Path()
    if entry == Path() or not entry.is_absolute():
        return []  # source given as text: no repository to read
    root = repository_root(entry.parent)
    return [
        s for keys in _config_keys(program, module, at, value, depth=3) for s in fixed_settings(keys, root, address)
    ]


def _config_keys(program: Program, module: Module, at: ast.AST, value: ast.expr, depth: int) -> List[Tuple[str, ...]]:
    """The key paths a value may come from: `hp.dist_config.dist_url` -> (dist_config, dist_url), `cfg["port"]`
    and `cfg.get("port")` -> (port,); a parameter: what its callers pass (`**opt["dist_params"]` -> (dist_params,
    port)), through `**kwargs` passed on, a few calls deep."""
    keys = _chain(value, module)
    if keys:
        return [keys, *((*above, *keys) for above in _keys_above(program, module, at, value, depth))]
    function = module.function_of(at)
    if depth <= 0 or function is None or not isinstance(value, ast.Name):
        return []
    return _parameter_keys(program, function, value.id, depth)


def _parameter_keys(program: Program, function: ast.FunctionDef, name: str, depth: int) -> List[Tuple[str, ...]]:
    parameters = [a.arg for a in function.args.args + function.args.kwonlyargs]
    by_kwargs = function.args.kwarg is not None and function.args.kwarg.arg == name
    if name not in parameters and not by_kwargs:
        return []
    position = call_position(function, name)
    found: List[Tuple[str, ...]] = []
    for caller, site in program.sites_of(function.name):
        given = None if by_kwargs else argument(site, position, name)
        if given is not None:
            found += _config_keys(program, caller, site, _port_value(program, caller, site, given), depth - 1)
            continue
        for spread in (kw.value for kw in site.keywords if kw.arg is None):  # f(..., **opt["dist_params"])
            source = _last_assignment(caller, site, spread)
            keys = _chain(source, caller)
            if keys:
                found.append(keys if by_kwargs else (*keys, name))
                continue
            outer = caller.function_of(site)
            kwargs = outer.args.kwarg.arg if outer is not None and outer.args.kwarg is not None else None
            if outer is not None and kwargs and is_name(source, kwargs) and depth > 1:  # def f(**kwargs): g(**kwargs)
                found += [(*k, name) for k in _parameter_keys(program, outer, kwargs, depth - 1)]
    return found


def _keys_above(program: Program, module: Module, at: ast.AST, value: ast.AST, depth: int) -> List[Tuple[str, ...]]:
    """The keys the configuration object itself sits under: `hp.dist_url` in `train(rank, args, hp)`, called with
    `hp = get_config_from_file(args.config).hparams` (text2semantic_t5): (hparams,)."""
    base, _ = _split_chain(value)
    if depth <= 0 or not isinstance(base, ast.Name):
        return []
    held = _last_assignment(module, at, base)
    if held is not base:
        return [k for k in _config_path(program, module, at, held, depth - 1) if k]
    function = module.function_of(at)
    if function is None or base.id in ("self", "cls"):
        return []  # (an object's own settings: its constructions say nothing of them here)
    if base.id not in [a.arg for a in function.args.args + function.args.kwonlyargs]:
        return []
    position = call_position(function, base.id)
    found: List[Tuple[str, ...]] = []
    for caller, site in program.sites_of(function.name):
        given = argument(site, position, base.id)
        if given is not None:
            found += [k for k in _config_path(program, caller, site, given, depth - 1) if k]
    return found


def _config_path(program: Program, module: Module, at: ast.AST, node: ast.AST, depth: int) -> List[Tuple[str, ...]]:
    """The keys from where a configuration is loaded down to `node`: `load_config(path).hparams` -> (hparams,); a
    name or parameter holding one, followed back."""
    base, keys = _split_chain(node)
    if keys is None:
        return []
    if isinstance(base, ast.Call):
        return [keys]
    return [(*above, *keys) for above in _keys_above(program, module, at, node, depth)]


def _split_chain(node: ast.AST) -> Tuple[ast.AST, Optional[Tuple[str, ...]]]:
    """`cfg.hparams["train"]` -> (`cfg`, (hparams, train)); keys None where one is computed."""
    keys: List[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            keys.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
                return node, None
            keys.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Call) and last_name(node) == "get" and isinstance(node.func, ast.Attribute):
            if not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                return node, None
            keys.append(node.args[0].value)
            node = node.func.value
        else:
            return node, tuple(reversed(keys))


def _chain(node: ast.expr, module: Module) -> Tuple[str, ...]:
    """The keys of a configuration read as attributes, string subscripts or `.get("key")` below a local name;
    () for anything else (a module's constant, an environment variable, a computed key)."""
    base, keys = _split_chain(node)
    if not keys or not isinstance(base, ast.Name) or base.id in module.imported or base.id in ("os", "environ"):
        return ()
    return keys


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _rendezvous_port(program: Program, option: ast.Call) -> bool:
    """A plain `--port` option is the rendezvous port where its value reaches `MASTER_PORT`, an init_method or a
    `tcp://` address (not a visdom or TensorBoard port)."""
    name = option_dest(option)  # argparse's own `dest` for `--portNum`
    for module in program.modules:
        for node in module.of_type(ast.Attribute, ast.Name, ast.Subscript):  # args.port, a parameter `port`, or
            if not _spells(node, name):  # `config["port"]`, a configuration the value was handed over in
                continue
            for parent in module.ancestors(node):
                if isinstance(parent, ast.stmt):
                    if isinstance(parent, ast.Assign) and _environ_port(parent):
                        return True
                    break
                if isinstance(parent, ast.Call) and last_name(parent) in ("init_process_group", "TCPStore"):
                    return True
                if _builds_a_tcp_address(parent) or _environ_entry(parent, node):
                    return True
    return False


def _spells(node: ast.AST, name: str) -> bool:
    """`args.NAME`, `NAME` or `config["NAME"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr == name
    if isinstance(node, ast.Name):
        return node.id == name
    return isinstance(node, ast.Subscript) and is_const(node.slice, name)


def _environ_entry(parent: ast.AST, node: ast.AST) -> bool:
    """`os.environ.update({'MASTER_PORT': args.master.split(':')[-1], ...})`: the value under the MASTER_PORT key."""
    return isinstance(parent, ast.Dict) and any(
        is_const(key, "MASTER_PORT") and any(n is node for n in walk(value))
        for key, value in zip(parent.keys, parent.values)
    )


def _builds_a_tcp_address(node: ast.AST) -> bool:
    """`f"tcp://{ip}:{port}"`, `'tcp://' + ip + ':' + port`, `'tcp://{}:{}'.format(ip, port)` or
    `'tcp://%s:%s' % (ip, port)`: an expression that makes an init_method address."""
    if isinstance(node, ast.JoinedStr):
        return any(is_const_str(v, "tcp://") for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = node.left
        while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add):
            left = left.left
        return is_const_str(left, "tcp://")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return is_const_str(node.func.value, "tcp://")
    return False


def _environ_port(node: ast.Assign) -> bool:
    return any(
        isinstance(t, ast.Subscript) and call_name(t.value).endswith("environ") and is_const(t.slice, "MASTER_PORT")
        for t in node.targets
    )


def _only_when_unset(module: Module, node: ast.Assign) -> bool:
    """`if "MASTER_PORT" not in os.environ:` (or `if not os.environ.get("MASTER_PORT"):`) around the assignment: a
    default a launcher's value overrides, as `os.environ.setdefault` is."""
    for parent in module.ancestors(node):
        if not isinstance(parent, ast.If) or not any(node is s or s in module.ancestors(node) for s in parent.body):
            continue
        test = parent.test
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.ops[0], ast.NotIn)
            and is_const(test.left, "MASTER_PORT")
            and call_name(test.comparators[0]).endswith("environ")
        ):
            return True
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call):
            got = test.operand
            if last_name(got) in ("get", "getenv") and got.args and is_const(got.args[0], "MASTER_PORT"):
                return True
    return False


def _port_value(program: Program, module: Module, at: ast.AST, value: ast.expr) -> ast.expr:
    """The constant a port or address comes from: itself, `str(...)` of it, a name assigned it in the same scope, or
    a module constant."""
    if isinstance(value, ast.Call) and last_name(value) == "str" and value.args:
        value = value.args[0]
    return program.constant(_last_assignment(module, at, value))


def _tcp_literals(program: Program, module: Module) -> Iterator[Hit]:
    """`"tcp://127.0.0.1:23456"` or `f"tcp://{host}:23456"` anywhere but in help text, docstrings, an
    init_process_group's own argument (reported at the call) and the default of an option the program never reads
    (`--dist-url` beside `init_method="env://"`)."""
    for node in module.of_type(ast.Constant, ast.JoinedStr, ast.BinOp):
        if isinstance(node, ast.BinOp):
            if isinstance(module.parents.get(node), ast.BinOp) or not _joined_with_a_fixed_port(node):
                continue
        elif isinstance(node, ast.Constant):
            if not (isinstance(node.value, str) and TCP_ADDRESS.match(node.value)):
                continue
            if isinstance(module.parents.get(node), ast.JoinedStr):
                continue
            joined = module.parents.get(node)
            if isinstance(joined, ast.BinOp) and isinstance(joined.op, ast.Add) and joined.left is node:
                continue  # `'tcp://127.0.0.1:123' + str(random.randint(0, 9))`: the port goes on past the literal
        else:
            parts = node.values
            first, last = parts[0], parts[-1]
            if not is_const_str(first, "tcp://"):
                continue
            literal = isinstance(last, ast.Constant) and re.fullmatch(r":\d{2,5}/?", str(last.value))
            if not (literal or _computed_port(module, node, parts)):
                continue
        parent = module.parents.get(node)
        if isinstance(parent, ast.Expr) or (isinstance(parent, ast.keyword) and parent.arg in ("help", "init_method")):
            continue
        if isinstance(parent, ast.keyword) and parent.arg == "default" and _option_never_read(program, module, parent):
            continue
        yield module, node.lineno


def _joined_with_a_fixed_port(node: ast.expr) -> bool:
    """`'tcp://' + master_ip + ':6585'`: an address joined from parts, the host computed, the port written in."""
    parts: List[ast.expr] = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts.insert(0, node.right)
        node = node.left
    parts.insert(0, node)
    last = parts[-1]
    return (
        len(parts) > 1
        and is_const_str(parts[0], "tcp://")
        and isinstance(last, ast.Constant)
        and bool(re.fullmatch(r".*:\d{2,5}/?", str(last.value)))
    )


def _option_never_read(program: Program, module: Module, default: ast.keyword) -> bool:
    """The `add_argument` this default belongs to names an option no code of the program reads (`args.dist_url`)."""
    option = module.parents.get(default)
    if not (isinstance(option, ast.Call) and last_name(option) == "add_argument"):
        return False
    dest = keyword(option, "dest")
    if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
        names = {dest.value}
    else:
        flag = _option_flag(option)
        names = {flag.lstrip("-").replace("-", "_")} if flag else set()
    return bool(names) and not any(names & m.words for m in program.modules)


ABSL_DEFINES = ("DEFINE_string", "DEFINE_integer")
HOST_AND_PORT = re.compile(r"[\w.\-]+:\d{2,5}")  # `127.0.0.1:1234`, a `--dist_address` default


def _defines_an_option(call: ast.Call) -> bool:
    """`parser.add_argument('--port', ...)` or absl's `flags.DEFINE_string("master_port", "12355", ...)`."""
    return (
        last_name(call) in ("add_argument", *ABSL_DEFINES)
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
    )


def _option_with_a_fixed_port(program: Program, option: ast.Call) -> bool:
    """A port option defaulting to a number (`--master-port`, or a plain `--port` whose value reaches the
    rendezvous), or an address option defaulting to `host:port` whose value becomes a `tcp://` address — where the
    program reads the value other than to print it."""
    absl = last_name(option) in ABSL_DEFINES
    default = argument(option, 1, "default") if absl else keyword(option, "default")
    flag = _option_flag(option)
    text = str(default.value) if isinstance(default, ast.Constant) else ""
    named = PORT_OPTIONS.match(flag)  # `'-P', '--port'`: the long one
    if not (named and text.isdigit()) and not HOST_AND_PORT.fullmatch(text):
        return False
    if text.isdigit() and int(text) == 0:
        return False  # port 0 (LSR-MP's `default="0000"`): no port of its own; a listener given it takes a free one
    if _only_logged(program, option):
        return False  # (a `--master_port` only printed: the launcher's port is what is used)
    return bool(named and named.group(1)) or _rendezvous_port(program, option)


def _only_logged(program: Program, option: ast.Call) -> bool:
    """The option's value is read, and only inside log calls (`print(f"... {args.master_port}")`). (An option read
    nowhere stays a finding: a launcher or a config may pass its value on by name.)"""
    name = option_dest(option)
    reads = [
        (module, node)
        for module in program.modules
        if name in module.words
        for node in module.of_type(ast.Attribute)
        if node.attr == name
    ]
    return bool(reads) and all(
        any(isinstance(p, ast.Call) and _logs(p) for p in module.ancestors(node)) for module, node in reads
    )


def _option_flag(option: ast.Call) -> str:
    """The flag an `add_argument` call takes its `dest` from: the first long one (`'-P', '--port'`: `--port`), or
    the first where there is none."""
    if last_name(option) in ABSL_DEFINES:
        return "--" + str(option.args[0].value) if option.args and isinstance(option.args[0], ast.Constant) else ""
    flags = [a.value for a in option.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [f for f in flags if f.startswith("--")] or flags
    return longs[0] if longs else ""


PORT_ARITHMETIC = {"os", "getuid", "sys", "platform", "hash", "int", "abs"}


def _computed_port(module: Module, at: ast.JoinedStr, parts: List[ast.expr]) -> bool:
    """`f"tcp://127.0.0.1:{port}"` with `port = 2**15 + hash(os.getuid()) % 2**14`: computed, but the same number
    for every job of the user (two jobs on a node collide as with a literal)."""
    if len(parts) < 2 or not isinstance(parts[-1], ast.FormattedValue):
        return False
    before = parts[-2]
    if not (isinstance(before, ast.Constant) and str(before.value).endswith(":")):
        return False
    value = _last_assignment(module, at, parts[-1].value)
    if value is parts[-1].value:  # a parameter, an option, nothing assigned here
        return False
    numbers = any(isinstance(n, ast.Constant) and type(n.value) is int for n in walk(value))
    return numbers and names_in(value) <= PORT_ARITHMETIC


def is_const_str(node: ast.AST, prefix: str) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefix)


# ---- DDP012 ---------------------------------------------------------------------------------------
def sqrt_world_clip(program: Program) -> Iterator[Hit]:
    for module, clip in program.calls_named("clip_grad_norm_"):
        limit = argument(clip, 1, "max_norm")
        if limit is None:
            continue
        names = names_in(_last_assignment(module, clip, limit))
        if "sqrt" in names and names & {"world_size", "get_world_size", "nprocs", "num_gpus", "WORLD_SIZE"}:
            yield module, clip.lineno


def _last_assignment(module: Module, at: ast.AST, expression: ast.expr) -> ast.expr:
    """A name used at `at`: the expression it was last assigned before, in the same scope."""
    if not isinstance(expression, ast.Name):
        return expression
    best: Optional[ast.Assign] = None
    for node in walk(module.scope_of(at)):
        if (
            isinstance(node, ast.Assign)
            and node.lineno <= getattr(at, "lineno", 0)
            and any(isinstance(t, ast.Name) and t.id == expression.id for t in node.targets)
            and (best is None or node.lineno > best.lineno)
        ):
            best = node
    return best.value if best is not None else expression


# ---- DDP013 ---------------------------------------------------------------------------------------
def _global_rank(module: Module, at: ast.AST, expression: ast.expr) -> bool:
    value = _last_assignment(module, at, expression)
    if isinstance(value, ast.BinOp) or names_in(value) & {"local_rank", "LOCAL_RANK", "gpu", "device_count"}:
        return False
    if isinstance(value, ast.Name):
        return False  # a parameter (mp.spawn's process index is the local one) or unknown
    if isinstance(value, ast.Call) and last_name(value) == "get_rank":
        return True
    if isinstance(value, ast.Call) and last_name(value) == "int" and value.args:
        return "RANK" in names_in(value.args[0]) and "LOCAL_RANK" not in names_in(value.args[0])
    return isinstance(value, ast.Attribute) and value.attr in ("rank", "global_rank")


def _attribute_from_process_index(program: Program, attr: str) -> bool:
    """Every `x.rank = ...` the program runs stores a plain parameter (`args.rank = gpu` in the function mp.spawn
    starts: one process per GPU of one node, where that index is the local rank) or the local rank itself
    (`self.rank = args.local_rank`, pretraining_different_gpt's DistributedManager). (A helper module's
    `args.rank = int(os.environ["RANK"])` for torchrun, which this program never calls, sets nothing here.)"""
    stores = [
        (module, node)
        for module in program.modules
        for node in module.of_type(ast.Assign)
        if any(isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets)
        and program.runs(module, node.lineno)
    ]
    return bool(stores) and all(
        isinstance(_last_assignment(module, node, node.value), ast.Name)
        or {n.rpartition(".")[2] for n in names_in(node.value)} & {"local_rank", "LOCAL_RANK"}
        for module, node in stores
    )


def _parameter_given_the_global_rank(program: Program, module: Module, value: ast.expr) -> bool:
    """`def train(rank, ...)` whose every caller passes the global rank (`rank = int(os.environ["RANK"])`;
    `train(rank, ...)`). A function also handed over uncalled (`mp.spawn(train, ...)`, `Process(target=train)`) gets
    its process index there, the local rank: not this."""
    function = module.function_of(value)
    if not isinstance(value, ast.Name) or function is None:
        return False
    parameters = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if value.id not in parameters or parameters[:1] in (["self"], ["cls"]):
        return False  # (a method's callers pass one argument fewer than it names)
    position = parameters.index(value.id)
    sites = [
        (site_module, site)
        for site_module, site in program.call_sites.get(function.name, [])
        if any(callee is function for _, callee in program.resolve(site, site_module))  # not `model.train()`
    ]
    if not sites or _handed_over(program, function.name):
        return False
    for site_module, site in sites:
        given = next((k.value for k in site.keywords if k.arg == value.id), None)
        if given is None and position < len(site.args) and not isinstance(site.args[position], ast.Starred):
            given = site.args[position]
        if given is None or not _global_rank(site_module, site, given):
            return False
    return True


def _handed_over(program: Program, name: str) -> bool:
    """The function is referred to other than by calling it: passed to a launcher or stored."""
    for module in program.modules:
        if name not in module.words:
            continue
        calls = {id(c.func) for c in module.calls}
        if any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in calls
            for n in module.of_type(ast.Name)
        ):
            return True
    return False


def single_node(program: Program) -> bool:
    """The program ranks its processes by the local rank (`init_process_group(..., rank=local_rank)`,
    `DistributedSampler(..., rank=args.local_rank)`): it is written for one node, where the local rank is the rank.
    Or the repository's shell scripts launch it on one node only (`torchrun --standalone`, `--nnodes=1`), or it
    sets the rendezvous address to this host (`os.environ['MASTER_ADDR'] = 'localhost'`, nnU-Net's spawn)."""
    return program.memo(
        ("single node",),
        lambda: (
            any(_ranked_locally(call) for _, call in program.calls())
            or _rendezvous_on_this_host(program)
            or _launched_on_one_node(program)
        ),
    )


LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _rendezvous_on_this_host(program: Program) -> bool:
    """`os.environ["MASTER_ADDR"] = "localhost"` (or `init_method="tcp://127.0.0.1:..."`) in code the program
    runs, not left to the environment (`if "MASTER_ADDR" not in os.environ:`): every process meets on this host,
    so there is one node."""
    for module in program.modules:
        if "MASTER_ADDR" not in module.source and "tcp://" not in module.source:
            continue
        for node in module.of_type(ast.Assign):
            if not (isinstance(node.value, ast.Constant) and node.value.value in LOOPBACK):
                continue
            if not any(
                isinstance(t, ast.Subscript) and is_const(t.slice, "MASTER_ADDR") and "environ" in call_name(t.value)
                for t in node.targets
            ):
                continue
            if program.runs(module, node.lineno) and not _left_to_the_environment(module, node):
                return True
    local = tuple(f"tcp://{host}:" for host in LOOPBACK)
    for module, call in program.calls_named("init_process_group"):
        address = keyword(call, "init_method")
        if isinstance(address, ast.JoinedStr) and address.values:  # f"tcp://127.0.0.1:{args.port}"
            address = address.values[0]
        while isinstance(address, ast.BinOp) and isinstance(address.op, ast.Add):  # "tcp://127.0.0.1:" + port
            address = address.left
        if (
            isinstance(address, ast.Constant)
            and str(address.value).startswith(local)
            and program.runs(module, call.lineno)
        ):
            return True
        if address is not None and not isinstance(address, ast.Constant) and program.runs(module, call.lineno):
            settings = _configured_settings(program, module, call, address, address=True)
            if settings and all(s.value.startswith(local) for s in settings):
                return True  # `init_method=hp.dist_url`, its config's `dist_url: "tcp://localhost:12345"`
    return False


def _left_to_the_environment(module: Module, node: ast.AST) -> bool:
    """Under a test of the environment (`if "MASTER_ADDR" not in os.environ:`, `if not os.getenv(...)`)."""
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.If, ast.IfExp)):
            words = {n.value for n in walk(parent.test) if isinstance(n, ast.Constant)} | names_in(parent.test)
            if "MASTER_ADDR" in words or any("environ" in w or "getenv" in w for w in map(str, words)):
                return True
    return False


def _launched_on_one_node(program: Program) -> bool:
    entry = program.modules[0].file if program.modules else Path()
    if entry == Path() or not entry.is_absolute():
        return False  # source given as text: no repository to read
    if any(module.words & MULTI_NODE_NAMES for module in program.modules):
        return False  # the program reads a node's rank or count (SLURM, NODE_RANK): it is meant for several nodes
    return launched_on_one_node(repository_root(entry.parent), entry)


def _ranked_locally(call: ast.Call) -> bool:
    name = last_name(call)
    if name != "init_process_group" and not name.endswith("Sampler"):
        return False
    rank = keyword(call, "rank")
    if isinstance(rank, ast.Subscript) and isinstance(rank.slice, ast.Constant):  # `rank=config["local_rank"]`
        return "local_rank" in str(rank.slice.value).lower()
    return rank is not None and "local_rank" in last_name(rank).lower()


def global_rank_device(program: Program) -> Iterator[Hit]:
    if not program.distributed or single_node(program):
        return
    for module, call in program.calls_named("set_device", "DistributedDataParallel", "DDP", "device", "cuda", "to"):
        name = last_name(call)
        candidates: List[Tuple[ast.expr, ast.Call]] = []
        if name in ("cuda", "to"):  # a batch moved there in the step (`data.cuda(args.rank)`, MONAI's BTCV)
            candidates = [(call.args[0], call)] if _is_move(call) else []
        elif name == "set_device" and call.args:
            candidates = [(call.args[0], call)]
        elif name in ("DistributedDataParallel", "DDP"):
            ids = keyword(call, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)):
                candidates = [(elt, call) for elt in ids.elts]
            candidates += [(move.args[0], move) for move in _moves_of_the_wrapped(module, call)]
        elif name == "device" and len(call.args) == 2 and is_const(call.args[0], "cuda"):
            candidates = [(call.args[1], call)]
        for candidate, at in candidates:
            value = _last_assignment(module, at, candidate)
            if not (_global_rank(module, at, candidate) or _parameter_given_the_global_rank(program, module, value)):
                continue
            if isinstance(value, ast.Attribute) and _attribute_from_process_index(program, value.attr):
                continue
            yield module, at.lineno
            break


def _moves_of_the_wrapped(module: Module, wrap: ast.Call) -> List[ast.Call]:
    """The model's moves to a device before the DDP wrap that takes it (`self.model.to(self.rank)` then
    `DDP(self.model, device_ids=[local_rank])`; `DDP(model.cuda(rank))`): where the model lives is its device."""
    if not wrap.args:
        return []
    given = wrap.args[0]
    if _is_move(given):
        return [given]  # type: ignore[list-item]
    wrapped = call_name(given)
    scope = module.function_of(wrap)
    if not wrapped or scope is None:
        return []
    return [
        call
        for call in module.calls_in(scope)
        if _is_move(call) and call.lineno <= wrap.lineno and call_name(call.func.value) == wrapped  # type: ignore[attr-defined]
    ]


def _is_move(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("to", "cuda")
        and len(node.args) == 1
        and not node.keywords
    )


# ---- DDP014 ---------------------------------------------------------------------------------------
def _training_loop(loop: ast.AST) -> bool:
    names = {last_name(c) for c in walk(loop) if isinstance(c, ast.Call)}
    return bool(names & {"backward", "step", "train_one_epoch", "train_epoch", "run_epoch", "_run_epoch"}) or any(
        "train" in n for n in names
    )


EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit"}


def _trains_through_a_helper(program: Program, module: Module, loop: ast.AST) -> bool:
    """`for epoch in ...: fit_one_epoch(model, ...)`: a loop whose step is a function of the program that
    back-propagates (or calls one that does)."""
    return any(
        _backpropagates(program, other, function, 1)
        for call in walk(loop)
        if isinstance(call, ast.Call)
        for other, function in program.resolve(call, module)
    )


def _backpropagates(program: Program, module: Module, function: ast.FunctionDef, depth: int) -> bool:
    calls = module.calls_in(function)
    if any(last_name(c) == "backward" for c in calls):
        return True
    return depth > 0 and any(
        _backpropagates(program, other, callee, depth - 1)
        for c in calls
        for other, callee in program.resolve(c, module)
        if callee is not function
    )


def _leaves_before_training(program: Program, module: Module, node: ast.AST) -> bool:
    """`if rank == 0 and args.test_only: evaluate(...); return` before the function's training loop: the other
    ranks go on to train and wait for rank 0 in the first gradient all-reduce (not where the branch's `else`
    leaves too)."""
    function = module.function_of(node)
    if function is None or not program.distributed:
        return False
    branch = module.rank_branch(node)
    if branch is None or branch.orelse or module.function_of(branch) is not function:
        return False
    if not any(node is n for n in walk(branch)) or any(node is n for n in walk(branch.test)):
        return False
    return any(
        loop.lineno > branch.end_lineno  # type: ignore[operator]
        and (_training_loop(loop) or _trains_through_a_helper(program, module, loop))
        for loop in walk(function)
        if isinstance(loop, (ast.For, ast.While)) and module.function_of(loop) is function
    )


def loop_exit_on_some_ranks(program: Program) -> Iterator[Hit]:
    if program.distributed and program.any_call("DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"):
        for module in program.modules:  # (FSDP's backward waits for every rank's gradient shards too)
            yield from _skips_on_a_rank_own_loss(module)
    for module in program.modules:
        exits = [call for call in module.calls if call_name(call) in EXIT_CALLS]
        for node in [*module.of_type(ast.Break, ast.Return), *exits]:
            loop = next((p for p in module.ancestors(node) if isinstance(p, (ast.For, ast.While))), None)
            if loop is None:  # (an exit with an error status ends the job: torchrun and mp.spawn stop the rest)
                if isinstance(node, ast.Return) and _leaves_before_training(program, module, node):
                    yield module, node.lineno
                continue
            if not (_training_loop(loop) or _trains_through_a_helper(program, module, loop)):
                continue
            if module.function_of(node) is not module.function_of(loop):
                continue
            branch = module.rank_branch(node, stop=loop)
            if branch is not None:
                yield module, node.lineno
            else:
                yield from _flag_set_on_some_ranks(program, module, node, loop)


def _skips_on_a_rank_own_loss(module: Module) -> Iterator[Hit]:
    """`if not torch.isfinite(loss): continue` before `loss.backward()`, or `if loss.item() < 0.06: break`, in a DDP
    training loop: each rank decides on its own loss, and the rank that skips the backward (or leaves) leaves the
    others waiting in the gradient all-reduce — a hang (not where a collective before the test shared the value, so
    every rank takes the same turn)."""
    if "loss" not in module.source:
        return
    yield from _skips_on_a_rank_own_error(module)
    yield from _skips_past_a_flagged_backward(module)
    for node in module.of_type(ast.Continue, ast.Break):
        branch = next((p for p in module.ancestors(node) if isinstance(p, ast.If)), None)
        loop = next((p for p in module.ancestors(node) if isinstance(p, (ast.For, ast.While))), None)
        if branch is None or loop is None or not any(p is loop for p in module.ancestors(branch)):
            continue
        if selects_ranks(branch.test):
            continue
        calls = [c for c in walk(loop) if isinstance(c, ast.Call)]
        backward = [c for c in calls if _back_propagates(c)]
        trained = {  # `loss`, also in `scaler.scale(loss).backward()`, and `out` of `out['loss'].backward()`
            name
            for c in backward
            if isinstance(c.func, ast.Attribute)
            for value in ([c.func.value, *_scaled(c.func.value)] if last_name(c) == "backward" else c.args)
            for name in _loss_names(value)
        }
        trained |= {  # `loss += bz_loss.data.float()`: a running sum of what the loop back-propagates
            name
            for n in walk(loop)
            if isinstance(n, (ast.Assign, ast.AugAssign)) and _dotted_in(n.value) & trained
            for name in _assigned_names(n)
        }
        tested = {call_name(n) for n in walk(branch.test) if isinstance(n, (ast.Name, ast.Attribute))}
        if (
            not trained & tested
            and not _tests_the_ranks_own_batch(module, loop, branch, tested)
            and not _a_non_finite_loss(branch.test)
        ):
            continue  # a test of something else (a validation loss every rank computes alike)
        if isinstance(node, ast.Continue):
            backward = [c for c in backward if c.lineno > branch.lineno]
        before = [c for c in calls if c.lineno < branch.lineno and is_collective(c, module)]
        if backward and not any(_shares(module, c, tested, loop, branch) for c in before):
            yield module, node.lineno


def _skips_past_a_flagged_backward(module: Module) -> Iterator[Hit]:
    """UniTabE's step: `loss_flag = False`, then a loop over tasks that `continue`s on the rank's own NaN loss or
    out-of-memory error before `loss_flag = True`, and after that loop `if loss_flag: self.backward_loss(loss)`: a
    rank whose every task was skipped leaves the others waiting in the gradient all-reduce."""
    for node in module.of_type(ast.Continue):
        loops = [p for p in module.ancestors(node) if isinstance(p, (ast.For, ast.While))]
        if len(loops) < 2 or module.function_of(loops[0]) is not module.function_of(loops[1]):
            continue
        inner, outer = loops[0], loops[1]
        branch = next((p for p in module.ancestors(node) if isinstance(p, (ast.If, ast.ExceptHandler))), None)
        if branch is None or not any(p is inner for p in module.ancestors(branch)):
            continue
        if isinstance(branch, ast.If) and not (
            any("loss" in name.lower() for name in _texts_and_names(branch.test))
            or any(isinstance(p, ast.ExceptHandler) for p in module.ancestors(branch))
        ):
            continue  # (`if cur_task_data is None: continue`: a batch without that task, not a rank's failure)
        flags = {
            target.id
            for n in walk(inner)
            if isinstance(n, ast.Assign) and n.lineno > node.lineno and is_const(n.value, True)
            for target in n.targets
            if isinstance(target, ast.Name)
        }
        if any(_backward_under_a_flag(module, statement, flags) for statement in walk(outer) if statement is not inner):
            yield module, node.lineno


def _texts_and_names(node: ast.AST) -> Set[str]:
    """The names a test reads and the strings in it (`result['loss']`: 'result' and 'loss')."""
    return set(names_in(node)) | {
        n.value for n in walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _backward_under_a_flag(module: Module, statement: ast.AST, flags: Set[str]) -> bool:
    """`if loss_flag:` holding `loss.backward()` or a call of a helper named for it (`self.backward_loss(loss)`)."""
    return (
        isinstance(statement, ast.If)
        and isinstance(statement.test, ast.Name)
        and statement.test.id in flags
        and any(isinstance(c, ast.Call) and "backward" in last_name(c).lower() for c in walk(statement))
    )


def _tests_the_ranks_own_batch(module: Module, loop: ast.AST, branch: ast.If, tested: Set[str]) -> bool:
    """The test reads what the rank's own batch holds, a few assignments on (GP-Transformer: `mask =
    yb["has_e_hat"]...`, `if mask.any(): ... else: continue`): each rank's batch is its own, so is the turn. Not the
    batch's index (`enumerate`), and not a test of a size (`len`, `.shape`: padded shards give every rank as many and
    as large batches but the last, the drop-the-short-batch idiom)."""
    if not (isinstance(loop, ast.For) and _iterates_a_loader(module, loop)):
        return False
    if {"len", "shape", "size", "numel"} & names_in(branch.test):
        return False
    target = loop.target
    if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "enumerate" and isinstance(target, ast.Tuple):
        target = target.elts[-1]
    derived = {n.id for n in walk(target) if isinstance(n, ast.Name)}
    steps = [n for n in walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign)) and n.lineno < branch.lineno]
    for assignment in sorted(steps, key=lambda n: n.lineno):
        if {n.id for n in walk(assignment.value) if isinstance(n, ast.Name)} & derived:
            derived |= _assigned_names(assignment)
    return bool(derived & tested)


def _skips_on_a_rank_own_error(module: Module) -> Iterator[Hit]:
    """`try: loss = forward_step(...)` / `except Exception: continue` before `scaler.scale(loss).backward()` in a
    DDP training loop (Music-Source-Separation-Training's `--safe_mode`), or with the backward inside the `try`
    (GeorgianTTS: `try: loss = compute_loss(...); loss.backward()` / `except Exception: continue`): an error is one
    rank's own — a sample it alone reads, its own out-of-memory — so that rank skips the backward the others wait
    in."""
    for node in module.of_type(ast.Continue, ast.Break):
        handler = next((p for p in module.ancestors(node) if isinstance(p, ast.ExceptHandler)), None)
        loop = next((p for p in module.ancestors(node) if isinstance(p, (ast.For, ast.While))), None)
        if handler is None or loop is None or not any(p is loop for p in module.ancestors(handler)):
            continue
        attempt = module.parents.get(handler)
        if not isinstance(attempt, ast.Try):
            continue
        backward = [c for c in walk(loop) if isinstance(c, ast.Call) and _back_propagates(c)]
        tried = [c for c in backward if any(p is attempt for p in module.ancestors(c)) and not _handles(attempt, c)]
        if tried and not (isinstance(loop, ast.For) and _iterates_a_loader(module, loop)):
            tried = []  # (a probe of batch sizes until one fails, UniTS's `memory_check`: no pass over the data)
        if tried or any(c.lineno > (attempt.end_lineno or attempt.lineno) for c in backward):
            yield module, node.lineno


def _a_non_finite_loss(test: ast.expr) -> bool:
    """`torch.isnan(result['loss'])`, `not torch.isfinite(loss_val)`: whether this rank's own loss came out NaN."""
    return any(
        isinstance(c, ast.Call)
        and last_name(c) in ("isnan", "isinf", "isfinite")
        and any("loss" in text.lower() for text in _texts_and_names(c))
        for c in walk(test)
    )


def _back_propagates(call: ast.Call) -> bool:
    """`loss.backward()`, or a helper named for it that is handed the loss (UniTabE's `self.backward_loss(loss)`)."""
    name = last_name(call)
    return name == "backward" or ("backward" in name.lower() and "hook" not in name.lower() and bool(call.args))


def _handles(attempt: ast.Try, node: ast.AST) -> bool:
    """`node` is in one of the `try`'s handlers (or its `finally`), not in what it tries."""
    return any(node in walk(part) for part in [*attempt.handlers, *attempt.finalbody])


def _scaled(value: ast.expr) -> List[ast.expr]:
    """`loss` in `scaler.scale(loss)` (what a GradScaler's backward back-propagates)."""
    if isinstance(value, ast.Call) and last_name(value) == "scale" and value.args:
        return [value.args[0]]
    return []


def _loss_names(value: ast.expr) -> Set[str]:
    """The names a back-propagated value is read from: `loss`; `out` in `out['loss']` and in `out['loss'] /
    out['ntokens']` (VoiceCraft's trainer skips the step on `if out == None: continue`)."""
    while isinstance(value, ast.BinOp):
        value = value.left
    found = {call_name(value)}
    if isinstance(value, ast.Subscript):
        found.add(call_name(value.value))
    return found - {""}


def _shares(module: Module, collective: ast.Call, tested: Set[str], loop: ast.AST, branch: ast.If) -> bool:
    """The collective combines what the test reads: it is given it (`dist.all_reduce(loss)`), its result is
    (`loss = reduce_mean(loss)`), or the test reads what was then computed from those (`all_reduce(finite)`, `loss
    = loss if finite.item() else nan`) — not a reduction of something else for logging (FreeYOLO's
    `reduce_dict(loss_dict)` beside `if torch.isnan(losses): continue`), nor a barrier."""
    shared = {call_name(n) for a in [*collective.args, *(k.value for k in collective.keywords)] for n in walk(a)}
    statement = next((p for p in module.ancestors(collective) if isinstance(p, ast.stmt)), None)
    shared |= _assigned_names(statement) if statement is not None else set()
    between = [
        n
        for n in walk(loop)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and collective.lineno < n.lineno < branch.lineno
    ]
    for assignment in sorted(between, key=lambda n: n.lineno):
        if assignment.value is not None and _dotted_in(assignment.value) & shared:
            shared |= _assigned_names(assignment)
    return bool(shared & tested)


def _flag_set_on_some_ranks(program: Program, module: Module, exit_node: ast.stmt, loop: ast.AST) -> Iterator[Hit]:
    """`if stop: break` where `stop` was assigned only inside a rank-selecting branch and never sent to the other
    ranks (broadcast, all_reduce) inside the loop."""
    test = next((p.test for p in module.ancestors(exit_node) if isinstance(p, ast.If)), None)
    if test is None:
        return
    flags = {call_name(n) for n in walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    assigned: Set[str] = set()
    first = exit_node.lineno
    for node in walk(loop):
        if isinstance(node, ast.Assign) and module.rank_branch(node, stop=loop) is not None:
            names = {call_name(t) for t in node.targets} & flags
            if names:
                assigned |= names
                first = min(first, node.lineno)
    if not assigned:
        yield from _attribute_flag_set_on_some_ranks(program, module, exit_node, loop, flags)
        return
    shared = any(  # sent to every rank between the decision and the exit (broadcast_object_list, all_reduce)
        isinstance(c, ast.Call) and is_collective(c, module) and first <= c.lineno <= exit_node.lineno
        for c in walk(loop)
    )
    if not shared:
        yield module, exit_node.lineno


def _attribute_flag_set_on_some_ranks(
    program: Program, module: Module, exit_node: ast.stmt, loop: ast.AST, flags: Set[str]
) -> Iterator[Hit]:
    """`if self.stop: break` where another method of the class sets `self.stop = True` on some ranks only (in a
    rank-0 branch, or in a method only rank 0 calls) and the class never sends it to the other ranks."""
    attributes = {f for f in flags if f.startswith("self.")}
    owner = next((p for p in module.ancestors(loop) if isinstance(p, ast.ClassDef)), None)
    if attributes and owner is not None and _class_decides_on_some_ranks(program, module, owner, attributes):
        yield module, exit_node.lineno
        return
    for flag in sorted(f for f in flags if "." in f and not f.startswith("self.")):
        receiver, _, attribute = flag.rpartition(".")  # `solver.stop`, `solver = Solver(...)` in this module
        for assign in module.assignments(receiver):
            if not isinstance(assign.value, ast.Call):
                continue
            for other, cls in program.classes.get(last_name(assign.value), []):
                if _class_decides_on_some_ranks(program, other, cls, {f"self.{attribute}"}):
                    yield module, exit_node.lineno
                    return


def _class_decides_on_some_ranks(program: Program, module: Module, owner: ast.ClassDef, attributes: Set[str]) -> bool:
    """Every decision the class stores in these attributes (not the `= False` of a reset) is made on some ranks
    only, and the class never sends it to the other ranks."""
    decided = []
    for node in walk(owner):
        if (
            isinstance(node, ast.Call)
            and is_collective(node, module)
            and {a.split(".", 1)[1] for a in attributes} & names_in(node)
        ):
            return False  # the class shares the flag
        if (
            isinstance(node, ast.Assign)
            and {call_name(t) for t in node.targets} & attributes
            and not isinstance(node.value, ast.Constant)
        ):
            made = getattr(module.function_of(node), "name", "") == "__init__"
            decided.append(not made and program.guarded(module, node))  # (what the object is made with is no
            # decision: an object made on some ranks only runs its loop there too)
    return bool(decided) and all(decided)  # (an assignment on every rank, `self.stop = shared[0]`, shares it)


# ---- DDP015 ---------------------------------------------------------------------------------------
def _on_a_command_without_the_group(
    program: Program, module: Module, node: ast.AST, depth: int = 3, caller: bool = False
) -> bool:
    """Reached only through arms of an `if`/`elif` chain that make no process group where another arm does: a
    command-line tool's subcommands (SevenNet's `if args.command == 'train': run(args)` / `elif args.command ==
    'cp': checkpoint_cmd.run(args)`): the other subcommands run in one process."""
    arm = _arm_without_the_group(program, module, node)
    if arm is not None:
        return arm
    function = module.function_of(node)
    if function is None or depth == 0:
        return False
    named = [*program.sites_of_function(module, function), *program.handed_over(module, function)]
    sites = program.running_sites(module, function, handed=True)
    if not sites:  # a caller that nothing the program runs calls (sevenn_cp's own `main()`) adds no path; the
        # save's own function must have one; a method may be called without its name (`__call__`, a hook)
        return caller and (bool(named) or isinstance(module.parents.get(function), ast.Module))
    return all(_on_a_command_without_the_group(program, m, c, depth - 1, caller=True) for m, c in sites)


def _arm_without_the_group(program: Program, module: Module, node: ast.AST) -> Optional[bool]:
    """For the innermost `if`/`elif` chain around `node` (in its function) whose arms differ on the process group:
    whether `node`'s arm makes none; None where no such chain holds it."""
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if isinstance(parent, ast.If) and child is not parent.test:
            top, above = parent, module.parents.get(parent)
            while isinstance(above, ast.If) and above.orelse == [top]:  # up to the chain's first `if`
                top, above = above, module.parents.get(above)
            arms = _chain_arms(top)
            makes = [_makes_the_group(program, module, arm) for arm in arms]
            if any(makes) and not all(makes):
                own = next(i for i, arm in enumerate(arms) if any(child is s for s in arm))
                return not makes[own]
        child = parent
    return None


def _function_makes_the_group(program: Program, module: Module, function: ast.FunctionDef, depth: int) -> bool:
    key = ("makes the group", id(function), depth)
    return bool(program.memo(key, lambda: _makes_the_group(program, module, function.body, depth)))


def _chain_arms(branch: ast.If) -> List[List[ast.stmt]]:
    arms = [branch.body]
    while len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.If):
        branch = branch.orelse[0]
        arms.append(branch.body)
    if branch.orelse:
        arms.append(branch.orelse)
    return arms


def _makes_the_group(program: Program, module: Module, statements: List[ast.stmt], depth: int = 3) -> bool:
    for statement in statements:
        for call in (n for n in walk(statement) if isinstance(n, ast.Call)):
            if last_name(call) == "init_process_group":
                return True
            if depth > 0:
                for other, callee in program.resolve(call, module):
                    if _function_makes_the_group(program, other, callee, depth - 1):
                        return True
    return False


def _every_caller_names_the_rank(program: Program, module: Module, call: ast.Call, path: ast.expr) -> bool:
    """The path is a parameter every running caller fills from the rank (DCASE2020-Task2's `trainer.train(...,
    save_path)` with `save_path = os.path.join(save_dir, f'model_rank{rank}.pth')`): one file per rank."""
    return isinstance(path, ast.Name) and _every_caller_gives(
        program,
        module,
        call,
        path.id,
        lambda caller, site, given: given is not None and bool(_derived_names(caller, site, given) & RANK_NAMES),
    )


def same_path_every_rank(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return
    for module, call in program.calls_named(*FILE_WRITERS):
        path = _written_path(call)
        if path is None:
            continue
        if last_name(call) != "save" and not module.is_multiprocess():
            continue  # a figure drawn by a module that knows nothing of ranks (a CLI's plotting subcommand)
        target = _last_assignment(module, call, path)
        if isinstance(target, ast.Call) and last_name(target) == "BytesIO":
            continue  # memory
        if _derived_names(module, call, path) & RANK_NAMES or _every_caller_names_the_rank(program, module, call, path):
            continue  # one file per rank (`os.path.join(d, fn)` with `fn = f"optimizer.{dist.get_rank():05d}.pth"`)
        function = module.function_of(call)
        if function is not None and _guards_by_name(function.name):
            continue  # save_on_master and the like guard inside
        if function is not None and module.function_of(function) is None and not _may_be_called(program, function):
            continue  # a utility this program never calls (`utils.train.save_checkpoint(...)` calls its namesake)
        if _runs_single_process_only(program, module, call) or _on_a_command_without_the_group(program, module, call):
            continue  # the else of `if args.distributed:`, a subcommand that makes no group: one process, one writer
        if program.guarded(module, call) or _per_node_branch(program, module, call) is not None:
            continue
        if function is not None and _one_writer_wherever_called(program, module, function):
            continue  # `if parallel: if rank == 0: trainer.save()` / `else: trainer.save()`
        if _in_a_dataset(module, call) or _in_the_launcher_only(program, module, call):
            continue  # a per-sample cache written while loading; the one process that spawns the others
        if not _first_on_main(program, module, call):
            yield module, call.lineno


# what starts one process per rank from the process that calls it (`mp.Process(target=run, ...)` too, made in a loop)
PROCESS_STARTERS = ("spawn", "start_processes")


def _in_the_launcher_only(program: Program, module: Module, node: ast.AST, depth: int = 3) -> bool:
    """Reached only from the code of an entry script that starts its processes itself — its top level, its
    `__main__` block, the function that calls `mp.spawn` — before or after it does: that code runs in one process
    (graphlearn's IGBH example builds its dataset, writing fp16 copies of the features, before
    `torch.multiprocessing.spawn(run_training_proc, ...)`)."""
    entry = program.modules[0]
    if not program.memo(("starts its processes",), lambda: _starts_its_processes(entry)):
        return False
    if module is entry and _launcher_code(module, node):
        return True  # (not the script's top level outside `__main__`: each spawned process imports it again)
    function = module.function_of(node)
    if function is None or depth == 0:
        return False
    sites = program.running_sites(module, function, handed=True)
    if any(last_name(call) in (*PROCESS_STARTERS, "Process") for _, call in sites):
        return False  # the function each started process runs
    return bool(sites) and all(_in_the_launcher_only(program, m, call, depth - 1) for m, call in sites)


def _launcher_code(entry: Module, node: ast.AST) -> bool:
    """`node` is in the entry script's `__main__` block or in the function that calls `mp.spawn`."""
    function = entry.function_of(node)
    return _in_the_main_block(entry, node) or (function is not None and _starts_processes_in(function))


def _in_the_main_block(module: Module, node: ast.AST) -> bool:
    top = _top_statement(module, node)
    return is_main_guard(top) and module.function_of(node) is None


def _starts_its_processes(entry: Module) -> bool:
    return any(_starts_processes_in(s) for s in entry.tree.body if not isinstance(s, ast.ClassDef))


def _starts_processes_in(node: ast.AST) -> bool:
    loops = [n for n in walk(node) if isinstance(n, (ast.For, ast.While))]
    return any(isinstance(n, ast.Call) and last_name(n) in PROCESS_STARTERS and n.args for n in walk(node)) or any(
        isinstance(n, ast.Call) and last_name(n) == "Process" and n.keywords for loop in loops for n in walk(loop)
    )


def _one_writer_wherever_called(program: Program, module: Module, function: ast.FunctionDef) -> bool:
    """Every call of the function the program runs is on some ranks only, or on the single-process arm."""
    sites = program.running_sites(module, function)
    return bool(sites) and all(
        program.guarded(m, c) or _on_single_process_path(m, c) or m.on_a_single_process_arm(c) for m, c in sites
    )


# calls that write one file, by last name: the position and keyword of the path, and what the call is named in
# full where the last name alone says too little (`save` is torch's only as `torch.save`)
FILE_WRITERS = {"save": (1, "f", ("torch.save",)), "save_image": (1, "fp", ()), "savefig": (0, "fname", ())}


def _written_path(call: ast.Call) -> Optional[ast.expr]:
    """The path a file-writing call writes (`torch.save(obj, path)`, torchvision's `save_image(grid, path)`,
    matplotlib's `plt.savefig(path)`); None for another call of the name (`model.save(...)`, `np.save`)."""
    position, name, full_names = FILE_WRITERS[last_name(call)]
    if full_names and call_name(call) not in full_names:
        return None
    path = call.args[position] if len(call.args) > position else keyword(call, name)
    return None if path is None or is_const(path, None) else path


def _in_a_dataset(module: Module, node: ast.AST) -> bool:
    """In what a `Dataset`'s `__getitem__` runs, directly or through the class's own methods (`torch.save(spec,
    spec_filename)` in its `get_audio`): one sample's cache. (A cache of the whole set written in `__init__` is
    one path on every rank.)"""
    owner = next((p for p in module.ancestors(node) if isinstance(p, ast.ClassDef)), None)
    function = module.function_of(node)
    if owner is None or function is None:
        return False
    if not any(last_name(b) in ("Dataset", "IterableDataset") for b in owner.bases):
        return False
    methods = {f.name: f for f in owner.body if isinstance(f, ast.FunctionDef)}
    reached, frontier = set(), ["__getitem__"]
    for _ in range(4):
        frontier = [n for n in frontier if n in methods and n not in reached]
        reached.update(frontier)
        frontier = [
            c.func.attr
            for name in frontier
            for c in module.calls_in(methods[name])
            if isinstance(c.func, ast.Attribute) and call_name(c.func.value) == "self"
        ]
    return function.name in reached


def _may_be_called(program: Program, function: ast.FunctionDef) -> bool:
    """Some call of that name may run this function: one that resolves to it, or to nothing the program knows —
    or the function is handed over by name (`mp.spawn(train_ddp, ...)`, `Process(target=train)`); an `__init__`,
    whenever its class or a subclass is used (`Program.runs` answers that, and whether a subclass replaces it)."""
    if function.name == "__init__":
        return True
    for module, site in program.sites_of(function.name):
        targets = [f for _, f in program.resolve(site, module)]
        if not targets or any(f is function for f in targets):
            return True
    return any(
        isinstance(node, ast.Name) and node.id == function.name and isinstance(node.ctx, ast.Load)
        for module in program.modules
        if function.name in module.words
        for node in module.of_type(ast.Name)
    )


def _first_on_main(program: Program, module: Module, node: ast.AST, depth: int = 3) -> bool:
    """`node` runs inside `with torch_distributed_zero_first(rank):` (or is reached only from there, or from code one
    rank runs): rank 0 runs the block first and writes its cache while the others wait at a barrier, then they read
    what it wrote."""
    for parent in module.ancestors(node):
        if isinstance(parent, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and _main_goes_first(program, module, item.context_expr)
            for item in parent.items
        ):
            return True
    function = module.function_of(node)
    if function is None or depth == 0:
        return False
    sites = program.running_sites(module, function)
    return bool(sites) and all(program.guarded(m, c) or _first_on_main(program, m, c, depth - 1) for m, c in sites)


def _main_goes_first(program: Program, module: Module, call: ast.Call) -> bool:
    """A context manager by name (`torch_distributed_zero_first`, Accelerate's `main_process_first`), or one of the
    program's that waits at a barrier on some ranks before its `yield` and on the others after it."""
    name = last_name(call).lower()
    if "zero_first" in name or ("first" in name and any(w in name for w in ("main", "master", "rank"))):
        return True
    for other, function in program.resolve(call, module):
        barriers = [c for c in other.calls_in(function) if last_name(c) == "barrier"]
        yields = [n for n in walk(function) if isinstance(n, (ast.Yield, ast.YieldFrom))]
        if yields and len(barriers) >= 2 and all(other.rank_branch(b) is not None for b in barriers):
            return True
    return False


def _guards_by_name(name: str) -> bool:
    """`save_on_master`, `save_main_process`, `rank0_save`: a helper whose name says it writes on one rank only —
    not `main` or `train_main`, the entry functions every rank runs."""
    lowered = name.lower()
    main = any(w in lowered for w in ("on_main", "main_process", "main_rank", "is_main", "main_only"))
    return main or any(w in lowered for w in ("master", "rank0", "rank_0", "primary"))


# ---- DDP019 ---------------------------------------------------------------------------------------
LOCAL_RANK_NAMES = {"local_rank", "LOCAL_RANK", "get_local_rank", "gpu", "local_process_index"}
# names by which a program tells a process's rank in the job from its rank on its node: it runs on several nodes
MULTI_NODE_NAMES = {"node_rank", "NODE_RANK", "nnodes", "num_nodes", "GROUP_RANK", "SLURM_NODEID", "SLURM_PROCID"}


def _local_only_test(test: ast.expr) -> bool:
    """`local_rank == 0`, `args.gpu == 0`, `rank % ngpus_per_node == 0`: rank 0 of each node, not of the job."""
    names = names_in(test)
    per_node = any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and names_in(n.left) & GLOBAL_RANK for n in walk(test)
    )
    if per_node:
        return True
    local = names & LOCAL_RANK_NAMES or any(
        ("local" in n or "base" in n) and ("rank" in n or "master" in n) for n in names
    )
    return bool(local) and not names & (GLOBAL_RANK | {"is_main_process", "is_master"})


def _per_node_branch(program: Program, module: Module, node: ast.AST) -> Optional[ast.If]:
    """The `if` around `node` that picks rank 0 of each node (and none that picks rank 0 of the job)."""
    tests = [p for p in module.ancestors(node) if isinstance(p, ast.If) and node is not p.test]
    local = [p for p in tests if _per_node_test(program, module, p.test)]
    if not local or any(selects_ranks(p.test) and not _per_node_test(program, module, p.test) for p in tests):
        return None
    return local[0]


def _per_node_test(program: Program, module: Module, test: ast.expr) -> bool:
    """A test that picks rank 0 of each node, inline or through a helper of the program every `return` of which
    does (`def main_process(): return args.rank % args.ngpus_per_node == 0`) — not one that also asks for rank 0
    of the job (`local_rank == 0 and total_rank == 0`, with `total_rank = dist.get_rank()`)."""
    if (
        isinstance(test, ast.BoolOp)
        and isinstance(test.op, ast.And)
        and any(_tests_the_global_rank(module, test, value) for value in test.values)
    ):
        return False
    if _local_only_test(test):
        return not _local_name_set_to_the_global_rank(module, test)
    for call in (n for n in walk(test) if isinstance(n, ast.Call)):
        for _, function in program.resolve(call, module):
            returns = [n.value for n in walk(function) if isinstance(n, ast.Return) and n.value is not None]
            if returns and all(_local_only_test(value) for value in returns):
                return True
    return False


def _local_name_set_to_the_global_rank(module: Module, test: ast.expr) -> bool:
    """`args.local_rank = dist.get_rank()` in the module (crj1998/SR, after `init_process_group`): what the test
    calls the local rank is the job's rank."""
    tested = {call_name(n) for n in walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    return any(
        {call_name(t) for t in assign.targets} & tested
        and isinstance(assign.value, ast.Call)
        and last_name(assign.value) == "get_rank"
        for assign in module.of_type(ast.Assign)
    )


def _tests_the_global_rank(module: Module, at: ast.AST, value: ast.expr) -> bool:
    """`rank == 0` by a name of the job's rank, or by a name last set from `dist.get_rank()` or the RANK variable."""
    if names_in(value) & GLOBAL_RANK:
        return True
    return any(isinstance(n, ast.Name) and _global_rank(module, at, n) for n in walk(value) if isinstance(n, ast.Name))


def _runs_on_several_nodes(program: Program) -> bool:
    return (
        program.any_call("get_rank")
        or any(module.words & (MULTI_NODE_NAMES | {"RANK"}) for module in program.modules)
        or any(_rank_from_node_rank(module) for module in program.modules)
    )


def _rank_from_node_rank(module: Module) -> bool:
    """`args.rank = args.rank * ngpus_per_node + gpu`: the job's rank computed from the node's (the `--rank` option
    counts nodes, as in PyTorch's ImageNet example)."""
    if "rank" not in module.source:
        return False
    return any(
        isinstance(node.op, ast.Mult)
        and len({_node_part(names_in(node.left)), _node_part(names_in(node.right))} - {""}) == 2
        for node in module.of_type(ast.BinOp)
    )


def _node_part(names: FrozenSet[str]) -> str:
    """Which factor of `node_rank * processes_per_node` these names make, if either."""
    if names & {"rank", "node_rank", "NODE_RANK", "nr"}:
        return "node"
    if any("gpus" in n or "per_node" in n or n in ("device_count", "nproc", "nprocs") for n in names):
        return "width"
    return ""


def save_per_node(program: Program) -> Iterator[Hit]:
    if not program.distributed or not _runs_on_several_nodes(program) or single_node(program):
        return
    for module, call in program.calls():
        if call_name(call) != "torch.save" and not any(
            "torch.save" in {call_name(c) for c in other.calls_in(callee)}
            for other, callee in program.resolve(call, module)
        ):
            continue  # (a helper that writes a JSON config is not a checkpoint)
        if _per_node_branch(program, module, call) is None:
            continue
        target = _last_assignment(module, call, call.args[1]) if len(call.args) > 1 else None
        if target is not None and names_in(target) & (RANK_NAMES | MULTI_NODE_NAMES):
            continue  # one file per rank or node
        yield module, call.lineno


# ---- DDP016 ---------------------------------------------------------------------------------------
def _combines(call: ast.Call) -> bool:
    """A collective that combines the ranks' values (all_reduce, all_gather, reduce...), or a helper named so."""
    return _combines_name(last_name(call))


def _combines_name(name: str) -> bool:
    return "reduce" in name.lower() or "gather" in name.lower()


def _evaluates(calls: Iterable[ast.Call]) -> bool:
    """Calls that mark evaluation: no_grad, inference_mode, model.eval(), set_grad_enabled(False)."""
    return any(
        last_name(c) in ("no_grad", "inference_mode", "eval")
        or (last_name(c) == "set_grad_enabled" and is_const(argument(c, 0, "mode"), False))
        for c in calls
    )


def _evaluates_through_a_hook(program: Program, module: Module, calls: List[ast.Call]) -> bool:
    """A call of the program's that only switches to evaluation: `on_start_eval(model)`, a function (often defined
    inside the loop's own) that runs `model.eval()` and `torch.set_grad_enabled(False)`, no loop, no backward."""
    if any(last_name(c) == "backward" for c in calls):
        return False  # the loop trains
    for call in calls:
        for other, callee in program.resolve(call, module):
            inner = other.calls_in(callee)
            switches = [c for c in inner if last_name(c) in ("eval", "set_grad_enabled")]  # (a `with no_grad()`
            if _evaluates(switches) and not _over_batches(other, callee):  # in the helper covers the helper only)
                return True
    return False


def _evaluation_reduces(program: Program) -> bool:
    """Some code the program runs that evaluates (no_grad, inference_mode, eval(), or calls `evaluate`/`validate`...)
    combines values over ranks (not a function nothing calls: ppt_learning's unused `eval_policy_parallel`)."""
    for module in program.modules:
        for scope in [module.tree, *module.functions]:
            if isinstance(scope, ast.FunctionDef) and not program.runs(module, scope.lineno):
                continue
            calls = module.calls_in(scope)
            marked = _evaluates(calls) or (
                _over_batches(module, scope) and _evaluates_through_a_hook(program, module, calls)
            )
            if marked and (
                _over_batches(module, scope)
                or any(last_name(c) == "eval" for c in calls)
                or _is_eval_name(getattr(scope, "name", ""))
            ):
                if _reduces(program, module, scope):
                    return True
            elif _combines_what_evaluation_returns(module, scope, calls):
                return True  # `acc = evaluate(...)` then `dist.all_reduce(acc)`
    return _metric_combined_by_a_hook(program)


def _metric_combined_by_a_hook(program: Program) -> bool:
    """Ignite's `MetricsLambda(average_distributed_scalar, metrics["nll"], args)`: the evaluator's metric passes
    through a function of the program that all-reduces it (the transfer-learning tutorials' template)."""
    for _, call in program.calls_named("MetricsLambda"):
        hook = call.args[0] if call.args else None
        if isinstance(hook, ast.Name) and any(
            program.reaches_collective(module, function) for module, function in program.functions.get(hook.id, [])
        ):
            return True
    return False


def _combines_what_evaluation_returns(module: Module, scope: ast.AST, calls: List[ast.Call]) -> bool:
    """`acc = evaluate(...)` (or `validate`...) then a combining call given `acc`, or what was computed from it
    (`t = torch.tensor(acc)`, `all_reduce(t)`); not a reduction of something else in the same scope (a training
    loss)."""
    results: Set[str] = set()
    for call in calls:
        if not _is_eval_name(last_name(call)):
            continue
        if any(isinstance(p, ast.Call) and _combines(p) for p in module.ancestors(call)):
            return True  # `all_reduce(evaluate(...))`
        parent = module.parents.get(call)
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            results |= _last_parts(_assigned_names(parent))
    if not results:
        return False
    events = [n for n in walk(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.Call))]
    for node in sorted(events, key=lambda n: (n.lineno, n.col_offset)):
        if module.scope_of(node) is not scope:
            continue
        if isinstance(node, ast.Call):  # `meter.update(acc)`: the meter now holds the evaluation's figures
            if isinstance(node.func, ast.Attribute) and any(names_in(a) & results for a in node.args):
                results |= _last_parts({_root_name(node.func.value)})
        elif names_in(node.value) & results:
            results |= _last_parts(_assigned_names(node))
    return any(_combines(c) and names_in(c) & results for c in calls)


def _last_parts(dotted: Set[str]) -> Set[str]:
    """`self.meter` -> `meter`: names as `names_in` gives them (a bare `self` would match every method call)."""
    return {name.split(".")[-1] for name in dotted} - {"", "self", "cls"}


def _over_batches(module: Module, scope: ast.AST) -> bool:
    """A loop in the scope: an evaluation goes over a loader's batches; a helper that reduces a training loss under
    `no_grad` (`reduce_loss(loss)`) has none, and its reduction combines no evaluation. (What holds a loop is
    found once per module, from its few loops up, not by walking every scope.)"""

    def holders() -> Set[int]:
        return {
            id(holder) for loop in module.of_type(ast.For, ast.AsyncFor, ast.While) for holder in module.ancestors(loop)
        }

    return id(scope) in module.memo(("holds a loop",), holders)


def padded_evaluation(program: Program) -> Iterator[Hit]:
    if not any(name.endswith("DistributedSampler") for name in program.call_sites):
        return  # no sampler pads anything (asked first: whether an evaluation reduces is the costly question)
    if not _evaluation_reduces(program):
        return  # no evaluation combines values over ranks (a barrier or a broadcast combines none): DDP017's case
    if _deduplicates_by_id(program) or _takes_the_padding_off(program):
        return  # the gathered results are merged by sample id, or the padded samples taken off: each counts once
    for module, call in program.calls():
        name = last_name(call)
        if not name.endswith("DistributedSampler") or is_const(keyword(call, "drop_last"), True):
            continue
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        names = _sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")
        if not (
            _for_evaluation(program, module, call)  # (also a helper's, where a caller asks for no shuffling)
            or DEV_PART in re.split(r"[^a-z0-9]+", names.lower())
            or name.startswith("Ordered")
        ):
            continue
        if _never_used(module, call) or program.branches_away(module, call):
            continue  # made and never given to a loader, or in a branch no call of its helper takes
        if _divides_evenly_asserted(module, call) or _merged_by_key_in(module):
            continue
        yield module, call.lineno


def _takes_the_padding_off(program: Program) -> bool:
    """A function that reduces over the ranks first takes off, on the ranks a test of the rank against a count
    picks, what the padding added (DejaVid's `if v_id == 0 and global_rank < padded: it_total -= 1`, and the same
    for the correct counts, before `dist.reduce(it_total, ...)`)."""
    for module in program.modules:
        if "reduce" not in module.source:
            continue
        for function in module.functions:
            calls = module.calls_in(function)
            if not any(last_name(c) in ("reduce", "all_reduce") for c in calls):
                continue
            for branch in walk(function):
                if (
                    isinstance(branch, ast.If)
                    and names_in(branch.test) & RANK_NAMES
                    and _compares_with_a_count(branch.test)
                    and any(isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Sub) for n in walk(branch))
                ):
                    return True
    return False


def _divides_evenly_asserted(module: Module, call: ast.Call) -> bool:
    """`assert opts.val_size % opts.world_size == 0` before the sampler, in its function: nothing is padded."""
    scope = module.scope_of(call)
    for node in walk(scope):
        if not isinstance(node, ast.Assert) or node.lineno > call.lineno:
            continue
        for test in walk(node.test):
            if (
                isinstance(test, ast.BinOp)
                and isinstance(test.op, ast.Mod)
                and names_in(test.right) & (PROCESS_COUNT_NAMES | {"get_world_size", "nprocs", "world"})
            ):
                return True
    return False


def _deduplicates_by_id(program: Program) -> bool:
    """A function of the program gathers every rank's results and keeps one per id (COCO evaluators:
    `all_gather(img_ids)` ... `np.unique(merged_img_ids, return_index=True)`; `drop_duplicates` on an id column),
    or cuts the gathered results back to the set's length (the old transformers examples' `distributed_concat`:
    `return torch.cat(gathered)[:num_total_examples]`, beside a sampler that pads only the tail)."""
    for module in program.modules:
        if "gather" not in module.source:
            continue
        for function in module.functions:
            calls = module.calls_in(function)
            if not any("gather" in last_name(c).lower() for c in calls):
                continue
            if any(_cut_to_a_length(node) for node in walk(function) if isinstance(node, ast.Return)):
                return True
            for call in calls:
                if last_name(call) in ("unique", "drop_duplicates") and any(
                    _names_an_id(name) for name in names_in(call) | {call_name(call)}
                ):
                    return True
    return False


def _merged_by_key_in(module: Module) -> bool:
    """A function of the sampler's own module gathers every rank's results into dictionaries keyed by sample and
    merges them (`_merged_by_key`): its evaluation counts a padded sample once."""

    def find() -> bool:
        if "update" not in module.source or ("gather" not in module.source and "world_size" not in module.source):
            return False
        return any(_merged_by_key(function, module.calls_in(function)) for function in module.functions)

    return bool(module.memo(("merged by key",), find))


def _merged_by_key(function: ast.AST, calls: List[ast.Call]) -> bool:
    """`all_gather_object(feats_all, feats)` of dictionaries keyed by sample (voxceleb_trainer's features by file
    name), then `for part in feats_all[1:]: feats.update(part)` (Pointcept's testers: `record_sync =
    comm.gather(record)`, each part `record.update(...)`): a padded sample's second copy lands on its key."""
    gathered = {call_name(c.args[0]) for c in calls if last_name(c) == "all_gather_object" and c.args}
    gathered |= {  # `record_sync = comm.gather(record, dst=0)`: a helper that returns every rank's part
        call_name(target)
        for statement in walk(function)
        if isinstance(statement, ast.Assign)
        and isinstance(statement.value, ast.Call)
        and "gather" in last_name(statement.value).lower()
        for target in statement.targets
    }
    for loop in walk(function):  # `for part in feats_all[1:]:` or `for _ in range(len(record_sync)):`, or
        if not isinstance(loop, ast.For):  # `for r in range(world_size):` loading each rank's file
            continue
        if not (names_in(loop.iter) & gathered or _loads_every_ranks_file(loop)):
            continue
        if any(isinstance(n, ast.Call) and last_name(n) == "update" for s in loop.body for n in walk(s)):
            return True
    return False


def _cut_to_a_length(node: ast.Return) -> bool:
    """`return concat[:num_total_examples]`: the first n of what was gathered."""
    value = node.value
    return (
        isinstance(value, ast.Subscript)
        and isinstance(value.slice, ast.Slice)
        and value.slice.lower is None
        and value.slice.step is None
        and value.slice.upper is not None
    )


def _names_an_id(name: str) -> bool:
    parts = set(re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])", name.lower().replace(".", "_")))
    return bool(parts & {"id", "ids", "idx", "index", "indices", "uid", "key", "keys"}) or name.lower().endswith("ids")


def _never_used(module: Module, call: ast.Call) -> bool:
    """`test_sampler = DistributedSampler(...)` whose name nothing reads: made and never given to a loader; or
    given only where it shuffles (`DistributedSampler(ds, shuffle=train)` ... `sampler=sampler if train else
    None`, FourCastNet's loader helper): an evaluation's loader gets no sampler."""
    target = module.parents.get(call)
    if isinstance(target, ast.IfExp) and target.test is not call:  # `DistributedSampler(...) if ddp else None`
        target = module.parents.get(target)
    if not (isinstance(target, ast.Assign) and all(isinstance(t, ast.Name) for t in target.targets)):
        return False
    names = {t.id for t in target.targets}  # type: ignore[attr-defined]
    reads = [n for n in module.of_type(ast.Name) if n.id in names and isinstance(n.ctx, ast.Load)]
    shuffle = keyword(call, "shuffle")
    if reads and isinstance(shuffle, ast.Name):
        return all(_chosen_when(module, read, shuffle.id) for read in reads)
    return not reads


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _chosen_when(module: Module, node: ast.AST, flag: str) -> bool:
    """`node if flag else ...`, or `node` in the body of `if flag:`: read only when `flag` holds."""
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        if isinstance(parent, ast.IfExp) and _is_name(parent.test, flag) and parent.body is child:
            return True
        if isinstance(parent, ast.If) and _is_name(parent.test, flag) and child in parent.body:
            return True
        child = parent
    return False


def _groups_of_one(program: Program) -> bool:
    """Every process group the program makes has `world_size=1` (a benchmark of the DDP wrapper in one
    process): GPU 0 is the one process's GPU."""

    def compute() -> bool:
        groups = [(m, call) for m, call in program.calls_named("init_process_group") if program.runs(m, call.lineno)]
        return bool(groups) and all(is_const(keyword(call, "world_size"), 1) for _, call in groups)

    return bool(program.memo(("groups of one",), compute))  # (asked by DDP006 and DDP020)


# ---- DDP022 ---------------------------------------------------------------------------------------
# what a DistributedDataParallel answers itself (nn.Module's methods and its own): the rest is the inner model's
MODULE_API = {
    "forward",
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
    "train",
    "eval",
    "to",
    "cuda",
    "cpu",
    "half",
    "float",
    "double",
    "bfloat16",
    "type",
    "zero_grad",
    "state_dict",
    "load_state_dict",
    "apply",
    "requires_grad_",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "get_submodule",
    "get_parameter",
    "get_buffer",
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_backward_hook",
    "share_memory",
    "extra_repr",
    "no_sync",
    "join",
    "register_comm_hook",
    "set_extra_state",
    "get_extra_state",
    "compile",
}


def model_method_on_the_wrapper(program: Program) -> Iterator[Hit]:
    """`model = DDP(model, ...)`, then `model.predict(...)` — directly, or in a function given the wrapper
    (SASRec's `evaluate(model, ...)` calling `model.predict`): DistributedDataParallel has only nn.Module's
    methods and its own, so a method of the program's model class raises AttributeError there."""
    if not program.distributed or _subclasses_ddp(program):
        return  # (a program class derived from DistributedDataParallel may answer them, or forward __getattr__)
    own = {name for name in program.method_names if not name.startswith("_")} - MODULE_API
    seen: Set[Tuple[int, int]] = set()
    for module in program.modules if own else []:
        wraps = _wraps(module, program)
        if not wraps:
            continue
        wrapper_names = {name for name, _, _ in wraps}
        for call in module.calls:
            given = [call.func.value] if isinstance(call.func, ast.Attribute) else []
            given += [*call.args, *(k.value for k in call.keywords)]
            if not any(call_name(value) in wrapper_names for value in given):
                continue  # (most calls: nothing of the wrapper's is given or called)
            hits = []
            owner = call_name(call.func.value) if isinstance(call.func, ast.Attribute) else ""
            if (
                owner
                and call.func.attr in own  # type: ignore[attr-defined]
                and _is_wrapper(module, call, owner, wraps)
                and not _unwrapped_before(module, call, owner)
                and not _under_a_wrapper_test(module, call)
                and not _beside_an_arm_that_unwraps(module, call, owner)
            ):
                hits.append((module, call))
            for other, callee, parameter in _wrapper_passed(program, module, call, wraps):
                hits += [
                    (other, inner)
                    for inner in other.calls_in(callee)
                    if isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in own
                    and call_name(inner.func.value) == parameter
                    and not _unwrapped_before(other, inner, parameter)
                    and not _under_a_wrapper_test(other, inner)
                    and not _beside_an_arm_that_unwraps(other, inner, parameter)
                ]
            for hit_module, hit in hits:
                if (id(hit_module), hit.lineno) not in seen:
                    seen.add((id(hit_module), hit.lineno))
                    yield hit_module, hit.lineno
    for hit_module, line in _model_attribute_on_the_wrapper(program):
        if (id(hit_module), line) not in seen:
            seen.add((id(hit_module), line))
            yield hit_module, line


# what the DDP wrapper answers itself (its own attributes and nn.Module's), besides its methods
DDP_ATTRIBUTES = {
    "module", "device_ids", "output_device", "device_type", "device", "dim", "broadcast_buffers",
    "find_unused_parameters", "process_group", "bucket_bytes_cap", "gradient_as_bucket_view", "static_graph",
    "logger", "reducer", "training", "require_backward_grad_sync", "require_forward_param_sync", "mixed_precision",
    "parameters_to_ignore", "is_multi_device_module", "modules_buffers", "named_module_buffers", "dump_patches",
    "call_super_init", "T_destination",
}  # fmt: skip


def _model_attribute_on_the_wrapper(program: Program) -> Iterator[Hit]:
    """`model = DDP(model, ...)`, then `model.optimizer` where the program's model class sets `self.optimizer =
    ...` (Superpoints_Registration's resume, `optimizer=model.optimizer`): the wrapper holds no such attribute, so
    reading it raises AttributeError."""
    kept = program.memo(("model attributes",), lambda: _model_attributes(program))
    if not kept:
        return
    for module in program.modules:
        wraps = _wraps(module, program)
        wrapper_names = {name for name, _, _ in wraps}
        if not wraps:
            continue
        for node in module.of_type(ast.Attribute):
            if not (isinstance(node.ctx, ast.Load) and node.attr in kept and call_name(node.value) in wrapper_names):
                continue
            parent = module.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                continue  # a method called: the part above
            owner = call_name(node.value)
            if _set_on(module, node, owner):
                continue  # `model.users = 0.0` on the wrapper first (LLM-SRec): the read finds that one
            if (
                _is_wrapper(module, node, owner, wraps)
                and not _unwrapped_before(module, node, owner)
                and not _under_a_wrapper_test(module, node)
                and not _beside_an_arm_that_unwraps(module, node, owner)
            ):
                statement = next(p for p in [node, *module.ancestors(node)] if isinstance(p, ast.stmt))
                yield module, statement.lineno  # (once for `load(model.optimizer, model.scheduler)`)


def _set_on(module: Module, node: ast.Attribute, owner: str) -> bool:
    """`owner.attr = ...` somewhere in the read's scope: the name holds that attribute itself."""
    return any(
        isinstance(target, ast.Attribute) and target.attr == node.attr and call_name(target.value) == owner
        for assign in walk(module.scope_of(node))
        if isinstance(assign, (ast.Assign, ast.AugAssign))
        for target in (assign.targets if isinstance(assign, ast.Assign) else [assign.target])
    )


def _model_attributes(program: Program) -> Set[str]:
    """What the program's model classes (an `nn.Module` subclass, or a class with a `forward`) set on `self`, but
    what their `__init__` makes with a class (submodules): `self.optimizer = torch.optim.AdamW(...)` in
    `configure_optimizers`, `self.optimizer = None` in `__init__`."""
    found: Set[str] = set()
    for classes in program.classes.values():
        for _, node in classes:
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            if not any(m.name == "forward" for m in methods) and not any(
                last_name(base) == "Module" for base in node.bases
            ):
                continue
            for method in methods:
                for assign in walk(method):
                    if not isinstance(assign, ast.Assign) or (method.name == "__init__" and _a_layer(assign.value)):
                        continue
                    for target in assign.targets:
                        if isinstance(target, ast.Attribute) and call_name(target.value) == "self":
                            found.add(target.attr)
    return {name for name in found if not name.startswith("_")} - DDP_ATTRIBUTES - MODULE_API


def _a_layer(value: ast.expr) -> bool:
    """`nn.Linear(...)`, `SomeBlock(...)` made in `__init__`: most likely a submodule or a parameter (the wrapper
    does not answer those either, but what a class makes is not told here): left out."""
    return isinstance(value, ast.Call) and last_name(value)[:1].isupper()


def _subclasses_ddp(program: Program) -> bool:
    return any(
        last_name(base) in ("DistributedDataParallel", "DDP")
        for found in program.classes.values()
        for _, node in found
        for base in node.bases
    )


def _under_a_wrapper_test(module: Module, node: ast.AST) -> bool:
    """Inside `if hasattr(model, "module"):`, `if isinstance(model, DDP):`, their `else`, or `if hasattr(model,
    'no_weight_decay'):` (asked first: on the wrapper the branch is not taken)."""
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.If, ast.IfExp)):
            words = {n.value for n in walk(parent.test) if isinstance(n, ast.Constant)} | names_in(parent.test)
            if words & {"module", "DistributedDataParallel", "DDP", "distributed", "is_distributed", "hasattr"}:
                return True
    return False


# ---- DDP021 ---------------------------------------------------------------------------------------
def shard_read_by_some_ranks(program: Program) -> Iterator[Hit]:
    """`if args.local_rank in [-1, 0]: evaluate(...)` whose `evaluate` builds `DistributedSampler(eval_dataset)`
    (the old transformers examples' `evaluate` and `predict`): rank 0 reads its shard alone."""
    if not program.distributed:
        return
    for module in program.modules:
        for call in _shard_calls(module):
            if not last_name(call).endswith("DistributedSampler") or len(call.args) > 1 or call.keywords:
                continue  # (`num_replicas=1`, `rank=0` given: the sampler is told it is alone)
            if _never_used(module, call) or not program.runs(module, call.lineno):
                continue
            if module.on_a_single_process_arm(call) or program.branches_away(module, call):
                continue
            if (
                program.guarded(module, call)
                and not _never_called(program, module, call)
                and not _on_both_arms_of_a_rank_test(program, module, call)
            ):
                yield module, call.lineno
        yield from _sharded_loader_evaluated_on_some_ranks(program, module)


def _sharded_loader_evaluated_on_some_ranks(program: Program, module: Module) -> Iterator[Hit]:
    """`if device == 0: print(utils.eval(loaders['train'], model, ...))`, the loader made with
    `sampler=DistributedSampler(train_set)` for training (aswa): an evaluation on some ranks only reads a
    loader sharded over every rank — rank 0 scores its shard as the whole set."""
    if "DistributedSampler" not in module.source:
        return
    for call in module.calls:
        if not _is_eval_name(last_name(call)) or not call.args:
            continue
        kept = module.parents.get(call)
        if isinstance(kept, ast.Assign) and all(isinstance(t, ast.Name) for t in kept.targets):
            continue  # `val_loss = evaluate(...)`, then logged: DDP017 follows the name
        if not any(_sharded_loader(module, call, value) for value in call.args):
            continue
        some = module.rank_branch(call) is not None and program.guarded(module, call)
        if program.runs(module, call.lineno) and (some or _after_other_ranks_skip(module, call)):
            yield module, call.lineno


def _after_other_ranks_skip(module: Module, node: ast.AST) -> bool:
    """After `if device != 0: continue` (or `break`) earlier in the same loop's body: only the rank the test lets
    through gets here."""
    child = node
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if isinstance(parent, (ast.For, ast.While)):
            top = next((s for s in parent.body if s is child), None)
            before = parent.body[: parent.body.index(top)] if top is not None else []
            return any(
                isinstance(s, ast.If)
                and module.selects_ranks_at(s)
                and len(s.body) == 1
                and isinstance(s.body[0], (ast.Continue, ast.Break))
                and not s.orelse
                for s in before
            )
        child = parent
    return False


def _sharded_loader(module: Module, at: ast.AST, value: ast.AST, depth: int = 2) -> bool:
    """A loader made with a DistributedSampler: `DataLoader(ds, sampler=DistributedSampler(ds))`, through the name
    it was last given in the function, or a literal dictionary's entry (`loaders['train']`)."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and isinstance(value.slice, ast.Constant):
        held = _last_assignment(module, at, value.value)
        if isinstance(held, ast.Dict):
            return any(
                is_const(key, value.slice.value) and _sharded_loader(module, at, entry, depth)
                for key, entry in zip(held.keys, held.values)
                if key is not None
            )
        return False
    if isinstance(value, ast.Name) and depth > 0:
        return _sharded_loader(module, at, _last_assignment(module, at, value), depth - 1)
    if not (isinstance(value, ast.Call) and last_name(value) == "DataLoader"):
        return False
    sampler = keyword(value, "sampler") or keyword(value, "batch_sampler")
    if isinstance(sampler, ast.Name) and depth > 0:
        sampler = _last_assignment(module, at, sampler)
    return isinstance(sampler, ast.Call) and last_name(sampler).endswith("DistributedSampler")


def _on_both_arms_of_a_rank_test(program: Program, module: Module, node: ast.AST) -> bool:
    """The function around `node` is reached from both arms of one rank test, directly or through callers (SUEF's
    `if is_master(): create_data_loaders(...)` — which calls `create_train_loader` — / `else:
    create_train_loader(...)`): every rank runs it."""
    arms: Dict[int, Set[bool]] = {}
    _rank_arms(program, module, node, arms, 3)
    return any(len(sides) == 2 for sides in arms.values())


def _rank_arms(program: Program, module: Module, node: ast.AST, arms: Dict[int, Set[bool]], depth: int) -> None:
    branch = module.rank_branch(node)
    if branch is not None:
        inside = any(node is n for s in branch.body for n in walk(s))
        arms.setdefault(id(branch), set()).add(inside)
    function = module.function_of(node)
    if function is None or depth == 0:
        return
    for other, site in program.running_sites(module, function):
        _rank_arms(program, other, site, arms, depth - 1)


def _never_called(program: Program, module: Module, node: ast.AST) -> bool:
    """The function around `node` has no call the program runs, by name or handed over (an imported script's `main`,
    called only in its own `__main__` block): nothing there runs, on any rank."""
    function = module.function_of(node)
    if function is None or function.name.startswith("__"):
        return False
    return not program.running_sites(module, function, handed=True)


# ---- DDP023 ---------------------------------------------------------------------------------------
SEED_CALLS = ("manual_seed", "seed_everything", "set_seed")  # what seeds torch's default generator
UNREPEATABLE_SEEDS = {"randint", "time", "time_ns", "urandom", "random", "getpid"}


def unshared_random_split(program: Program) -> Iterator[Hit]:
    """`train, val = random_split(dataset, [n_train, n_val])` with no `generator=`, in a program whose ranks do not
    seed torch alike (no seed at all, `torch.manual_seed(seed + rank)`): every rank draws its own split, so one
    rank's validation images are another's training images, and the DistributedSampler's shards of the different
    subsets no longer partition the data."""
    if not program.distributed:
        return
    yield from _unseeded_shuffle_split(program)
    splits = [(m, c) for m, c in program.calls_named("random_split") if _torch_split(program, m, c)]
    if not splits:
        return
    seeds = _global_seeds(program)
    if seeds and not any(seeds):
        return  # every rank seeds torch with the same value: the same split everywhere
    for module, call in splits:
        if program.guarded(module, call) or _on_single_process_path(module, call):
            continue  # split on one rank, or by the single-process run
        if not program.branches_away(module, call):
            yield module, call.lineno


# what seeds every generator at once (Lightning's, transformers', the common helpers)
SEED_ALL = ("seed_everything", "set_seed", "set_random_seed", "seed_all", "setup_seed", "init_seeds", "fix_seed")


def _unseeded_shuffle_split(program: Program) -> Iterator[Hit]:
    """`random.shuffle(paths)`, then `train = paths[:k]`, `val = paths[k:]`, in a program that never seeds Python's
    `random` alike on every rank (DFC2025 seeds numpy and torch only): each rank shuffles its own way, so one rank's
    validation images are another's training images. The same for `np.random.shuffle` without `np.random.seed`."""
    for module, call in program.calls_named("shuffle"):
        generator = call_name(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        if generator not in ("random", "np.random", "numpy.random") or len(call.args) != 1:
            continue
        shuffled = call.args[0]
        if not isinstance(shuffled, ast.Name) or not _split_after(module, call, shuffled.id):
            continue
        if _seeded_alike(program, generator) or program.guarded(module, call) or _on_single_process_path(module, call):
            continue
        if not program.branches_away(module, call):
            yield module, call.lineno


def _split_after(module: Module, call: ast.Call, name: str) -> bool:
    """Both `name[:k]` and `name[k:]` read after `call` in its function: a split into two parts."""
    halves = {
        (node.slice.lower is None, node.slice.upper is None)
        for node in walk(module.scope_of(call))
        if isinstance(node, ast.Subscript)
        and is_name(node.value, name)
        and isinstance(node.slice, ast.Slice)
        and node.lineno > call.lineno
    }
    return (True, False) in halves and (False, True) in halves


def _seeds(function: ast.AST, owners: Tuple[str, ...]) -> bool:
    """The function calls `random.seed(...)` (`np.random.seed(...)`: any of `owners`) itself."""
    return any(isinstance(n, ast.Call) and call_name(n) in {o + ".seed" for o in owners} for n in walk(function))


def _seeded_alike(program: Program, generator: str) -> bool:
    """The program seeds that generator (`random.seed(args.seed)`, `np.random.seed(...)`, or a helper that seeds
    it among others) with a value that is not the rank's."""
    owners = ("random",) if generator == "random" else ("np.random", "numpy.random")
    for module, call in program.calls_named("seed", *SEED_ALL):
        if last_name(call) == "seed":
            if call_name(call).rpartition(".")[0] not in owners:
                continue
        else:
            own = program.resolve(call, module)
            if own and not any(_seeds(f, owners) for _, f in own):
                continue  # the program's own helper, seeding other generators only
        given = [*call.args, *(k.value for k in call.keywords)]
        if given and not any(names_in(v) & (RANK_NAMES | UNREPEATABLE_SEEDS) for v in given):
            return True  # (`random.seed()` draws its seed from the system: each rank its own)
    return False


def _torch_split(program: Program, module: Module, call: ast.Call) -> bool:
    """torch's `random_split` left to the default generator (not the program's own `random_split(df, 0.7, 0.1)`)."""
    if keyword(call, "generator") is not None or len(call.args) > 2 or program.resolve(call, module):
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False  # `random_split(*parts)`, `random_split(**split)`: a generator may be among them
    if len(call.args) + len([k for k in call.keywords if k.arg in ("dataset", "lengths")]) < 2:
        return False  # not a complete call (it raises before splitting)
    name = call_name(call)
    return name.startswith("torch.") or any(
        imported.startswith("torch.") and imported.endswith(".random_split") for imported in module.import_names
    )


def _global_seeds(program: Program) -> List[bool]:
    """Each call the program runs that seeds torch's default generator, True where its seed differs by rank (or
    from run to run): `torch.manual_seed(args.seed + rank)`, a helper `set_seed(seed)` called with one, a seed from
    the clock. A generator's own `g.manual_seed(...)` and CUDA's seeds leave the default generator alone."""
    found = []
    for module, call in program.calls_named(*SEED_CALLS):
        name = call_name(call)
        if last_name(call) == "manual_seed" and name not in ("torch.manual_seed", "manual_seed"):
            continue  # `torch.cuda.manual_seed`, `g.manual_seed(0)`
        if program.resolve(call, module) or not program.runs(module, call.lineno):
            continue  # the program's own helper: the seeding calls inside it are read themselves
        function = module.function_of(call)
        if function is not None and not _may_be_called(program, function):
            continue  # a helper nothing calls seeds nothing
        seed = argument(call, 0, "seed")
        found.append(seed is not None and _differs_by_rank(program, module, call, seed))
    return found


def _differs_by_rank(program: Program, module: Module, call: ast.Call, seed: ast.expr) -> bool:
    names = _derived_names(module, call, seed)
    if names & (RANK_NAMES | UNREPEATABLE_SEEDS):
        return True
    function = module.function_of(call)
    if function is None:
        return False
    parameters = {a.arg for a in function.args.args} & names  # `def set_seed(seed): torch.manual_seed(seed)`
    for site_module, site in program.sites_of_function(module, function):
        for parameter in parameters:
            given = given_value(function, site, parameter)
            if given is not None and _derived_names(site_module, site, given) & (RANK_NAMES | UNREPEATABLE_SEEDS):
                return True
    return False


# ---- DDP017 ---------------------------------------------------------------------------------------
LOG_CALLS = {
    "print",
    "info",
    "debug",
    "warning",
    "log",
    "add_scalar",
    "add_scalars",
    "log_metrics",
    "log_metric",
    "log_string",  # the PointNet family's logger
}
# a progress bar's text: a log line where it shows a figure after the pass over the batches (ppt_learning's test
# loss on rank 0's bar), not the running figure it shows batch by batch
PROGRESS_CALLS = {"set_description", "set_postfix"}
# a metric's name holds one of these anywhere, or one of METRIC_PARTS as a whole part (`em`, `val_ppl`, `mAP`)
METRIC_WORDS = (
    "acc",
    "top1",
    "top5",
    "correct",
    "loss",
    "metric",
    "precision",
    "recall",
    "f1",
    "iou",
    "psnr",
    "ssim",
    "bleu",
    "perplexity",
)
MATH_MODULES = {"torch", "math", "np", "numpy", "F", "jnp", "tf", "scipy", "cmath"}
METRIC_PARTS = {"em", "ppl", "map", "auc", "err", "dice", "wer"}
# (collect_results/merge_results: mmcv's and OpenPCDet's gathering of every rank's results through files or
# all_gather, which rank 0 then combines)
REDUCING_WORDS = (
    "reduce",
    "gather",
    "synchronize",
    "sync",
    "mean_across",
    "average_across",
    "collect_results",
    "merge_results",
)
FILE_MERGES = ("collect_results", "merge_results")
FILE_READS = ("load", "open", "read_pickle", "read_json")


def _reads_every_ranks_file(function: ast.AST) -> bool:
    """`for r in range(opt.world_size): with open(f'..._rank_{r}.pkl', 'rb') as fid: pk.load(fid)`: every rank's
    part read back from the file it wrote (a loop over the world size that loads files)."""
    return any(isinstance(loop, ast.For) and _loads_every_ranks_file(loop) for loop in walk(function))


def _loads_every_ranks_file(loop: ast.For) -> bool:
    if not (isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range"):
        return False
    if not names_in(loop.iter) & (PROCESS_COUNT_NAMES | {"get_world_size"}):
        return False
    return any(isinstance(n, ast.Call) and last_name(n) in FILE_READS for s in loop.body for n in walk(s))


SHARD_COUNTS = ("num_shards", "num_replicas", "nshards")  # a custom per-rank split: ShardedDataIterator(...)


def _reduces(program: Program, module: Module, function: ast.AST) -> bool:
    """Whether a function combines values over ranks itself or through the program's functions and objects it
    calls. A call the program defines counts by what it runs (`synchronize()` that only waits at a barrier combines
    nothing), a library's by its name (`all_reduce`, `synchronize_between_processes`)."""
    return _reduces_in(program, module, function, 4)


def _reduces_in(program: Program, module: Module, function: ast.AST, depth: int) -> bool:
    """Kept per function and depth in the program (which decides what a call resolves to): helpers that call one
    another densely are read once each, not once per path."""
    return program.memo(("reduces", id(function), depth), lambda: _reduces_reading(program, module, function, depth))


def _reduces_reading(program: Program, module: Module, function: ast.AST, depth: int) -> bool:
    if _reads_every_ranks_file(function):
        return True  # HybrIK's `test_gt_kpt_rank_{rank}.pkl`, each read back by rank 0 and merged
    for call in module.calls_in(function):
        targets = program.resolve(call, module) or program.bound_methods(call, module)
        if any(word in last_name(call).lower() for word in FILE_MERGES):
            return True  # each rank's part written to a file, read back by rank 0: barriers are all they call
        if _applies_a_gathering_function(program, call):
            return True  # `torch.cat(GatherLayer.apply(feats))`
        if not targets or depth == 0:  # a library's call, or one too deep to read: judged by its name
            if any(word in last_name(call).lower() for word in REDUCING_WORDS) and not (
                _within_process(module, call) or _result_thrown_away(module, call)
            ):
                return True  # (a barrier or a broadcast reduces nothing)
            continue
        if last_name(call) == "compute" and any(_torchmetrics_class(other, callee) for other, callee in targets):
            return True  # a torchmetrics Metric of the program's own: compute() syncs its states over ranks
        if any(callee is not function and _reduces_in(program, other, callee, depth - 1) for other, callee in targets):
            return True
    return False


def _torchmetrics_class(module: Module, method: ast.FunctionDef) -> bool:
    """The method's class derives from torchmetrics' `Metric` (`class MACELoss(Metric):`, Metric from torchmetrics)."""
    owner = next((p for p in module.ancestors(method) if isinstance(p, ast.ClassDef)), None)
    if owner is None:
        return False
    for base in owner.bases:
        name = call_name(base)
        if name.startswith("torchmetrics.") or module.import_tops.get(name.split(".")[0]) == "torchmetrics":
            return True
    return False


WITHIN_PROCESS = ("nn.parallel", "cuda.comm", "scatter_gather")  # DataParallel's gathers between one process's GPUs


def _within_process(module: Module, call: ast.Call) -> bool:
    """`torch.nn.parallel.gather(...)`, or `torch_gather(...)` imported from there: no other rank takes part."""
    name = call_name(call)
    if any(word in name for word in WITHIN_PROCESS) or name == "torch.gather" or keyword(call, "index") is not None:
        return True  # (torch.gather / tensor.gather(dim, index=...): indexing, not a collective)
    if last_name(call) == "gather" and call.args and _int_literal(call.args[0]):
        return True  # `a.gather(-1, t)`: a tensor's gather along a dimension (a collective's first is a tensor)
    if "batchnorm" in name.lower() or "syncbn" in name.lower():
        return True  # convert_sync_batchnorm builds layers: nothing is combined when it runs
    root = name.split(".")[0]
    for node in module.imports:
        for alias in node.names:  # type: ignore[attr-defined]
            if (alias.asname or alias.name.split(".")[0]) == root:
                source = (node.module + "." if isinstance(node, ast.ImportFrom) and node.module else "") + alias.name
                return any(word in source for word in WITHIN_PROCESS)
    return False


def _int_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _shard_call(call: ast.Call) -> bool:
    """A DistributedSampler, a data iterator split per rank by keywords (`num_shards=`, `shard_id=`), or a loader
    given the process's rank and the world size (`DistributedDataLoader(path, B, T, ddp_rank, ddp_world_size)`)."""
    return (
        last_name(call).endswith("DistributedSampler")
        or any(keyword(call, name) is not None for name in SHARD_COUNTS)
        or _loader_given_rank_and_world(call)
    )


def _loader_given_rank_and_world(call: ast.Call) -> bool:
    name = last_name(call)
    if not name.endswith(("Loader", "Iterator")) or name == "DataLoader":
        return False
    words = [call_name(a).rpartition(".")[2].lower() for a in [*call.args, *(k.value for k in call.keywords)]]
    return any("rank" in w and "local" not in w for w in words) and any("world" in w for w in words)


def _shuffle_of(call: ast.Call) -> Optional[ast.expr]:
    if last_name(call).endswith("DistributedSampler"):
        return argument(call, 3, "shuffle")
    return keyword(call, "shuffle")


def _for_evaluation(program: Program, module: Module, call: ast.Call) -> bool:
    """A shard maker built for evaluation: without shuffling, named for validation, under `if split == 'val':`,
    or in a helper that one of its callers asks for an unshuffled (or validation) split."""
    shuffle = _shuffle_of(call)
    dataset = call.args[0] if call.args else keyword(call, "dataset")
    names = _sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")
    if _is_eval_name(names) or _under_eval_split(module, call):
        return True
    if is_const(shuffle, False):  # unshuffled: evaluation, unless named for the training split (a pass that
        return "train" not in names.lower()  # caches each training image's features, `sampler_train`)
    if isinstance(shuffle, ast.Name) and _unshuffled_split_in(module, call, shuffle.id):
        return True
    if _some_caller_does_not_shuffle(program, module, call):
        return True  # BLIP's and ALBEF's create_sampler(datasets, [True, False, False], ...)
    if _some_caller_asks_for_evaluation(program, module, call):
        return True
    if any(_under_eval_split(module, loader) for loader in _loaders_given(module, call)):
        return True  # `sampler = DistributedSampler(ds)`, then `if split == 'val': DataLoader(ds, sampler=sampler)`
    function = module.function_of(call)
    if function is None or not isinstance(shuffle, ast.Name):
        return False
    position = call_position(function, shuffle.id)
    if position is None:
        return False
    for other, site in program.sites_of(function.name):
        passed = argument(site, position, shuffle.id)
        if is_const(passed, False) or _is_eval_name(_sampler_target(other, site)):
            return True
    return False


def _unshuffled_split_in(module: Module, call: ast.Call, flag: str) -> bool:
    """3detr: `for split in ["train", "test"]:` ... `shuffle = True` for train, `False` otherwise, then
    `DistributedSampler(datasets[split], shuffle=shuffle)`: the function sets the flag False on some arm and names an
    evaluation split — the sampler serves the test set too."""
    scope = module.scope_of(call)
    unshuffled = any(
        isinstance(node, ast.Assign)
        and is_const(node.value, False)
        and any(isinstance(t, ast.Name) and t.id == flag for t in node.targets)
        for node in walk(scope)
    )
    return unshuffled and any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in EVAL_SPLITS
        for node in walk(scope)
    )


def _loaders_given(module: Module, sampler: ast.Call) -> List[ast.Call]:
    """The loaders of the sampler's function given it by the name it is kept in (`sampler=train_sampler`)."""
    parent = module.parents.get(sampler)
    names = {t.id for t in parent.targets if isinstance(t, ast.Name)} if isinstance(parent, ast.Assign) else set()
    scope = module.function_of(sampler)
    if not names or scope is None:
        return []
    return [
        call
        for call in module.calls_in(scope)
        if last_name(call) == "DataLoader"
        and isinstance(given := keyword(call, "sampler"), ast.Name)
        and given.id in names
    ]


def _under_eval_split(module: Module, call: ast.Call) -> bool:
    """Inside `if split == 'val':` (or `elif mode in ('test', 'val')`, or the `else` of `if split != 'val':`) —
    not the `else` of `if split == 'val':`, where the training split's samplers are made."""
    lineage = {id(call), *map(id, module.ancestors(call))}
    for parent in module.ancestors(call):
        if isinstance(parent, ast.If) and isinstance(parent.test, ast.Compare) and id(parent.test) not in lineage:
            words = [n.value for n in walk(parent.test) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            if not any(_is_eval_name(w) and len(w) <= 10 for w in words):
                continue
            asks = not any(isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)) for op in parent.test.ops)
            if any(id(statement) in lineage for statement in parent.body) == asks:
                return True
    return False


def _some_caller_asks_for_evaluation(program: Program, module: Module, call: ast.Call) -> bool:
    """A helper that makes the sampler for whatever split it is asked for, and one of the program's calls asks
    for a validation one (`build_vocloader("val", cfg)` beside `build_vocloader("train", cfg)`) — where that
    call's split reaches the sampler (not an `if split == 'val':` it leaves for the other arm)."""
    function = module.function_of(call)
    if function is None:
        return False
    parameters = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    return _asked_for_evaluation(program, module, function, call, parameters, depth=2)


def _asked_for_evaluation(
    program: Program, module: Module, function: ast.FunctionDef, node: ast.AST, parameters: List[str], depth: int
) -> bool:
    """Some running call of `function` gives one of `parameters` a validation split — or, `depth` callers up, a
    parameter of its own that a call of its function gives one (UniTS: `_get_data(flag)` passes `flag` to
    `data_provider(args, config, flag, ddp=True)`, and `test()` calls `_get_data(..., flag='test')`)."""
    for other, site in program.sites_of_function(module, function):
        if branch_not_taken(module, function, node, site) or not program.runs(other, site.lineno):
            continue
        caller = other.function_of(site)
        for parameter in parameters:
            given = given_value(function, site, parameter)
            if (
                isinstance(given, ast.Constant)
                and isinstance(given.value, str)
                and len(given.value) <= 10
                and _is_eval_name(given.value)
                and "train" not in given.value.lower()  # (`split='trainval'`: both)
            ) or (isinstance(given, ast.Attribute) and given.attr.lower() in EVAL_SPLITS):
                return True  # (`dataset_builder(args, config.dataset.val)`: the validation split's settings)
            if depth > 1 and isinstance(given, ast.Name) and caller is not None and caller is not function:
                own = [a.arg for a in [*caller.args.posonlyargs, *caller.args.args, *caller.args.kwonlyargs]]
                if given.id in own and _asked_for_evaluation(program, other, caller, site, [given.id], depth - 1):
                    return True
    return False


EVAL_SPLITS = {"val", "valid", "validation", "test", "eval", "dev"}


def _evaluation_sharded(program: Program) -> bool:
    """An evaluation shard maker is built (see `_for_evaluation`): each rank evaluates a part. Without one every
    rank evaluates the whole set, and rank 0's figure is the model's."""
    return any(
        _for_evaluation(program, module, call)
        and not _never_used(module, call)
        and not program.branches_away(module, call)
        for module in program.modules
        for call in _shard_calls(module)
    )


def _shard_calls(module: Module) -> List[ast.Call]:
    """The module's DistributedSamplers and iterators split by keywords (looked for only where the words occur)."""

    def compute() -> List[ast.Call]:
        words = ("Sampler", "world", *SHARD_COUNTS)
        if not any(word in module.source for word in words):
            return []
        return [call for call in module.calls if _shard_call(call)]

    return module.memo(("shard calls",), compute)


def _logged_names(call: ast.Call) -> Set[str]:
    """The names and attributes a call's arguments read: `acc`, `self.total_eval_loss[key]`."""
    found: Set[str] = set()
    for value in [*call.args, *[k.value for k in call.keywords]]:
        for node in walk(value):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
    return found


def _name_parts(name: str) -> Set[str]:
    return {part.lower() for part in re.split(r"[_\W\d]+|(?<=[a-z])(?=[A-Z])", name) if part}


NOT_METRICS = ("correction",)  # `correction = ...` (a fitted offset) holds `correct` and counts nothing


def _is_metric(names: Iterable[str]) -> bool:
    def metric(name: str) -> bool:
        lowered = name.lower()
        for word in NOT_METRICS:
            lowered = lowered.replace(word, " ")
        return any(word in lowered for word in METRIC_WORDS) or bool(_name_parts(name) & METRIC_PARTS)

    return any(metric(name) for name in names)


def _is_log_call(program: Program, module: Module, call: ast.Call) -> bool:
    """`print`, `logger.info`, `writer.add_scalar`..., or a program function that passes one of its parameters to
    one (`print_only_rank0(msg)`) and is given a figure there — not a worker that prints its image count
    (StudioGAN's `save_images_png(..., num_images=n)`: `print(f"Save {num_images} ...")`)."""
    if _logs(call):
        return True
    if last_name(call) in PROGRESS_CALLS and isinstance(call.func, ast.Attribute):
        return not any(
            _over_a_loader(p) or _iterates_a_loader(module, p) for p in module.ancestors(call) if isinstance(p, ast.For)
        )
    for other, callee in program.resolve(call, module):
        logged = _logged_parameters(other, callee)
        if not logged:
            continue
        spread = {a.arg for a in (callee.args.vararg, callee.args.kwarg) if a is not None} & logged
        given = [given_value(callee, call, name) for name in logged - spread]
        if spread:  # `print0(*args)`: whatever the call passes
            given += [*call.args, *(k.value for k in call.keywords)]
        if any(value is not None and _is_metric(_names_read(value)) for value in given):
            return True
    return False


def _names_read(value: ast.expr) -> Set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.attr for n in walk(value) if isinstance(n, (ast.Name, ast.Attribute))
    }


def _logs(call: ast.Call) -> bool:
    """A logging call by name — not the logarithm (`torch.log(x)`, `math.log(x)`, `x.log()`)."""
    name = call_name(call)
    if last_name(call) not in LOG_CALLS:
        return False
    return not (name.endswith(".log") or name == "log") or bool(
        (call.args or call.keywords) and name.split(".")[0] not in MATH_MODULES
    )


def _logged_parameters(module: Module, function: ast.FunctionDef) -> Set[str]:
    """The function's parameters it passes to a log call (`def print_only_rank0(msg): if rank == 0: print(msg)`)."""

    def compute() -> Set[str]:
        spread = [a for a in (function.args.vararg, function.args.kwarg) if a is not None]  # print(*args, **kwargs)
        parameters = {a.arg for a in [*function.args.args, *spread]} - {"self", "cls"}
        return {name for call in module.calls_in(function) if _logs(call) for name in _logged_names(call) & parameters}

    return module.memo(("logged parameters", id(function)), compute)


def _in_loop(module: Module, node: ast.AST, function: ast.AST) -> bool:
    for parent in module.ancestors(node):
        if parent is function:
            return False
        if isinstance(parent, (ast.For, ast.While)):
            return True
    return False


def unreduced_metric_logged(program: Program) -> Iterator[Hit]:
    yield from _unsynced_lightning_logs(program)
    if not program.distributed or not _evaluation_sharded(program):
        return
    for module in program.modules:
        for function in module.functions:
            calls = module.calls_in(function)
            if not (_evaluates(calls) or _evaluates_per_batch(program, module, function, calls)):
                continue
            if function.body and _runs_single_process_only(program, module, function.body[0]):
                continue  # the single-process runner's evaluation (its subclass for DDP evaluates its own way)
            if _trains_beside(module, calls):  # (a training step that puts a teacher in eval() and no_grad is no
                yield from _validations_within(program, module, function)  # evaluation; a loop under no_grad is)
                continue
            if _reduces(program, module, function):
                yield from _logged_beside_a_reduction(program, module, function, calls)
                continue
            logged = [
                c
                for c in calls
                if _is_log_call(program, module, c) and _is_metric(_traced(module, function, _logged_names(c)))
            ]
            if _reads_its_own_whole_set_loaders(module, function):
                continue  # GP-Transformer's `_evaluate_checkpoint_on_test`: `DataLoader(test_ds, shuffle=False)` made
                # inside, no sampler: whichever rank runs it reads the whole set
            if _iterates_whole_lists(program, module, function):
                continue
            if logged and not _given_whole_set_loaders(program, module, function):
                # logged on rank 0, or on every rank (each its own shard): the figure after the loop first
                after = [c for c in logged if not _in_loop(module, c, function)]
                yield module, (after or logged)[0].lineno
            loops = any(isinstance(n, (ast.For, ast.While)) for n in walk(function))
            returns = any(isinstance(n, ast.Return) and n.value is not None for n in walk(function))
            if returns and loops:  # an evaluation over a loader, not a loss helper: by its name, or where a
                # caller keeps its result as an evaluation's (`val_loss = self.run_epoch(val_dl, training=False)`)
                yield from _logged_by_callers(program, function.name, not _is_eval_name(function.name), function)
        yield from _top_level_evaluations_logged(program, module)


def _reads_its_own_whole_set_loaders(module: Module, function: ast.FunctionDef) -> bool:
    """Every loop of the function over a loader goes over one the function makes itself with no sampler."""
    loops = [loop for loop in walk(function) if isinstance(loop, ast.For) and _iterates_a_loader(module, loop)]
    names = [_iterated_name(loop.iter) for loop in loops]
    return bool(loops) and all(
        name is not None and _made_in(module, function, name) and _unsampled_loader(module, loop, name, 3)
        for loop, name in zip(loops, names)
    )


def _iterates_whole_lists(program: Program, module: Module, function: ast.FunctionDef) -> bool:
    """Every loop of the evaluation over a parameter goes over what each running caller built with one of the
    program's functions that makes no loader or sampler and reads no rank, or over a literal (DIN_v2's
    `evaluate_topk(eval_data=eval_data, ks=[5, 10])`, its users listed by `get_topk_eval_data`): whichever rank runs
    it reads the whole list."""
    parameters = _parameter_names(function)
    loops = [
        loop
        for loop in walk(function)
        if isinstance(loop, ast.For) and module.function_of(loop) is function and _runs_a_model(loop)
    ]
    iterated = [_iterated_name(loop.iter) for loop in loops]
    names = [name for name in iterated if name is not None and name.id in parameters]
    if not names or len(names) != len(iterated):
        return False
    return all(
        _every_caller_gives(program, module, name, name.id, functools.partial(_a_whole_list, program))
        for name in {n.id: n for n in names}.values()
    )


def _runs_a_model(loop: ast.For) -> bool:
    """The loop calls something named for a model (`self.model(batch)`, `net(x)`)."""
    return any(isinstance(call, ast.Call) and last_name(call).lower().endswith(("model", "net")) for call in walk(loop))


def _a_whole_list(program: Program, caller: Module, site: ast.Call, value: Optional[ast.expr]) -> bool:
    """A literal list, or a name the caller set from calls of the program's own functions that mention no loader,
    sampler or rank, given none."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return all(isinstance(item, ast.Constant) for item in value.elts)
    if isinstance(value, ast.Call):
        return _made_whole(program, caller, [value])
    if not isinstance(value, ast.Name):
        return False
    made = [  # (`eval_data, ie = None, None` first: the call is under `if eval_data is not None:`)
        node.value
        for node in walk(caller.scope_of(site))
        if isinstance(node, ast.Assign)
        and node.lineno < site.lineno
        and any(value.id in {n.id for n in walk(t) if isinstance(n, ast.Name)} for t in node.targets)
        and not all(is_const(n, None) for n in (node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]))
    ]
    return _made_whole(program, caller, made)


def _made_whole(program: Program, caller: Module, made: List[ast.expr]) -> bool:
    calls = [m for m in made if isinstance(m, ast.Call)]
    if not calls or len(calls) != len(made):
        return False
    return all(
        (found := program.resolve(call, caller))
        and not _mentions_sharding(names_in(call))
        and all(not _mentions_sharding(names_in(function)) for _, function in found)
        for call in calls
    )


def _mentions_sharding(names: FrozenSet[str]) -> bool:
    return bool(names & RANK_NAMES) or any(
        word in name.lower() for name in names for word in ("loader", "sampler", "rank", "shard")
    )


def _made_in(module: Module, function: ast.FunctionDef, name: ast.Name) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and module.function_of(node) is function
        and name.id in {call_name(t) for t in node.targets}
        for node in walk(function)
    )


def _iterated_name(iterated: ast.expr) -> Optional[ast.Name]:
    """The name a loop goes over: `loader`, `enumerate(loader)`, `tqdm(loader)`."""
    while isinstance(iterated, ast.Call) and iterated.args and last_name(iterated) in ("enumerate", "tqdm", "iter"):
        iterated = iterated.args[0]
    return iterated if isinstance(iterated, ast.Name) else None


def _given_whole_set_loaders(program: Program, module: Module, function: ast.FunctionDef) -> bool:
    """Every running call of the evaluation gives it a loader with no sampler (HagAli22's final report on rank 0,
    given `DataLoader(self.val_dataset, ...)` "without DistributedSampler for full evaluation"): it logs the whole
    set's figure."""
    sites = program.running_sites(module, function)
    return bool(sites) and all(_whole_set_loader_given(m, c) for m, c in sites)


def _traced(module: Module, function: ast.AST, names: Set[str], depth: int = 3) -> Set[str]:
    """The logged names with what the function built them from, a few assignments back: `info` joined from
    `results`, which holds `eval_loss` (`results['loss'] = eval_loss`), is a metric's figure."""
    found, frontier = set(names), set(names)
    assigns = module.memo(
        ("assignments in", id(function)),
        lambda: [n for n in walk(function) if isinstance(n, (ast.Assign, ast.AugAssign))],
    )
    for _ in range(depth):
        sources: Set[str] = set()
        for node in assigns:
            if any(_root_name(t) in frontier for t in _targets(node)):
                sources |= {n.id for n in walk(node.value) if isinstance(n, ast.Name)}
        frontier = sources - found
        if not frontier:
            break
        found |= frontier
    return found


def _evaluates_per_batch(program: Program, module: Module, function: ast.AST, calls: List[ast.Call]) -> bool:
    """A loop over a loader whose batches go through a program function that evaluates (`loss, acc =
    self._valid_batch(x, y)` with `torch.no_grad()` inside it) and nothing the loop runs back-propagates: an
    evaluation whose marker is in its per-batch helper."""
    evaluating = False
    for call in calls:
        loop = next((p for p in module.ancestors(call) if isinstance(p, (ast.For, ast.While, ast.FunctionDef))), None)
        if not (isinstance(loop, ast.For) and _iterates_a_loader(module, loop)):
            continue  # (not a loop over a list of file names that rank 0 reads whole)
        for other, callee in program.resolve(call, module):
            inner = other.calls_in(callee)
            if any(last_name(c) in ("backward", "step") for c in inner):
                return False
            evaluating = evaluating or any(last_name(c) in ("no_grad", "inference_mode") for c in inner)
    return evaluating


def _trains_beside(module: Module, calls: List[ast.Call]) -> bool:
    """The function back-propagates where it evaluates — not only in the other arm of an `if` (`if training:
    ... backward()` / `else: model.eval()`: an epoch helper for both)."""
    markers = [c for c in calls if last_name(c) in ("no_grad", "inference_mode", "eval")]
    return any(
        last_name(c) == "backward" and not any(_exclusive(module, c, marker) for marker in markers) for c in calls
    )


def _validations_within(program: Program, module: Module, function: ast.FunctionDef) -> Iterator[Hit]:
    """A training function's own validation: `with torch.no_grad():` looping over a loader every N steps, its loss
    logged right after with no reduction (each rank's shard reported as the model's)."""
    for node in walk(function):
        if not isinstance(node, ast.With) or not any(
            isinstance(i.context_expr, ast.Call) and _evaluates([i.context_expr]) for i in node.items
        ):
            continue
        if any(isinstance(n, (ast.For, ast.While)) for n in walk(node)):
            hit = _logged_after(program, module, node)
            if hit is not None:
                yield hit


def _top_level_evaluations_logged(program: Program, module: Module) -> Iterator[Hit]:
    """A script's own evaluation, outside any function: `with torch.no_grad():` looping over batches in the
    training loop, then a figure computed in it logged after it, with no reduction in between (llm.c's
    `print0(f"val loss {val_loss}")` of its rank's shard)."""
    for block in module.tree.body if "no_grad" in module.source or "inference_mode" in module.source else []:
        for node in walk(block):
            if not isinstance(node, ast.With) or module.function_of(node) is not None:
                continue
            if not any(isinstance(i.context_expr, ast.Call) and _evaluates([i.context_expr]) for i in node.items):
                continue
            if not any(isinstance(n, (ast.For, ast.While)) for n in walk(node)):
                continue
            hit = _logged_after(program, module, node)
            if hit is not None:
                yield hit


def _logged_after(program: Program, module: Module, scope: ast.With) -> Optional[Hit]:
    """The first log line after `scope`, in the statements that follow it, of a metric computed in it."""
    parent = next(iter(module.ancestors(scope)), None)
    body = next((b for b in _bodies(parent) if scope in b), None) if parent is not None else None
    if body is None:
        return None
    computed = {call_name(t) for n in walk(scope) if isinstance(n, (ast.Assign, ast.AugAssign)) for t in _targets(n)}
    computed |= {  # `valid_losses.append(loss.item())`: the list the evaluation fills
        call_name(n.func.value)
        for n in walk(scope)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend")
    } - {""}
    following = body[body.index(scope) + 1 :]
    sources = _computed_after(following, computed)
    calls = [n for s in following for n in walk(s) if isinstance(n, ast.Call)]
    inside = [n for n in walk(scope) if isinstance(n, ast.Call)]
    if any(any(word in last_name(c).lower() for word in REDUCING_WORDS) for c in [*inside, *calls]):
        return None  # reduced (all_reduce, gather) in the evaluation or after it
    for call in calls:
        names = _logged_names(call) & set(sources)
        shown = names | {source for name in names for source in sources[name]}
        if names and _is_log_call(program, module, call) and _is_metric(shown):
            return module, call.lineno
    return None


def _computed_after(statements: List[ast.stmt], computed: Set[str]) -> Dict[str, Set[str]]:
    """Each name computed in the evaluation, or after it from such names (`valid_loss = np.average(valid_losses)`,
    then `print_msg = f'... {valid_loss}'`: KenMeSH), with the names it was computed from."""
    sources: Dict[str, Set[str]] = {name: set() for name in computed}
    assignments = [n for s in statements for n in walk(s) if isinstance(n, (ast.Assign, ast.AugAssign))]
    for node in sorted(assignments, key=lambda n: n.lineno):
        read = {call_name(n) for n in walk(node.value) if isinstance(n, (ast.Name, ast.Attribute))} & set(sources)
        if read:
            for target in _targets(node):
                sources.setdefault(call_name(target), set()).update(read | {s for r in read for s in sources[r]})
    return sources


def _bodies(node: ast.AST) -> List[List[ast.stmt]]:
    return [
        getattr(node, field)
        for field in ("body", "orelse", "finalbody")
        if isinstance(getattr(node, field, None), list)
    ]


def _targets(node: ast.AST) -> List[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]


def _logged_beside_a_reduction(
    program: Program, module: Module, function: ast.AST, calls: List[ast.Call]
) -> Iterator[Hit]:
    """A function that combines some values over ranks and logs a validation figure none of whose values came out
    of a combination: `val_loss_meter.avg` printed while only the metrics went through `all_gather`, or what
    Horovod's out-of-place `hvd.allreduce(x)` returned thrown away."""
    reduced = _reduced_values(program, module, function, calls)
    for call in calls:
        if not _is_log_call(program, module, call) or not _labelled_for_evaluation(call):
            continue
        if _in_loop(module, call, function):
            continue  # a progress line every few batches, this rank's so far; the figure is what follows the loop
        values = _dotted_values(call)
        if _is_metric(_logged_names(call)) and values and not values & reduced:
            yield module, call.lineno
            return


def _labelled_for_evaluation(call: ast.Call) -> bool:
    """The logged figure says it is a validation or test one: in its text, keys or names."""
    return any(_is_eval_name(text) for text in [*_texts(call), *_logged_names(call)])


def _texts(call: ast.Call) -> List[str]:
    """The literal text a call is given (f-strings' literal parts too): what a log line says it shows."""
    return [n.value for n in walk(call) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _dotted_values(call: ast.Call) -> Set[str]:
    """What a log call reads, as dotted names (`val_loss_meter`, `val_loss_meter.avg`), without `self` alone."""
    found: Set[str] = set()
    for value in [*call.args, *[k.value for k in call.keywords]]:
        for node in walk(value):
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = call_name(node)
                if name and name not in ("self", "cls"):
                    found.add(name)
    return found


def _reduced_values(program: Program, module: Module, function: ast.AST, calls: List[ast.Call]) -> Set[str]:
    """The dotted names whose values come out of a combination over ranks in this function, in source order:
    reduced in place (`dist.all_reduce(x)`, `metric_logger.synchronize...()`), assigned from a combining call
    (`loss = reduce_mean(loss)`), computed from those, or a meter of the program fed with them."""
    libraries = set(module.import_tops)
    reduced: Set[str] = set()
    assignments = [n for n in walk(function) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))]
    events = sorted([*assignments, *calls], key=lambda n: (n.lineno, n.col_offset, isinstance(n, ast.Call)))
    for node in events:
        if isinstance(node, ast.For):  # `for _, meters in record.items():` over a merged result
            if _dotted_in(node.iter) & reduced:
                reduced |= names_in(node.target)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if node.value is not None and _dotted_in(node.value) & reduced:
                reduced |= _assigned_names(node)
        elif _combining_call(program, module, node):
            statement = next((p for p in module.ancestors(node) if isinstance(p, ast.stmt)), None)
            if statement is None:
                continue
            if not isinstance(statement, ast.Expr):
                reduced |= _assigned_names(statement)
            if isinstance(statement, ast.Expr) or _async_handle(node):  # its result thrown away (or a handle to
                # wait on, `work = dist.all_reduce(loss, async_op=True)`): what it changed in place
                if _out_of_place(module, node):
                    continue
                changed = _in_place_targets(program, module, node)
                reduced |= {name for name in changed if name.split(".")[0] not in libraries}
        elif (
            isinstance(node.func, ast.Attribute)
            and not _is_log_call(program, module, node)
            and any(_dotted_in(a) & reduced for a in node.args)
        ):
            receiver = {call_name(node.func.value), _root_name(node.func.value)}  # meter.update(reduced_loss)
            reduced |= {name for name in receiver if name.split(".")[0] not in libraries}
    return reduced - {"self", "cls", ""}


def _dotted_in(node: ast.AST) -> Set[str]:
    return {call_name(n) for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _root_name(node: ast.AST) -> str:
    """`losses` for `losses[i]`, `self.meters[k]`'s `self.meters`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return call_name(node)


def _combining_call(program: Program, module: Module, call: ast.Call) -> bool:
    if any(word in last_name(call).lower() for word in FILE_MERGES):
        return True
    if _applies_a_gathering_function(program, call):
        return True
    targets = program.resolve(call, module) or program.bound_methods(call, module)
    if targets:
        return any(_reduces_in(program, other, callee, 3) for other, callee in targets)
    return any(word in last_name(call).lower() for word in REDUCING_WORDS) and not _within_process(module, call)


def _applies_a_gathering_function(program: Program, call: ast.Call) -> bool:
    """`losses.GatherLayer.apply(x)`: an autograd Function of the program whose `forward` all-gathers (the gather
    layer SimCLR and GAN code copies, StudioGAN's metrics)."""
    if last_name(call) != "apply" or not isinstance(call.func, ast.Attribute):
        return False
    for module, node in program.classes.get(last_name(call.func.value), []):
        forward = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
        if forward is not None and program.reaches_collective(module, forward):
            return True
    return False


def _result_thrown_away(module: Module, call: ast.Call) -> bool:
    """`hvd.allreduce(rt)` as a statement: Horovod returns the combined tensor and leaves `rt` as it was."""
    return _out_of_place(module, call) and isinstance(module.parents.get(call), ast.Expr)


def _async_handle(call: ast.Call) -> bool:
    """`dist.all_reduce(x, async_op=True)` returns a handle to wait on; `x` is what is reduced, in place."""
    flag = keyword(call, "async_op")
    return flag is not None and not is_const(flag, False)


def _out_of_place(module: Module, call: ast.Call) -> bool:
    """Horovod's `allreduce`/`allgather`/`broadcast` return a new tensor (the in-place forms end in `_`)."""
    root = call_name(call).split(".")[0]
    return module.import_tops.get(root) == "horovod" and not last_name(call).endswith("_")


def _in_place_targets(program: Program, module: Module, call: ast.Call) -> Set[str]:
    """What a combining call whose result is thrown away may have changed: for a function of the program, the
    arguments it passes to an in-place collective (`reduce_tensor(t)` running `dist.all_reduce(t)`) and, for a
    method, its object (`self.metric.update(pred, label)`); for a library's call, its first argument and its
    object (`dist.all_reduce(x)`, `metric_logger.synchronize_between_processes()`)."""
    found: Set[str] = set()
    functions = program.resolve(call, module)
    if functions:
        for other, function in functions:
            positions = _reduced_in_place(program, other, function)
            found |= {name for i, a in enumerate(call.args) if i in positions for name in _dotted_in(a)}
        return found
    if call.args:
        found |= _dotted_in(call.args[0])
    if isinstance(call.func, ast.Attribute):
        found |= {call_name(call.func.value), _root_name(call.func.value)}
    return found


def _reduced_in_place(program: Program, module: Module, function: ast.FunctionDef) -> Set[int]:
    """The positions (as the caller counts them) of the parameters a function hands to an in-place collective."""

    def compute() -> Set[int]:
        found: Set[int] = set()
        for call in module.calls_in(function):
            first = call.args[0] if call.args else None
            in_place = is_collective(call, module) or (
                not program.resolve(call, module) and any(w in last_name(call).lower() for w in REDUCING_WORDS)
            )
            position = call_position(function, first.id) if in_place and isinstance(first, ast.Name) else None
            if position is not None and position >= 0:
                found.add(position)
        return found

    return program.memo(("in place", id(function)), compute)


def _assigned_names(statement: ast.stmt) -> Set[str]:
    """What an assignment binds: `loss`, `self.best`, each of `a, b`, the container of `scores[key]`."""
    if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return set()
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    found: Set[str] = set()
    for target in targets:
        for node in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            found.add(_root_name(node.value if isinstance(node, ast.Starred) else node))
    return found - {""}


def _logged_by_callers(
    program: Program, name: str, named_results_only: bool = False, function: Optional[ast.FunctionDef] = None
) -> Iterator[Hit]:
    """`acc = evaluate(...)` then `if rank == 0: print(acc)` with no reduction of `acc` between: the caller logs
    rank 0's part. `named_results_only`: only where the caller names the result for evaluation (`val_loss`).
    `function`: not at calls known to run another function of that name (`trainer.evaluate_topk(...)` with
    `trainer = SimpleDDPTrainer(...)`, not the imported RichTrainer's)."""
    for module, site in program.call_sites.get(name, []):
        assign = module.parents.get(site)
        if not isinstance(assign, ast.Assign):
            continue
        if function is not None:
            runs = [f for _, f in [*program.resolve(site, module), *program.bound_methods(site, module)]]
            if runs and function not in runs:
                continue
        results = {n.id for t in assign.targets for n in walk(t) if isinstance(n, ast.Name)}
        if named_results_only and not any(_is_eval_name(r) for r in results):
            continue
        if _whole_set_loader_given(module, site):
            continue  # `evaluate(model, DataLoader(val_dataset), ...)` with no sampler: every rank reads the whole set
        scope = module.scope_of(site)
        derived = sorted(  # `mean = torch.tensor(val_loss)`: what is computed from the result stands for it
            (n for n in walk(scope) if isinstance(n, ast.Assign) and n.lineno > site.lineno), key=lambda n: n.lineno
        )
        for call in module.calls_in(scope):
            if call.lineno <= site.lineno:
                continue
            while derived and derived[0].lineno < call.lineno:
                assign = derived.pop(0)
                targets = {n.id for t in assign.targets for n in walk(t) if isinstance(n, ast.Name)}
                if names_in(assign.value) & results:
                    results |= targets
                else:  # `results = reduce_dict(epoch_results)`: the name holds something else from here on
                    results -= targets
            if (is_collective(call, module) or any(w in last_name(call).lower() for w in REDUCING_WORDS)) and names_in(
                call
            ) & results:
                break  # reduced before it is logged
            if _is_log_call(program, module, call):
                logged = _logged_names(call) & results
                if logged and (_is_metric(logged) or _is_metric(_texts(call))):  # `cnt / total` as "accuracy"
                    yield module, call.lineno
                    break


def _whole_set_loader_given(module: Module, site: ast.Call) -> bool:
    """The call is given a loader made with no sampler (`val_loader = DataLoader(val_dataset, batch_size=...)` on
    an `--eval_only` path, beside a sharded one on the training path): what it returns is the whole set's figure."""
    return any(_unsampled_loader(module, site, given, 3) for given in [*site.args, *(k.value for k in site.keywords)])


def _unsampled_loader(module: Module, site: ast.AST, value: ast.AST, depth: int) -> bool:
    """`DataLoader(ds, batch_size=...)` with no sampler — also through the name last given one before `site` (an
    alias followed: `eval_loader = test_loader`)."""
    if isinstance(value, ast.Name) and depth > 0:
        held = _last_assignment(module, site, value)
        return held is not value and _unsampled_loader(module, site, held, depth - 1)
    return (
        isinstance(value, ast.Call)
        and last_name(value) == "DataLoader"
        and not any(k.arg in ("sampler", "batch_sampler") or k.arg is None for k in value.keywords)
        and len(value.args) <= 3  # (no sampler given by position either: it is the fourth)
    )


# Lightning: `self.log(name, value)` of a plain tensor in a validation or test step logs each rank's own mean at
# the epoch's end unless `sync_dist=True` (a torchmetrics Metric object syncs itself)
LIGHTNING_EVAL_HOOKS = (
    "validation_step",
    "test_step",
    "validation_epoch_end",
    "test_epoch_end",
    "on_validation_epoch_end",
    "on_test_epoch_end",
)


def _lightning_ddp(program: Program) -> bool:
    """A Lightning Trainer run with a DDP strategy (`strategy='ddp'`, `DDPStrategy(...)`, the old
    `accelerator='ddp'`/`distributed_backend='ddp'`)."""
    if not any("lightning" in name for module in program.modules for name in module.import_names):
        return False
    return any(
        module.memo(("lightning ddp",), functools.partial(_runs_lightning_ddp, module)) for module in program.modules
    )


def _runs_lightning_ddp(module: Module) -> bool:
    if "ddp" not in module.source.lower():
        return False
    for call in module.calls:
        name = last_name(call)
        if name.startswith("DDP") and name.endswith(("Strategy", "Plugin")):
            return True
        if name == "Trainer":
            for word in ("strategy", "accelerator", "distributed_backend"):
                value = keyword(call, word)
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and "ddp" in value.value:
                    return True
    return False


def _unsynced_lightning_logs(program: Program) -> Iterator[Hit]:
    if not _lightning_ddp(program):
        return
    for module in program.modules:
        for node in module.of_type(ast.ClassDef):
            if any("Lightning" in last_name(b) for b in node.bases):
                for method in _evaluation_methods(module, node, _lightning_runs(program, node)):
                    for call in module.calls_in(method):
                        if call_name(call) in ("self.log", "self.log_dict") and _unsynced(module, call):
                            yield module, call.lineno


def _lightning_runs(program: Program, node: ast.ClassDef) -> Set[str]:
    """The evaluation loops ("validation", "test") Lightning runs for this module: validation where the module has
    a `val_dataloader` or a `fit(...)` call is given validation data (a third argument, `val_dataloaders=`, a data
    module), test where it has a `test_dataloader` or the program calls `.test(...)`; both where the program makes
    no `fit(...)` call of its own (a trainer set up elsewhere)."""
    own = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
    fits = [c for _, c in program.calls_named("fit") if isinstance(c.func, ast.Attribute)]
    if not fits:
        return {"validation", "test"}
    runs = set()
    given = any(
        len(c.args) >= 3
        or any(k.arg in ("val_dataloaders", "datamodule") for k in c.keywords)
        or (len(c.args) == 2 and any(w in call_name(c.args[1]).lower() for w in ("datamodule", "data_module", "dm")))
        for c in fits
    )
    if "val_dataloader" in own or given:
        runs.add("validation")
    if "test_dataloader" in own or any(isinstance(c.func, ast.Attribute) for _, c in program.calls_named("test")):
        runs.add("test")
    return runs


def _evaluation_methods(module: Module, node: ast.ClassDef, runs: Set[str]) -> List[ast.FunctionDef]:
    """A LightningModule's validation and test hooks of the loops that run, and the methods they call
    (`self._common_step(batch, "val")`)."""
    methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
    hooks = [h for h in LIGHTNING_EVAL_HOOKS if any(loop in h for loop in runs)]
    reached = [methods[h] for h in hooks if h in methods]
    for hook in list(reached):
        for call in module.calls_in(hook):
            called = call.func.attr if isinstance(call.func, ast.Attribute) else ""
            if call_name(call) == f"self.{called}" and called in methods and methods[called] not in reached:
                reached.append(methods[called])
    return reached


def _unsynced(module: Module, call: ast.Call) -> bool:
    sync = keyword(call, "sync_dist")
    if sync is not None and not is_const(sync, False):
        return False
    if is_const(keyword(call, "on_epoch"), False):
        return False  # a per-step figure, each rank's by design
    value = argument(call, 1, "value") if call_name(call) == "self.log" else argument(call, 0, "dictionary")
    if value is None or isinstance(value, ast.Constant):
        return False
    metric_objects = {
        call_name(t)
        for assign in module.of_type(ast.Assign)
        if isinstance(assign.value, ast.Call) and "torchmetrics" in _dotted_root(module, assign.value)
        for t in assign.targets
    }
    return not (call_name(value) in metric_objects or last_name(value) in ("compute",))


def _dotted_root(module: Module, call: ast.Call) -> str:
    name = call_name(call)
    root = name.split(".")[0]
    return (module.import_tops.get(root) or "") + "." + name


# ---- DDP024 ---------------------------------------------------------------------------------------
DEVICE_TAKERS = ("set_device", "device", "DistributedDataParallel", "DDP", "cuda", "to")


def local_rank_option_under_torchrun(program: Program) -> Iterator[Hit]:
    """`parser.add_argument("--local_rank", type=int, default=0)`, then `torch.cuda.set_device(args.local_rank)`, in
    a program launched with torchrun — its own text says so (a help string, a usage note: "torchrun
    --nproc_per_node=2 ddp_train.py") or its repository's scripts do — which passes no `--local_rank`, only the
    LOCAL_RANK environment variable: every rank keeps the option's default and takes the same GPU (or none: -1).
    Not where the program reads LOCAL_RANK itself or sets the option in code, nor where its launch is said to be
    `torch.distributed.launch` (which passes the option)."""
    if not program.distributed or not program.modules:
        return
    options = [
        call
        for module in program.modules
        if "local" in module.source
        for call in module.calls
        if last_name(call) == "add_argument" and option_dest(call).replace("-", "_") == "local_rank"
    ]
    if not options or any("LOCAL_RANK" in m.source for m in program.modules) or not _launched_by_torchrun(program):
        return
    uses = [
        (module, call)
        for module, call in program.calls_named(*DEVICE_TAKERS)
        if _local_rank_option_given(call) and program.runs(module, call.lineno)
    ]
    held = {call_name(_local_rank_option_given(call).value) for _, call in uses}  # type: ignore[union-attr]
    if uses and not _local_rank_set(program, held):
        module, call = uses[0]
        yield module, call.lineno


def _local_rank_set(program: Program, held: Set[str]) -> bool:
    """`args.local_rank = dist.get_rank() % torch.cuda.device_count()`: the program gives the option its value
    (`held`: the names the device is read from, `args`)."""
    return any(
        isinstance(t, ast.Attribute)
        and t.attr == "local_rank"
        and call_name(t.value) in held
        and "local_rank" not in names_in(node.value)
        for module in program.modules
        for node in module.of_type(ast.Assign)
        for t in node.targets
    )


def _launched_by_torchrun(program: Program) -> bool:
    entry = program.modules[0]
    said = [entry.source]
    if entry.file.is_absolute():
        said += commands_launching(repository_root(entry.file.parent), entry.file)
    return any("torchrun" in text for text in said) and not any("distributed.launch" in text for text in said)


def _local_rank_option_given(call: ast.Call) -> Optional[ast.Attribute]:
    name = last_name(call)
    if name in ("DistributedDataParallel", "DDP"):
        ids = keyword(call, "device_ids")
        given = list(ids.elts) if isinstance(ids, (ast.List, ast.Tuple)) else []
    elif name == "device":
        given = call.args[1:2]
    elif name in ("cuda", "to"):
        given = call.args[:1] if _is_move(call) else []
    else:
        given = call.args[:1]
    return next((g for g in given if isinstance(g, ast.Attribute) and g.attr == "local_rank"), None)


# ---- DDP025 ---------------------------------------------------------------------------------------
def plain_state_into_the_wrapper(program: Program) -> Iterator[Hit]:
    """`model = DDP(model)`, then a resume `model.load_state_dict(checkpoint["net"])` of a file the program saves
    with `"net": model.module.state_dict()` (CMUNeXt, Medical_image_classification): the file's keys lack the
    wrapper's `module.` prefix, so the load raises on missing and unexpected keys in every distributed resume.
    Not where the program handles the prefix, nor on an arm the program tells from the wrapper's."""
    if not program.distributed:
        return
    for module in program.modules:
        if not module.spells("load_state_dict") or _handles_the_prefix(module):
            continue
        wraps = _wraps(module, program)
        for call in module.calls if wraps else []:
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict" and call.args):
                continue
            owner = call_name(func.value)
            if is_const(keyword(call, "strict"), False) or not _is_wrapper(module, call, owner, wraps):
                continue
            if _under_a_wrapper_test(module, call) or _beside_an_arm_that_unwraps(module, call, owner):
                continue
            loaded = call.args[0]
            if not isinstance(loaded, ast.Subscript) and not _read_from_a_file(module, call, loaded):
                continue  # `model.load_state_dict(best_state)`, a copy of the wrapper's own state kept in memory
            if program.runs(module, call.lineno) and _saved_unwrapped(program, owner, loaded):
                yield module, call.lineno


def _read_from_a_file(module: Module, at: ast.AST, loaded: ast.expr) -> bool:
    """The state a whole load gets is what a `torch.load` (or a helper named for loading) returns: in the call
    itself, or in the name's last assignment before it in the same scope (FeasMPNN's `best_model =
    copy.deepcopy(model.state_dict())` is the wrapper's own state, whatever file the program also saves)."""
    value = _last_assignment(module, at, loaded)
    return any(isinstance(node, ast.Call) and "load" in last_name(node).lower() for node in walk(value))


def _saved_unwrapped(program: Program, owner: str, loaded: ast.expr) -> bool:
    """The program saves `owner.module.state_dict()` where `loaded` reads it back: under the same key of a
    checkpoint dictionary (`checkpoint["net"]` and `{"net": model.module.state_dict()}`), or whole."""
    plain = owner + ".module.state_dict"
    key = loaded.slice.value if isinstance(loaded, ast.Subscript) and isinstance(loaded.slice, ast.Constant) else None
    for module in program.modules:
        if not module.spells(".module.state_dict"):
            continue
        if key is not None:
            for node in module.of_type(ast.Dict):
                if any(
                    is_const(k, key) and any(isinstance(n, ast.Call) and call_name(n) == plain for n in walk(v))
                    for k, v in zip(node.keys, node.values)
                ):
                    return True
        elif any(call_name(c) == "torch.save" and c.args and call_name(c.args[0]) == plain for c in module.calls):
            return True
    return False


# ---- DDP026 ---------------------------------------------------------------------------------------
def global_of_the_main_block_in_spawned_code(program: Program) -> Iterator[Hit]:
    """`mp.spawn(dist_train, ...)` in the `__main__` block that also sets `args = parser.parse_args()`, and a
    function `dist_train` reaches reading the global `args` (GrainGraphNN's `criterion`): spawn starts each process
    by importing the script again as `__mp_main__`, where the `__main__` block does not run — the name is not
    defined there, and the first read raises NameError on every rank. Reported once per function, at its first
    read of such a name."""
    entry = program.modules[0] if program.modules else None
    if entry is None or "spawn" not in entry.source or "__main__" not in entry.source:
        return
    top = entry.tree.body
    if any(isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names) for s in top):
        return  # (names that come from elsewhere)
    main = [s for s in top if is_main_guard(s)]
    only_main = _bound_at_the_top(main) - _bound_at_the_top([s for s in top if not is_main_guard(s)])
    only_main -= {n for node in entry.of_type(ast.Global) for n in node.names}  # (a function may set them)
    functions = {s.name: s for s in top if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    started = [
        call.args[0].id
        for call in entry.calls
        if last_name(call) in PROCESS_STARTERS
        and call.args
        and isinstance(call.args[0], ast.Name)
        and keyword(call, "start_method") is None  # (`start_method="fork"`: the children inherit the names)
    ]
    reached = _reached_by_name([f for f in started if f in functions], functions)
    if not only_main or not reached:
        return
    try:
        table = symtable.symtable(entry.source, str(entry.file), "exec")
    except (SyntaxError, ValueError):
        return
    scopes = {(t.get_name(), t.get_lineno()): t for t in table.get_children()}
    for name in reached:
        function = functions[name]
        scope = scopes.get((name, function.lineno))
        if scope is None:
            continue
        missing = _globals_read(scope) & only_main
        loads = [
            n.lineno
            for n in walk(function)
            if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and n.id in missing
            and not any(isinstance(p, ast.Raise) for p in entry.ancestors(n))  # (an error raised either way)
        ]
        if loads:
            yield entry, min(loads)


def _bound_at_the_top(statements: List[ast.stmt]) -> Set[str]:
    """The module-level names these statements bind (not those of the functions and classes they define)."""
    bound: Set[str] = set()
    pending: List[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        pending.extend(ast.iter_child_nodes(node))
    return bound


def _reached_by_name(start: List[str], functions: Mapping[str, ast.AST]) -> List[str]:
    """The module's functions `start` calls by bare name, transitively."""
    seen = list(dict.fromkeys(start))
    for name in seen:
        for node in walk(functions[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = node.func.id
                if callee in functions and callee not in seen:
                    seen.append(callee)
    return seen


def _globals_read(scope: symtable.SymbolTable) -> Set[str]:
    """The global names a function (and the lambdas, comprehensions and functions inside it) refers to."""
    found = {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
    for child in scope.get_children():
        found |= _globals_read(child)
    return found


# ---- DDP027 ---------------------------------------------------------------------------------------
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def name_set_on_some_ranks(program: Program) -> Iterator[Hit]:
    """`if rank == 0: test_loss = ...` inside the epoch loop, then `print('loss', test_loss)` after it on every
    rank (GrainGraphNN's `train`): the name is only ever assigned on the ranks the test lets through, so the others
    raise UnboundLocalError (NameError at a module's top level) where they read it. Not where another arm of the
    same test assigns it too, nor where the read is itself on some ranks only."""
    if not program.distributed:
        return
    for module in program.modules:
        scopes = {
            id(scope): scope
            for branch in module.of_type(ast.If)
            if module.selects_ranks_at(branch)
            for scope in [module.scope_of(branch)]
        }
        for scope in scopes.values():
            hit = _read_where_unset(program, module, scope)
            if hit is not None:
                yield module, hit


def _read_where_unset(program: Program, module: Module, scope: ast.AST) -> Optional[int]:
    stores: Dict[str, List[ast.Name]] = {}
    loads: Dict[str, List[ast.Name]] = {}
    for node in walk(scope):
        if not isinstance(node, ast.Name) or module.scope_of(node) is not scope:
            continue
        if any(isinstance(p, (*COMPREHENSIONS, ast.Lambda)) for p in module.ancestors(node)):
            continue  # (their own scopes)
        if isinstance(node.ctx, ast.Store):
            stores.setdefault(node.id, []).append(node)
        elif isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append(node)
    declared = {n for node in walk(scope) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    arguments = scope.args if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    parameters = {a.arg for a in ast.walk(arguments) if isinstance(a, ast.arg)} if arguments is not None else set()
    found = []
    for name, assigned in stores.items():
        if name in declared or name in parameters or name not in loads or not _only_on_some_ranks(module, assigned):
            continue
        if not all(program.guarded(module, s) for s in assigned):
            continue
        first = min(s.lineno for s in assigned)
        found += [
            load.lineno
            for load in loads[name]
            if load.lineno > first
            and module.rank_branch(load) is None
            and not _under_a_test(module, load)
            and not program.guarded(module, load)
            and program.runs(module, load.lineno)
        ]
    return min(found) if found else None


def _only_on_some_ranks(module: Module, assigned: List[ast.Name]) -> bool:
    """Every assignment is inside one chain of rank tests (`if rank == 0:` ... `elif` ... `else`), and some arm of it
    neither assigns the name nor leaves (`raise`, `return`, `continue`, `break`). Assignments under two separate
    tests (`if rank % 8 == 0:` and `if rank % 8 != 0:`, consistency_models' evaluator) may cover every rank between
    them: not read here."""
    tops = []
    for store in assigned:
        branch = module.rank_branch(store)
        if branch is None:
            return False
        top, above = branch, module.parents.get(branch)
        while isinstance(above, ast.If) and above.orelse == [top]:  # up to the chain's first `if`
            top, above = above, module.parents.get(above)
        tops.append(top)
    if any(top is not tops[0] for top in tops):
        return False
    last = tops[0]
    while len(last.orelse) == 1 and isinstance(last.orelse[0], ast.If):
        last = last.orelse[0]
    if not last.orelse:
        return True  # (no `else`: the ranks the tests leave out assign nothing)
    arms = _chain_arms(tops[0])
    return any(
        not any(store is n for s in arm for n in walk(s) for store in assigned)
        and not isinstance(arm[-1], (ast.Raise, ast.Return, ast.Continue, ast.Break))
        for arm in arms
    )


def _under_a_test(module: Module, node: ast.AST) -> bool:
    """An `if` statement or expression, a `while` loop, an `and`/`or` chain or a `try` block holds `node` in its
    function: a read there may be skipped, caught, or on ranks a test this rule cannot read lets through (`if
    self.verb:` with `params['verb'] = args.verb * (rank == 0)`; `if 0:`)."""
    for parent in module.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp, ast.While, ast.BoolOp, ast.Try)):
            return True
    return False


# ---- DDP028 ---------------------------------------------------------------------------------------
GROUP_QUERIES = ("destroy_process_group", "get_rank", "get_world_size")  # what raises where no group was made


def group_call_in_the_launcher(program: Program) -> Iterator[Hit]:
    """`mp.spawn(dist_train, ...)`, then `dist.destroy_process_group()` in the same `__main__` block (GrainGraphNN):
    the process that starts the ranks never joined their process group, so the call raises ("Default process group
    has not been initialized"; "Process group cannot be None"). The same for a collective, `get_rank()` and
    `get_world_size()` there — in the `__main__` block or the function that calls `mp.spawn`. Not where that
    process makes a group itself, nor in a script that asks `is_initialized()`."""
    entry = program.modules[0] if program.modules else None
    if entry is None or not program.memo(("starts its processes",), lambda: _starts_its_processes(entry)):
        return
    main = [s for s in entry.tree.body if is_main_guard(s)]
    if _makes_the_group(program, entry, main):
        return  # (`else: main(local_rank)`: a torchrun launch makes the group in this very process)
    if "is_initialized" in entry.source:
        return  # (it asks whether a group exists, in forms a flag or an `and` may carry)
    for call in entry.calls:
        name = call_name(call)
        if last_name(call) not in (*GROUP_QUERIES, *COLLECTIVES):
            continue
        if not (is_collective(call, entry) or name.rpartition(".")[0] in ("dist", "torch.distributed")):
            continue
        if any(isinstance(p, ast.Lambda) for p in entry.ancestors(call)):
            continue  # (run when something calls it, if ever)
        if _launcher_code(entry, call) and program.runs(entry, call.lineno):  # (not what it hands on)
            yield entry, call.lineno


# ---- DDP029 ---------------------------------------------------------------------------------------
FSDP_WRAPPERS = ("FullyShardedDataParallel", "FSDP")


def clip_over_fsdp_shards(program: Program) -> Iterator[Hit]:
    """`torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` in a program that wraps its model in
    `FullyShardedDataParallel` (GeorgianTTS's `train_fsdp.py`): each rank holds a shard of every gradient, so the
    norm is its shard's, each rank scales by a different factor and the replicas' updates no longer match what one
    clip of the whole gradient would give. FSDP's own `model.clip_grad_norm_(max_norm)` reduces the norm over the
    ranks. Not in a program that also makes DDP wrappers (which arm clips what is not read)."""
    if not program.any_call(*FSDP_WRAPPERS) or program.any_call("DistributedDataParallel", "DDP"):
        return
    for module, call in program.calls_named("clip_grad_norm_", "clip_grad_norm"):
        name = call_name(call)
        if isinstance(call.func, ast.Attribute) and not name.endswith(
            ("nn.utils." + last_name(call), "utils." + last_name(call))
        ):
            continue  # `model.clip_grad_norm_(...)`: FSDP's own, over every rank's shards
        if isinstance(call.func, ast.Name) and module.import_tops.get(name) != "torch":
            continue  # a helper of the program's or another library's
        clipped = call.args[0] if call.args else None
        owner = (
            clipped.func.value if isinstance(clipped, ast.Call) and isinstance(clipped.func, ast.Attribute) else None
        )
        if not isinstance(owner, ast.Name) or not _holds_a_sharded_model(program, module, call, owner.id, 2):
            continue  # (minChatGPT's single-process trainers beside its FSDP one, in one file)
        if program.runs(module, call.lineno):
            yield module, call.lineno


def _holds_a_sharded_model(program: Program, module: Module, at: ast.AST, name: str, depth: int) -> bool:
    """`name` holds an FSDP wrapper where `at` reads it: last assigned `FSDP(...)` (or a tuple's part of a program
    function's result that makes one: `t3_fsdp, ... = setup_model(...)`) in its scope, or a parameter every running
    caller fills with such a name (`self.train_epoch(dist_model, epoch)`)."""
    scope = module.scope_of(at)
    assigned = [
        node
        for node in walk(scope)
        if isinstance(node, ast.Assign)
        and node.lineno < getattr(at, "lineno", 0)
        and name in {n.id for t in node.targets for n in walk(t) if isinstance(n, ast.Name)}
    ]
    if assigned:
        value = max(assigned, key=lambda n: n.lineno).value
        if isinstance(value, ast.Call) and last_name(value) in FSDP_WRAPPERS:
            return True
        return isinstance(value, ast.Call) and any(
            any(last_name(c) in FSDP_WRAPPERS for c in other.calls_in(function))
            for other, function in program.resolve(value, module)
        )
    return depth > 0 and _every_caller_gives(
        program,
        module,
        at,
        name,
        lambda caller, site, given: (
            isinstance(given, ast.Name) and _holds_a_sharded_model(program, caller, site, given.id, depth - 1)
        ),
    )


# ---- DDP031 ---------------------------------------------------------------------------------------
def optimizer_changed_on_some_ranks(program: Program) -> Iterator[Hit]:
    """`if rank == 0: optimizer.load_state_dict(ckpt["optimizer"])` (protein_bert's resume), or a method that steps
    the LR scheduler called under `if is_main_process(rank):` (DIN_v2's `trainer.step_scheduler(valid_auc)`): the
    other ranks keep their own moments or learning rate, so the same averaged gradient moves each replica
    differently and they drift apart with no error. Once per rank test."""
    if not program.distributed:
        return
    for module in program.modules:
        reported: Set[int] = set()
        for call, branch in _calls_on_some_ranks(module):
            if id(branch) in reported or both_arms_call(branch, last_name(call)):
                continue
            if _compares_with_a_count(branch.test) or not selects_ranks(branch.test):
                continue  # tgl's `if args.local_rank < args.num_gpus:` (the training ranks, every one of them), or
                # a flag that only may hold on some ranks (its `if prev_thread is not None:`)
            direct = _changes_an_optimizer(call)
            if not direct and not any(
                _changes_an_optimizer(inner) and not _given_none(callee, call, inner)
                for other, callee in program.resolve(call, module) or program.bound_methods(call, module)
                for inner in other.calls_in(callee)
            ):
                continue
            if not _broadcast_after(module, call, {direct} if direct else names_in(call) - {last_name(call)}):
                reported.add(id(branch))
                yield module, call.lineno


def _changes_an_optimizer(call: ast.Call) -> str:
    """`optimizer.step()`, `self.scheduler.step(metric)`, `lr_scheduler.load_state_dict(...)`: a call that changes
    what the next step does on this rank; the name of what it changes ('' for none)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("step", "load_state_dict")):
        return ""
    owner = call_name(call.func.value) if isinstance(call.func.value, (ast.Name, ast.Attribute)) else ""
    return owner if any(word in owner.rpartition(".")[2].lower() for word in ("optim", "sched")) else ""


def _given_none(function: ast.FunctionDef, site: ast.Call, inner: ast.Call) -> bool:
    """The optimizer `inner` steps is a parameter the call gives None (fast-autoaugment's `run_epoch(model, loader,
    loss_fn, None, ...)` to evaluate): nothing is stepped."""
    owner = call_name(inner.func.value)  # type: ignore[attr-defined]
    return owner in _parameter_names(function) and is_const(given_value(function, site, owner), None)


def _broadcast_after(module: Module, call: ast.Call, names: AbstractSet[str]) -> bool:
    """A broadcast of what was changed, after the rank test (Horovod's `hvd.broadcast_optimizer_state(optimizer,
    root_rank=0)` after rank 0's `optimizer.load_state_dict(...)`): every rank gets rank 0's."""
    return any(
        later.lineno > call.lineno
        and "broadcast" in last_name(later).lower()
        and (
            any(word in last_name(later).lower() for word in ("model", "param"))  # brain-agent's master steps,
            # then `dist_broadcast_model(self.actor_critic)`: every rank gets its weights
            or any(call_name(n) in names for n in walk(later) if isinstance(n, (ast.Name, ast.Attribute)))
        )
        for later in module.calls_in(module.scope_of(call))
    )


RULES: List[Rule] = [
    Rule(
        "DDP001",
        WARNING,
        "nn.DataParallel on the multi-GPU path: one process drives every GPU, gathers outputs on GPU 0 and cannot "
        "span nodes",
        "use DistributedDataParallel with one process per GPU (e.g. `ddptrain train --nproc N`)",
        data_parallel,
    ),
    Rule(
        "DDP002",
        WARNING,
        "training DistributedSampler is never set_epoch()-ed: every epoch repeats the first epoch's order",
        "call sampler.set_epoch(epoch) at the start of each epoch",
        set_epoch_missing,
    ),
    Rule(
        "DDP003",
        ERROR,
        "DataLoader has both shuffle=True and a sampler (DataLoader raises ValueError)",
        "drop shuffle=True; shuffle in the sampler: DistributedSampler(dataset, shuffle=True)",
        shuffle_with_sampler,
    ),
    Rule(
        "DDP005",
        ERROR,
        "NCCL process group without torch.cuda.set_device: every process makes a CUDA context on GPU 0 (all ranks "
        "on GPU 0 where devices are not explicit; memory lost there where they are) and NCCL guesses each rank's "
        "device for its collectives (a hang is possible)",
        "call torch.cuda.set_device(local_rank) before init_process_group",
        nccl_without_set_device,
    ),
    Rule(
        "DDP006",
        ERROR,
        "device hard-coded to GPU 0 in a multi-process script ('cuda:0', device_ids=[0], or CUDA_VISIBLE_DEVICES='0' "
        "set where every process runs it): every rank on one GPU",
        "use torch.device('cuda', local_rank) and device_ids=[local_rank]; choose visible GPUs in the launch "
        "command (CUDA_VISIBLE_DEVICES=0,1 torchrun ...), not in the script",
        hard_coded_device,
    ),
    Rule(
        "DDP007",
        WARNING,
        "saves the DDP wrapper (its state_dict(), or the wrapped model whole): every key gets a 'module.' prefix, "
        "and the file does not load into the plain model",
        "save model.module.state_dict() (the unwrapped model)",
        saves_wrapped_state,
    ),
    Rule(
        "DDP008",
        WARNING,
        "torch.load(..., weights_only=False): unpickling a file runs any code it holds",
        "load state dicts with weights_only=True (the default since torch 2.6); keep False only for files you made",
        weights_only_false,
        SECURITY,
    ),
    Rule(
        "DDP009",
        ERROR,
        "gradient clipping on loss-scaled gradients (clip before scaler.unscale_): the clip threshold is meaningless",
        "call scaler.unscale_(optimizer) before clip_grad_norm_",
        clip_before_unscale,
    ),
    Rule(
        "DDP010",
        ERROR,
        "collective reached on some ranks only (inside a rank-selecting branch, or in a function called only there; "
        "a DDP model's forward is one: it broadcasts rank 0's buffers): the other ranks never join and the job hangs",
        "call the collective on every rank, outside `if rank == 0:`; evaluate model.module, not the DDP wrapper, on "
        "one rank",
        collective_on_some_ranks,
    ),
    Rule(
        "DDP011",
        WARNING,
        "hard-coded rendezvous port: a second job on the node fails with 'Address already in use'",
        "let the launcher choose (torchrun --master-port / --rdzv-endpoint, or ddptrain's free port)",
        hard_coded_port,
    ),
    Rule(
        "DDP012",
        WARNING,
        "clip norm scaled by sqrt(world size): DDP averages gradients, so the global-batch norm needs no factor",
        "use the same max_norm as on one GPU",
        sqrt_world_clip,
    ),
    Rule(
        "DDP013",
        ERROR,
        "CUDA device chosen by the global rank: on a second node rank 8 asks for GPU 8 (invalid device ordinal)",
        "use the local rank (LOCAL_RANK, or rank % torch.cuda.device_count())",
        global_rank_device,
    ),
    Rule(
        "DDP014",
        ERROR,
        "training loop left, or a step skipped (break/return/continue), on a decision some ranks take alone: the "
        "others wait in the next collective until the timeout",
        "decide on every rank: broadcast the decision (dist.broadcast_object_list) or all_reduce the flag first",
        loop_exit_on_some_ranks,
    ),
    Rule(
        "DDP015",
        WARNING,
        "torch.save (or save_image, savefig) to the same path from every rank: concurrent writes of one file can "
        "leave it corrupt",
        "save on rank 0 only (if dist.get_rank() == 0:), or put the rank in the file name",
        same_path_every_rank,
    ),
    Rule(
        "DDP016",
        WARNING,
        "evaluation through a DistributedSampler, whose padding repeats samples so every rank gets as many: averaged "
        "metrics count up to world_size - 1 images twice",
        "shard evaluation without padding (each index on one rank) and sum counts, or drop the padded tail",
        padded_evaluation,
    ),
    Rule(
        "DDP017",
        WARNING,
        "evaluation sharded over ranks and its metric logged without a reduction over ranks: it describes one "
        "rank's shard (1/world_size of the data), not the model",
        "all_reduce the sums (correct, count, loss x count) on every rank before logging (Lightning: "
        "self.log(..., sync_dist=True))",
        unreduced_metric_logged,
    ),
    Rule(
        "DDP018",
        ERROR,
        "DataLoader(shuffle=True) without a DistributedSampler in a DDP program: every rank trains on the whole "
        "dataset in its own order, so an epoch is world_size epochs and the ranks' batches overlap",
        "sampler = DistributedSampler(dataset, shuffle=True); DataLoader(dataset, sampler=sampler) without shuffle; "
        "sampler.set_epoch(epoch) each epoch",
        shuffled_without_sampler,
    ),
    Rule(
        "DDP019",
        WARNING,
        "torch.save guarded by the local rank in a program that runs on several nodes: rank 0 of every node writes "
        "the same path (on a shared file system, one file written by several nodes at once)",
        "save where the global rank is 0 (dist.get_rank() == 0); keep the local rank for choosing the GPU",
        save_per_node,
    ),
    Rule(
        "DDP020",
        ERROR,
        "the DDP wrapper is thrown away (kept in no name that is read again, replaced by its own .module before "
        "training, or passed by: the training step computes its loss through model.module and never calls the "
        "wrapper): forward and backward run on the inner model, no gradient is averaged over ranks and every rank "
        "trains its own copy",
        "keep the wrapper under the name the training loop uses (model = DDP(model, ...)); take the inner model "
        "under another name where you need it (raw_model = model.module)",
        wrapper_thrown_away,
    ),
    Rule(
        "DDP021",
        WARNING,
        "a DistributedSampler read on some ranks only (made in code that only rank 0 runs): that rank gets its "
        "shard, 1/world_size of the data, and the other shards are never read — an evaluation or prediction of a "
        "part reported as the whole",
        "on one rank, read the whole set (SequentialSampler, or no sampler); or run it on every rank and combine "
        "the results over ranks",
        shard_read_by_some_ranks,
    ),
    Rule(
        "DDP022",
        ERROR,
        "a method or attribute of your model read on the DDP wrapper: DistributedDataParallel has only nn.Module's "
        "methods and its own, so it raises AttributeError (\"'DistributedDataParallel' object has no attribute ...\")",
        "use the inner model (model.module.predict(...), model.module.optimizer), or keep the plain model under another "
        "name",
        model_method_on_the_wrapper,
    ),
    Rule(
        "DDP023",
        WARNING,
        "random_split without a generator (or random.shuffle, then slices) in a program whose ranks do not seed "
        "that generator alike: every rank draws its own split, so one rank's validation samples are another's "
        "training samples and the shards no longer partition the data",
        "give it a seeded generator (random_split(ds, lengths, generator=torch.Generator().manual_seed(0)); "
        "random.Random(0).shuffle(paths)), or split once and save the indices",
        unshared_random_split,
    ),
    Rule(
        "DDP024",
        ERROR,
        "the device from a --local_rank option in a program launched with torchrun, which passes no --local_rank "
        "(only the LOCAL_RANK environment variable): every rank keeps the option's default and takes the same GPU",
        "read the local rank from the environment: local_rank = int(os.environ['LOCAL_RANK']) (keep the option "
        "only as a fallback for torch.distributed.launch)",
        local_rank_option_under_torchrun,
    ),
    Rule(
        "DDP025",
        ERROR,
        "a state saved from the inner model (model.module.state_dict(): keys without 'module.') loaded into the DDP "
        "wrapper, whose keys all start with 'module.': load_state_dict raises on missing and unexpected keys",
        "load it into the inner model (model.module.load_state_dict(...)), or before wrapping the model in DDP",
        plain_state_into_the_wrapper,
    ),
    Rule(
        "DDP026",
        ERROR,
        "a name only the __main__ block defines, read by a function mp.spawn runs: spawn starts each process by "
        "importing the script again, where the __main__ block does not run, so the name is undefined there "
        "(NameError on every rank)",
        "pass the value to the function (mp.spawn(fn, args=(..., args))) and read the parameter, or define the "
        "name at the module's top level",
        global_of_the_main_block_in_spawned_code,
    ),
    Rule(
        "DDP027",
        ERROR,
        "a name assigned only on some ranks (inside `if rank == 0:`) and read on every rank: the other ranks "
        "raise UnboundLocalError (NameError) there",
        "give it a value on every rank before the test (test_loss = None), or read it inside the same test",
        name_set_on_some_ranks,
    ),
    Rule(
        "DDP028",
        ERROR,
        "a process-group call (destroy_process_group, a collective, get_rank) in the process that starts the ranks "
        "with mp.spawn, which never joined their group: it raises 'Default process group has not been initialized'",
        "make the call in the function each started process runs (before it returns), not after mp.spawn",
        group_call_in_the_launcher,
    ),
    Rule(
        "DDP029",
        ERROR,
        "torch.nn.utils.clip_grad_norm_ on a FullyShardedDataParallel model: each rank computes the norm of its own "
        "gradient shard, so every rank clips by a different factor and none by the whole gradient's norm",
        "call the wrapper's own model.clip_grad_norm_(max_norm), which reduces the norm over the ranks",
        clip_over_fsdp_shards,
    ),
    Rule(
        "DDP030",
        ERROR,
        "a DistributedSampler made and never given to the DataLoader of its dataset: the loader has no sampler, so "
        "every rank reads the whole dataset and the split is thrown away",
        "DataLoader(dataset, sampler=sampler, ...) (without shuffle), and sampler.set_epoch(epoch) each epoch",
        sampler_never_given,
    ),
    Rule(
        "DDP031",
        ERROR,
        "the optimizer or LR scheduler stepped or loaded on some ranks only (under `if rank == 0:`, or in a function "
        "called only there): the other ranks keep their own learning rate or moments, so the replicas drift apart",
        "step and load optimizers and schedulers on every rank (load the checkpoint on every rank with "
        "map_location), and decide a plateau scheduler from a metric reduced over the ranks",
        optimizer_changed_on_some_ranks,
    ),
]


def select(chosen: Sequence[str] = (), left_out: Sequence[str] = ()) -> List[Rule]:
    """The rules `--select` names (rule ids or their prefixes, categories, ALL; default: the ddp category), less
    those `--ignore` names. A term that names no rule raises ValueError."""

    def matches(rule: Rule, term: str) -> bool:
        return term.upper() == "ALL" or rule.id.startswith(term.upper()) or rule.category == term.lower()

    for term in [*chosen, *left_out]:
        if not any(matches(rule, term) for rule in RULES):
            raise ValueError(
                f"{term!r} names no rule: use rule ids ({RULES[0].id}..{RULES[-1].id}) or their prefixes, a "
                f"category ({', '.join(CATEGORIES)}) or ALL"
            )
    picked = (
        [r for r in RULES if any(matches(r, t) for t in chosen)] if chosen else [r for r in RULES if r.category == DDP]
    )
    return [r for r in picked if not any(matches(r, t) for t in left_out)]

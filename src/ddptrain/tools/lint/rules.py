"""The rules: each names the hang, crash or corruption it prevents and the fix. `error`: will hang, crash or corrupt
results; `warning`: risky. Each reads the whole program (see program.py) and favours missing a convoluted case over
flagging correct code. DDP004 (no drop_last: DistributedSampler pads, every rank gets the same batches) is retired.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from .program import (
    RANK_NAMES,
    Module,
    Program,
    argument,
    both_arms_call,
    call_name,
    is_collective,
    is_const,
    keyword,
    last_name,
    names_in,
)

ERROR, WARNING = "error", "warning"
Hit = Tuple[Module, int]
EVAL_WORDS = ("val", "test", "eval")
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
GLOBAL_RANK = {"rank", "global_rank", "RANK", "get_rank"}


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
    if not program.distributed:
        return  # a single-process script (a baseline beside DDP ones): DataParallel is its multi-GPU path
    for module, call in program.calls():
        if last_name(call) != "DataParallel":
            continue
        fallback = any(
            isinstance(parent, ast.If) and names_in(parent.test) & DISTRIBUTED_WORDS
            for parent in module.ancestors(call)
        )
        if not fallback:  # in the else of `if args.distributed:` it is the single-process path
            yield module, call.lineno


def _tells_distributed(test: ast.expr) -> bool:
    """A condition on whether the run is distributed: `args.distributed`, `use_ddp`, `world_size > 1`..."""
    return any(n in DISTRIBUTED_WORDS or "ddp" in n.lower() or "distributed" in n.lower() for n in names_in(test))


# ---- DDP002 ---------------------------------------------------------------------------------------
def _is_eval_name(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in EVAL_WORDS)


def _sampler_target(module: Module, call: ast.Call) -> str:
    parent = module.parents.get(call)
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
    for module, call in program.calls():
        if last_name(call) != "DistributedSampler" or is_const(keyword(call, "shuffle"), False):
            continue
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        names = _sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")
        if not _is_eval_name(names):
            yield module, call


def _repeats_epochs(program: Program) -> bool:
    """A loop that can run more than once around a loop over batches or an epoch's function (`for epoch in
    range(1)` and a single pass over the loader never reshuffle, so they need no set_epoch)."""
    for module in program.modules:
        for loop in module.nodes:
            if not isinstance(loop, (ast.For, ast.While)):
                continue
            if _once(loop):
                continue
            inner = [n for n in ast.walk(loop) if n is not loop]
            if any(isinstance(n, (ast.For, ast.While)) for n in inner) or any(
                isinstance(n, ast.Call) and ("epoch" in last_name(n).lower() or "train" in last_name(n).lower())
                for n in inner
            ):
                return True
    return False


def _once(loop: ast.AST) -> bool:
    """`for ... in range(1):`"""
    return (
        isinstance(loop, ast.For)
        and isinstance(loop.iter, ast.Call)
        and last_name(loop.iter) == "range"
        and len(loop.iter.args) == 1
        and is_const(loop.iter.args[0], 1)
    )


def set_epoch_missing(program: Program) -> Iterator[Hit]:
    if program.any_call("set_epoch"):  # anywhere in the program: a helper the epoch loop calls counts
        return
    if not _repeats_epochs(program):
        return
    for module, call in training_samplers(program):
        yield module, call.lineno
        return


# ---- DDP003 ---------------------------------------------------------------------------------------
def shuffle_with_sampler(program: Program) -> Iterator[Hit]:
    for module, call in program.calls():
        sampler, shuffle = keyword(call, "sampler"), keyword(call, "shuffle")
        if last_name(call) == "DataLoader" and sampler is not None and is_const(shuffle, True):
            yield module, call.lineno


# ---- DDP018 ---------------------------------------------------------------------------------------
# Libraries that give a loader its distributed sampler themselves (Accelerate, Lightning Fabric, DeepSpeed, Horovod's
# examples through their own helpers): a shuffling DataLoader handed to them is right.
SAMPLER_INJECTORS = ("prepare", "prepare_data_loader", "setup_dataloaders", "initialize", "Trainer")
RANK_PARTITIONERS = ("partition_dataset", "split_dataset_by_node")  # MONAI's, Hugging Face datasets'
SHARDING_WORDS = {"world_size", "num_replicas", "num_shards", "shard", "split_dataset_by_node", "get_world_size"}


def shuffled_without_sampler(program: Program) -> Iterator[Hit]:
    if not program.distributed or program.any_call(*SAMPLER_INJECTORS, *RANK_PARTITIONERS):
        return  # a library gives the loader its sampler, or the program splits its data by rank itself
    for module, call in program.calls():
        if last_name(call) != "DataLoader" or not is_const(keyword(call, "shuffle"), True):
            continue
        if keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
            continue
        if any(isinstance(p, ast.If) and _tells_distributed(p.test) for p in module.ancestors(call)):
            continue  # the single-process path of `if args.distributed: ... else: ...`
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        if dataset is not None and names_in(_last_assignment(module, call, dataset)) & (SHARDING_WORDS | RANK_NAMES):
            continue  # the dataset is already this rank's part
        yield module, call.lineno


# ---- DDP005 ---------------------------------------------------------------------------------------
def nccl_without_set_device(program: Program) -> Iterator[Hit]:
    if program.any_call("set_device") or any("CUDA_VISIBLE_DEVICES" in m.source for m in program.modules):
        return
    for module, call in program.calls():
        if last_name(call) == "init_process_group":
            backend = argument(call, 0, "backend")
            if is_const(backend, "nccl") and keyword(call, "device_id") is None:
                yield module, call.lineno


# ---- DDP006 ---------------------------------------------------------------------------------------
def hard_coded_device(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return
    for module, call in program.calls():
        if last_name(call) in ("DistributedDataParallel", "DDP"):
            ids = keyword(call, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)) and any(is_const(e, 0) for e in ids.elts):
                yield module, call.lineno
        elif last_name(call) in ("to", "device", "cuda") and any(is_const(a, "cuda:0") for a in call.args):
            scope = module.scope_of(call)
            if not names_in(scope) & {"local_rank", "LOCAL_RANK", "gpu", "device_id"}:
                yield module, call.lineno


# ---- DDP007 ---------------------------------------------------------------------------------------
def _wraps(module: Module) -> List[Tuple[str, int, ast.AST]]:
    """(name, line, scope) of each `name = DDP(...)`."""
    found = []
    assigns = [n for n in module.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)]
    for node in assigns:
        if last_name(node.value) in ("DistributedDataParallel", "DDP"):
            for target in node.targets:
                if isinstance(target, (ast.Name, ast.Attribute)):
                    found.append((call_name(target), node.lineno, module.scope_of(node)))
    return found


def _same_instance(module: Module, call: ast.AST, scope: ast.AST, name: str) -> bool:
    """`self.model = DDP(...)` in one method and `self.model.state_dict()` in another of the same class."""
    if not name.startswith("self."):
        return False
    classes = [p for p in module.ancestors(call) if isinstance(p, ast.ClassDef)]
    return bool(classes) and any(p is classes[0] for p in module.ancestors(scope))


def saves_wrapped_state(program: Program) -> Iterator[Hit]:
    if any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and "module." in n.value
        for m in program.modules
        for n in m.nodes
    ):
        return  # the program strips (or adds) the 'module.' prefix where it loads its files
    for module in program.modules:
        wraps = _wraps(module)
        if not wraps:
            continue
        wrapper_names = {name for name, _, _ in wraps}
        if any(
            last_name(c) == "load_state_dict"
            and isinstance(c.func, ast.Attribute)
            and call_name(c.func.value) in wrapper_names
            for c in module.calls
        ):
            continue  # the program loads its files back into the wrapper: the prefix is its own format
        for call in module.calls:
            if last_name(call) != "state_dict" or not isinstance(call.func, ast.Attribute):
                continue
            owner = call_name(call.func.value)
            wrapped = any(
                owner == name
                and (
                    _same_instance(module, call, scope, name) or (call.lineno > line and module.scope_of(call) is scope)
                )
                for name, line, scope in wraps
            )
            if wrapped and (
                any(isinstance(p, ast.Call) and "save" in last_name(p).lower() for p in module.ancestors(call))
                or _saved_later(module, call)
            ):
                yield module, call.lineno


def _saved_later(module: Module, call: ast.Call) -> bool:
    """`ckp = model.state_dict()` then `torch.save(ckp, path)` in the same function."""
    parent = module.parents.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    return any(
        "save" in last_name(c).lower() and c.lineno > call.lineno and name in names_in(c)
        for c in module.calls_in(module.scope_of(call))
    )


# ---- DDP008 -----------------------------------------------------------------------------------------
def weights_only_false(program: Program) -> Iterator[Hit]:
    for module, call in program.calls():
        if last_name(call) == "load" and is_const(keyword(call, "weights_only"), False):
            yield module, call.lineno


# ---- DDP009 ---------------------------------------------------------------------------------------
def _events(program: Program, module: Module, function: ast.AST, depth: int = 2) -> List[Tuple[str, int]]:
    """('unscale' | 'clip' | 'step', line) in source order, a helper's events at the line that calls it."""
    events: List[Tuple[str, int]] = []
    for call in module.calls_in(function):
        name = last_name(call)
        if name == "unscale_":
            events.append(("unscale", call.lineno))
        elif name in ("clip_grad_norm_", "clip_grad_value_"):
            events.append(("clip", call.lineno))
        elif name == "step" and "scaler" in call_name(call).lower():
            events.append(("step", call.lineno))
        elif depth > 0:  # a helper's events happen at the line that calls it, in its order
            for other, callee in program.resolve(call, module):
                if callee is not function:
                    events.extend((kind, call.lineno) for kind, _ in _events(program, other, callee, depth - 1))
    return events


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
        for function in module.functions:
            if not any(_scaled_backward(c) for c in module.calls_in(function)):
                continue  # not where the scaled loss is back-propagated
            scaled = [c for c in module.calls_in(function) if _scaled_backward(c)]
            unscaled = False
            for kind, line in _events(program, module, function):
                if kind == "unscale":
                    unscaled = True
                elif kind == "step":
                    unscaled = False
                elif kind == "clip" and not unscaled and not _only_unscaled_path(module, function, line, scaled):
                    yield module, line


def _only_unscaled_path(module: Module, function: ast.AST, line: int, scaled: List[ast.Call]) -> bool:
    """The clip at `line` is in an arm of an `if` whose other arm holds every scaled backward: on its path no
    GradScaler is live (the fp32 or apex branch beside the torch.amp one)."""
    clips = [c for c in module.calls_in(function) if c.lineno == line]
    if not clips:
        return False
    return all(_exclusive(module, clips[0], backward) for backward in scaled)


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
    manager yielding between them: the same collective on the other ranks elsewhere in the function."""
    scope = module.scope_of(call)
    for other in ast.walk(scope):
        if other is call or not isinstance(other, ast.Call) or last_name(other) != last_name(call):
            continue
        other_branch = module.rank_branch(other)
        if other_branch is not None and other_branch is not branch:
            return True
        if other_branch is None and branch is not None:
            return True  # also called on every rank: the rank-0 call pairs with a later one elsewhere
    return both_arms_call(branch, last_name(call))


def collective_on_some_ranks(program: Program) -> Iterator[Tuple[Module, int]]:
    for module, call in program.calls():
        branch = module.rank_branch(call)
        if branch is None:
            continue
        if is_collective(call):
            if not _paired(module, call, branch):
                yield module, call.lineno
            continue
        for other, callee in program.resolve(call, module):
            if callee.name.startswith(("is_", "get_")) or program.returns_early_off_main(callee):
                continue
            if program.reaches_collective(other, callee):
                yield module, call.lineno
                break


# ---- DDP011 ---------------------------------------------------------------------------------------
def hard_coded_port(program: Program) -> Iterator[Hit]:
    for module in program.modules:
        for node in module.nodes:
            if isinstance(node, ast.Assign) and "MASTER_PORT" not in module.source:
                continue
            if isinstance(node, ast.Assign):
                value = node.value
                if isinstance(value, ast.Call) and last_name(value) == "str" and value.args:
                    value = value.args[0]
                value = program.constant(value)
                if not isinstance(value, ast.Constant):
                    continue
                for target in node.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and call_name(target.value).endswith("environ")
                        and is_const(target.slice, "MASTER_PORT")
                    ):
                        yield module, node.lineno
            elif isinstance(node, ast.Call) and last_name(node) == "init_process_group":
                method = program.constant(keyword(node, "init_method") or ast.Constant(None))
                if isinstance(method, ast.Constant) and str(method.value).startswith("tcp://"):
                    yield module, node.lineno


# ---- DDP012 ---------------------------------------------------------------------------------------
def sqrt_world_clip(program: Program) -> Iterator[Hit]:
    for module, clip in program.calls():
        if last_name(clip) != "clip_grad_norm_":
            continue
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
    for node in ast.walk(module.scope_of(at)):
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


def global_rank_device(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return
    for module, call in program.calls():
        name = last_name(call)
        candidates: List[ast.expr] = []
        if name == "set_device" and call.args:
            candidates = [call.args[0]]
        elif name in ("DistributedDataParallel", "DDP"):
            ids = keyword(call, "device_ids")
            if isinstance(ids, (ast.List, ast.Tuple)):
                candidates = list(ids.elts)
        elif name == "device" and len(call.args) == 2 and is_const(call.args[0], "cuda"):
            candidates = [call.args[1]]
        if any(_global_rank(module, call, c) for c in candidates):
            yield module, call.lineno


# ---- DDP014 ---------------------------------------------------------------------------------------
def _training_loop(loop: ast.AST) -> bool:
    names = {last_name(c) for c in ast.walk(loop) if isinstance(c, ast.Call)}
    return bool(names & {"backward", "step", "train_one_epoch", "train_epoch", "run_epoch", "_run_epoch"}) or any(
        "train" in n for n in names
    )


def loop_exit_on_some_ranks(program: Program) -> Iterator[Hit]:
    for module in program.modules:
        for node in module.nodes:
            if not isinstance(node, (ast.Break, ast.Return)):
                continue
            loop = next((p for p in module.ancestors(node) if isinstance(p, (ast.For, ast.While))), None)
            if loop is None or not _training_loop(loop):
                continue
            if module.function_of(node) is not module.function_of(loop):
                continue
            branch = module.rank_branch(node, stop=loop)
            if branch is not None:
                yield module, node.lineno
            else:
                yield from _flag_set_on_some_ranks(module, node, loop)


def _flag_set_on_some_ranks(module: Module, exit_node: ast.stmt, loop: ast.AST) -> Iterator[Hit]:
    """`if stop: break` where `stop` was assigned only inside a rank-selecting branch and never sent to the other
    ranks (broadcast, all_reduce) inside the loop."""
    test = next((p.test for p in module.ancestors(exit_node) if isinstance(p, ast.If)), None)
    if test is None:
        return
    flags = {call_name(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
    assigned: Set[str] = set()
    first = exit_node.lineno
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and module.rank_branch(node, stop=loop) is not None:
            names = {call_name(t) for t in node.targets} & flags
            if names:
                assigned |= names
                first = min(first, node.lineno)
    if not assigned:
        return
    shared = any(  # sent to every rank between the decision and the exit (broadcast_object_list, all_reduce)
        isinstance(c, ast.Call) and is_collective(c) and first <= c.lineno <= exit_node.lineno for c in ast.walk(loop)
    )
    if not shared:
        yield module, exit_node.lineno


# ---- DDP015 ---------------------------------------------------------------------------------------
def same_path_every_rank(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return
    for module, call in program.calls():
        if call_name(call) != "torch.save" or len(call.args) < 2:
            continue
        target = _last_assignment(module, call, call.args[1])
        if names_in(target) & RANK_NAMES or (isinstance(target, ast.Call) and last_name(target) == "BytesIO"):
            continue  # one file per rank, or memory
        function = module.function_of(call)
        if function is not None and any(w in function.name.lower() for w in ("master", "main", "rank0", "primary")):
            continue  # save_on_master and the like guard inside
        if function is not None and function.name not in program.call_sites and module.function_of(function) is None:
            continue  # a utility this program never calls
        if not program.guarded(module, call):
            yield module, call.lineno


# ---- DDP016 ---------------------------------------------------------------------------------------
def padded_evaluation(program: Program) -> Iterator[Hit]:
    if not any(is_collective(c) or "reduce" in last_name(c).lower() for _, c in program.calls()):
        return  # nothing is averaged over ranks
    for module, call in program.calls():
        name = last_name(call)
        if not name.endswith("DistributedSampler") or is_const(keyword(call, "drop_last"), True):
            continue
        dataset = call.args[0] if call.args else keyword(call, "dataset")
        names = _sampler_target(module, call) + " " + (call_name(dataset) if dataset is not None else "")
        if not (is_const(keyword(call, "shuffle"), False) or _is_eval_name(names) or name.startswith("Ordered")):
            continue
        target = module.parents.get(call)
        if isinstance(target, ast.Assign) and all(isinstance(t, ast.Name) for t in target.targets):
            names_set = {t.id for t in target.targets}  # type: ignore[attr-defined]
            used = any(
                isinstance(n, ast.Name) and n.id in names_set and isinstance(n.ctx, ast.Load) for n in module.nodes
            )
            if not used:
                continue  # made and never given to a loader
        yield module, call.lineno


# ---- DDP017 ---------------------------------------------------------------------------------------
LOG_CALLS = {"print", "info", "log", "add_scalar", "add_scalars", "log_metrics", "log_metric"}
METRIC_WORDS = ("acc", "top1", "top5", "correct", "loss", "metric", "precision", "recall", "f1")
REDUCING_WORDS = ("reduce", "gather", "synchronize", "sync", "mean_across", "average_across")


def _reduces(program: Program, module: Module, function: ast.AST) -> bool:
    """Whether a function reduces over ranks itself or through the program's functions it calls."""
    for call in module.calls_in(function):
        name = last_name(call).lower()
        if is_collective(call) or any(word in name for word in REDUCING_WORDS):
            return True
        for other, callee in program.resolve(call, module):
            if callee is not function and program.reaches_collective(other, callee):
                return True
    return False


def unreduced_metric_logged(program: Program) -> Iterator[Hit]:
    if not program.distributed:
        return
    for module in program.modules:
        for function in module.functions:
            calls = module.calls_in(function)
            evaluates = any(last_name(c) in ("no_grad", "inference_mode", "eval") for c in calls)
            if not evaluates or _reduces(program, module, function):
                continue
            for call in calls:
                if last_name(call) not in LOG_CALLS or module.rank_branch(call) is None:
                    continue
                logged = {
                    n.id
                    for a in [*call.args, *[k.value for k in call.keywords]]
                    for n in ast.walk(a)
                    if isinstance(n, ast.Name)
                }
                if any(word in name.lower() for name in logged for word in METRIC_WORDS):
                    yield module, call.lineno
                    break


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
        "NCCL process group without torch.cuda.set_device: every process uses GPU 0 (device mismatch, out of memory, "
        "or a hang)",
        "call torch.cuda.set_device(local_rank) before init_process_group",
        nccl_without_set_device,
    ),
    Rule(
        "DDP006",
        ERROR,
        "device hard-coded to GPU 0 in a multi-process script ('cuda:0' or device_ids=[0]): every rank on one GPU",
        "use torch.device('cuda', local_rank) and device_ids=[local_rank]",
        hard_coded_device,
    ),
    Rule(
        "DDP007",
        WARNING,
        "saves state_dict() of the DDP-wrapped model: every key gets a 'module.' prefix, and the file does not load "
        "into the plain model",
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
        "collective reached on some ranks only (inside a rank-selecting branch, or in a function called only there): "
        "the other ranks never join and the job hangs",
        "call the collective on every rank, outside `if rank == 0:`",
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
        "training loop left (break/return) on a decision some ranks take alone: the others wait in the next "
        "collective until the timeout",
        "decide on every rank: broadcast the decision (dist.broadcast_object_list) or all_reduce the flag first",
        loop_exit_on_some_ranks,
    ),
    Rule(
        "DDP015",
        WARNING,
        "torch.save to the same path from every rank: concurrent writes of one file can leave it corrupt",
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
        "evaluation metric logged from rank 0 without a reduction over ranks: it describes rank 0's shard only "
        "(1/world_size of the data), not the model",
        "all_reduce the sums (correct, count, loss x count) on every rank before logging",
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

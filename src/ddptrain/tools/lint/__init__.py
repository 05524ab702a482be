"""`ddptrain lint`: a static (AST) check of a DDP training program for the mistakes that make multi-process
training hang, crash or produce wrong results. Each finding reads `file:line RULE severity message -> fix`.

A folder is read as the programs it holds (discover.py): each entry point with the modules it imports, so a helper
in another file, a module constant or a call made only on rank 0 is followed, and a function in one script is
never taken for its namesake in another. `# ddptrain: ignore[RULE]` on a line silences it. Exit status: 1 when an
error is found (any finding with --strict), 2 when a file cannot be read, else 0.
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import gc
import json
import multiprocessing
import os
import stat
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ...util import counted
from .cache import Cache, group_key
from .discover import Program as FoundProgram
from .discover import Sources, forget_listings, gather, independent_groups, programs
from .fixes import FIXES, apply, edits_for, line_key
from .formats import github_annotation, sarif
from .program import Module, Program, forget_trees
from .rules import ANY_PROGRAM, DDP, ERROR, RULES, Finding, Rule, select

__all__ = ["Finding", "RULES", "Rule", "lint_paths", "lint_program", "lint_source", "run_lint", "select"]


def lint_program(modules: Sequence[Module], rules: Optional[Sequence[Rule]] = None) -> List[Finding]:
    """The findings of the rules (default: the ddp category) on modules read together as one program."""
    program = Program(modules)
    findings = set()
    chosen = select() if rules is None else rules
    if not program.multiprocess:  # imports nothing multi-process training is written with: a single-process script
        chosen = [rule for rule in chosen if rule.category != DDP or rule.id in ANY_PROGRAM]
    for rule in chosen:
        for module, line in rule.check(program):
            if not module.is_ignored(line, rule.id) and program.runs(module, line):
                findings.add(Finding(module.path, line, rule.id, rule.severity, rule.message, rule.fix))
    return sorted(findings, key=lambda f: (f.file, f.line, f.rule))


def lint_source(path: str, source: str, rules: Optional[Sequence[Rule]] = None) -> List[Finding]:
    return lint_program([Module(path, source)], rules)


@dataclass
class Report:
    findings: List[Finding]
    problems: List[str]
    files: int
    programs: List[List[str]]  # each program's files, its entry point first
    scope: List[str] = field(default_factory=list)  # the folders imports were looked for in (cache.py)


@contextlib.contextmanager
def _collector_paused():
    """Parsing a large folder allocates millions of AST nodes that live until the end and hold no reference cycles:
    the cyclic garbage collector, run every few thousand allocations, would re-scan them all each time (a third of
    the time on a folder of a thousand files). Paused while linting, restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # The trees allocated meanwhile are all "young": the first collection after gc.enable() would scan
            # them all (half a second on a large folder). Frozen, then thawed into the oldest generation, they
            # are freed by reference counting when the report is done with them, never scanned.
            gc.freeze()
            gc.enable()
            gc.unfreeze()


def lint_paths(
    paths: Sequence[str],
    rules: Optional[Sequence[Rule]] = None,
    jobs: int = 1,
    cache: Optional[Cache] = None,
    release: bool = True,
) -> Report:
    """Lint the programs the paths hold; a finding in a module several programs share is reported once. Paths of
    different repositories cannot import from one another: with `jobs` > 1 they are read in that many processes
    (where processes fork), with the same report as in one. With a `cache`, a group of paths whose files have not
    changed since it was last linted is answered from it (cache.py), with the same report. `release`: free the
    syntax trees read before returning (a process that exits right after, the command line, need not)."""
    try:
        return _lint_paths(paths, rules, jobs, cache)
    finally:
        if release:
            forget_trees()


def _lint_paths(paths: Sequence[str], rules: Optional[Sequence[Rule]], jobs: int, cache: Optional[Cache]) -> Report:
    forget_listings()  # the folders may have changed since this process last looked
    groups = independent_groups(paths)
    chosen = select() if rules is None else list(rules)
    keys = [group_key(group, chosen) for group in groups] if cache is not None else []
    parts: List[Optional[Report]] = [None] * len(groups)
    if cache is not None:
        for index, group in enumerate(groups):
            stored = cache.get(keys[index], group)
            parts[index] = Report(*stored) if stored is not None else None
    todo = [index for index, part in enumerate(parts) if part is None]
    if jobs > 1 and len(todo) > 1 and _can_fork():
        made = _in_processes([groups[i] for i in todo], chosen, jobs)
    else:
        made = [_lint_group(groups[i], chosen) for i in todo]
    for index, report in zip(todo, made):
        parts[index] = report
        if cache is not None:
            cache.put(keys[index], groups[index], report.scope, report)
    done = [part for part in parts if part is not None]
    return Report(
        sorted({f for part in done for f in part.findings}, key=lambda f: (f.file, f.line, f.rule)),
        [problem for part in done for problem in part.problems],
        sum(part.files for part in done),
        [program for part in done for program in part.programs],
    )


def _lint_group(paths: Sequence[str], rules: Optional[Sequence[Rule]]) -> Report:
    with _collector_paused():
        sources = gather(paths)
        return _report(sources, programs(sources), rules)


_WORK: List[Tuple[Sequence[str], Optional[Sequence[Rule]]]] = []  # what forked workers read (nothing pickled in)


def _lint_work(index: int) -> Report:
    return _lint_group(*_WORK[index])


def _in_processes(groups: List[List[str]], rules: Optional[Sequence[Rule]], jobs: int) -> List[Report]:
    """At most one process per CPU (more only share the CPUs); a worker that dies (killed, out of memory) is an
    error naming the fix, never a wait (a multiprocessing.Pool would wait for its result forever)."""
    _WORK[:] = [(group, rules) for group in groups]
    workers = min(jobs, len(groups), default_jobs())
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_lint_work, range(len(groups))))
    except BrokenProcessPool as error:
        raise WorkerDied(
            f"a lint worker process ended without its report ({error}): killed, or out of memory? "
            "Run with --jobs 1 to read everything in one process"
        ) from None
    finally:
        _WORK.clear()


class WorkerDied(RuntimeError):
    pass


def _can_fork() -> bool:
    """Fork is cheap and safe for this torch-free reader on Linux; elsewhere (spawn: a fresh interpreter per
    worker) one process is as fast for the folders people lint."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _report(sources: Sources, found: List[FoundProgram], rules: Optional[Sequence[Rule]]) -> Report:
    findings = set()
    for program in found:
        findings.update(lint_program(program.modules, rules))
    ordered = sorted(findings, key=lambda f: (f.file, f.line, f.rule))
    programs = [[m.path for m in p.modules] for p in found]
    return Report(ordered, sources.problems, len(sources.given), programs, [str(s) for s in sources.scope])


@dataclass
class FileFix:
    module: Module
    before: bytes
    after: bytes
    fixed: List[Finding]


def fix_paths(paths: Sequence[str], rules: Optional[Sequence[Rule]] = None) -> Tuple[Report, List[FileFix]]:
    """Each file's fixable findings fixed one at a time on its bytes, each fix kept only where the file still parses
    and its programs, linted again, lost that finding and gained none; then the report of what remains."""
    try:
        with _collector_paused():
            return _fix_paths(paths, rules)
    finally:
        forget_trees()


def _fix_paths(paths: Sequence[str], rules: Optional[Sequence[Rule]]) -> Tuple[Report, List[FileFix]]:
    sources = gather(paths)
    found = programs(sources)
    report = _report(sources, found, rules)
    changes: List[FileFix] = []
    files = {f.file for f in report.findings if f.rule in FIXES}
    for module in [m for p in found for m in p.modules]:
        if module.path not in files or any(c.module is module for c in changes):
            continue
        change = _fix_file(module, [p for p in found if module in p.modules], rules)
        if change is not None:
            changes.append(change)
    if changes:
        edited = {c.module.file: c for c in changes}
        report = Report(
            sorted(
                {f for p in found for f in lint_program([_replaced(m, edited) for m in p.modules], rules)},
                key=lambda f: (f.file, f.line, f.rule),
            ),
            report.problems,
            report.files,
            report.programs,
        )
    return report, changes


def _replaced(module: Module, edited: dict) -> Module:
    change = edited.get(module.file)
    return Module(module.path, change.after.decode("utf-8-sig"), module.file) if change else module


def _fix_file(module: Module, owners: List[FoundProgram], rules: Optional[Sequence[Rule]]) -> Optional[FileFix]:
    try:
        before = module.file.read_bytes()
        Module(module.path, before.decode("utf-8-sig"), module.file)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    bom = codecs.BOM_UTF8 if before.startswith(codecs.BOM_UTF8) else b""  # edits count columns without it

    def findings(data: bytes, current: Module) -> List[Finding]:
        return sorted(
            {f for p in owners for f in lint_program([current if m is module else m for m in p.modules], rules)},
            key=lambda f: (f.file, f.line, f.rule),
        )

    def counts(found: List[Finding]) -> Counter:  # per file and rule: lines move as fixes insert lines
        return Counter((f.file, f.rule) for f in found)

    current, data, fixed, failed = module, before[len(bom) :], [], set()
    for _ in range(64):
        now = findings(data, current)
        todo = [
            f for f in now if f.file == module.path and f.rule in FIXES and line_key(data, f.line, f.rule) not in failed
        ]
        if not todo:
            break
        finding, key = todo[0], line_key(data, todo[0].line, todo[0].rule)
        edits = edits_for(current, finding.rule, finding.line, data)
        candidate = apply(data, edits) if edits else None
        try:
            fixed_module = Module(module.path, candidate.decode("utf-8"), module.file) if candidate else None
        except (SyntaxError, ValueError, UnicodeDecodeError):
            fixed_module = None
        if candidate is None or fixed_module is None:
            failed.add(key)
            continue
        old, new = counts(now), counts(findings(candidate, fixed_module))
        old[(finding.file, finding.rule)] -= 1
        if any(count > old[k] for k, count in new.items()):
            failed.add(key)  # the finding is still there, or the fix made another
            continue
        current, data = fixed_module, candidate
        fixed.append(finding)
    return FileFix(module, before, bom + data, fixed) if fixed else None


def write_fix(change: FileFix) -> Optional[str]:
    """Write a fixed file in place of the original (the file a link points to, its mode kept), unless it changed
    since it was read; the problem, else None."""
    target = change.module.file
    try:
        if target.read_bytes() != change.before:
            return f"{change.module.path}: changed while it was being fixed; left as it is"
        if not os.access(target, os.W_OK) or not target.stat().st_mode & 0o222:  # (root may write anything)
            return f"{change.module.path}: read-only; left as it is (make it writable to fix it)"
        temporary = target.with_name(f".{target.name}.ddptrain-fix")
        temporary.write_bytes(change.after)
        os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
    except OSError as error:
        return f"{change.module.path}: not written: {error}"
    return None


def unified_diff(change: FileFix) -> str:
    before = change.before.decode("utf-8-sig").splitlines(keepends=True)
    after = change.after.decode("utf-8-sig").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, change.module.path, change.module.path))


def run_lint(
    paths: Sequence[str],
    as_json: bool = False,
    out=None,
    strict: bool = False,
    chosen: Sequence[str] = (),
    left_out: Sequence[str] = (),
    style: str = "text",
    fix: bool = False,
    diff: bool = False,
    jobs: int = 1,
    cache_folder: Optional[Path] = None,
) -> int:
    """The `lint` command: its exit status. `cache_folder`: where reports of unchanged repositories are kept."""
    out = out or sys.stdout
    if jobs < 0:
        print(f"error: --jobs {jobs}: give 0 (one process per CPU), 1 (none) or more", file=sys.stderr)
        return 2
    try:
        rules = select(chosen, left_out)
    except ValueError as error:
        print(f"error: --select/--ignore: {error}", file=sys.stderr)
        return 2
    if fix or diff:
        report, changes = fix_paths(paths, rules)
        for change in changes:
            if diff:
                out.write(unified_diff(change))
            problem = write_fix(change) if fix else None
            if problem:
                report.problems.append(problem)
            else:
                verb = "fixed" if fix else "would fix"
                for finding in change.fixed:
                    print(f"{verb}: {change.module.path}:{finding.line} {finding.rule}", file=sys.stderr)
        if diff and not fix:
            return 1 if changes else 0
    else:
        cache = Cache(cache_folder) if cache_folder is not None else None
        try:
            report = lint_paths(paths, rules, jobs or default_jobs(), cache, release=False)  # the process ends next
        except WorkerDied as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if cache is not None and cache.problem:
            print(f"note: {cache.problem}", file=sys.stderr)
    _print(report, rules, "json" if as_json else style, out)
    if report.problems:
        return 2
    return 1 if any(f.severity == ERROR or strict for f in report.findings) else 0


def _print(report: Report, rules: Sequence[Rule], style: str, out) -> None:
    if style == "json":
        json.dump(
            {
                "findings": [asdict(f) for f in report.findings],
                "errors": report.problems,
                "files": report.files,
                "programs": report.programs,
            },
            out,
        )
        out.write("\n")
    elif style == "sarif":
        json.dump(sarif(report.findings, rules), out, indent=1)
        out.write("\n")
    else:
        for finding in report.findings:
            print(github_annotation(finding) if style == "github" else finding, file=out)
    if style in ("text", "github"):
        for problem in report.problems:
            print(f"error: {problem}", file=sys.stderr)
        errors = sum(f.severity == ERROR for f in report.findings)
        print(
            f"{counted(errors, 'error')}, {counted(len(report.findings) - errors, 'warning')} in "
            f"{counted(report.files, 'file')}, {counted(len(report.programs), 'program')}",
            file=sys.stderr,
        )

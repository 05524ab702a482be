"""`ddptrain lint`: a static (AST) check of a DDP training program for the mistakes that make multi-process
training hang, crash or produce wrong results. Each finding reads `file:line RULE severity message -> fix`.

The files given are read together as one program (a folder: every .py file under it), so a helper in another file,
a module constant or a call made only on rank 0 is followed. `# ddptrain: ignore[RULE]` on a line silences it.
Exit status: 1 when an error is found (any finding with --strict), 2 when a file cannot be read, else 0.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Sequence

from .program import Module, Program
from .rules import ERROR, RULES, Rule

__all__ = ["Finding", "RULES", "Rule", "lint_program", "lint_source", "run_lint"]


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


def lint_program(modules: Sequence[Module]) -> List[Finding]:
    program = Program(modules)
    findings = set()
    for rule in RULES:
        for module, line in rule.check(program):
            if not module.is_ignored(line, rule.id):
                findings.add(Finding(module.path, line, rule.id, rule.severity, rule.message, rule.fix))
    return sorted(findings, key=lambda f: (f.file, f.line, f.rule))


def lint_source(path: str, source: str) -> List[Finding]:
    return lint_program([Module(path, source)])


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


def run_lint(paths: Sequence[str], as_json: bool, out=None, strict: bool = False) -> int:
    out = out or sys.stdout
    problems: List[str] = []
    modules: List[Module] = []
    files = python_files(paths, problems)
    for path in files:
        try:
            modules.append(Module(str(path), path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, OSError) as error:
            problems.append(f"{path}: cannot parse: {error}")
    findings = lint_program(modules)
    if as_json:
        json.dump({"findings": [asdict(f) for f in findings], "errors": problems, "files": len(files)}, out)
        out.write("\n")
    else:
        for finding in findings:
            print(finding, file=out)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        errors = sum(f.severity == ERROR for f in findings)
        print(f"{errors} error(s), {len(findings) - errors} warning(s) in {len(files)} file(s)", file=sys.stderr)
    if problems:
        return 2
    return 1 if any(f.severity == ERROR or strict for f in findings) else 0

"""docs/ARCHITECTURE.md stays true where a test can tell: every module it names exists and every module is named
there, its list of lint rules is the linter's, and its list of checkpoint keys is TrainState's fields."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from ddptrain.tools.lint.rules import RULES
from ddptrain.train.state import TrainState

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
PACKAGE = ROOT / "src" / "ddptrain"


def test_every_module_named_exists_and_every_module_is_named():
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", DOC, flags=re.MULTILINE))
    actual = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    assert sorted(named - actual) == [], "named in ARCHITECTURE.md but not in src/ddptrain"
    assert sorted(actual - named) == [], "in src/ddptrain but not in ARCHITECTURE.md's module table"


def test_the_lint_rules_listed_are_the_linters():
    section = DOC.split("## The lint rules", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"DDP\d{3}", section.split("(DDP004 was retired)")[0])
    assert listed == [rule.id for rule in RULES]


def test_the_checkpoint_keys_listed_are_trainstates_fields():
    listed = re.search(r"Checkpoint keys: (.*?)\.\n", DOC, flags=re.DOTALL).group(1)
    keys = re.findall(r"`(\w+)`", listed)
    assert keys == [field.name for field in fields(TrainState)]

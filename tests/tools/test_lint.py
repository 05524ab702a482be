"""`ddptrain lint`: every rule fires on the mistake and stays quiet on the corrected script."""

import json
import re
import textwrap
from pathlib import Path

import pytest

from ddptrain.tools.lint import RULES, lint_source, run_lint

ROOT = Path(__file__).resolve().parents[2]

HEADER = """
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
"""

# One lesson from real training scripts per pair (see docs/lint.md): NAME_mistake.py gets exactly the findings
# its `# expect:` marks name, NAME_fixed.py (the idiom that must stay quiet) gets none.
CASES = ROOT / "tests" / "lint_samples" / "cases"
SAMPLES = sorted(CASES.glob("*.py"))


def _marked(path: Path) -> set:
    expected = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for rule in re.findall(r"DDP\d{3}", line.partition("# expect:")[2]):
            expected.add((rule, number))
    return expected


def _rules(source: str) -> set:
    return {f.rule for f in lint_source("script.py", HEADER + textwrap.dedent(source))}


def test_every_rule_has_a_mistake_and_a_fixed_sample_and_a_severity():
    mistakes = [path for path in SAMPLES if path.stem.endswith("_mistake")]
    assert {rule.id for rule in RULES} <= {rule for path in mistakes for rule, _ in _marked(path)}
    for rule in RULES:
        ours = [p for p in mistakes if p.name.startswith(rule.id.lower())]
        assert ours and all((CASES / p.name.replace("_mistake", "_fixed")).is_file() for p in ours), rule.id
    assert {rule.severity for rule in RULES} == {"error", "warning"}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda path: path.stem)
def test_each_sample_gets_exactly_its_marked_findings(sample):
    found = {(f.rule, f.line) for f in lint_source(str(sample), sample.read_text())}
    assert found == _marked(sample)
    if sample.stem.endswith("_mistake"):
        assert sample.stem[:6].upper() in {rule for rule, _ in found}  # the rule the sample is about fires


def test_a_program_in_two_files_is_read_as_one(capsys):
    """set_epoch and the rank-0 save live in the helper module; linting the folder follows them."""
    assert run_lint([str(ROOT / "tests" / "lint_samples" / "program")], as_json=True, strict=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    assert run_lint([str(ROOT / "tests" / "lint_samples" / "program" / "train.py")], as_json=True) == 0
    alone = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert alone == {"DDP002"}  # without engine.py the loop's set_epoch cannot be seen: a warning, exit 0


def test_an_ignore_comment_silences_one_rule_on_one_line():
    source = 'os.environ["MASTER_PORT"] = "12355"  # ddptrain: ignore[DDP011]\nmodel = nn.DataParallel(net)\n'
    assert _rules(source) == {"DDP001"}
    assert _rules("model = nn.DataParallel(net)  # ddptrain: ignore[DDP011]\n") == {"DDP001"}
    assert _rules("model = nn.DataParallel(net)  # ddptrain: ignore\n") == set()


def test_warnings_exit_0_unless_strict_and_errors_exit_1(tmp_path, capsys):
    warned, failed = tmp_path / "warned.py", tmp_path / "failed.py"
    warned.write_text(HEADER + 'os.environ["MASTER_PORT"] = "12355"\n')
    failed.write_text(HEADER + 'dist.init_process_group("nccl")\n')
    assert run_lint([str(warned)], as_json=False) == 0
    assert run_lint([str(warned)], as_json=False, strict=True) == 1
    assert run_lint([str(failed)], as_json=True) == 1
    out = capsys.readouterr().out
    assert "DDP011 warning hard-coded rendezvous port" in out
    assert json.loads(out.strip().splitlines()[-1])["findings"][0]["severity"] == "error"


def test_tutorial_shaped_script_gets_exactly_its_marked_findings(capsys):
    sample = ROOT / "tests" / "lint_samples" / "tutorial_train.py"
    expected = _marked(sample)
    assert len({rule for rule, _ in expected}) >= 9  # several different mistakes at once
    assert run_lint([str(sample)], as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert {(f["rule"], f["line"]) for f in report["findings"]} == expected
    assert all("->" not in f["message"] and f["fix"] for f in report["findings"])


def test_findings_read_file_line_rule_severity_message_and_fix(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(HEADER + 'state = torch.load("m.pt", weights_only=False)\n')
    assert run_lint([str(script)], as_json=False) == 0  # a warning
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{script}:8 DDP008 warning torch.load(..., weights_only=False)") and "-> load" in line


def test_project_code_and_the_bare_ddp_benchmark_are_clean(capsys):
    assert run_lint([str(ROOT / "src")], as_json=True) == 0  # the bare DDP benchmark loop ships in src too
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_unparsable_or_missing_file_is_reported(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert run_lint([str(broken), str(tmp_path / "missing.py")], as_json=False) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such file" in err and "broken.py: cannot parse" in err

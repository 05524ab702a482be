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

# rule -> (a script with the mistake, the same script corrected)
CASES = {
    "DDP001": ("model = nn.DataParallel(net)", "model = DDP(net.to(device), device_ids=[local_rank])"),
    "DDP002": (
        """
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler, drop_last=True)
        for epoch in range(10):
            for batch in loader:
                step(batch)
        """,
        """
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler, drop_last=True)
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)
        """,
    ),
    "DDP003": ("loader = DataLoader(ds, sampler=sampler, shuffle=True)", "loader = DataLoader(ds, sampler=sampler)"),
    "DDP004": (
        """
        sampler = DistributedSampler(ds, shuffle=True)
        loader = DataLoader(ds, sampler=sampler)
        for epoch in range(3):
            sampler.set_epoch(epoch)
        """,
        """
        sampler = DistributedSampler(ds, shuffle=True)
        loader = DataLoader(ds, sampler=sampler, drop_last=True)
        val = DataLoader(vs, sampler=DistributedSampler(vs, shuffle=False))
        for epoch in range(3):
            sampler.set_epoch(epoch)
        """,
    ),
    "DDP005": ('dist.init_process_group("nccl")', 'torch.cuda.set_device(local_rank)\ndist.init_process_group("nccl")'),
    "DDP006": (
        """
        dist.init_process_group("gloo")
        model = DDP(net, device_ids=[0])
        x = x.to("cuda:0")
        """,
        """
        dist.init_process_group("gloo")
        model = DDP(net, device_ids=[local_rank])
        x = x.to(f"cuda:{local_rank}")
        """,
    ),
    "DDP007": (
        """
        model = DDP(net)
        torch.save(model.state_dict(), "m.pt")
        """,
        """
        model = DDP(net)
        torch.save({"model": model.module.state_dict()}, "m.pt")
        """,
    ),
    "DDP008": ('state = torch.load("m.pt")', 'state = torch.load("m.pt", map_location="cpu", weights_only=True)'),
    "DDP009": (
        """
        def step(loss):
            scaler.scale(loss).backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
        """,
        """
        def step(loss):
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(optimizer)
        """,
    ),
    "DDP010": (
        """
        if dist.get_rank() == 0:
            dist.all_reduce(total)
            print(total)
        """,
        """
        dist.all_reduce(total)
        if dist.get_rank() == 0:
            print(total)
        """,
    ),
    "DDP011": ('os.environ["MASTER_PORT"] = "12355"', 'port = os.environ["MASTER_PORT"]'),
    "DDP012": (
        """
        limit = 1.0 * math.sqrt(dist.get_world_size())
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)
        """,
        """
        limit = 1.0
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)
        """,
    ),
}


def _rules(source: str) -> set:
    return {f.rule for f in lint_source("script.py", HEADER + textwrap.dedent(source))}


def test_every_rule_has_a_case():
    assert sorted(CASES) == [rule.id for rule in RULES]


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_fires_on_the_mistake(rule):
    assert rule in _rules(CASES[rule][0])


@pytest.mark.parametrize("rule", sorted(CASES))
def test_corrected_script_is_clean(rule):
    assert _rules(CASES[rule][1]) == set()


def test_tutorial_shaped_script_gets_exactly_its_marked_findings(capsys):
    sample = ROOT / "tests" / "lint_samples" / "tutorial_train.py"
    expected = set()
    for number, line in enumerate(sample.read_text().splitlines(), start=1):
        for rule in re.findall(r"DDP\d{3}", line.partition("# expect:")[2]):
            expected.add((rule, number))
    assert len({rule for rule, _ in expected}) >= 9  # several different mistakes at once
    assert run_lint([str(sample)], as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert {(f["rule"], f["line"]) for f in report["findings"]} == expected
    assert all("->" not in f["message"] and f["fix"] for f in report["findings"])


def test_findings_read_file_line_rule_message_and_fix(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(HEADER + 'state = torch.load("m.pt")\n')
    assert run_lint([str(script)], as_json=False) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{script}:8 DDP008 torch.load without") and "-> torch.load(path, map_location" in line


def test_project_code_and_the_bare_ddp_benchmark_are_clean(capsys):
    assert run_lint([str(ROOT / "src"), str(ROOT / "benchmarks" / "bare_ddp.py")], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_unparsable_or_missing_file_is_reported(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert run_lint([str(broken), str(tmp_path / "missing.py")], as_json=False) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such file" in err and "broken.py: cannot parse" in err

"""`ddptrain lint --fix` / `--diff`: each mechanical fix, on every sample that has it, leaves a file that parses,
lints clean of what was fixed, keeps its other findings, and changes no line a fix does not need."""

from __future__ import annotations

import ast
import difflib
import os
import re
import shutil
from pathlib import Path

import pytest

from ddptrain.tools.lint import RULES, lint_source, run_lint
from ddptrain.tools.lint.fixes import FIXES

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "lint_samples" / "cases"
# (a line marked `# expect: DDPnnn (no fix)` holds a form no mechanical fix is safe for)
FIXABLE = sorted(
    p
    for p in [*CASES.glob("*_mistake.py"), ROOT / "tests" / "lint_samples" / "tutorial_train.py"]
    if {r for line in p.read_text().splitlines() if "(no fix)" not in line for r in re.findall(r"DDP\d{3}", line)}
    & set(FIXES)
)
# what a fixed line may hold: the text each fix writes
FIX_TEXT = re.compile(
    r"set_epoch\(|\.module\.state_dict\(|save\(\w+\.module,|getattr\([\w.]+, \"module\", [\w.]+\)|unscale_\(|setdefault\(\"MASTER_PORT\"|device_count\(\)|sampler"
)

# what a removed or rewritten line may have held: the text each fix replaces
REWRITTEN = re.compile(r"state_dict\(|save\(\w+,|MASTER_PORT|shuffle=True|unscale_\(|rank|DataLoader\(")


def _rules(path: Path, text: str) -> dict:
    counts: dict = {}
    for finding in lint_source(str(path), text, RULES):
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    return counts


def test_every_fixable_rule_has_samples():
    assert {rule for p in FIXABLE for rule in re.findall(r"DDP\d{3}", p.read_text())} >= set(FIXES)


@pytest.mark.parametrize("sample", FIXABLE, ids=lambda p: p.stem)
def test_a_fix_parses_lints_clean_of_what_it_fixed_and_changes_nothing_else(sample, tmp_path, capsys):
    script = tmp_path / sample.name
    shutil.copy(sample, script)
    before = script.read_text()
    assert run_lint([str(script)], fix=True) in (0, 1)
    after = script.read_text()
    assert after != before, "no fix was made"
    ast.parse(after)
    found_before, found_after = _rules(script, before), _rules(script, after)
    # a rule with fewer findings after (a sample may also hold forms no mechanical fix covers)
    fixed = {rule for rule in found_before if rule in FIXES and found_after.get(rule, 0) < found_before[rule]}
    assert fixed, (found_before, found_after)
    for rule, count in found_after.items():
        assert count <= found_before.get(rule, 0), f"the fix made a new {rule} finding"
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    added = [line[2:] for line in diff if line.startswith("+ ")]
    removed = [line[2:] for line in diff if line.startswith("- ")]
    assert added and all(FIX_TEXT.search(line) for line in added), added
    assert all(REWRITTEN.search(line) for line in removed), removed
    own = CASES / sample.name.replace("_mistake", "_fixed")
    if own.is_file() and not found_after:
        assert _rules(own, own.read_text()) == {}
    err = capsys.readouterr().err
    assert all(f"fixed: {script}:" in err and rule in err for rule in fixed)


@pytest.mark.parametrize(
    "sample, written",
    [
        ("ddp007_a_wrapper_returned_on_one_path_of_a_helper", 'getattr(model, "module", model).state_dict()'),
        ("ddp007_state_dict_of_an_attribute_saved_through_a_name", "self.model.module.state_dict()"),
    ],
)
def test_the_wrapper_fix_takes_module_only_where_the_model_is_always_wrapped(sample, written, tmp_path):
    """`model.module` would raise where the model may be the plain one (a helper wraps it under `if distributed:`):
    there the fix writes `getattr(model, "module", model)`, which is the plain model's own keys either way."""
    script = tmp_path / "train.py"
    shutil.copy(CASES / f"{sample}_mistake.py", script)
    run_lint([str(script)], fix=True)
    assert written in script.read_text()


def test_diff_shows_the_fix_and_writes_nothing(tmp_path, capsys):
    script = tmp_path / "train.py"
    shutil.copy(CASES / "ddp018_shuffle_without_sampler_mistake.py", script)
    before = script.read_bytes()
    assert run_lint([str(script)], diff=True) == 1
    out = capsys.readouterr().out
    assert "+sampler = DistributedSampler(train_set, shuffle=True)" in out and "+    sampler.set_epoch(epoch)" in out
    assert script.read_bytes() == before
    assert run_lint([str(CASES / "ddp018_shuffle_without_sampler_fixed.py")], diff=True) == 0  # nothing to fix


def test_a_fix_that_cannot_be_made_safely_is_not_made(tmp_path, capsys):
    """The loader is built in one function and the epoch loop runs in another: no place for set_epoch, so no
    sampler either; the finding stays."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch.distributed as dist\n"
        "from torch.utils.data import DataLoader\n"
        "def loaders(ds):\n"
        "    return DataLoader(ds, shuffle=True)\n"
        "dist.init_process_group('gloo')\n"
        "for epoch in range(3):\n"
        "    run(loaders(ds))\n"
    )
    before = script.read_bytes()
    assert run_lint([str(script)], fix=True) == 1
    assert script.read_bytes() == before
    assert "DDP018" in capsys.readouterr().out


def test_the_global_rank_fix_moves_the_output_device_with_the_device_ids(tmp_path):
    """RT-DETR's `DDP(model, device_ids=[rank], output_device=rank)`: both name the one GPU, both become the
    local index, so the wrapper is not left pointing its output at a GPU a second node does not have."""
    shutil.copy(CASES / "ddp013_global_rank_as_device_mistake.py", tmp_path / "train.py")
    run_lint([str(tmp_path / "train.py")], fix=True)
    fixed = (tmp_path / "train.py").read_text()
    assert "device_ids=[rank % torch.cuda.device_count()], output_device=rank % torch.cuda.device_count()" in fixed


def test_fix_runs_from_the_command_line(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "train.py"
    shutil.copy(CASES / "ddp007_wrapped_state_saved_mistake.py", script)
    done = subprocess.run(
        [sys.executable, "-m", "ddptrain", "lint", "--fix", str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert "model.module.state_dict()" in script.read_text()
    assert f"fixed: {script}:9 DDP007" in done.stderr
    assert "DDP015" in done.stdout  # what no fix covers is still reported


def test_a_port_that_also_reaches_a_store_is_not_half_fixed(tmp_path, capsys):
    """sc23-dl-tutorial's MPI wire-up: `port = 29500` goes to `MASTER_PORT` and to `dist.TCPStore(port=port)`.
    `setdefault` would leave the store on the fixed port, so no fix is made and both findings stay."""
    script = tmp_path / "train.py"
    script.write_text(
        "import os\nimport torch.distributed as dist\n"
        "def wireup(rank, world_size):\n"
        "    port = 29500\n"
        "    os.environ['MASTER_PORT'] = str(port)\n"
        "    store = dist.TCPStore(host_name='node0', port=port, world_size=world_size, is_master=rank == 0)\n"
        "    dist.init_process_group('nccl', store=store, rank=rank, world_size=world_size)\n"
        "wireup(int(os.environ['RANK']), int(os.environ['WORLD_SIZE']))\n"
    )
    before = script.read_bytes()
    run_lint([str(script)], fix=True)
    assert script.read_bytes() == before
    out = capsys.readouterr().out
    assert out.count("DDP011") == 2


@pytest.mark.parametrize(
    "loader, written",
    [
        ("DataLoader(ds,\n                    batch_size=8)", "batch_size=8, sampler=train_sampler)"),  # STAR's
        ("DataLoader(ds, batch_size=8, shuffle=True)", "DataLoader(ds, batch_size=8, sampler=train_sampler)"),
    ],
)
def test_the_unused_sampler_fix_gives_it_to_the_loader_and_tells_it_the_epoch(loader, written, tmp_path):
    """STAR's `train_sampler = DistributedSampler(train_ds, ...)` beside `DataLoader(train_ds, batch_size=...)`:
    the fix passes `sampler=train_sampler` (in place of `shuffle=True` where the loader shuffles) and, as nothing
    tells that sampler its epoch, `train_sampler.set_epoch(epoch)` first in the epoch loop (DDP030, no new DDP002)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "def run(ds, model):\n"
        "    dist.init_process_group('gloo')\n"
        "    train_sampler = DistributedSampler(ds)\n"
        f"    loader = {loader}\n"
        "    model = DDP(model)\n"
        "    for epoch in range(3):\n"
        "        for x in loader:\n"
        "            model(x).sum().backward()\n"
        "if __name__ == '__main__':\n"
        "    run(None, None)\n"
    )
    assert run_lint([str(script)], fix=True) == 0
    fixed = script.read_text()
    assert written in fixed
    assert "    for epoch in range(3):\n        train_sampler.set_epoch(epoch)\n" in fixed
    assert _rules(script, fixed) == {}

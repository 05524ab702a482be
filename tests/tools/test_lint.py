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

# rule -> [(a script with the mistake, the same script corrected), ...]: each pair teaches one lesson from real
# training scripts (see docs/lint.md); the corrected script is the idiom that must stay quiet
CASES = {
    "DDP001": [
        ("model = nn.DataParallel(net)", "model = DDP(net.to(device), device_ids=[local_rank])"),
        (  # the non-distributed fallback of a DDP script is not the DDP path
            """
            if use_parallel:
                model = nn.DataParallel(net)
            """,
            """
            if args.distributed:
                model = DDP(net, device_ids=[args.gpu])
            else:
                model = nn.DataParallel(net)
            """,
        ),
    ],
    "DDP002": [
        (
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
        (  # set_epoch in a method the epoch loop calls
            """
            class Trainer:
                def _run_epoch(self, epoch):
                    for batch in self.loader:
                        self.step(batch)
                def train(self):
                    self.loader = DataLoader(ds, sampler=DistributedSampler(ds))
                    for epoch in range(3):
                        self._run_epoch(epoch)
            """,
            """
            class Trainer:
                def _run_epoch(self, epoch):
                    self.loader.sampler.set_epoch(epoch)
                    for batch in self.loader:
                        self.step(batch)
                def train(self):
                    self.loader = DataLoader(ds, sampler=DistributedSampler(ds))
                    for epoch in range(3):
                        self._run_epoch(epoch)
            """,
        ),
    ],
    "DDP003": [
        ("loader = DataLoader(ds, sampler=sampler, shuffle=True)", "loader = DataLoader(ds, sampler=sampler)"),
    ],
    "DDP005": [
        ('dist.init_process_group("nccl")', 'torch.cuda.set_device(local_rank)\ndist.init_process_group("nccl")'),
    ],
    "DDP006": [
        (
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
    ],
    "DDP007": [
        (
            """
            model = DDP(net)
            torch.save(model.state_dict(), "m.pt")
            """,
            """
            model = DDP(net)
            if rank == 0:
                torch.save({"model": model.module.state_dict()}, "m.pt")
            """,
        ),
        (  # the wrapper's state passed to the script's own helper; saving before wrapping is fine
            """
            model = DDP(net)
            save_checkpoint({"epoch": 3, "state_dict": model.state_dict()}, is_best)
            """,
            """
            save_checkpoint({"epoch": 0, "state_dict": model.state_dict()}, False)
            model = DDP(model)
            """,
        ),
    ],
    "DDP008": [
        (
            'state = torch.load("m.pt", map_location="cpu", weights_only=False)',
            'state = torch.load("m.pt", map_location="cpu")',  # weights_only=True by default since torch 2.6
        ),
    ],
    "DDP009": [
        (
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
        (  # the clip inside a helper
            """
            def clip(params):
                nn.utils.clip_grad_norm_(params, 1.0)
            def step(loss):
                scaler.scale(loss).backward()
                clip(params)
                scaler.step(optimizer)
            """,
            """
            def clip(params):
                nn.utils.clip_grad_norm_(params, 1.0)
            def step(loss):
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                clip(params)
                scaler.step(optimizer)
            """,
        ),
    ],
    "DDP010": [
        (
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
        (  # the paired-barrier idiom (main process first) is correct
            """
            if rank == 0:
                dist.barrier()
            """,
            """
            if rank != 0:
                dist.barrier()
            prepare_dataset()
            if rank == 0:
                dist.barrier()
            """,
        ),
        (  # a collective inside a function that only rank 0 calls (a hang on resume)
            """
            def load_everywhere(path):
                data = read(path)
                dist.broadcast_object_list([data], src=0)
                return data
            if dist.get_rank() == 0:
                state = load_everywhere(path)
            """,
            """
            def load_everywhere(path):
                data = read(path) if dist.get_rank() == 0 else None
                holder = [data]
                dist.broadcast_object_list(holder, src=0)
                return holder[0]
            state = load_everywhere(path)
            """,
        ),
    ],
    "DDP011": [
        ('os.environ["MASTER_PORT"] = "12355"', 'port = os.environ["MASTER_PORT"]'),
        (  # through a module constant
            """
            PORT = 29500
            os.environ["MASTER_PORT"] = str(PORT)
            """,
            """
            PORT = 29500
            os.environ.setdefault("MASTER_PORT", str(PORT))
            """,
        ),
    ],
    "DDP012": [
        (
            """
            limit = 1.0 * math.sqrt(dist.get_world_size())
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)
            """,
            """
            limit = 1.0
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=limit)
            """,
        ),
    ],
    "DDP013": [
        (
            """
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            torch.cuda.set_device(rank % torch.cuda.device_count())
            model = DDP(net.cuda(), device_ids=[rank])
            """,
            """
            dist.init_process_group("nccl")
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            model = DDP(net.cuda(), device_ids=[local_rank])
            """,
        ),
    ],
    "DDP014": [
        (
            """
            for epoch in range(100):
                train_one_epoch(model, loader)
                if dist.get_rank() == 0:
                    if early_stopper(validate(model)):
                        break
            """,
            """
            for epoch in range(100):
                train_one_epoch(model, loader)
                stop = [early_stopper(validate(model)) if dist.get_rank() == 0 else None]
                dist.broadcast_object_list(stop, src=0)
                if stop[0]:
                    break
            """,
        ),
        (  # a flag set on rank 0 only, then read by every rank
            """
            for epoch in range(100):
                train_one_epoch(model, loader)
                if rank == 0:
                    stop = patience_over(history)
                if stop:
                    break
            """,
            """
            for epoch in range(100):
                train_one_epoch(model, loader)
                if rank == 0:
                    stop = patience_over(history)
                flag = [stop if rank == 0 else None]
                dist.broadcast_object_list(flag, 0)
                stop = flag[0]
                if stop:
                    break
            """,
        ),
    ],
    "DDP015": [
        (
            """
            dist.init_process_group("gloo")
            for epoch in range(3):
                train(model)
                torch.save(model.module.state_dict(), "checkpoint.pt")
            """,
            """
            dist.init_process_group("gloo")
            for epoch in range(3):
                train(model)
                if dist.get_rank() == 0:
                    torch.save(model.module.state_dict(), "checkpoint.pt")
            """,
        ),
        (  # "not distributed or rank 0" holds on every rank of a distributed run that is not mp-spawned
            """
            dist.init_process_group("gloo")
            def save_checkpoint(state, path):
                torch.save(state, path)
            if not args.multiprocessing_distributed or args.rank % ngpus == 0:
                save_checkpoint(state, "checkpoint.pt")
            """,
            """
            dist.init_process_group("gloo")
            def save_checkpoint(state, path):
                torch.save(state, path)
            if args.rank == 0:
                save_checkpoint(state, "checkpoint.pt")
            """,
        ),
    ],
    "DDP016": [
        (
            """
            val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
            correct = evaluate(model, val_loader)
            dist.all_reduce(correct)
            """,
            """
            val_loader = DataLoader(val_set, sampler=ShardSampler(len(val_set), rank, world))
            correct = evaluate(model, val_loader)
            dist.all_reduce(correct)
            """,
        ),
    ],
}


def _rules(source: str) -> set:
    source = textwrap.dedent(source)
    return {f.rule for f in lint_source("script.py", HEADER + textwrap.dedent(source))}


PAIRS = [(rule, index) for rule, pairs in CASES.items() for index in range(len(pairs))]


def test_every_rule_has_a_case_and_a_severity():
    assert sorted(CASES) == [rule.id for rule in RULES]
    assert {rule.severity for rule in RULES} == {"error", "warning"}


@pytest.mark.parametrize(("rule", "index"), PAIRS)
def test_rule_fires_on_the_mistake(rule, index):
    assert rule in _rules(CASES[rule][index][0])


@pytest.mark.parametrize(("rule", "index"), PAIRS)
def test_corrected_script_is_clean(rule, index):
    assert _rules(CASES[rule][index][1]) == set()


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
    expected = set()
    for number, line in enumerate(sample.read_text().splitlines(), start=1):
        for rule in re.findall(r"DDP\d{3}", line.partition("# expect:")[2]):
            expected.add((rule, number))
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
    assert run_lint([str(ROOT / "src"), str(ROOT / "benchmarks" / "bare_ddp.py")], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_unparsable_or_missing_file_is_reported(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert run_lint([str(broken), str(tmp_path / "missing.py")], as_json=False) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such file" in err and "broken.py: cannot parse" in err

"""`ddptrain lint`: every rule fires on the mistake and stays quiet on the corrected script."""

import ast
import gc
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from ddptrain.tools.lint import RULES, fix_paths, lint_paths, lint_program, lint_source, run_lint
from ddptrain.tools.lint.discover import gather
from ddptrain.tools.lint.program import Module, argument, call_position

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


@pytest.mark.parametrize(
    "address",
    [
        'f"tcp://{args.ip}:{args.port}"',
        '"tcp://" + args.ip + ":" + args.port',
        '"tcp://{}:{}".format(args.ip, args.port)',
        '"tcp://%s:%s" % (args.ip, args.port)',
    ],
)
def test_a_plain_port_option_with_a_fixed_default_is_the_rendezvous_port_however_the_address_is_built(address):
    options = 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--ip", default="localhost")\n'
    init = f"args = p.parse_args()\nurl = {address}\ndist.init_process_group('gloo', init_method=url)\n"
    assert _rules(options + 'p.add_argument("--port", default="23456")\n' + init) == {"DDP011"}
    assert _rules(options + 'p.add_argument("--port", default=None)\n' + init) == set()
    assert _rules(options + 'p.add_argument("--port", default="0000")\n' + init) == set()  # 0: any free port
    visdom = 'p.add_argument("--port", default="8097")\nargs = p.parse_args()\nviz = Visdom(port=int(args.port))\n'
    assert (
        _rules(
            options + visdom + "dist.init_process_group('nccl')\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
        )
        == set()
    )


@pytest.mark.parametrize("log", ["print", "logger.info", "logger.debug", "logger.warning"])
def test_a_shards_accuracy_logged_at_any_level_is_one_ranks_figure(log):
    source = f"""
    import logging
    logger = logging.getLogger(__name__)
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    loader = DataLoader(test_set, sampler=DistributedSampler(test_set, shuffle=False))

    def test(model, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        acc = correct / len(loader.dataset)
        {log}(f"test accuracy {{acc}}")
        return acc

    test(model, loader)
    """
    assert "DDP017" in _rules(source)


@pytest.mark.parametrize(
    "fit, found",
    [
        ("trainer.fit(Segmenter(), train_loader, val_loader)", True),
        ("trainer.fit(Segmenter(), train_loader, val_dataloaders=val_loader)", True),
        ("trainer.fit(Segmenter(), datamodule=data)", True),
        ("trainer.fit(Segmenter(), train_loader)", False),  # no validation loop runs: its logs are never made
    ],
)
def test_lightning_validation_logs_count_only_where_validation_runs(fit, found):
    sample = (CASES / "ddp017_lightning_log_without_sync_dist_mistake.py").read_text()
    source = sample.replace("trainer.fit(Segmenter(), train_loader, val_loader)", fit)
    assert ("DDP017" in {f.rule for f in lint_source("train.py", source)}) is found


@pytest.mark.parametrize(
    "where, found",
    [
        ("def pseudo_labels(model, data):", True),
        ("@torch.no_grad()\ndef pseudo_labels(model, data):", False),
        ("@torch.inference_mode\ndef pseudo_labels(model, data):", False),
    ],
)
def test_a_shuffling_loader_made_where_no_gradient_is_taken_trains_nothing(where, found):
    source = f"""
{where}
    labels = []
    for x in DataLoader(data, batch_size=8, shuffle=True):
        labels.append(model(x).argmax(1))
    return labels

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
pseudo_labels(model, unlabeled)
"""
    assert ("DDP018" in _rules(source)) is found


@pytest.mark.parametrize(
    "stop, found",
    [
        ("if float(loss.item()) < 0.06:\n                break", True),  # this rank's loss: it leaves alone
        ("if val_loss < 0.06:\n                break", False),  # every rank evaluates the whole set alike
        (
            "shared = loss.detach().clone()\n            dist.all_reduce(shared)\n            if shared.item() < 0.06:\n                break",
            False,
        ),
    ],
)
def test_leaving_the_training_loop_on_this_ranks_own_loss(stop, found):
    source = f"""
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            val_loss = sum(torch.nn.functional.mse_loss(model(a), b).item() for a, b in whole_val_set)
            {stop}
    """
    assert ("DDP014" in _rules(source)) is found


@pytest.mark.parametrize(
    "init, found",
    [
        ('dist.init_process_group("nccl", rank=dist_rank, world_size=world_size)', True),
        ('dist.init_process_group("nccl", rank=config["local_rank"], world_size=world_size)', False),  # LSR-MP
        ('dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + port, rank=dist_rank, world_size=2)', False),
    ],
)
def test_a_program_ranked_by_its_local_rank_or_meeting_on_this_host_runs_on_one_node(init, found):
    """One node: the local rank is the job's rank, so a save on local rank 0 is written once (DDP019)."""
    source = f"""
    config = {{"local_rank": int(os.environ["LOCAL_RANK"])}}
    dist_rank = int(os.environ["RANK"])
    world_size = torch.cuda.device_count()
    port = os.environ["MASTER_PORT"]
    torch.cuda.set_device(config["local_rank"])
    {init}
    model = DDP(nn.Linear(2, 2).cuda(), device_ids=[config["local_rank"]])
    for epoch in range(3):
        if config["local_rank"] == 0:
            torch.save(model.module.state_dict(), "last.pt")
    """
    assert ("DDP019" in _rules(source)) is found


@pytest.mark.parametrize(
    "guard, found",
    [
        ("local_rank == 0", True),  # rank 0 of every node: each node writes the path
        ("local_rank == 0 and total_rank == 0", False),  # rank 0 of the job
        ("local_rank == 0 and dist.get_rank() == 0", False),
    ],
)
def test_a_save_on_local_rank_0_that_also_asks_for_the_jobs_rank_0_writes_once(guard, found):
    source = f"""
    node_rank = int(os.environ["NODE_RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    total_rank = dist.get_rank()
    model = DDP(nn.Linear(2, 2).cuda(), device_ids=[local_rank])
    for epoch in range(3):
        if {guard}:
            torch.save(model.module.state_dict(), "last.pt")
    """
    assert ("DDP019" in _rules(source)) is found


@pytest.mark.parametrize("call, found", [("setup()", True), ("pass", False)])
def test_a_port_set_in_a_function_the_program_never_runs_fixes_nothing(call, found):
    """GOTHAM's scripts keep a `setup()` that sets `MASTER_PORT` beside code that never calls it."""
    source = f"""
    def setup():
        os.environ["MASTER_PORT"] = "12355"

    if __name__ == "__main__":
        {call}
        dist.init_process_group("gloo")
    """
    assert ("DDP011" in _rules(source)) is found


@pytest.mark.parametrize(
    "port, found",
    [
        ("'8888' if backend == 'nccl' else '8989'", True),  # RAMiT: one fixed port per backend
        ("'8888' if backend == 'nccl' else str(args.port)", False),
    ],
)
def test_a_port_chosen_between_two_numbers_is_fixed(port, found):
    source = f"""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--port")
    args = parser.parse_args()
    backend = "nccl"
    os.environ["MASTER_PORT"] = {port}
    dist.init_process_group(backend)
    """
    assert ("DDP011" in _rules(source)) is found


def test_the_models_own_train_call_is_not_the_trainers_train_method():
    """LSR-MP's `train_epoch` calls `self._model.train()` (nn.Module's), and its trainer's own `train()` calls
    `train_epoch`: reading the model's call as the trainer's method put the whole epoch's events (a clip after the
    scaler's step, on the fp32 arm) at that line, and DDP009 reported the `train()` call."""
    source = """
    class Trainer:
        def __init__(self, model, fp16):
            self._model = DDP(model)
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            self.scaler = torch.cuda.amp.GradScaler()
            self.fp16 = fp16

        def train_epoch(self, batches):
            self._model.train()
            for x in batches:
                loss = self._model(x).sum()
                if self.fp16:
                    self.scaler.scale(loss).backward()
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self._model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self._model.parameters(), 1.0)
                    self.optimizer.step()

        def train(self, batches, epochs):
            for epoch in range(epochs):
                self.train_epoch(batches)

    dist.init_process_group("gloo")
    Trainer(nn.Linear(2, 2), True).train([torch.randn(4, 2)], 3)
    """
    assert "DDP009" not in _rules(source)
    assert "DDP009" in _rules(source.replace("self.scaler.unscale_(self.optimizer)", "pass"))


@pytest.mark.parametrize(
    "start, found",
    [
        ("mp.spawn(main, args=(2, 0), nprocs=2)", True),  # every run on port 12355
        ("mp.spawn(main, args=(2, int(sys.argv[1])), nprocs=2)", False),  # the user gives each run its own
        ("main(0, 2, 3)", True),  # called, not spawned: a number all the same
        ("main(0, 2, int(sys.argv[1]))", False),
    ],
)
def test_a_port_offset_by_a_parameter_is_fixed_where_every_caller_gives_a_number(start, found):
    source = f"""
    import sys
    import torch.multiprocessing as mp
    def setup(rank, world_size, unique_num):
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = str(12355 + unique_num)
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    def main(rank, world_size, unique_num):
        setup(rank, world_size, unique_num)
    if __name__ == "__main__":
        {start}
    """
    assert ("DDP011" in _rules(source)) is found


@pytest.mark.parametrize(
    "init, found",
    [
        ('dist.init_process_group("nccl", init_method=args.dist_url)', True),
        ('dist.init_process_group("nccl", init_method="env://")', False),  # the option's default is never used
    ],
)
def test_a_fixed_address_in_an_option_counts_only_where_the_option_is_read(init, found):
    source = f"""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", type=str, help="url used to set up training")
    args = parser.parse_args()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    {init}
    """
    assert ("DDP011" in _rules(source)) is found


@pytest.mark.parametrize(
    "path, found",
    [
        ("os.path.join(save_dir, f'model_rank{rank}.pth')", False),  # DCASE2020-Task2: one file per rank
        ("os.path.join(save_dir, 'model.pth')", True),
    ],
)
def test_a_path_every_caller_builds_from_the_rank_is_one_file_per_rank(path, found):
    source = f"""
    class Trainer:
        def __init__(self, net):
            self.net = net

        def train(self, loader, save_path):
            for epoch in range(3):
                torch.save(self.net.state_dict(), save_path)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    save_dir = "runs"
    trainer = Trainer(DDP(nn.Linear(2, 2)))
    save_path = {path}
    trainer.train([], save_path)
    """
    assert ("DDP015" in _rules(source)) is found


@pytest.mark.parametrize(
    "name, found",
    [
        ('f"optimizer.{dist.get_rank():05d}-of-{dist.get_world_size():05d}.pth"', False),  # one file per rank
        ('"optimizer.pth"', True),
    ],
)
def test_a_file_name_built_from_the_rank_a_line_before_is_one_file_per_rank(name, found):
    source = f"""
    dist.init_process_group("gloo")
    optimizer = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    for epoch in range(3):
        opt_state_fn = (
            {name}
        )
        torch.save(optimizer.state_dict(), os.path.join("checkpoints", opt_state_fn))
    """
    assert ("DDP015" in _rules(source)) is found


@pytest.mark.parametrize(
    "test, found",
    [
        ('__name__ == "__main__"', False),  # a script: a function nothing calls never runs
        ('"__main__" == __name__', False),
        ('__name__ in ("__main__",)', False),
        ('MODE == "__main__"', True),  # no `__main__` block: a library linted alone is read whole
    ],
)
def test_a_main_block_tests_the_modules_name(test, found):
    source = f"""
    MODE = "__main__"
    def build(model):
        return DDP(model.to("cuda:0"), device_ids=[0])
    dist.init_process_group("gloo")
    if {test}:
        pass
    """
    assert ("DDP006" in _rules(source)) is found


@pytest.mark.parametrize(
    "guard, found",
    [
        ("not args.distributed", False),  # the single-process arm: the plain model
        ("not args.distributed or args.rank % ngpus_per_node == 0", True),  # also rank 0 of a distributed run
    ],
)
def test_a_guard_for_one_process_or_rank_0_is_no_single_process_arm(guard, found):
    source = f"""
    model = nn.Linear(2, 2)
    if args.distributed:
        dist.init_process_group("gloo")
        model = DDP(model)
    if {guard}:
        torch.save(model.state_dict(), "model.pt")
    """
    assert ("DDP007" in _rules(source)) is found


def test_every_rule_has_a_mistake_and_a_fixed_sample_and_a_severity():
    mistakes = [path for path in SAMPLES if path.stem.endswith("_mistake")]
    assert {rule.id for rule in RULES} <= {rule for path in mistakes for rule, _ in _marked(path)}
    for rule in RULES:
        ours = [p for p in mistakes if p.name.startswith(rule.id.lower())]
        assert ours and all((CASES / p.name.replace("_mistake", "_fixed")).is_file() for p in ours), rule.id
    assert {rule.severity for rule in RULES} == {"error", "warning"}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda path: path.stem)
def test_each_sample_gets_exactly_its_marked_findings(sample):
    found = {(f.rule, f.line) for f in lint_source(str(sample), sample.read_text(), RULES)}
    assert found == _marked(sample)
    if sample.stem.endswith("_mistake"):
        assert sample.stem[:6].upper() in {rule for rule, _ in found}  # the rule the sample is about fires


def test_a_program_in_two_files_is_read_as_one(tmp_path, capsys):
    """set_epoch and the rank-0 save live in the helper module; linting the folder, or the script alone, follows
    its import; a copy of the script without the module beside it cannot see them."""
    program = ROOT / "tests" / "lint_samples" / "program"
    assert run_lint([str(program)], as_json=True, strict=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    assert run_lint([str(program / "train.py")], as_json=True, strict=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["findings"] == [] and [Path(p).name for p in report["programs"][0]] == ["train.py", "engine.py"]
    (tmp_path / "train.py").write_text((program / "train.py").read_text())
    assert run_lint([str(tmp_path / "train.py")], as_json=True) == 0
    alone = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert alone == {"DDP002"}  # without engine.py the loop's set_epoch cannot be seen: a warning, exit 0


def _write(folder: Path, files: dict) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(HEADER + textwrap.dedent(text))
    return folder


def test_a_folder_of_independent_scripts_is_linted_script_by_script(tmp_path, capsys):
    """Tutorial series keep scripts side by side: one script's save_checkpoint, called on every rank, must not
    make another script's rank-0-only save_checkpoint look unguarded, and a single-process script beside DDP ones
    is not a DDP program. A module both import is read in each program and its finding reported once."""
    _write(
        tmp_path,
        {
            "common.py": """
                def init():
                    dist.init_process_group("gloo")
                    os.environ["MASTER_PORT"] = "29500"
                """,
            "guarded.py": """
                from common import init

                def save_checkpoint(model, path):
                    torch.save(model.module.state_dict(), path)

                if __name__ == "__main__":
                    init()
                    if dist.get_rank() == 0:
                        save_checkpoint(model, "last.pt")
                """,
            "everyone.py": """
                import common

                def save_checkpoint(model, path):
                    torch.save(model.module.state_dict(), path)

                common.init()
                save_checkpoint(model, "last.pt")
                """,
            "single.py": """
                model = nn.Linear(2, 2)
                torch.save(model.state_dict(), "single.pt")
                loader = DataLoader(ds, shuffle=True)
                """,
        },
    )
    assert run_lint([str(tmp_path)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    found = {(Path(f["file"]).name, f["rule"]) for f in report["findings"]}
    assert found == {("everyone.py", "DDP015"), ("common.py", "DDP011")}
    assert len(report["findings"]) == 2  # common.py's port: once, though two programs read it
    assert sorted(Path(p[0]).name for p in report["programs"]) == ["everyone.py", "guarded.py", "single.py"]
    # even read as one program, a namesake runs only where its own module's running code mentions it or a
    # module imports it: everyone.py's call of its save_checkpoint does not make guarded.py's look unguarded
    merged = lint_program(gather([str(tmp_path)]).given)
    assert ("guarded.py", "DDP015") not in {(Path(f.file).name, f.rule) for f in merged}


def test_a_script_that_imports_a_ddp_library_but_runs_none_of_it_is_single_process(tmp_path, capsys):
    """A repository's package holds the DDP trainer; its evaluation script and toy trainer import the package and
    run none of its distributed code: their saves are one process's, not every rank's. The DDP script still gets
    the trainer's unguarded save."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/trainer.py": """
                def setup(rank, world):
                    dist.init_process_group("gloo", rank=rank, world_size=world)
                    return DistributedDataParallel(build())

                def save_checkpoint(model, path):
                    torch.save(model.module.state_dict(), path)
                """,
            "pkg/metrics.py": """
                def save_statistics(stats, path):
                    torch.save(stats, path)
                """,
            "train.py": """
                from pkg.trainer import setup, save_checkpoint

                if __name__ == "__main__":
                    model = setup(int(os.environ["LOCAL_RANK"]), 2)
                    save_checkpoint(model, "last.pt")
                """,
            "eval.py": """
                from pkg.trainer import save_checkpoint
                from pkg.metrics import save_statistics

                if __name__ == "__main__":
                    save_statistics(compute(), "stats.pt")
                    save_checkpoint(model, "copy.pt")
                """,
        },
    )
    assert run_lint([str(tmp_path)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    found = {(Path(f["file"]).name, f["rule"]) for f in report["findings"]}
    assert found == {("trainer.py", "DDP015")}  # train.py's save; metrics.py's (eval.py's alone) is not one
    assert len(report["programs"]) == 2


def test_a_folder_inside_a_repository_imports_the_repositorys_package_as_its_scripts_do(tmp_path, capsys):
    """`lint tools/` reads what `tools/train.py` imports from the repository's package above it, as `lint
    tools/train.py` does: the folder's findings are its scripts' findings."""
    _write(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'rl'\n",
            "rl/__init__.py": "",
            "rl/runner.py": """
                def save(model, path):
                    torch.save(model.module.state_dict(), path)
                """,
            "tools/train_dist.py": """
                from rl.runner import save

                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    model = DDP(build())
                    save(model, "model.pt")
                """,
        },
    )
    reports = []
    for given in ("tools", "tools/train_dist.py"):
        assert run_lint([str(tmp_path / given)], as_json=True) == 0
        findings = json.loads(capsys.readouterr().out)["findings"]
        reports.append({(Path(f["file"]).relative_to(tmp_path).as_posix(), f["rule"]) for f in findings})
    assert reports[0] == reports[1] == {("rl/runner.py", "DDP015")}


def test_what_an_imported_module_never_runs_is_not_reported(tmp_path, capsys):
    """A library module's code counts where the program can run it: its import-time code and the functions and
    methods the program mentions — not a runner class nobody builds, an unused helper, or its `__main__` block."""
    _write(
        tmp_path,
        {
            "lib.py": """
                class SingleGpuRunner:
                    def train(self):
                        torch.save(self.model.state_dict(), "single.pt")

                def unused_save(model):
                    torch.save(model.state_dict(), "unused.pt")

                def used_save(model):
                    torch.save(model.state_dict(), "every-rank.pt")

                if __name__ == "__main__":
                    loader = DataLoader(ds, shuffle=True)
                """,
            "train.py": """
                import lib

                def train():
                    dist.init_process_group("gloo")
                    lib.used_save(model)

                if __name__ == "__main__":
                    train()
                """,
        },
    )
    assert run_lint([str(tmp_path / "train.py")], as_json=True) == 0
    found = {(Path(f["file"]).name, f["line"], f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found == {("lib.py", 17, "DDP015")}  # used_save's torch.save only


@pytest.mark.parametrize("given", ["../repo/train.py", "../repo", "ABSOLUTE"])
def test_a_finding_in_an_imported_module_names_it_the_way_the_user_named_the_script(
    tmp_path, capsys, monkeypatch, given
):
    """Run from a folder beside the repository: the imported module's finding is `../repo/utils.py`, like the
    script the user named, not an absolute path; a script named by its absolute path gets absolute paths."""
    repo = _write(
        tmp_path / "repo",
        {
            "utils.py": """
                def setup(model):
                    dist.init_process_group("gloo")
                    return nn.DataParallel(model)
                """,
            "train.py": """
                from utils import setup
                model = setup(nn.Linear(2, 2))
                """,
        },
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    path = str(repo / "train.py") if given == "ABSOLUTE" else given
    assert run_lint([path], as_json=True) == 0
    files = {f["file"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert files == {str(repo / "utils.py") if given == "ABSOLUTE" else "../repo/utils.py"}


def test_a_function_imported_under_another_name_runs_when_that_name_is_called(tmp_path, capsys):
    """`from train_lib import main as app_main` then `app_main()`: `main` runs, and its mistakes are reported."""
    _write(
        tmp_path,
        {
            "train_lib.py": """
                def main():
                    dist.init_process_group("gloo")
                    device = torch.device("cuda:0")
                    model = DDP(build().to(device))

                def unused():
                    device = torch.device("cuda:0")
                """,
            "launch.py": """
                from train_lib import main as app_main

                class Trainer:
                    def __call__(self):
                        app_main()

                if __name__ == "__main__":
                    Trainer()()
                """,
        },
    )
    run_lint([str(tmp_path / "launch.py")], as_json=True)
    found = {(Path(f["file"]).name, f["line"], f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found == {("train_lib.py", 11, "DDP006")}  # main's device (after HEADER's lines); `unused` never runs


def test_entry_points_are_found_by_main_guard_shell_script_or_python_m(tmp_path, capsys):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": "from . import helpers\ndef run():\n    helpers.go()\n",
            "pkg/helpers.py": "def go():\n    pass\n",
            "pkg/launched.py": "from pkg.engine import run\nrun()\n",
            "tools/train.py": "from pkg import engine\nif __name__ == '__main__':\n    engine.run()\n",
            "tools/shared.py": "VALUE = 1\n",
            "tools/also.py": "import shared\n",
        },
    )
    (tmp_path / "run.sh").write_text("torchrun --nproc-per-node 2 tools/shared.py\npython -m pkg.launched --x 1\n")
    assert run_lint([str(tmp_path)], as_json=True) == 0
    programs = {
        Path(p[0]).name: sorted(Path(f).name for f in p[1:]) for p in json.loads(capsys.readouterr().out)["programs"]
    }
    assert programs == {
        "train.py": ["__init__.py", "engine.py", "helpers.py"],  # the package's __init__, then what it imports
        "launched.py": ["__init__.py", "engine.py", "helpers.py"],  # `python -m pkg.launched` in run.sh
        "shared.py": [],  # imported by also.py, but run.sh launches it
        "also.py": ["shared.py"],  # nobody imports it
    }


def test_select_and_ignore_take_rules_prefixes_and_categories(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(
        HEADER
        + 'state = torch.load("m.pt", weights_only=False)\nos.environ["MASTER_PORT"] = "1"\ndist.init_process_group("gloo")\n'
    )

    def rules(**selection) -> set:
        code = run_lint([str(script)], as_json=True, **selection)
        return code, {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}

    assert rules() == (0, {"DDP011"})  # weights_only=False is a security finding, off by default
    assert rules(chosen=["security"]) == (0, {"DDP008"})
    assert rules(chosen=["ALL"], left_out=["DDP01"]) == (0, {"DDP008"})
    assert rules(chosen=["ddp", "DDP008"]) == (0, {"DDP008", "DDP011"})
    assert run_lint([str(script)], chosen=["DDP9"]) == 2
    assert "'DDP9' names no rule" in capsys.readouterr().err


def test_github_annotations_and_sarif(tmp_path, capsys):
    script = tmp_path / "a,b.py"
    script.write_text(HEADER + 'dist.init_process_group("nccl")\nos.environ["MASTER_PORT"] = "1"\ndist.barrier()\n')
    assert run_lint([str(script)], style="github") == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"::error file={str(script).replace(',', '%2C')},line=8,title=DDP005::NCCL process")
    assert lines[1].startswith("::warning ") and ",line=9,title=DDP011::" in lines[1]
    assert run_lint([str(script)], style="sarif") == 1
    log = json.loads(capsys.readouterr().out)
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "ddptrain lint"
    ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "DDP008" not in ids and "DDP018" in ids
    results = [(r["ruleId"], ids[r["ruleIndex"]], r["level"]) for r in run["results"]]
    assert results == [("DDP005", "DDP005", "error"), ("DDP011", "DDP011", "warning")]
    location = run["results"][0]["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": str(script)}, "region": {"startLine": 8}}


def test_an_ignore_comment_silences_one_rule_on_one_line():
    source = 'os.environ["MASTER_PORT"] = "12355"  # ddptrain: ignore[DDP011]\nmodel = nn.DataParallel(net)\n'
    source += 'dist.init_process_group("gloo")\n'  # DataParallel beside a multi-process path
    assert _rules(source) == {"DDP001"}
    init = 'dist.init_process_group("gloo")\n'
    assert _rules("model = nn.DataParallel(net)  # ddptrain: ignore[DDP011]\n" + init) == {"DDP001"}
    assert _rules("model = nn.DataParallel(net)  # ddptrain: ignore\n" + init) == set()


def test_warnings_exit_0_unless_strict_and_errors_exit_1(tmp_path, capsys):
    warned, failed = tmp_path / "warned.py", tmp_path / "failed.py"
    warned.write_text(HEADER + 'os.environ["MASTER_PORT"] = "12355"\ndist.init_process_group("gloo")\n')
    failed.write_text(HEADER + 'dist.init_process_group("nccl")\ndist.barrier()\n')
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
    script.write_text(HEADER + 'os.environ["MASTER_PORT"] = "12355"\ndist.init_process_group("gloo")\n')
    assert run_lint([str(script)], as_json=False) == 0  # a warning
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{script}:8 DDP011 warning hard-coded rendezvous port") and "-> let the launcher" in line


def _two_repositories(tmp_path: Path) -> list:
    """Two repositories, each a `train.py` with its own `helpers.py`: the same helper name, saved on rank 0 only
    in one and on every rank in the other."""
    body = """
        from helpers import save

        if __name__ == "__main__":
            dist.init_process_group("gloo")
            save(model)
        """
    for name, guard in (("careful", "if dist.get_rank() == 0:\n                    "), ("careless", "")):
        repo = tmp_path / name
        (repo / "src").mkdir(parents=True)
        (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        _write(
            repo / "src",
            {
                "train.py": body,
                "helpers.py": f"""
            def save(model):
                {guard}torch.save(model.state_dict(), "last.pt")
            """,
            },
        )
    return [str(tmp_path / "careful" / "src" / "train.py"), str(tmp_path / "careless" / "src"), str(tmp_path / "gone")]


def test_repositories_given_together_are_read_apart_and_side_by_side_alike(tmp_path, capsys, monkeypatch):
    """Paths of different repositories cannot import from one another: one repository's `save` is never taken
    for the other's, and `--jobs 2` reads them in two processes with the report of one, byte for byte."""
    import os

    import ddptrain.tools.lint as lint

    paths = _two_repositories(tmp_path)
    assert run_lint(paths, as_json=True, jobs=1) == 2  # the missing path
    alone = capsys.readouterr().out
    report = json.loads(alone)
    assert {(Path(f["file"]).parent.parent.name, f["rule"]) for f in report["findings"]} == {("careless", "DDP015")}
    assert [Path(p[0]).parent.parent.name for p in report["programs"]] == ["careful", "careless"]
    assert report["errors"] == [f"{paths[2]}: no such file or folder"]

    workers = tmp_path / "pids"
    read_group = lint._lint_group

    def noted(group, rules):
        with open(workers, "a") as out:
            out.write(f"{os.getpid()}\n")
        return read_group(group, rules)

    monkeypatch.setattr(lint, "_lint_group", noted)
    assert run_lint(paths, as_json=True, jobs=2) == 2
    assert capsys.readouterr().out == alone
    pids = set(workers.read_text().split())
    assert len(pids) >= min(2, lint.default_jobs()) and str(os.getpid()) not in pids  # in forked processes


def test_a_shell_script_launches_files_of_its_own_repository_only(tmp_path, capsys):
    """`python train.py` in one repository's run.sh names that repository's train.py, not a namesake elsewhere
    that another repository only imports (read as part of its importer's program, not as one of its own)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.sh").write_text("torchrun --nproc-per-node 2 train.py\n")
    _write(tmp_path / "a", {"train.py": "dist.init_process_group('gloo')\n"})
    (tmp_path / "b").mkdir()
    _write(tmp_path / "b", {"train.py": "def fit():\n    pass\n", "main.py": "from train import fit\nfit()\n"})
    for jobs in (1, 2):
        assert run_lint([str(tmp_path / "a"), str(tmp_path / "b")], as_json=True, jobs=jobs) == 0
        programs = json.loads(capsys.readouterr().out)["programs"]
        assert [[Path(f).parent.name + "/" + Path(f).name for f in p] for p in programs] == [
            ["a/train.py"],
            ["b/main.py", "b/train.py"],
        ]


def test_modules_of_a_folder_without_init_are_read_as_python_imports_them(tmp_path, capsys):
    """`from utils import ckpt` where utils/ has no __init__.py (a namespace package, as research repositories
    keep their helpers) runs utils/ckpt.py: its every-rank save is found. A module named like the folder wins, as
    in Python (a package, then a module, then a namespace folder)."""
    _write(
        tmp_path,
        {
            "train.py": """
                from utils import ckpt

                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    ckpt.save(model)
                """,
            "utils/ckpt.py": """
                def save(model):
                    torch.save(model.module.state_dict(), "last.pt")
                """,
        },
    )
    assert run_lint([str(tmp_path / "train.py")], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "ckpt.py"]
    assert {(Path(f["file"]).name, f["rule"]) for f in report["findings"]} == {("ckpt.py", "DDP015")}
    (tmp_path / "utils.py").write_text("def ckpt():\n    pass\n")  # now `utils` is this module
    assert run_lint([str(tmp_path / "train.py")], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "utils.py"] and not report["findings"]


def test_jobs_below_zero_is_refused(tmp_path, capsys):
    assert run_lint([str(tmp_path)], jobs=-1) == 2
    assert "--jobs -1: give 0 (one process per CPU), 1 (none) or more" in capsys.readouterr().err


def test_project_code_and_the_bare_ddp_benchmark_are_clean(capsys):
    assert run_lint([str(ROOT / "src")], as_json=True) == 0  # the bare DDP benchmark loop ships in src too
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_unparsable_or_missing_file_is_reported(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert run_lint([str(broken), str(tmp_path / "missing.py")], as_json=False) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such file" in err and "broken.py: cannot parse" in err
    running = f"{sys.version_info.major}.{sys.version_info.minor}"  # (a file written for a newer Python: the fix)
    assert f"lint reads files with the Python it runs under ({running})" in err


def test_linting_leaves_the_garbage_collector_as_it_found_it(tmp_path):
    """Lint pauses Python's cyclic collector while it reads (the trees it builds hold no cycles); a program that
    calls it gets the collector back as it was, also when a file could not be read."""
    (tmp_path / "train.py").write_text(HEADER + "dist.init_process_group('gloo')\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    assert gc.isenabled()
    report = lint_paths([str(tmp_path)])
    assert gc.isenabled() and report.problems
    gc.disable()
    try:
        lint_paths([str(tmp_path)])
        assert not gc.isenabled()
    finally:
        gc.enable()


def _nodes_named(name: str) -> list:
    """The syntax-tree nodes alive that define or name `name`."""
    gc.collect()
    return [
        o
        for o in gc.get_objects()
        if issubclass(type(o), ast.AST) and name in (getattr(o, "id", ""), getattr(o, "name", ""))
    ]


@pytest.mark.parametrize("fix", [False, True])
def test_a_program_calling_lint_gets_its_memory_back(tmp_path, fix):
    """The syntax trees lint reads (a gigabyte for a large corpus) are not kept alive by its caches once the report
    is returned: a notebook or a service that lints keeps none of them."""
    (tmp_path / "train.py").write_text(
        HEADER + "def zz_train_step(model):\n    torch.save(model.state_dict(), 'ckpt.pt')\n"
        "dist.init_process_group('nccl')\nsampler = DistributedSampler([])\nzz_train_step(DDP(nn.Linear(1, 1)))\n"
    )
    report = fix_paths([str(tmp_path)])[0] if fix else lint_paths([str(tmp_path)])
    assert report.findings  # the function was read and its body walked
    assert _nodes_named("zz_train_step") == []


SHARDED_EVALUATION = """
dist.init_process_group("gloo")
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            pair_ious = model(x)
            {line}
evaluate(model, val_loader)
"""


@pytest.mark.parametrize(
    "line, found",
    [
        ("cost = -torch.log(pair_ious + 1e-8)", False),  # a logarithm
        ("cost = math.log(pair_ious)", False),
        ("writer.log({'iou': pair_ious.mean()})", True),  # a tracker's log line
        ("print('mIoU', pair_ious.mean())", True),
        ("print('EM', em)", True),  # a metric named by a short part
        ("print('items', item)", False),  # a short part inside a longer word is none
        ("print(f'correct = {correct}')", True),
        ("print(f'correction = {correction:.6f} eV')", False),  # a fitted offset counts nothing
        ("bar.set_description(f'iou {pair_ious.mean():.3f}')", False),  # a bar's running figure, batch by batch
    ],
)
def test_a_logarithm_is_no_log_line_and_short_metric_names_count_as_whole_parts(line, found):
    assert ("DDP017" in _rules(SHARDED_EVALUATION.format(line=line))) is found


@pytest.mark.parametrize(
    "shown", ["bar.set_description(f'test loss {test_loss:.3f}')", "bar.set_postfix(loss=test_loss)"]
)
def test_a_progress_bars_text_after_the_pass_is_a_log_line(shown):
    """ppt_learning's `test()` shows its loss on rank 0's bar after the pass over its shard, never reduced."""
    source = f"""
    dist.init_process_group("gloo")
    val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
    def evaluate(model, loader, rank):
        model.eval()
        bar = tqdm(loader, disable=rank != 0)
        test_loss = 0.0
        with torch.no_grad():
            for x, y in bar:
                test_loss += (model(x) - y).pow(2).sum().item()
        if rank == 0:
            {shown}
    evaluate(model, val_loader, dist.get_rank())
    """
    assert "DDP017" in _rules(source)


PER_BATCH_HELPER = """
class Trainer:
    def __init__(self, model, valid_loader):
        self.model, self.valid_loader = model, valid_loader

    def _valid_batch(self, x, y):
        with torch.no_grad():
            loss = criterion(self.model(x), y){step}
        return loss

    def validate(self):
        total_loss = 0.0
        batches = {batches}
        for x, y in batches:
            total_loss += self._valid_batch(x, y).item()
        print(f"validation loss {{total_loss / len(self.valid_loader)}}")

dist.init_process_group("gloo")
Trainer(model, DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))).validate()
"""


@pytest.mark.parametrize(
    "step, batches, found",
    [
        ("", "tqdm(self.valid_loader)", True),  # each rank prints the loss of its own shard, as if it were the model's
        ("\n        loss.backward()", "self.valid_loader", False),  # a helper that back-propagates trains
        ("", "read_pairs(self.val_files)", False),  # not the sharded loader: files read whole
    ],
)
def test_an_evaluation_marked_only_in_its_per_batch_helper_is_an_evaluation(step, batches, found):
    """The `no_grad` is in the helper each batch goes through, not in the loop that logs the figure (a
    held-out program's `_run_validate`, which printed each rank's shard on every rank)."""
    assert ("DDP017" in _rules(PER_BATCH_HELPER.format(step=step, batches=batches))) is found


HOOKED_EVALUATION = """
class Trainer:
    def eval_loop(self, model, val_loader):
        def on_start_eval(model):
            model.eval()
            torch.set_grad_enabled(False)

        {start}
        outs = []
        for x, y in val_loader:
            outs.append(model(x))

        def on_validation_epoch_end():
            gathered = [torch.zeros_like(outs[0]) for _ in range(dist.get_world_size())]
            dist.all_gather(gathered, torch.cat(outs))
            print("val loss", torch.cat(gathered).mean())

        on_validation_epoch_end()

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
Trainer().eval_loop(model, DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)))
"""


@pytest.mark.parametrize("start, found", [("on_start_eval(model)", True), ("pass", False)])
def test_an_evaluation_switched_on_by_a_hook_and_gathered_in_another_is_padded_evaluation(start, found):
    """A trainer in the style of Lightning Fabric's hand-written loops: `model.eval()` and
    `set_grad_enabled(False)` in one nested hook, the all_gather of the padded shards in another. Without the
    switch to evaluation the loop is not known for one, and nothing is said."""
    assert ("DDP016" in _rules(HOOKED_EVALUATION.format(start=start))) is found


METRIC_CLASS = """
{imports}
class LossMetric({base}):
    def update(self, loss, n):
        self.total += loss * n
        self.count += n

    def compute(self):
        return self.total / self.count

def evaluate(model, loader):
    metric = LossMetric(){moved}
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            metric.update(criterion(model(x), y).item(), len(y))
    return metric.compute()

dist.init_process_group("gloo")
val_loss = evaluate(model, DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)))
if dist.get_rank() == 0:
    print(f"val loss {{val_loss}}")
"""


@pytest.mark.parametrize("moved", ["", ".to(device)"])
@pytest.mark.parametrize(
    "imports, base, found",
    [
        ("", "object", True),  # the class's compute() adds up this rank's share only
        ("from torchmetrics import Metric", "Metric", False),  # torchmetrics sums the states over ranks first
        ("import torchmetrics", "torchmetrics.Metric", False),
    ],
)
def test_a_metric_class_of_the_program_on_torchmetrics_combines_its_states(imports, base, found, moved):
    source = METRIC_CLASS.format(imports=imports, base=base, moved=moved)
    assert ("DDP017" in _rules(source)) is found


def test_helpers_imported_with_a_star_resolve_and_a_barrier_helper_reduces_nothing(tmp_path):
    (tmp_path / "comm.py").write_text(
        "import torch.distributed as dist\n"
        "def synchronize():\n    dist.barrier()\n"
        "def reduce_mean(t):\n    dist.all_reduce(t)\n    return t / dist.get_world_size()\n"
    )
    script = """
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from comm import *
def evaluate(model, loader):
    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    {reduce}
    print("accuracy", correct.item())
if __name__ == "__main__":
    dist.init_process_group("gloo")
    evaluate(model, DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)))
"""
    rules = [rule for rule in RULES if rule.id == "DDP017"]
    for reduce, expected in [("synchronize()", ["DDP017"]), ("correct = reduce_mean(correct)", [])]:
        (tmp_path / "train.py").write_text(script.format(reduce=reduce))
        report = lint_paths([str(tmp_path / "train.py")], rules)
        assert [f.rule for f in report.findings] == expected, reduce


HOROVOD_EVALUATION = """
import horovod.torch as hvd
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, num_replicas=hvd.size(), rank=hvd.rank()))
def validate(model, loader):
    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    {reduce}
    print("val accuracy", correct.item() / len(loader.dataset))
validate(model, val_loader)
"""


@pytest.mark.parametrize(
    "reduce, found",
    [
        ("hvd.allreduce(correct, op=hvd.Sum)", True),  # out of place: the sum it returns is thrown away
        ("correct = hvd.allreduce(correct, op=hvd.Sum)", False),
        ("hvd.allreduce_(correct, op=hvd.Sum)", False),  # in place
    ],
)
def test_horovods_out_of_place_allreduce_counts_only_where_its_result_is_kept(reduce, found):
    assert ("DDP017" in _rules(HOROVOD_EVALUATION.format(reduce=reduce))) is found


@pytest.mark.parametrize(
    "imports, call, found",
    [("from test import repeat_eval", "parse_config()", False), ("import test", "test.parse_config()", True)],
)
def test_a_namesake_in_an_imported_module_runs_only_where_it_is_used(tmp_path, capsys, imports, call, found):
    """OpenPCDet's tools/train.py imports one helper from tools/test.py; both define parse_config(), and test.py's
    (with a fixed port) runs only in its own __main__ block — unless train.py calls that one."""
    _write(
        tmp_path,
        {
            "test.py": """
                def parse_config():
                    os.environ["MASTER_PORT"] = "18888"

                def repeat_eval(model):
                    model.eval()

                if __name__ == "__main__":
                    parse_config()
                """,
            "train.py": f"""
                {imports}
                from test import repeat_eval

                def parse_config():
                    dist.init_process_group("gloo")

                if __name__ == "__main__":
                    {call}
                    repeat_eval(model)
                """,
        },
    )
    run_lint([str(tmp_path / "train.py")], as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert (("test.py", "DDP011") in {(Path(f["file"]).name, f["rule"]) for f in report["findings"]}) is found


@pytest.mark.parametrize("body, found", [("hvd.allreduce(rt)", True), ("rt = hvd.allreduce(rt)", False)])
def test_a_helper_that_throws_away_horovods_allreduce_combines_nothing(body, found):
    """pytorch-distributed's reduce_mean: `rt = tensor.clone(); hvd.allreduce(rt); return rt` returns the local value."""
    helper = f"def reduce_mean(tensor):\n    rt = tensor.clone()\n    {body}\n    return rt\n"
    source = HOROVOD_EVALUATION.format(reduce="correct = reduce_mean(correct)")
    assert ("DDP017" in _rules(helper + source)) is found


@pytest.mark.parametrize(
    "source, rule",
    [
        # a program that ranks its processes by the local rank is written for one node: rank 0 of the node is rank 0
        (
            "dist.init_process_group('nccl', init_method='env://', rank={rank})\n"
            "torch.cuda.set_device(local_rank)\nif local_rank == 0:\n    torch.save(model.module.state_dict(), 'a.pt')\n"
            "print(os.environ['RANK'])\n",
            "DDP019",
        ),
        (
            "dist.init_process_group('nccl', init_method='env://', rank={rank})\n"
            "torch.cuda.set_device(dist.get_rank())\n",
            "DDP013",
        ),
    ],
)
@pytest.mark.parametrize("rank, expected", [("int(os.environ['RANK'])", True), ("local_rank", False)])
def test_a_program_ranked_by_the_local_rank_is_single_node(source, rule, rank, expected):
    program = "local_rank = int(os.environ['LOCAL_RANK'])\n" + source.format(rank=rank)
    assert (rule in _rules(program)) is expected


@pytest.mark.parametrize(
    "visible, found", [("", True), ("os.environ['CUDA_VISIBLE_DEVICES'] = str(devices[rank])", False)]
)
def test_cuda_0_is_each_process_own_gpu_where_it_sees_one(visible, found):
    """MSN's process_main makes one GPU visible per spawned process; then `cuda:0` is that process's GPU."""
    source = f"""
def process_main(rank, devices):
    {visible or "pass"}
    main(rank)

def main(rank):
    dist.init_process_group("nccl", rank=rank, world_size=2)
    model = DDP(nn.Linear(2, 2).to("cuda:0"))

mp.spawn(process_main, args=(devices,), nprocs=2)
"""
    assert ("DDP006" in _rules("import torch.multiprocessing as mp\n" + source)) is found


@pytest.mark.parametrize(
    "comment, found",
    [
        ("# CUDA_VISIBLE_DEVICES=0,1 torchrun --standalone --nproc_per_node=gpu train.py", True),
        ("# CUDA_VISIBLE_DEVICES=$LOCAL_RANK python train.py  (one GPU a process)", False),
    ],
)
def test_a_launch_line_in_a_comment_that_shows_every_gpu_to_every_process_sets_no_device(comment, found):
    """Deepfake_Detect's ddp_train.py: the torchrun line in its last comment shows both GPUs to both processes, and
    with no set_device each of them makes its context on GPU 0."""
    source = f"""
def setup():
    dist.init_process_group(backend="nccl")

gpu_id = int(os.environ["LOCAL_RANK"])
setup()
model = DDP(nn.Linear(2, 2).to(gpu_id), device_ids=[gpu_id])
{comment}
"""
    assert ("DDP005" in _rules(source)) is found


@pytest.mark.parametrize(
    "option, use, found",
    [
        ('"--port", type=int, default=8900', "vis = visdom.Visdom(port=args.port)", False),
        ('"--port", type=int, default=8900', "os.environ['MASTER_PORT'] = str(args.port)", True),
        # DistributedPyTorch's multinodeMP.py: `--portNum` read back by argparse's own name for it, `args.portNum`
        ('"--portNum", default="39990", type=str', "vis = visdom.Visdom(port=int(args.portNum))", False),
        ('"--portNum", default="39990", type=str', "os.environ['MASTER_PORT'] = args.portNum", True),
    ],
)
def test_a_plain_port_option_counts_where_it_reaches_the_rendezvous(option, use, found):
    source = f"""
import argparse
parser = argparse.ArgumentParser()
parser.add_argument({option})
args = parser.parse_args()
{use}
dist.init_process_group("gloo")
"""
    assert ("DDP011" in _rules(source)) is found


# BLIP's and ALBEF's helper: one sampler per dataset, each with its own shuffle flag
CREATE_SAMPLER = """
def create_sampler(datasets, shuffles, num_tasks, global_rank):
    samplers = []
    for dataset, shuffle in zip(datasets, shuffles):
        samplers.append(torch.utils.data.DistributedSampler(dataset, num_replicas=num_tasks, rank=global_rank, shuffle=shuffle))
    return samplers
"""


@pytest.mark.parametrize("shuffles, found", [("[False, False]", False), ("[True, False]", True)])
def test_a_sampler_helper_every_caller_asks_not_to_shuffle_needs_no_set_epoch(shuffles, found):
    """BLIP's create_sampler(datasets, shuffles, ...) zips its datasets with their shuffle flags."""
    source = (
        CREATE_SAMPLER
        + f"""

dist.init_process_group("gloo")
samplers = create_sampler([first, second], {shuffles}, 2, dist.get_rank())
for epoch in range(10):
    for x, y in DataLoader(first, sampler=samplers[0]):
        loss = model(x).sum()
        loss.backward()
"""
    )
    assert ("DDP002" in _rules(source)) is found


@pytest.mark.parametrize("launcher, found", [("pytorch", False), ("slurm", True)])
def test_a_branch_no_caller_selects_does_not_run(launcher, found):
    """KAIR's init_dist(launcher): every training script passes 'pytorch', so the SLURM setup and its port never run."""
    source = f"""
def init_dist(launcher):
    if launcher == "pytorch":
        dist.init_process_group("gloo")
    elif launcher == "slurm":
        init_slurm()

def init_slurm():
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo")

if __name__ == "__main__":
    init_dist("{launcher}")
"""
    assert ("DDP011" in _rules(source)) is found


@pytest.mark.parametrize(
    "work, found",
    [
        ("time.sleep(60)", False),  # a group made and destroyed: no GPU work, no device to choose
        ("dist.barrier()", True),
        ("model = DDP(SplitModel(dev0, dev1), device_ids=None)", False),  # one process drives two GPUs by design
        ("model = DDP(nn.Linear(2, 2).cuda())", True),
    ],
)
def test_nccl_without_set_device_where_a_process_has_one_gpu_to_use(work, found):
    source = f"import time\ndist.init_process_group('nccl')\n{work}\ndist.destroy_process_group()\n"
    assert ("DDP005" in _rules(source)) is found


def test_a_function_called_through_a_package_and_its_subpackage_is_the_programs(tmp_path, capsys):
    """`encoding.utils.save_checkpoint(...)` runs the package's own `save_checkpoint`, whose torch.save makes the
    call a checkpoint save: under `args.gpu == 0` in a job over several nodes, every node writes it (DDP019)."""
    _write(
        tmp_path,
        {
            "encoding/__init__.py": "from . import utils\n",
            "encoding/utils/__init__.py": "from .files import *\n",
            "encoding/utils/files.py": """\
                def save_checkpoint(state, filename):
                    torch.save(state, filename)
                """,
            "train.py": """\
                import encoding
                def main_worker(gpu, ngpus_per_node, args):
                    args.gpu = gpu
                    args.rank = args.rank * ngpus_per_node + gpu
                    dist.init_process_group("gloo", world_size=args.world_size, rank=args.rank)
                    model = DDP(nn.Linear(2, 2))
                    for epoch in range(3):
                        if args.gpu == 0:
                            encoding.utils.save_checkpoint({"model": model.module.state_dict()}, "checkpoint.pt")
                if __name__ == "__main__":
                    main_worker(0, 1, None)
                """,
        },
    )
    assert run_lint([str(tmp_path / "train.py")], as_json=True) == 0
    found = [(Path(f["file"]).name, f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]]
    assert found == [("train.py", "DDP019")]


def test_a_script_that_calls_a_shared_helper_down_its_single_process_branch_is_single_process(tmp_path, capsys):
    """A tutorial series: `common.load_dataset(..., rank=-1)` makes `DistributedSampler(ds) if rank != -1 else
    None`, `Trainer(model, ddp=False)` passes `ddp` to a helper that wraps under `if ddp:`, `build(multi_gpu=False)`
    is imported under another name. The scripts that leave those off make no process group and save once; the DDP
    script beside them, which passes the rank, saves on every rank."""
    _write(
        tmp_path,
        {
            "common.py": """\
                def load_dataset(ds, rank=-1, world_size=1):
                    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank) if rank != -1 else None
                    return DataLoader(ds, sampler=sampler, shuffle=sampler is None)

                def build(ds, multi_gpu=False):
                    if multi_gpu is True:
                        return DataLoader(ds, sampler=DistributedSampler(ds))
                    return DataLoader(ds, shuffle=True)

                def setup(model, ddp):
                    if not ddp:
                        return model
                    return DDP(model)

                class Trainer:
                    def __init__(self, model, ddp=False):
                        self.model = setup(model, ddp)
                """,
            "single.py": """\
                from common import load_dataset, Trainer
                from common import build as make_loader
                def main():
                    loader = load_dataset(list(range(8)))
                    other = make_loader(list(range(8)), multi_gpu=False)
                    trainer = Trainer(nn.Linear(2, 2), ddp=False)
                    for epoch in range(3):
                        torch.save(trainer.model.state_dict(), "last.pt")
                if __name__ == "__main__":
                    main()
                """,
            "ddp.py": """\
                from common import load_dataset
                def main():
                    loader = load_dataset(list(range(8)), rank=int(os.environ["RANK"]), world_size=2)
                    model = DDP(nn.Linear(2, 2))
                    for epoch in range(3):
                        loader.sampler.set_epoch(epoch)
                        torch.save(model.module.state_dict(), "last.pt")
                if __name__ == "__main__":
                    main()
                """,
        },
    )
    run_lint([str(tmp_path)], as_json=True)
    found = sorted((Path(f["file"]).name, f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"])
    assert found == [("ddp.py", "DDP015")]


def test_a_package_in_src_is_read_where_the_repositorys_scripts_import_it(tmp_path, capsys):
    """The "src layout" (`[tool.setuptools.packages.find] where = ["src"]`, installed with `pip install -e .`): an
    example imports `trnr.trainer`, whose epoch loop never calls `set_epoch` on the sampler the example made."""
    (tmp_path / "pyproject.toml").write_text("[tool.setuptools.packages.find]\nwhere = ['src']\n")
    _write(
        tmp_path,
        {
            "src/trnr/__init__.py": "",
            "src/trnr/trainer.py": """\
                class Trainer:
                    def __init__(self, model):
                        self.model = model

                    def fit(self, loader, epochs):
                        for epoch in range(epochs):
                            for x, y in loader:
                                self.model(x).sum().backward()
                """,
            "examples/train_ddp.py": """\
                from trnr.trainer import Trainer
                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    data = list(range(8))
                    loader = DataLoader(data, sampler=DistributedSampler(data))
                    Trainer(DDP(nn.Linear(2, 2))).fit(loader, epochs=3)
                """,
        },
    )
    run_lint([str(tmp_path / "examples" / "train_ddp.py")], as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train_ddp.py", "__init__.py", "trainer.py"]
    assert [f["rule"] for f in report["findings"]] == ["DDP002"]


def test_a_helper_that_only_shares_its_name_with_the_one_called_saves_nothing(tmp_path, capsys):
    """workers/linear.py defines a `save_checkpoint` nothing calls; the program calls `utils.train.save_checkpoint`,
    which saves on rank 0 only. The unused namesake's every-rank save is no finding; called, it is."""
    files = {
        "utils/__init__.py": "",
        "utils/train.py": """\
            def save_checkpoint(state, path):
                if dist.get_rank() == 0:
                    torch.save(state, path)
            """,
        "workers/__init__.py": "",
        "workers/linear.py": """\
            import utils.train

            def save_checkpoint(state, path):
                torch.save(state, path)

            def linear(model, epochs):
                for epoch in range(epochs):
                    utils.train.save_checkpoint({"model": model.module.state_dict()}, "last.pt")
            """,
        "main.py": """\
            from workers.linear import linear
            if __name__ == "__main__":
                dist.init_process_group("gloo")
                linear(DDP(nn.Linear(2, 2)), 3)
            """,
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "main.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    called = files["workers/linear.py"].replace("utils.train.save_checkpoint(", "save_checkpoint(")
    _write(tmp_path, {"workers/linear.py": called})
    run_lint([str(tmp_path / "main.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP015"]


def test_a_rank_stored_from_the_spawn_index_is_local_whatever_a_helper_for_another_launcher_stores(tmp_path, capsys):
    """utils.py serves two scripts: `dist_setup_launch` stores the global RANK for torchrun (main_launch.py),
    `dist_setup_mp` uses the `args.rank = rank` that main_mp.py's spawned worker stored, the local index. The
    device from it is no finding in main_mp.py's program; torchrun's global rank as the device is, in the other."""
    _write(
        tmp_path,
        {
            "utils.py": """\
                def dist_setup_launch(args):
                    args.rank = int(os.environ["RANK"])
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(args.rank)

                def dist_setup_mp(args):
                    dist.init_process_group("nccl", rank=args.rank, world_size=args.world_size)
                    torch.cuda.set_device(args.rank)
                """,
            "main_mp.py": """\
                import torch.multiprocessing as mp
                from utils import dist_setup_mp
                def main(rank, args):
                    args.rank = rank
                    dist_setup_mp(args)
                if __name__ == "__main__":
                    mp.spawn(main, args=(None,), nprocs=2)
                """,
            "main_launch.py": """\
                from utils import dist_setup_launch
                if __name__ == "__main__":
                    dist_setup_launch(None)
                """,
        },
    )
    found = {}
    for script in ("main_mp.py", "main_launch.py"):
        run_lint([str(tmp_path / script)], as_json=True)
        found[script] = [(Path(f["file"]).name, f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]]
    assert found == {"main_mp.py": [], "main_launch.py": [("utils.py", "DDP013")]}


def test_a_repository_that_is_a_package_is_read_when_it_imports_itself_by_name(tmp_path, capsys):
    """pseudoESM/train.py with `from pseudoESM.trainer import Trainer` (run from the folder above, the repository
    being a package): trainer.py is read. A folder beside the repository is never searched for other names."""
    _write(
        tmp_path,
        {
            "pseudoESM/__init__.py": "",
            "pseudoESM/setup.py": "",
            "pseudoESM/train.py": """
                from pseudoESM.trainer import fit
                import helpers

                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    fit(model)
                    helpers.save(model)
                """,
            "pseudoESM/trainer.py": """
                def fit(model):
                    torch.save(model.module.state_dict(), "last.pt")
                """,
            "helpers.py": """
                def save(model):
                    torch.save(model.module.state_dict(), "other.pt")
                """,
        },
    )
    assert run_lint([str(tmp_path / "pseudoESM" / "train.py")], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "__init__.py", "trainer.py"]
    assert {(Path(f["file"]).name, f["rule"]) for f in report["findings"]} == {("trainer.py", "DDP015")}


def test_a_parameter_is_found_where_its_callers_pass_it():
    """Positions as a caller counts them: a method's `self` is not passed; a keyword-only parameter has none."""
    tree = ast.parse("class A:\n    def f(self, a, /, b, *, c): pass\ndef g(x, y=1): pass\n")
    method, function = tree.body[0].body[0], tree.body[1]
    assert [call_position(method, n) for n in ("self", "a", "b", "c", "d")] == [-1, 0, 1, None, None]
    assert [call_position(function, n) for n in ("x", "y")] == [0, 1]
    call = ast.parse("g(5, y=7)").body[0].value
    assert [ast.unparse(argument(call, call_position(function, n), n)) for n in ("x", "y")] == ["5", "7"]
    assert argument(call, None, "x") is None


def test_a_class_private_save_is_reached_only_through_its_own_class(tmp_path, capsys):
    """Two classes each define `__save_checkpoint`; Python mangles the name, so `self.__save_checkpoint()` in the
    trainer runs the trainer's own method, never the manager's. The manager's file write is reached only from the
    trainer's save, which runs under `if self.rank == 0`: no finding. Called on every rank, it is one."""
    files = {
        "checkpoint.py": """\
            class CheckpointManager:
                def __save_checkpoint(self, state, step):
                    torch.save(state, f"ckpt/{step}.pt")

                def save_checkpoint(self, state, step):
                    self.__save_checkpoint(state, step)
            """,
        "train.py": """\
            from checkpoint import CheckpointManager

            class Trainer:
                def __init__(self, model, rank):
                    self.model, self.rank = model, rank
                    self.manager = CheckpointManager()

                def __save_checkpoint(self, step):
                    self.manager.save_checkpoint({"model": self.model.module.state_dict()}, step)

                def fit(self, epochs):
                    for epoch in range(epochs):
                        if self.rank == 0:
                            self.__save_checkpoint(epoch)

            if __name__ == "__main__":
                dist.init_process_group("gloo")
                Trainer(DDP(nn.Linear(2, 2)), dist.get_rank()).fit(3)
            """,
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    every_rank = files["train.py"].replace("if self.rank == 0:\n", "if True:\n")
    _write(tmp_path, {"train.py": every_rank})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP015"]


def test_a_wrap_behind_is_initialized_makes_no_ddp_program_of_a_script_that_never_initialises(tmp_path, capsys):
    """The package's `fit()` wraps the model in DDP only when a caller has made a process group; a demo that never
    makes one runs in one process, and its shuffling loader is right. A demo that initialises is a DDP program."""
    files = {
        "lib/__init__.py": "",
        "lib/model.py": """\
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            def fit(model, loader, epochs):
                is_ddp = dist.is_initialized()
                if is_ddp:
                    model = DDP(model)
                for epoch in range(epochs):
                    for x, y in loader:
                        model(x).sum().backward()
            """,
        "demo.py": """\
            from torch.utils.data import DataLoader
            from lib.model import fit

            if __name__ == "__main__":
                loader = DataLoader(make_dataset(), batch_size=32, shuffle=True)
                fit(make_model(), loader, 10)
            """,
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "demo.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    initialised = files["demo.py"].replace("loader = ", "dist.init_process_group('gloo'); loader = ")
    _write(tmp_path, {"demo.py": initialised})
    run_lint([str(tmp_path / "demo.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP018"]


@pytest.mark.parametrize(
    "default",
    [
        'device = device if device is not None else torch.device("cuda:0")',
        'if device is None:\n                device = torch.device("cuda:0")',
    ],
)
def test_a_gpu_0_default_every_caller_replaces_is_no_hard_coded_device(tmp_path, capsys, default):
    """A helper falls back to GPU 0 when no device is given; the training loop, the only caller, always gives the
    local-rank device, so the fallback never runs. A caller that leaves the device out uses GPU 0 on every rank."""
    program = f"""\
        def to_device(batch, device=None):
            {default}
            return {{k: v.to(device) for k, v in batch.items()}}

        def main():
            dist.init_process_group("nccl")
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            model = DDP(build().to(device), device_ids=[local_rank])
            for batch in loader:
                model(to_device(batch, device=device))

        if __name__ == "__main__":
            main()
        """
    _write(tmp_path, {"train.py": program})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    _write(tmp_path, {"train.py": program.replace("to_device(batch, device=device)", "to_device(batch)")})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP006"]


def test_a_save_that_returns_early_on_a_flag_its_constructor_was_given_as_a_rank_test_runs_on_rank_0(tmp_path, capsys):
    """`Checkpointer.save` returns early `if not self.save_to_disk`; the flag comes from `__init__`, which a
    subclass hands its own parameter through `super().__init__`, and the trainer builds that subclass with
    `save_to_disk = get_rank() == 0`: the save runs on rank 0 only. Built with `save_to_disk=True`, every rank
    writes the same path."""
    files = {
        "checkpoint.py": """\
            class Checkpointer:
                def __init__(self, model, save_dir, save_to_disk=None):
                    self.model, self.save_dir = model, save_dir
                    self.save_to_disk = save_to_disk

                def save(self, name):
                    if not self.save_to_disk:
                        return
                    torch.save({"model": self.model.state_dict()}, f"{self.save_dir}/{name}.pth")

            class DetCheckpointer(Checkpointer):
                def __init__(self, model, save_dir, save_to_disk=None):
                    super().__init__(model, save_dir, save_to_disk)
            """,
        "train.py": """\
            from checkpoint import DetCheckpointer

            def main():
                dist.init_process_group("gloo")
                model = DDP(build())
                save_to_disk = dist.get_rank() == 0
                checkpointer = DetCheckpointer(model.module, "out", save_to_disk=save_to_disk)
                for epoch in range(10):
                    checkpointer.save(f"epoch_{epoch}")

            if __name__ == "__main__":
                main()
            """,
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    _write(tmp_path, {"train.py": files["train.py"].replace("save_to_disk=save_to_disk", "save_to_disk=True")})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP015"]


def test_a_save_in_exit_runs_only_where_a_with_statement_enters_the_object(tmp_path, capsys):
    """`Logger.__exit__` saves, but the program never enters a Logger with `with` (only a lock, by name): the one
    save that runs is `log_epoch`'s, on rank 0. Entered with `with Logger(...) as logger:`, `__exit__` saves on
    every rank."""
    files = {
        "logger.py": """\
            import threading

            class Logger:
                def __init__(self, models):
                    self.models = models
                    self._lock = threading.Lock()

                def save(self):
                    with self._lock:
                        torch.save({k: m.state_dict() for k, m in self.models.items()}, "checkpoint.pth")

                def log_epoch(self):
                    self.save()

                def __exit__(self, *exc):
                    self.save()
            """,
        "train.py": """\
            from logger import Logger

            def main():
                dist.init_process_group("gloo")
                model = DDP(build())
                logger = Logger({"model": model.module})
                for epoch in range(10):
                    if dist.get_rank() == 0:
                        logger.log_epoch()

            if __name__ == "__main__":
                main()
            """,
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []
    entered = """\
        from logger import Logger

        def main():
            dist.init_process_group("gloo")
            model = DDP(build())
            with Logger({"model": model.module}) as logger:
                for epoch in range(10):
                    if dist.get_rank() == 0:
                        logger.log_epoch()

        if __name__ == "__main__":
            main()
        """
    _write(tmp_path, {"train.py": entered})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP015"]


def test_a_validation_inside_the_training_function_logged_unreduced_is_found(tmp_path, capsys):
    """The training function validates every N steps under `torch.no_grad()` through a sharded loader and prints
    the loss of its own shard: DDP017, though the same function back-propagates. Reduced first, no finding."""
    program = """\
        def train(model, train_loader, val_loader, optimizer):
            for step, (x, y) in enumerate(train_loader):
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    model.eval()
                    val_loss = 0.0
                    with torch.no_grad():
                        for vx, vy in val_loader:
                            val_loss += F.cross_entropy(model(vx), vy).item()
                    val_loss /= len(val_loader)
                    print(f"val loss {val_loss:.4f}")
                    model.train()

        def main():
            dist.init_process_group("gloo")
            model = DDP(build())
            sampler = DistributedSampler(train_set)
            train_loader = DataLoader(train_set, sampler=sampler, batch_size=32)
            val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False), batch_size=32)
            for epoch in range(3):
                sampler.set_epoch(epoch)
                train(model, train_loader, val_loader, torch.optim.SGD(model.parameters(), lr=0.1))

        if __name__ == "__main__":
            main()
        """
    _write(tmp_path, {"train.py": program})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP017"]
    reduced = program.replace(
        "val_loss /= len(val_loader)",
        "val_loss = torch.tensor(val_loss / len(val_loader))\n                dist.all_reduce(val_loss)",
    )
    _write(tmp_path, {"train.py": reduced})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_a_sampler_given_to_the_validation_split_s_loader_shards_the_evaluation(tmp_path, capsys):
    """`get_dataloader` makes one DistributedSampler and gives it to the loader of whichever split it is asked for;
    for split 'val' that shards the evaluation, whose mIoU `logger.log_string` then reports from rank 0's shard."""
    program = """\
        def get_dataloader(dataset, split):
            sampler = DistributedSampler(dataset)
            if split == "val":
                loader = DataLoader(dataset, batch_size=1, sampler=sampler)
            else:
                loader = DataLoader(dataset, batch_size=8, sampler=sampler)
            return loader

        def evaluate(net, loader, logger):
            net.eval()
            iou_sum = 0.0
            for batch in loader:
                with torch.no_grad():
                    iou_sum += iou(net(batch["x"]), batch["y"])
            if dist.get_rank() == 0:
                logger.log_string("mean iou %f" % (iou_sum / len(loader)))

        def main():
            dist.init_process_group("gloo")
            net = DDP(build())
            train_loader = get_dataloader(train_set, "train")
            val_loader = get_dataloader(val_set, "val")
            for epoch in range(3):
                train_loader.sampler.set_epoch(epoch)
                train_one_epoch(net, train_loader)
                evaluate(net, val_loader, Logger())

        if __name__ == "__main__":
            main()
        """
    _write(tmp_path, {"train.py": program})
    run_lint([str(tmp_path / "train.py")], as_json=True)
    found = [(f["rule"], f["line"]) for f in json.loads(capsys.readouterr().out)["findings"]]
    line = HEADER.count("\n") + program.count("\n", 0, program.index("logger.log_string")) + 1
    assert found == [("DDP017", line)]


@pytest.mark.parametrize(
    "test, found",
    [("step % 5 == 0 and run", False), ("step % 5 == 0 and run is not None", False), ("step % 5 == 0", True)],
)
def test_an_object_made_on_one_rank_guards_what_runs_where_it_exists(tmp_path, capsys, test, found):
    """LLM_Train's `run = setup_wandb() if local_rank == 0 else None`, then `if ... and run:` around a save that a
    thread writes (`threading.Thread(target=_write_checkpoint, ...)`): the save runs on rank 0 only."""
    _write(
        tmp_path,
        {
            "ckpt.py": """
                import threading

                def _write(state, path):
                    torch.save(state, path)

                def save_checkpoint(model, path):
                    state = {k: v.cpu() for k, v in model.state_dict().items()}
                    threading.Thread(target=_write, args=(state, path), daemon=True).start()
                """,
            "train.py": f"""
                from ckpt import save_checkpoint

                def train():
                    dist.init_process_group("nccl")
                    local_rank = int(os.environ["LOCAL_RANK"])
                    torch.cuda.set_device(local_rank)
                    model = DDP(nn.Linear(2, 2).cuda(), device_ids=[local_rank])
                    run = wandb.init(project="x") if local_rank == 0 else None
                    for step in range(10):
                        if {test}:
                            save_checkpoint(model.module, "ckpt.pt")

                if __name__ == "__main__":
                    train()
                """,
        },
    )
    run_lint([str(tmp_path / "train.py")], as_json=True)
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert ("DDP015" in rules) is found


@pytest.mark.parametrize(
    "sampler, rules",
    [
        ("sampler=None, shuffle=True", {"DDP018"}),  # no sampler written out: every rank trains on the whole set
        ("sampler=DistributedSampler(train_set), shuffle=True", {"DDP003"}),  # DataLoader raises
        ("sampler=DistributedSampler(train_set)", set()),
    ],
)
def test_a_sampler_of_none_written_out_is_no_sampler(sampler, rules):
    source = f"""
dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
for x, y in DataLoader(train_set, {sampler}):
    model(x).sum().backward()
"""
    assert _rules(source) & {"DDP003", "DDP018"} == rules


@pytest.mark.parametrize("epochs, found", [("range(1)", False), ("range(args.epochs)", True)])
def test_a_batch_loop_with_a_loop_inside_it_is_no_epoch_loop(epochs, found):
    """A hand-written all_reduce over the parameters inside the batch loop: one epoch still needs no set_epoch."""
    source = f"""
def train_model(model, train_loader):
    for batch_idx, (x, y) in enumerate(train_loader):
        model(x).sum().backward()
        for name, param in model.named_parameters():
            dist.all_reduce(param.grad)

dist.init_process_group("gloo")
loader = DataLoader(train_set, sampler=DistributedSampler(train_set))
for epoch in {epochs}:
    train_model(model, loader)
"""
    assert ("DDP002" in _rules(source)) is found


@pytest.mark.parametrize(
    "address, found",
    [
        ("'tcp://' + master_ip + ':6585'", True),  # the port written into the joined address
        ("'tcp://' + master_ip + ':' + os.environ['MASTER_PORT']", False),
    ],
)
def test_an_address_joined_from_a_host_and_a_written_port_is_a_fixed_port(address, found):
    source = f"""
master_ip = os.environ["MASTER_ADDR"]
dist.init_process_group(backend="gloo", init_method={address}, rank=rank, world_size=world_size)
"""
    assert ("DDP011" in _rules(source)) is found


@pytest.mark.parametrize(
    "loader, found",
    [
        ("DataLoader(test_set, batch_size=4, shuffle=False)", False),  # made inside, no sampler: the whole set
        ("DataLoader(test_set, batch_size=4, sampler=DistributedSampler(test_set))", True),  # one rank's shard
    ],
)
def test_an_evaluation_over_a_loader_it_makes_without_a_sampler_reads_the_whole_set(loader, found):
    """GP-Transformer's `_evaluate_checkpoint_on_test` makes `DataLoader(test_ds, shuffle=False)` itself; rank 0
    prints what it returns: the whole test set's figure, beside a validation sharded over ranks elsewhere."""
    source = f"""
    def validate(model, loader):
        model.eval()
        with torch.no_grad():
            losses = [model(x).pow(2).mean() for (x,) in loader]
        return sum(losses)

    def evaluate_on_test(model, test_set):
        test_loader = {loader}
        total = 0.0
        with torch.no_grad():
            for (x,) in test_loader:
                total += model(x).pow(2).sum().item()
        return total / len(test_set)

    if __name__ == "__main__":
        dist.init_process_group("gloo")
        model = DDP(nn.Linear(2, 1))
        val_set = torch.utils.data.TensorDataset(torch.randn(10, 2))
        val_loss = validate(model, DataLoader(val_set, sampler=DistributedSampler(val_set)))
        dist.all_reduce(val_loss)
        if dist.get_rank() == 0:
            test_loss = evaluate_on_test(model.module, val_set)
            print(f"test loss {{test_loss}}")
    """
    assert ("DDP017" in _rules(source)) is found


@pytest.mark.parametrize(
    "made, found",
    [
        ("loader_for(val_set, rank=rank)", False),  # given the rank, made on every rank (UniAug)
        ("loader_for(val_set, rank=rank) if rank == 0 else None", True),  # made on rank 0 only
    ],
)
def test_a_flag_set_to_a_call_given_the_rank_is_no_rank_test(made, found):
    """UniAug's `valid_loader = get_dist_dataloader(..., rank=rank)` (None where the split is missing), then `if
    valid_loader is not None:` around a forward through the DDP model: every rank takes the branch."""
    source = f"""
    def loader_for(ds, rank):
        return DataLoader(ds, sampler=DistributedSampler(ds, rank=rank))

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 1))
    val_set = torch.utils.data.TensorDataset(torch.randn(10, 2))
    try:
        valid_loader = {made}
    except KeyError:
        valid_loader = None
    if valid_loader is not None:
        with torch.no_grad():
            for (x,) in valid_loader:
                model(x)
    """
    assert ("DDP010" in _rules(source)) is found


@pytest.mark.parametrize(
    "combine, found",
    [
        ("dist.all_reduce(total)", True),  # the padded duplicates are summed over ranks
        ("total = total.gather(-1, torch.zeros(1, dtype=torch.long))", False),  # a tensor's gather (UniAug)
        ("pass", False),
    ],
)
def test_padded_evaluation_counts_only_a_combination_over_ranks_in_code_the_program_runs(combine, found):
    """ppt_learning's unused `eval_policy_parallel` calls a rollout runner's `collect_results()`; UniAug's evaluation
    reaches `a.gather(-1, t)`: neither combines values over ranks, and each rank's figure stays its own."""
    source = f"""
    def eval_policy_parallel(policy, runner):
        policy.eval()
        return runner.collect_results()

    def evaluate(model, loader):
        model.eval()
        total = torch.zeros(1)
        with torch.no_grad():
            for x, y in loader:
                total += (model(x) - y).pow(2).sum()
        {combine}
        return total

    if __name__ == "__main__":  # (a script: a function nothing calls does not run)
        dist.init_process_group("gloo")
        model = DDP(nn.Linear(2, 1))
        val_set = torch.utils.data.TensorDataset(torch.randn(10, 2), torch.randn(10, 1))
        val_sampler = DistributedSampler(val_set, shuffle=False)
        print(evaluate(model, DataLoader(val_set, sampler=val_sampler)))
    """
    assert ("DDP016" in _rules(source)) is found


@pytest.mark.parametrize("shuffles, found", [("[True, False]", True), ("[True, True]", False)])
def test_a_sampler_helper_a_caller_asks_not_to_shuffle_makes_the_evaluation_sampler(shuffles, found):
    """ALBEF's create_sampler(datasets, [True, False, False], ...): its unshuffled samplers pad the evaluation
    splits, whose accuracy is then summed over ranks."""
    source = (
        CREATE_SAMPLER
        + f"""

def evaluate(model, loader):
    model.eval()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    dist.all_reduce(correct)
    return correct

dist.init_process_group("gloo")
train_sampler, val_sampler = create_sampler([train_set, val_set], {shuffles}, 2, dist.get_rank())
print(evaluate(model, DataLoader(val_set, sampler=val_sampler)))
"""
    )
    assert ("DDP016" in _rules(source)) is found


@pytest.mark.parametrize(
    "other_ranks, found",
    [
        ("Trainer(config)", False),  # only rank 0's trainer has a logger: the save under `if ... logger` is rank 0's
        ("Trainer(config, logger=Logger())", True),  # every rank's has one: every rank saves
    ],
)
def test_an_object_given_to_rank_0_only_guards_what_runs_where_it_is_present(other_ranks, found):
    """XMem's trainer: `logger=None` by default, given only where `local_rank == 0`; the saves run under `if
    self.logger is not None:` in a method and under `if model.logger is not None:` in the script."""
    source = f"""
class Trainer:
    def __init__(self, config, logger=None):
        self.logger = logger

    def step(self, it):
        if self.logger is not None:
            torch.save(self.net.state_dict(), "latest.pth")

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
if local_rank == 0:
    model = Trainer(config, logger=Logger())
else:
    model = {other_ranks}
model.step(1)
if model.logger is not None:
    torch.save(model.net.state_dict(), "final.pth")
"""
    assert ("DDP015" in _rules(source)) is found


@pytest.mark.parametrize(
    "test, found",
    [
        ("dist.is_available() and args.local_rank != -1", False),  # the `else` is the run without a launcher
        ("args.local_rank != -1", False),
        ("args.fp16", True),  # the `else` runs on every rank of a distributed run: every rank saves
    ],
)
def test_a_flag_set_on_rank_0_and_in_the_single_process_arm_is_a_rank_test(test, found):
    """DeVLBert: `default_gpu` is True on rank 0 of a distributed run, and in the `else` of `if
    dist.is_available() and args.local_rank != -1:` (one process, no launcher)."""
    source = f"""
dist.init_process_group("nccl")
torch.cuda.set_device(args.local_rank)
default_gpu = False
if {test}:
    if dist.get_rank() == 0:
        default_gpu = True
else:
    default_gpu = True
if default_gpu:
    torch.save(model.module.state_dict(), "model.bin")
"""
    assert ("DDP015" in _rules(source)) is found


@pytest.mark.parametrize(
    "line, found",
    [
        ("os.environ['CUDA_VISIBLE_DEVICES'] = '0'", True),  # every process sees GPU 0 alone
        ("os.environ['CUDA_VISIBLE_DEVICES'] = str(local_rank)", False),  # each its own
        ("if local_rank == -1:\n    os.environ['CUDA_VISIBLE_DEVICES'] = '0'", False),  # the run without a launcher
    ],
)
def test_one_gpu_made_visible_to_every_process_is_gpu_0_hard_coded(line, found):
    source = f"""
local_rank = int(os.environ.get("LOCAL_RANK", -1))
{line}
dist.init_process_group("nccl")
torch.cuda.set_device(max(local_rank, 0))
model = DDP(nn.Linear(2, 2).cuda(), device_ids=[max(local_rank, 0)])
"""
    assert ("DDP006" in _rules(source)) is found


@pytest.mark.parametrize(
    "wrap, save, rules",
    [  # a wrapper moved after the wrap is still the wrapper: rank 0's evaluation runs its forward (a broadcast)
        ("DDP(Net()).to(device)", "model.module.state_dict() if world_size > 1 else model.state_dict()", {"DDP010"}),
        ("DDP(Net()).to(device)", "model.state_dict()", {"DDP010", "DDP007"}),
        ("DDP(Net(), broadcast_buffers=False).to(device)", "model.module.state_dict()", set()),
    ],
)
def test_a_wrapper_moved_after_the_wrap_and_a_save_whose_other_arm_unwraps(wrap, save, rules):
    source = f"""
def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(model(x).sum() for x in loader)

dist.init_process_group("nccl")
torch.cuda.set_device(local_rank)
model = {wrap}
for x in train_loader:
    model(x).sum().backward()
if dist.get_rank() == 0:
    print(evaluate(model, val_loader))
    torch.save({{"model": {save}}}, "ckpt.pt")
"""
    assert _rules(source) & {"DDP007", "DDP010"} == rules


@pytest.mark.parametrize("norm, found", [("nn.Dropout(0.25)", False), ("nn.BatchNorm2d(32)", True)])
def test_a_program_model_without_buffers_broadcasts_nothing_in_its_forward(norm, found):
    """Rank 0's evaluation through the wrapper's forward: a collective only where the model has buffers
    (BatchNorm's running statistics) for DDP to broadcast."""
    source = f"""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.norm = {norm}
        self.fc = nn.Linear(32, 10)

dist.init_process_group("gloo")
model = Net().to(device)
model = DDP(model)
if dist.get_rank() == 0:
    with torch.no_grad():
        print(model(batch).argmax(1))
"""
    assert ("DDP010" in _rules(source)) is found


@pytest.mark.parametrize(
    "before, after, found",
    [
        ("", "train(model, loader)\n", True),  # unwrapped right after the wrap: the inner model trains alone
        ("train(model, loader)\n", "", False),  # trained through the wrapper, then unwrapped to save
    ],
)
def test_the_wrapper_thrown_away_before_training_not_after_it(before, after, found):
    source = f"""
def train(model, loader):
    for x, y in loader:
        model(x).sum().backward()

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
{before}model = model.module
{after}if dist.get_rank() == 0:
    torch.save(model.state_dict(), "model.pt")
"""
    assert ("DDP020" in _rules(source)) is found


@pytest.mark.parametrize(
    "override, found",
    [
        ("    def run(self):\n        self.fit(DataLoader(train_set, shuffle=True))\n", False),  # replaces the DDP path
        ("    def run(self):\n        super().run()\n", True),  # runs it
        ("", True),  # inherits it
    ],
)
def test_a_base_method_every_used_subclass_overrides_never_runs(tmp_path, capsys, override, found):
    """PersonReID-YouReID's single-process trainer subclasses the DDP one and overrides the method that makes the
    process group: the program it is the entry point of is single-process."""
    files = {
        "base.py": """
class BaseTrainer:
    def run(self):
        dist.init_process_group("nccl")
        model = DDP(self.model)
        self.fit(DataLoader(train_set, shuffle=True))

    def fit(self, loader):
        for x in loader:
            self.model(x).sum().backward()
""",
        "single.py": f"""
from base import BaseTrainer

class SingleTrainer(BaseTrainer):
{override or "    pass"}

if __name__ == "__main__":
    SingleTrainer().run()
""",
    }
    _write(tmp_path, files)
    run_lint([str(tmp_path / "single.py")], as_json=True)
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert ("DDP018" in rules) is found


@pytest.mark.parametrize(
    "wrap, found",
    [
        ("    model = DDP(Model)\n    train(Model)\n", True),  # the wrapper in a name nothing reads: Model trains
        ("    DDP(Model)\n    train(Model)\n", True),  # kept nowhere
        ("    model = DDP(Model)\n    train(model)\n", False),
        ("    model = DDP(Model)\n    return model\n", False),  # handed back to the caller
    ],
)
def test_a_wrapper_no_name_keeps_is_thrown_away(wrap, found):
    source = f"""
def train(model):
    for x in loader:
        model(x).sum().backward()

def main():
    dist.init_process_group("gloo")
    Model = nn.Linear(2, 2)
{wrap}
main()
"""
    assert ("DDP020" in _rules(source)) is found


@pytest.mark.parametrize("given, found", [("True", True), ("False", False)])
def test_a_loader_class_shuffles_as_its_constructions_ask(given, found):
    """Parsecaps: `Cifar10(path, 64, shuffle=True)()` keeps `self.shuffle` and builds `DataLoader(...,
    shuffle=self.shuffle)` with no sampler: every rank trains on the whole set."""
    source = f"""
class Cifar10:
    def __init__(self, data_path, batch_size, shuffle):
        self.data_path, self.batch_size, self.shuffle = data_path, batch_size, shuffle
        self.shuffle = shuffle

    def __call__(self):
        return DataLoader(CIFAR(self.data_path), batch_size=self.batch_size, shuffle=self.shuffle)

dist.init_process_group("nccl")
model = DDP(net)
for x, y in Cifar10("data", 64, shuffle={given})():
    model(x).sum().backward()
"""
    assert ("DDP018" in _rules(source)) is found


@pytest.mark.parametrize("method, found", [("__getitem__", False), ("__init__", True)])
def test_a_cache_a_dataset_writes_per_sample_is_not_one_path_for_every_rank(method, found):
    """Bert-VITS2 writes each clip's spectrogram next to it while loading (`__getitem__`): each rank loads, and
    writes, its own samples. A cache of the whole set written when the dataset is made is one path on every rank."""
    source = f"""
class Clips(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files
        {"self.load_all()" if method == "__init__" else "pass"}

    def load_all(self):
        torch.save([spectrogram(f) for f in self.files], "all.spec.pt")

    def __getitem__(self, index):
        return self.get_audio(self.files[index])

    def get_audio(self, filename):
        spec = spectrogram(filename)
        {"torch.save(spec, filename + '.spec.pt')" if method == "__getitem__" else "pass"}
        return spec

dist.init_process_group("nccl")
model = DDP(net)
loader = DataLoader(Clips(files), sampler=DistributedSampler(Clips(files)))
"""
    assert ("DDP015" in _rules(source)) is found


@pytest.mark.parametrize("names, found", [("val_sampler, val_set", True), ("sampler_train, dataset_train", False)])
def test_an_unshuffled_sampler_named_for_training_is_no_evaluation(names, found):
    """MAR's `main_cache.py` caches every training image's latents through `DistributedSampler(dataset_train,
    shuffle=False)`: no evaluation, no padded metric."""
    sampler, dataset = names.split(", ")
    source = f"""
def evaluate(model, loader):
    model.eval()
    total = torch.zeros(1)
    with torch.no_grad():
        for x, y in loader:
            total += model(x).sum()
    dist.all_reduce(total)
    return total

dist.init_process_group("nccl")
{sampler} = DistributedSampler({dataset}, shuffle=False)
print(evaluate(model, DataLoader({dataset}, sampler={sampler})))
"""
    assert ("DDP016" in _rules(source)) is found


def test_the_programs_own_function_named_ddp_is_no_wrapper():
    """CuiJiali-CV's `def DDP(address, port, local_rank, nprocs):` sets up the process group; calling it as a
    statement throws no wrapper away."""
    source = """
def DDP(address, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = address, port
    dist.init_process_group("gloo")

DDP("localhost", os.environ.get("PORT", "0"))
model = torch.nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
model(x).sum().backward()
"""
    assert "DDP020" not in _rules(source)


def test_a_method_call_on_an_object_runs_no_module_level_namesake(tmp_path, capsys):
    """VisionModelKit's `launch.py` rebinds `trainer = trainer.BaseTrainer(config)` and calls `trainer.train()`:
    that runs the class's method, not the script's own module-level `train()` (dead code there), so the script's
    `save_checkpoint` is never reached on every rank; the trainer's rank-0 save stays quiet too. The same call on
    a module (`utils.train()`) still runs the module's function, whose unguarded save is found."""
    files = {
        "trainer.py": """
            class BaseTrainer:
                def __init__(self, config):
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    self.rank = dist.get_rank()
                    self.model = DDP(nn.Linear(2, 2))

                def train(self):
                    for epoch in range(3):
                        self.model(x).sum().backward()
                        if self.rank == 0:
                            self.save_checkpoint({"model": self.model.module.state_dict()}, "last.pt")

                def save_checkpoint(self, state, path):
                    torch.save(state, path)
            """,
        "launch.py": """
            import trainer

            def train(model):
                save_checkpoint({"model": model.state_dict()}, "old.pt")

            def save_checkpoint(state, path):
                torch.save(state, path)

            if __name__ == "__main__":
                trainer = trainer.BaseTrainer(config=None)
                trainer.train()
            """,
    }
    _write(tmp_path / "objects", files)
    assert run_lint([str(tmp_path / "objects")], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    _write(
        tmp_path / "modules",
        {
            "utils.py": """
                def train(model):
                    save_checkpoint({"model": model.module.state_dict()}, "last.pt")

                def save_checkpoint(state, path):
                    torch.save(state, path)
                """,
            "launch.py": """
                import utils

                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    model = DDP(nn.Linear(2, 2))
                    utils.train(model)
                """,
        },
    )
    run_lint([str(tmp_path / "modules" / "launch.py")], as_json=True)
    found = {(Path(f["file"]).name, f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    assert ("utils.py", "DDP015") in found


def test_a_trainer_whose_ddp_flag_no_construction_sets_is_single_process(tmp_path, capsys):
    """torch-atom keeps `self.ddp = ddp` (default False) and wraps under `if self.ddp:` in another method:
    `main.py` builds `Trainer(model)` and trains one process with a shuffling loader (no finding), while
    `main_ddp.py`'s `Trainer(model, ddp=True)` is a DDP program whose loader without a sampler is found."""
    _write(
        tmp_path,
        {
            "trainer.py": """
                class Trainer:
                    def __init__(self, model, ddp=False):
                        self.ddp = ddp
                        self.model = self._wrap(model)

                    def _wrap(self, model):
                        if self.ddp:
                            model = DDP(model, device_ids=[int(os.environ["LOCAL_RANK"])])
                        return model

                    def train(self, loader):
                        for epoch in range(3):
                            for x in loader:
                                self.model(x).sum().backward()
                """,
            "main.py": """
                from trainer import Trainer

                if __name__ == "__main__":
                    Trainer(nn.Linear(2, 2)).train(DataLoader(ds, shuffle=True))
                """,
            "main_ddp.py": """
                from trainer import Trainer

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    Trainer(nn.Linear(2, 2), ddp=True).train(DataLoader(ds, shuffle=True))
                """,
        },
    )
    run_lint([str(tmp_path)], as_json=True)
    found = {(Path(f["file"]).name, f["rule"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    assert ("main_ddp.py", "DDP018") in found
    assert ("main.py", "DDP018") not in found


HF_EXAMPLE = """
def evaluate(args, model):
    eval_sampler = SequentialSampler(eval_ds) if args.local_rank == -1 else DistributedSampler(eval_ds)
    eval_loader = DataLoader(eval_ds, sampler=eval_sampler)
    eval_loss = 0.0
    model.eval()
    for batch in eval_loader:
        with torch.no_grad():
            eval_loss += model(batch).item()
    results = {"f1": score()}
    results["loss"] = eval_loss / len(eval_loader)
    info = "-".join(f"{key}: {value:.4f}" for key, value in results.items())
    logger.info(info)
    return results

def train(args, model):
    sampler = DistributedSampler(train_ds)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for batch in DataLoader(train_ds, sampler=sampler):
            model(batch).sum().backward()
            if args.local_rank in [-1, 0] and step % 50 == 0:
                if args.local_rank == -1:  # only evaluate when single GPU
                    evaluate(args, model)

if __name__ == "__main__":
    torch.cuda.set_device(args.local_rank)
    dist.init_process_group("nccl")
    model = DDP(net, device_ids=[args.local_rank])
    train(args, model)
    if args.do_train and (args.local_rank == -1 or torch.distributed.get_rank() == 0):
        torch.save(args, os.path.join(args.output_dir, "training_args.bin"))
    if args.local_rank in [-1, 0]:
        evaluate(args, plain_model)
"""


def test_the_hugging_face_example_loop_is_read_as_its_guards_say():
    """BERT-NER's run_ner_*.py (the old transformers examples): the evaluation under `if args.local_rank == -1:`
    runs where there is one process only (no DDP010); `do_train and (local_rank == -1 or get_rank() == 0)` is
    rank 0's save (no DDP015); the final evaluation on rank 0 through a DistributedSampler logs a figure joined
    from `results`, which holds the shard's loss: DDP017."""
    found = _rules(HF_EXAMPLE)
    assert "DDP010" not in found and "DDP015" not in found
    assert "DDP017" in found
    assert "DDP017" not in _rules(
        HF_EXAMPLE.replace("else DistributedSampler(eval_ds)", "else SequentialSampler(eval_ds)")
    )


def test_a_key_cut_in_a_module_of_the_program_is_the_prefix_handled():
    """U2PL saves the wrapper's state_dict and strips the prefix with `name = k[7:]` in its utils module, which the
    training script imports: no DDP007. Without that helper the save is found."""
    helper = """
from collections import OrderedDict
def convert_state_dict(state_dict):
    new_state_dict = OrderedDict()
    for k, v in state_dict.items():
        name = k[7:]
        new_state_dict[name] = v
    return new_state_dict
"""
    source = """
dist.init_process_group("gloo")
model = DDP(net)
for epoch in range(3):
    model(x).sum().backward()
    if dist.get_rank() == 0:
        torch.save({"model_state": model.state_dict()}, "ckpt.pth")
"""
    assert "DDP007" in _rules(source)
    assert "DDP007" not in _rules(helper + source)


LOADERS = """
def build_loader(split, cfg):
    dset = Dataset(cfg, split)
    sample = DistributedSampler(dset)
    return DataLoader(dset, sampler=sample)

def build_semi_loader(split, cfg):
    dset = Dataset(cfg, split)
    if split == "val":
        return DataLoader(dset, sampler=DistributedSampler(dset))
    else:
        sample_sup = DistributedSampler(dset)
        sample_unsup = DistributedSampler(unlabeled)
        return DataLoader(dset, sampler=sample_sup), DataLoader(unlabeled, sampler=sample_unsup)

def validate(model, loader):
    model.eval()
    with torch.no_grad():
        for images, labels in loader:
            inter, union = intersection_and_union(model(images), labels)
            dist.all_reduce(inter)
            dist.all_reduce(union)

if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(net)
    sup, unsup = build_semi_loader("train", cfg)
    val_loader = build_loader("val", cfg)
    for epoch in range(3):
        sup.sampler.set_epoch(epoch)
        for batch in sup:
            model(batch).sum().backward()
        validate(model, val_loader)
"""


def test_padded_evaluation_through_a_helper_asked_for_the_validation_split():
    """U2PL: `build_loader("val", cfg)` makes the validation sampler, which pads, and the evaluation all-reduces
    its counts: DDP016 at that sampler. The semi-supervised helper's `if split == "val":` arm is never taken (its
    only call asks for "train") and its `else` arm holds the training samplers: no finding there."""
    findings = [(f.rule, f.line) for f in lint_source("train.py", HEADER + LOADERS)]
    line = (HEADER + LOADERS).splitlines().index("    sample = DistributedSampler(dset)") + 1
    assert findings == [("DDP016", line)]
    only_train = LOADERS.replace('build_loader("val", cfg)', 'build_loader("train", cfg)')
    assert "DDP016" not in _rules(only_train)


def test_a_port_option_with_its_short_flag_first_is_read_by_its_long_name():
    """Palette's `parser.add_argument('-P', '--port', default='21012')` joined into `'tcp://127.0.0.1:' + args.port`."""
    source = """
parser.add_argument('-P', '--port', default='21012', type=str)
args = parser.parse_args()
dist.init_process_group("nccl", init_method='tcp://127.0.0.1:' + args.port, rank=r, world_size=w)
"""
    assert "DDP011" in _rules(source)
    assert "DDP011" not in _rules(source.replace("default='21012', ", ""))


def test_a_collective_on_the_single_process_arm_inside_a_rank_test_is_reached_by_the_one_process():
    """`if args.local_rank in [-1, 0]:` then `if args.local_rank == -1: evaluate(...)` (BERT-NER): the inner test
    holds only where there is no process group, so no other rank waits — no DDP010; without it, rank 0 alone
    reaches evaluate's all_reduce."""
    source = """
def evaluate(t):
    dist.all_reduce(t)

dist.init_process_group("gloo")
if args.local_rank in [-1, 0]:
    if args.local_rank == -1:
        evaluate(t)
"""
    assert "DDP010" not in _rules(source)
    assert "DDP010" in _rules(source.replace("    if args.local_rank == -1:\n        evaluate", "    evaluate"))


def test_figures_reduced_through_an_async_handle_are_combined():
    """hysts' validate(): `loss_all_reduce = dist.all_reduce(loss, async_op=True)`, then `.wait()` — `loss` is
    reduced in place, the meter it feeds is combined, and its logged average is the model's (no DDP017)."""
    source = """
def validate(model, val_loader):
    model.eval()
    loss_meter = AverageMeter()
    with torch.no_grad():
        for data, targets in val_loader:
            loss = loss_func(model(data), targets)
            handle = dist.all_reduce(loss, op=dist.ReduceOp.SUM, async_op=True)
            handle.wait()
            loss_meter.update(loss.item(), data.size(0))
    logger.info(f"val loss {loss_meter.avg:.4f}")

dist.init_process_group("gloo")
model = DDP(net)
val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds, shuffle=False))
validate(model, val_loader)
"""
    assert "DDP017" not in _rules(source)
    assert "DDP017" in _rules(
        source.replace("handle = dist.all_reduce(loss, op=dist.ReduceOp.SUM, async_op=True)", "handle = work()")
    )


def test_a_dist_env_master_flag_is_a_rank_test():
    """rq-vae's `if distenv.master:` (a DistEnv made with `master=(dist.get_rank() == 0)`): rank 0's save."""
    source = """
dist.init_process_group("gloo")
if distenv.master:
    torch.save(seeds, "seeds.pth")
"""
    assert "DDP015" not in _rules(source)
    assert "DDP015" in _rules(source.replace("if distenv.master:", "if distenv.ready:"))


def test_a_process_group_of_one_is_one_process_on_gpu_0():
    """Tensor_PPO_2048's benchmark wraps its model in DDP inside `init_process_group(..., world_size=1, rank=0)`:
    `device_ids=[0]` is the one process's GPU (no DDP006), and its step through `.module` has nothing to all-reduce
    (no DDP020)."""
    source = """
dist.init_process_group(backend="gloo", init_method="env://", world_size=1, rank=0)
model = DDP(net.cuda(), device_ids=[0])
worker = model.module
for step in range(10):
    worker.value(x).sum().backward()
"""
    assert _rules(source) & {"DDP006", "DDP020"} == set()
    assert {"DDP006", "DDP020"} <= _rules(source.replace("world_size=1, rank=0", "world_size=2, rank=r"))


def test_a_model_method_on_the_wrapper_is_found_unless_asked_for_or_unwrapped_first():
    """`model.generate_samples()` on the DDP wrapper raises AttributeError (DDP022); not under `if hasattr(model,
    'generate_samples'):` (ALBEF's `no_weight_decay`), not after `model = model.module if ... else model`, and not
    for nn.Module's own methods (`model.train()`)."""
    source = """
class Net(nn.Module):
    def forward(self, x):
        return x

    def generate_samples(self, n):
        return n

    def train(self, mode=True):
        return self

dist.init_process_group("gloo")
model = DDP(Net())
model.train()
model(x).sum().backward()
model.generate_samples(4)
"""
    assert "DDP022" in _rules(source)
    guarded = source.replace(
        "model.generate_samples(4)", "if hasattr(model, 'generate_samples'):\n    model.generate_samples(4)"
    )
    unwrapped = source.replace("model.generate_samples(4)", "model = model.module\nmodel.generate_samples(4)")
    only_module_api = source.replace("model.generate_samples(4)", "model.eval()")
    assert "DDP022" not in _rules(guarded) | _rules(only_module_api) | _rules(unwrapped)
    in_a_helper = (
        "def sample(model):\n    model = model.module if hasattr(model, 'module') else model\n"
        "    return model.generate_samples(4)\nsample(model)\n"
    )
    assert "DDP022" not in _rules(source.replace("model.generate_samples(4)\n", in_a_helper))
    assert "DDP022" in _rules(
        source.replace(
            "model.generate_samples(4)\n",
            in_a_helper.replace("    model = model.module if hasattr(model, 'module') else model\n", ""),
        )
    )


def test_a_model_method_in_the_arm_beside_one_that_unwraps_is_the_plain_models():
    """A-LLMRec: `if args.multi_gpu: model.module.save_model(args)` / `else: model.save_model(args)` — the program
    tells the wrapper from the plain model, and the `else` arm holds the plain one (no DDP022, no DDP007 for the
    same shape of save). An arm beside one that unwraps another model tells nothing of this one."""
    source = """
class Net(nn.Module):
    def forward(self, x):
        return x

    def save_model(self, path):
        torch.save(self.state_dict(), path)

dist.init_process_group("gloo")
model = Net()
if args.multi_gpu:
    model = DDP(model)
for step in range(10):
    model(x).sum().backward()
    if dist.get_rank() == 0:
        if args.multi_gpu: model.module.save_model("last.pt")
        else: model.save_model("last.pt")
"""
    assert "DDP022" not in _rules(source)
    assert "DDP022" in _rules(source.replace("model.module.save_model", "other.module.save_model"))
    saves = source.replace("model.module.save_model(", "torch.save(model.module.state_dict(), ").replace(
        "model.save_model(", "torch.save(model.state_dict(), "
    )
    assert "DDP007" not in _rules(saves)
    assert "DDP007" in _rules(saves.replace("model.module.state_dict()", "model.state_dict()"))


def test_a_sampler_given_to_the_loader_only_when_it_shuffles_pads_no_evaluation():
    """FourCastNet's loader helper builds `DistributedSampler(ds, shuffle=train)` for both splits but gives the
    loader `sampler=sampler if train else None`: its validation loader has no sampler, so nothing is padded
    (DDP016) and every rank evaluates the whole set (DDP017). Given to the loader whatever the split, it pads."""
    source = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())

def get_loader(dataset, distributed, train):
    sampler = DistributedSampler(dataset, shuffle=train) if distributed else None
    loader = DataLoader(dataset, batch_size=4, sampler=sampler if train else None)
    if train:
        return loader, sampler
    return loader

train_loader, train_sampler = get_loader(train_set, True, train=True)
valid_loader = get_loader(valid_set, True, train=False)
for epoch in range(3):
    train_sampler.set_epoch(epoch)
    for x in train_loader:
        model(x).sum().backward()
    correct = torch.zeros(1)
    with torch.no_grad():
        for x, y in valid_loader:
            correct += (model(x).argmax(1) == y).sum()
    dist.all_reduce(correct)
    print("accuracy", correct / len(valid_set))
"""
    assert "DDP016" not in _rules(source)
    assert "DDP016" in _rules(source.replace("sampler=sampler if train else None", "sampler=sampler"))


@pytest.mark.parametrize(
    "address, found",
    [
        ('os.environ["MASTER_ADDR"] = "localhost"', set()),
        ('os.environ["MASTER_ADDR"] = "127.0.0.1"', set()),
        ('if "MASTER_ADDR" not in os.environ:\n        os.environ["MASTER_ADDR"] = "localhost"', {"DDP013"}),
        ('os.environ["MASTER_ADDR"] = args.master_addr', {"DDP013"}),
    ],
)
def test_a_rendezvous_on_this_host_is_one_node(address, found):
    """nnU-Net sets `MASTER_ADDR` to `localhost` and spawns its workers: every process meets on this host, so the
    rank is the local rank and `set_device(dist.get_rank())` is the right GPU. Left to the environment, or taken
    from an option, the program may span nodes."""
    source = f"""
import torch.multiprocessing as mp

def worker(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(dist.get_rank())
    model = DDP(nn.Linear(2, 2).cuda())
    model(x).sum().backward()

if __name__ == "__main__":
    {address}
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(worker, args=(4,), nprocs=4)
"""
    assert _rules(source) & {"DDP013"} == found


@pytest.mark.parametrize(
    "subclass, found",
    [
        ("    pass\n", {"DDP015"}),
        ("    def __init__(self, path):\n        self.examples = read(path)\n", set()),
        ("    def __init__(self, path):\n        super().__init__(path)\n", {"DDP015"}),
    ],
)
def test_a_class_init_runs_where_its_class_or_a_subclass_is_made_unless_every_subclass_replaces_it(subclass, found):
    """A dataset's `__init__` that caches the whole set with `torch.save` on every rank writes one path from all
    of them (DDP015) when a subclass that inherits it, or calls `super().__init__()`, is made. CodeBERT's
    `TextDataset.__init__` is replaced by every subclass's own `__init__`, none calling it: it never runs."""
    source = f"""
class TextDataset(torch.utils.data.Dataset):
    def __init__(self, path):
        self.examples = read(path)
        torch.save(self.examples, path + ".cache")

class GenDataset(TextDataset):
{subclass}
if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = DDP(nn.Linear(2, 2).cuda())
    data = GenDataset("train.jsonl")
"""
    assert _rules(source) & {"DDP015"} == found


@pytest.mark.parametrize(
    "backward", ['out["loss"].backward()', 'scaler.scale(out["loss"] / out["ntokens"]).backward()']
)
def test_skipping_the_step_on_this_ranks_own_output_hangs_the_others(backward):
    """VoiceCraft's `if out == None: continue` after the forward: a rank whose micro-batch slice was empty skips the
    backward (and the all-reduces after it) while the others wait. The loss is read out of `out`."""
    source = f"""
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
for batch in loader:
    out = model(batch)
    if out == None:
        continue
    {backward}
"""
    assert "DDP014" in _rules(source)
    assert "DDP014" not in _rules(source.replace("if out == None:", "if batch_is_empty_everywhere:"))


def test_a_name_set_to_gpu_0_in_the_function_is_gpu_0():
    """CodeBERT's evaluation helper sets `local_rank = 0` and moves every batch with `.to(local_rank)`: whatever
    the process, GPU 0. Read from the environment (or given as a parameter), it is the process's own GPU."""
    source = """
def evaluate(model, loader):
    local_rank = 0
    for x in loader:
        model(x.to(local_rank))

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = DDP(nn.Linear(2, 2).cuda(), device_ids=[local_rank])
evaluate(model, loader)
"""
    assert "DDP006" in _rules(source)
    assert "DDP006" not in _rules(source.replace("local_rank = 0\n", "local_rank = int(os.environ['LOCAL_RANK'])\n"))
    as_parameter = source.replace(
        "def evaluate(model, loader):\n    local_rank = 0\n", "def evaluate(model, loader, local_rank):\n"
    )
    assert "DDP006" not in _rules(
        as_parameter.replace("evaluate(model, loader)", "evaluate(model, loader, local_rank)")
    )


@pytest.mark.parametrize("write", ['save_image(samples, f"samples/{epoch}.png")', 'plt.savefig("loss.png")'])
def test_an_image_or_a_figure_written_by_every_rank_to_one_path(write):
    """FourCastNet's validation `save_image`s to one path on every rank, MedSAM's loss plot `plt.savefig`s to one
    path on every rank: concurrent writers of one file (DDP015, as for torch.save). Not on rank 0 alone, not with
    the rank in the name."""
    source = f"""
import matplotlib.pyplot as plt
from torchvision.utils import save_image

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
for epoch in range(3):
    samples = model(x)
    {write}
"""
    assert "DDP015" in _rules(source)
    assert "DDP015" not in _rules(source.replace(f"    {write}", f"    if dist.get_rank() == 0:\n        {write}"))
    ranked = write.replace("samples/{epoch}", "samples/{epoch}_{dist.get_rank()}").replace(
        '"loss.png"', 'f"loss_{dist.get_rank()}.png"'
    )
    assert "DDP015" not in _rules(source.replace(write, ranked))


def test_a_figure_drawn_by_a_module_that_knows_nothing_of_ranks_is_not_every_ranks(tmp_path, capsys):
    """GPT2's CLI has a plotting subcommand beside its DDP training: the module that draws the figure imports
    nothing distributed, so its `plt.savefig` is no rank's concurrent write."""
    main = """
        import plot

        def train(args):
            dist.init_process_group("nccl")
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            model = DDP(nn.Linear(2, 2).cuda())
            model(x).sum().backward()

        if __name__ == "__main__":
            args = parse()
            (train if args.command == "train" else plot.plot)(args)
        """
    _write(tmp_path / "cli", {"main.py": main})
    plot = "import matplotlib.pyplot as plt\n\ndef plot(args):\n    plt.plot(read(args.log))\n    plt.savefig(args.figure)\n"
    (tmp_path / "cli" / "plot.py").write_text(plot)
    assert run_lint([str(tmp_path / "cli")], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


@pytest.mark.parametrize(
    "seeding, found",
    [
        ("", {"DDP023"}),  # each process starts from its own random seed
        ("torch.manual_seed(args.seed + dist.get_rank())\n", {"DDP023"}),
        ("seed = args.seed + int(os.environ['LOCAL_RANK'])\ntorch.manual_seed(seed)\n", {"DDP023"}),
        ("torch.manual_seed(int(time.time()))\n", {"DDP023"}),
        ("set_seed(args.seed + rank)\n", {"DDP023"}),  # the program's own helper, called with a rank's seed
        ("torch.manual_seed(args.seed)\n", set()),
        ("set_seed(args.seed)\n", set()),
        ("torch.cuda.manual_seed(args.seed)\n", {"DDP023"}),  # CUDA's generator: not the one random_split draws from
    ],
)
def test_a_random_split_is_one_split_only_where_every_rank_seeds_torch_alike(seeding, found):
    """hkproj's and minGPT-ddp's `random_split(ds, [n_train, n_val])` with no generator and no shared seed: each
    rank draws its own split (DDP023). One seed for all ranks, directly or through the program's `set_seed`, makes
    one split."""
    source = f"""
import time
from torch.utils.data import random_split

def set_seed(seed):
    torch.manual_seed(seed)

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
{seeding}model = DDP(nn.Linear(2, 2).cuda())
train_set, val_set = random_split(dataset, [900, 100])
for x in DataLoader(train_set, sampler=DistributedSampler(train_set)):
    model(x).sum().backward()
"""
    assert _rules(source) & {"DDP023"} == found
    with_generator = source.replace("[900, 100])", "[900, 100], generator=torch.Generator().manual_seed(0))")
    assert "DDP023" not in _rules(with_generator)
    on_rank_0 = source.replace(
        "train_set, val_set = random_split", "if rank == 0:\n    train_set, val_set = random_split"
    )
    assert "DDP023" not in _rules(on_rank_0)


def test_a_programs_own_random_split_is_not_torchs():
    """rasbt's `random_split(df, 0.7, 0.1)` splits a DataFrame with the program's own function: not torch's."""
    source = """
def random_split(df, train_frac, validation_frac):
    return df[:10], df[10:12], df[12:]

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
train_df, validation_df, test_df = random_split(balanced_df, 0.7, 0.1)
"""
    assert "DDP023" not in _rules(source)


def test_leaving_the_loop_on_a_running_sum_of_this_ranks_loss():
    """IDvs.MoRec adds each step's loss into `loss += bz_loss.data.float()` and breaks on `if
    torch.isnan(loss.data):`: a rank whose sum went NaN leaves while the others wait in the next backward."""
    source = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
for epoch in range(3):
    loss = 0.0
    for batch in loader:
        bz_loss = model(batch).sum()
        loss += bz_loss.data.float()
        scaler.scale(bz_loss).backward()
        if torch.isnan(loss.data):
            break
"""
    assert "DDP014" in _rules(source)
    assert "DDP014" not in _rules(source.replace("if torch.isnan(loss.data):", "if epoch_budget_spent:"))


def test_a_helper_called_down_the_branch_that_does_not_wrap_returns_a_plain_model():
    """fast-autoaugment's `get_model(conf, n, local_rank)` wraps in DDP only `if local_rank >= 0:`; its EMA copy is
    `get_model(conf, n, local_rank=-1)`, a plain model, so evaluating it on rank 0 alone runs no collective
    (DDP010 quiet) — evaluating the wrapped model there still hangs the others."""
    source = """
def get_model(conf, num_class=10, local_rank=-1):
    model = make(conf, num_class)
    if local_rank >= 0:
        model = DDP(model.cuda(), device_ids=[local_rank])
    else:
        model = model.cuda()
    return model

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = get_model(conf, 10, local_rank=local_rank)
model_ema = get_model(conf, 10, local_rank=-1)
for x in loader:
    model(x).sum().backward()
if dist.get_rank() == 0:
    with torch.no_grad():
        model_ema(x)
"""
    assert "DDP010" not in _rules(source)
    assert "DDP010" in _rules(source.replace("        model_ema(x)", "        model(x)"))


def test_gathered_results_cut_back_to_the_sets_length_count_each_sample_once():
    """The old transformers examples' `distributed_concat`: every rank's results all-gathered, concatenated and
    cut to `[:num_total_examples]` beside a sampler that pads only the tail: no padded duplicate is counted."""
    source = """
def distributed_concat(tensor, num_total_examples):
    output_tensors = [tensor.clone() for _ in range(dist.get_world_size())]
    dist.all_gather(output_tensors, tensor)
    return torch.cat(output_tensors, dim=0)[:num_total_examples]

def evaluate(model, dataset):
    test_sampler = SequentialDistributedSampler(dataset, batch_size=64)
    scores = []
    with torch.no_grad():
        for x in DataLoader(dataset, sampler=test_sampler, batch_size=64):
            scores.append(model(x))
    return distributed_concat(torch.cat(scores), len(dataset)).mean()

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
print(evaluate(model, valid_set))
"""
    assert "DDP016" not in _rules(source)
    assert "DDP016" in _rules(source.replace("[:num_total_examples]", ""))


def test_an_ignite_metric_averaged_over_ranks_through_a_helper_counts_the_padded_samples():
    """The transfer-learning tutorials' template: a padding validation sampler (`valid_sampler = DistributedSampler(
    datasets['valid']) if args.distributed else None`) and Ignite's `MetricsLambda(average_distributed_scalar,
    ...)`, whose helper all-reduces the metric: padded duplicates are averaged in (DDP016)."""
    source = """
from ignite.metrics import Loss, MetricsLambda

def average_distributed_scalar(scalar, args):
    scalar_t = torch.tensor(scalar, dtype=torch.float) / dist.get_world_size()
    dist.all_reduce(scalar_t)
    return scalar_t.item()

dist.init_process_group("nccl")
torch.cuda.set_device(args.local_rank)
model = DDP(nn.Linear(2, 2).cuda())
train_sampler = DistributedSampler(datasets['train']) if args.distributed else None
valid_sampler = DistributedSampler(datasets['valid']) if args.distributed else None
valid_loader = DataLoader(datasets['valid'], sampler=valid_sampler, shuffle=False)
metrics = {"nll": Loss(torch.nn.CrossEntropyLoss())}
metrics["average_nll"] = MetricsLambda(average_distributed_scalar, metrics["nll"], args)
"""
    found = {(f.rule, f.line) for f in lint_source("script.py", HEADER + textwrap.dedent(source))}
    line = (HEADER + textwrap.dedent(source)).splitlines().index(
        "valid_sampler = DistributedSampler(datasets['valid']) if args.distributed else None"
    ) + 1
    assert ("DDP016", line) in found and not any(rule == "DDP016" and at != line for rule, at in found)
    plain = source.replace("MetricsLambda(average_distributed_scalar,", "MetricsLambda(lambda x, a: x,")
    assert "DDP016" not in _rules(plain)


def test_a_ports_default_in_a_command_line_function_is_reported_where_it_is_written(tmp_path, capsys):
    """jukebox's scripts are `fire.Fire(run)` with `def run(hps="teeny", port=29500, **kwargs)`, which passes the
    port down to the helper that sets `MASTER_PORT`: the default is every run's port, reported at the default in
    each script (where it is changed), not once at the shared helper."""
    files = {
        "dist_utils.py": """
            def setup_dist(port=29500):
                return _setup(port)

            def _setup(port):
                os.environ["MASTER_PORT"] = str(port)
                dist.init_process_group("nccl")
            """,
        "train.py": """
            import fire
            from dist_utils import setup_dist

            def run(hps="teeny", port=29500, **kwargs):
                setup_dist(port=port)
                model = DDP(nn.Linear(2, 2))

            if __name__ == "__main__":
                fire.Fire(run)
            """,
        "sample.py": """
            import fire
            from dist_utils import setup_dist

            def run(model="5b", port=29501, **kwargs):
                setup_dist(port=port)

            if __name__ == "__main__":
                fire.Fire(run)
            """,
    }
    folder = _write(tmp_path / "jb", files)
    run_lint([str(folder)], as_json=True, chosen=["DDP011"])
    found = {(Path(f["file"]).name, f["line"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    text = {name: (folder / name).read_text().splitlines() for name in ("train.py", "sample.py")}
    assert found == {
        ("train.py", next(i for i, line in enumerate(text["train.py"], 1) if "def run(" in line)),
        ("sample.py", next(i for i, line in enumerate(text["sample.py"], 1) if "def run(" in line)),
    }


def test_saving_under_one_rank_or_one_process_is_one_writer():
    """Yolact saves under `if (not cfg.cuda) or main_gpu:`, where `main_gpu = dist.get_rank() == 0` is set inside
    `if cfg.cuda:` beside the DDP wrap: on the GPU path rank 0 writes, on the CPU path one process does."""
    source = """
main_gpu = False
if cfg.cuda:
    dist.init_process_group("nccl")
    torch.cuda.set_device(args.local_rank)
    main_gpu = dist.get_rank() == 0
    net = DDP(net.cuda(), [args.local_rank])
for step in range(10):
    net(x).sum().backward()
    if (not cfg.cuda) or main_gpu:
        torch.save(net.state_dict(), "latest.pth")
"""
    assert "DDP015" not in _rules(source)
    assert "DDP015" in _rules(source.replace("(not cfg.cuda) or main_gpu", "(not cfg.half) or main_gpu"))


@pytest.mark.parametrize(
    "guard, found",
    [
        ("if world_size > 1:", {"DDP001"}),  # inside each DDP process: DataParallel over every GPU
        ("if args.distributed:", {"DDP001"}),
        ("if n_gpu > 1:", set()),  # a GPU count: DataParallel's own single-process test
        ("if not args.distributed:", set()),
    ],
)
def test_dataparallel_in_the_multi_process_arm_is_found(guard, found):
    """StudioGAN's k-NN analysis wraps a ResNet in `DataParallel` under `if world_size > 1:` inside every DDP process:
    the multi-process arm, not a single-process fallback."""
    source = f"""
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
features = nn.Linear(2, 2).cuda()
{guard}
    features = nn.DataParallel(features)
"""
    assert _rules(source) & {"DDP001"} == found


def test_a_switch_named_dist_something_tells_distributed_runs():
    """TransReID saves under `if cfg.MODEL.DIST_TRAIN: if dist.get_rank() == 0: torch.save(...)` and, in the `else`,
    on the single-process path: one writer either way (DDP015 quiet)."""
    source = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
for epoch in range(3):
    model(x).sum().backward()
    if cfg.MODEL.DIST_TRAIN:
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "last.pth")
    else:
        torch.save(model.state_dict(), "last.pth")
"""
    assert "DDP015" not in _rules(source)
    assert "DDP015" in _rules(source.replace("if cfg.MODEL.DIST_TRAIN:", "if cfg.MODEL.SAVE_BOTH:"))


def test_features_gathered_by_an_autograd_gather_layer_are_combined():
    """StudioGAN gathers every rank's features with `torch.cat(losses.GatherLayer.apply(feats))`, an autograd
    Function whose `forward` all-gathers, before computing and logging its metrics: no shard's figure (DDP017
    quiet)."""
    source = """
class GatherLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(output, x)
        return tuple(output)

def stack_features(loader, model):
    feats = []
    with torch.no_grad():
        for x in loader:
            feats.append(model(x))
    return torch.cat(GatherLayer.apply(torch.cat(feats)))

def evaluate(model):
    model.eval()
    feats = stack_features(DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)), model)
    acc = knn_accuracy(feats)
    print(f"val acc {acc}")

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
evaluate(model)
"""
    assert "DDP017" not in _rules(source)
    assert "DDP017" in _rules(source.replace("dist.all_gather(output, x)", "output = [x]"))


def test_a_worker_that_prints_a_count_is_no_log_call_but_a_print_helper_given_a_metric_is():
    """StudioGAN's `save_images_png(..., num_images=n)` prints its image count: calling it logs no figure of the
    sharded evaluation. `print_rank0(f"val acc {acc}")` does (DDP017 both ways)."""
    source = """
def save_images(loader, model, num_images, best_acc):
    print(f"Save {num_images} images")
    for x in loader:
        write(model(x))

def print_rank0(msg):
    if dist.get_rank() == 0:
        print(msg)

def evaluate(model):
    model.eval()
    loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
    with torch.no_grad():
        save_images(loader, model, num_images=len(val_set), best_acc=best_acc)

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
evaluate(model)
"""
    assert "DDP017" not in _rules(source)
    logging_a_metric = source.replace(
        "        save_images(loader, model, num_images=len(val_set), best_acc=best_acc)",
        "        acc = sum((model(x).argmax(1) == y).float().mean() for x, y in loader)\n"
        "    print_rank0(f'val acc {acc}')",
    )
    assert "DDP017" in _rules(logging_a_metric)


def test_a_modules_nodes_by_class_are_the_same_whatever_is_asked_first():
    """`Module.of_type` groups the nodes by class once for a concrete class and keeps asking `isinstance` for a
    base class (`ast.stmt`) or a class with subclasses (`ast.Constant`): each answer is every such node once, in
    source order, in any order of questions."""
    source = "x = 1\nif x:\n    y = 'a'\n    z = x + 2\n"
    questions = [(ast.Constant,), (ast.stmt,), (ast.Assign,), (ast.Name,), (ast.Assign, ast.If), (ast.If,)]
    expected = {q: [n for n in ast.walk(ast.parse(source)) if isinstance(n, q)] for q in questions}
    for order in (questions, questions[::-1]):
        module = Module("m.py", source)
        for question in order:
            got = module.of_type(*question)
            assert [type(n) for n in got] == [type(n) for n in expected[question]]
            assert sorted((n.lineno, n.col_offset) for n in got) == sorted(
                (n.lineno, n.col_offset) for n in expected[question]
            )


def _found(paths: list) -> set:
    """(file name, rule) of each finding lint reports for the paths."""
    return {(Path(f.file).name, f.rule) for f in lint_paths([str(p) for p in paths]).findings}


def test_gpu_0_on_the_single_process_arm_of_a_distributed_switch_is_its_own():
    """neuraloperator's `setup`: `cuda:{local_rank}` under `if config.distributed.use_distributed:`, `cuda:0` in the
    `else` a run without a process group takes."""
    source = """
def setup(config):
    if config.distributed.use_distributed:
        dist.init_process_group("nccl")
        device = torch.device(f"cuda:{comm.get_local_rank()}")
    else:
        device = torch.device("cuda:0")
    torch.cuda.set_device(device.index)
    return device

device = setup(config)
model = DDP(nn.Linear(2, 2).to(device), device_ids=[device.index])
"""
    assert "DDP006" not in _rules(source)
    assert "DDP006" in _rules(
        source.replace("    else:\n        device = torch.device", "    if True:\n        device = torch.device")
    )


def test_a_port_option_handed_over_in_a_configuration_dictionary_reaches_the_address():
    """RecBole: `--port` default "5678" passed as `config_dict["port"]`, joined into `"tcp://" + ip + ":" +
    str(config["port"])`."""
    source = """
parser = argparse.ArgumentParser()
parser.add_argument("--port", type=str, default="5678")
args = parser.parse_args()
config = {"port": args.port, "ip": "localhost"}
dist.init_process_group("nccl", init_method="tcp://" + config["ip"] + ":" + str(config["port"]))
"""
    assert "DDP011" in _rules(source)
    assert "DDP011" not in _rules(source.replace('config["port"]', 'config["visdom"]'))


def test_a_module_imported_by_a_literal_name_and_a_class_got_by_a_literal_attribute_are_read(tmp_path):
    """RecBole's `getattr(importlib.import_module("recbole.trainer"), "Trainer")`: the module is part of the program
    and the class's methods run."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/trainer.py": """
                class Trainer:
                    def fit(self, model, loader, optimizer):
                        scaler = torch.cuda.amp.GradScaler()
                        for x in loader:
                            scaler.scale(model(x).sum()).backward()
                            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                            scaler.step(optimizer)
                """,
            "train.py": """
                import importlib

                def get_trainer():
                    return getattr(importlib.import_module("pkg.trainer"), "Trainer")

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    model = DDP(nn.Linear(2, 2).cuda())
                    get_trainer()().fit(model, loader, optimizer)
                """,
        },
    )
    assert ("trainer.py", "DDP009") in _found([tmp_path / "train.py"])
    literal = (tmp_path / "train.py").read_text()
    (tmp_path / "train.py").write_text(literal.replace('"Trainer")', "name)"))
    assert ("trainer.py", "DDP009") not in _found([tmp_path / "train.py"])  # a computed class: none known to run
    (tmp_path / "train.py").write_text(literal.replace('"pkg.trainer"', "name"))
    assert ("trainer.py", "DDP009") not in _found([tmp_path / "train.py"])  # a computed module: not read


@pytest.mark.parametrize("leave, found", [("return", True), ("pass", False)])
def test_rank_0_leaving_before_the_loop_that_trains_through_a_helper(leave, found):
    """doctr: `if rank == 0 and args.test_only: evaluate(...); return` and, in the epoch loop that calls
    `fit_one_epoch` (which back-propagates), `if rank == 0: ... if early_stopper.early_stop(val_loss): break`."""
    source = f"""
def fit_one_epoch(model, loader, optimizer):
    for x in loader:
        model(x).sum().backward()
        optimizer.step()

def main(args):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = DDP(nn.Linear(2, 2).cuda())
    if rank == 0 and args.test_only:
        evaluate(model.module)
        {leave}
    for epoch in range(args.epochs):
        fit_one_epoch(model, loader, optimizer)
        if rank == 0:
            if args.early_stop and early_stopper.early_stop(val_loss):
                {"break" if found else "pass"}

if __name__ == "__main__":
    main(args)
"""
    findings = [f for f in lint_source("script.py", HEADER + textwrap.dedent(source)) if f.rule == "DDP014"]
    assert len(findings) == (2 if found else 0)
    if found:  # an exit with an error status instead: torchrun and mp.spawn stop the other ranks
        error_exit = source.replace("        evaluate(model.module)\n        return", "        sys.exit(1)")
        assert len([f for f in lint_source("s.py", HEADER + textwrap.dedent(error_exit)) if f.rule == "DDP014"]) == 1


def test_set_epoch_only_on_a_path_no_construction_takes_is_never_called(tmp_path):
    """KPGT makes `Trainer(...)` without `ddp=True`, so `if self.ddp: train_loader.sampler.set_epoch(epoch)` never
    runs; its script is started from scripts/ and finds src/ through `sys.path.append('..')`."""
    _write(
        tmp_path,
        {
            "src/__init__.py": "",
            "src/trainer.py": """
                class Trainer:
                    def __init__(self, optimizer, ddp=False):
                        self.ddp = ddp
                        self.optimizer = optimizer

                    def fit(self, model, train_loader, epochs):
                        for epoch in range(epochs):
                            if self.ddp:
                                train_loader.sampler.set_epoch(epoch)
                            for x in train_loader:
                                model(x).sum().backward()
                                self.optimizer.step()
                """,
            "scripts/train.py": """
                import sys
                sys.path.append('..')
                from src.trainer import Trainer

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    model = DDP(nn.Linear(2, 2).cuda())
                    loader = DataLoader(ds, sampler=DistributedSampler(ds))
                    Trainer(optimizer).fit(model, loader, 10)
                """,
        },
    )
    assert ("train.py", "DDP002") in _found([tmp_path / "scripts" / "train.py"])
    fixed = (
        (tmp_path / "scripts" / "train.py").read_text().replace("Trainer(optimizer)", "Trainer(optimizer, ddp=True)")
    )
    (tmp_path / "scripts" / "train.py").write_text(fixed)
    assert ("train.py", "DDP002") not in _found([tmp_path / "scripts" / "train.py"])


def test_a_sampler_behind_a_flag_computed_from_a_parameter_every_caller_leaves_is_not_made():
    """fast-autoaugment's search: `train_and_eval(...)` leaves `local_rank=-1`, which passes `multinode=(local_rank
    >= 0)` on to `get_dataloaders`: neither its DistributedSampler nor the loop's `set_epoch` runs."""
    source = """
def get_dataloaders(ds, multinode=False):
    sampler = None
    if multinode:
        sampler = DistributedSampler(ds)
    return sampler, DataLoader(ds, sampler=sampler, shuffle=sampler is None)

def train_and_eval(ds, local_rank=-1):
    sampler, loader = get_dataloaders(ds, multinode=(local_rank >= 0))
    for epoch in range(10):
        if local_rank >= 0:
            sampler.set_epoch(epoch)
        for x in loader:
            model(x).sum().backward()

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
train_and_eval(ds)
"""
    assert "DDP002" not in _rules(source)
    no_set_epoch = source.replace("        if local_rank >= 0:\n            sampler.set_epoch(epoch)\n", "")
    assert "DDP002" not in _rules(no_set_epoch)  # no sampler is made either
    assert "DDP002" in _rules(no_set_epoch.replace("train_and_eval(ds)", "train_and_eval(ds, local_rank=args.rank)"))


def test_a_backend_option_defaulting_to_gloo_is_nccl_only_where_the_user_asks():
    """opacus' cifar10 example: `--dist_backend` defaults to "gloo"; each process already uses its own device."""
    source = """
parser = argparse.ArgumentParser()
parser.add_argument("--dist_backend", type=str, default="gloo")
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()
dist.init_process_group(backend=args.dist_backend)
model = DDP(nn.Linear(2, 2).to(args.local_rank), device_ids=[args.local_rank])
print(torch.cuda.device_count())
"""
    assert "DDP005" not in _rules(source)
    assert "DDP005" in _rules(source.replace('default="gloo"', 'default="nccl"'))


def test_a_call_of_the_modules_own_function_is_no_call_of_a_method_of_that_name(tmp_path):
    """opacus: cifar10.py calls its own `save_checkpoint(...)`; `PrivacyEngine.save_checkpoint`, a method of a class
    the script uses, is not run by that call."""
    _write(
        tmp_path,
        {
            "engine.py": """
                class PrivacyEngine:
                    def make_private(self, model):
                        return model

                    def save_checkpoint(self, path, model):
                        torch.save(model.state_dict(), path)
                """,
            "train.py": """
                from engine import PrivacyEngine

                def save_checkpoint(state, filename):
                    if dist.get_rank() == 0:
                        torch.save(state, filename)

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    model = PrivacyEngine().make_private(DDP(nn.Linear(2, 2).cuda()))
                    save_checkpoint({"model": model.module.state_dict()}, "checkpoint.tar")
                """,
        },
    )
    assert ("engine.py", "DDP015") not in _found([tmp_path / "train.py"])
    called = (
        (tmp_path / "train.py")
        .read_text()
        .replace('save_checkpoint({"model"', 'PrivacyEngine().save_checkpoint("c.pt", model)\n    ({"model"')
    )
    (tmp_path / "train.py").write_text(called)
    assert ("engine.py", "DDP015") in _found([tmp_path / "train.py"])


def test_a_launcher_the_options_choices_leave_out_never_runs_and_a_local_variable_names_no_function(tmp_path):
    """gmflow's `init_dist(args.launcher)` with `--launcher` limited to none/pytorch never reaches its slurm
    helper's fixed port; neuraloperator's `init = "svd"` in another function names no module function `init`, and
    its `import wandb` (beside a config/wandb.py of its own) is the library, so `wandb.init()` is no call of it."""
    _write(
        tmp_path,
        {
            "config/__init__.py": "",
            "config/wandb.py": "PROJECT = 'x'\n",
            "dist_utils.py": """
                def init_dist(launcher, backend="nccl"):
                    if launcher == "pytorch":
                        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                        dist.init_process_group(backend)
                    elif launcher == "slurm":
                        _init_dist_slurm(backend)

                def _init_dist_slurm(backend):
                    os.environ["MASTER_PORT"] = "29500"
                    torch.cuda.set_device(int(os.environ["SLURM_LOCALID"]))
                    dist.init_process_group(backend)

                def init(model):
                    torch.save(model.state_dict(), "weights.pt")
                """,
            "train.py": """
                import argparse
                import wandb
                from config import wandb as wandb_config
                from dist_utils import init_dist, init

                def decompose(matrix):
                    init = "svd"
                    return tucker(matrix, init=init)

                if __name__ == "__main__":
                    parser = argparse.ArgumentParser()
                    parser.add_argument("--launcher", default="none", choices=["none", "pytorch"])
                    args = parser.parse_args()
                    wandb.init(project=wandb_config.PROJECT)
                    init_dist(args.launcher)
                    model = DDP(nn.Linear(2, 2).cuda())
                    decompose(model.weight)
                """,
        },
    )
    assert _found([tmp_path / "train.py"]) == set()
    slurm = (tmp_path / "train.py").read_text().replace('"pytorch"]', '"pytorch", "slurm"]')
    (tmp_path / "train.py").write_text(slurm)
    assert _found([tmp_path / "train.py"]) == {("dist_utils.py", "DDP011")}
    calls_init = slurm.replace("decompose(model.weight)", "init(model.module)")
    (tmp_path / "train.py").write_text(calls_init)
    assert ("dist_utils.py", "DDP015") in _found([tmp_path / "train.py"])


def test_a_shuffling_loader_read_only_without_gradients_trains_nothing():
    """neuraloperator's calibration: `calib_loader = DataLoader(db, shuffle=True)` read in `with torch.no_grad():`
    and counted with `len(calib_loader)`."""
    source = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
calib_loader = DataLoader(calib_db, shuffle=True, batch_size=1)
with torch.no_grad():
    ratios = [model(x) for x in calib_loader]
n = len(calib_loader)
"""
    assert "DDP018" not in _rules(source)
    trained = source + "for x in calib_loader:\n    model(x).sum().backward()\n"
    assert "DDP018" in _rules(trained)


def test_a_repository_downloaded_without_its_history_is_read_from_its_top(tmp_path):
    """Pointcept as GitHub's "Download ZIP" gives it: no .git, no setup.py, a .gitignore and a LICENSE at the top;
    `tools/train.py` imports `pointcept.engines` from there (run as `PYTHONPATH=. python tools/train.py`). Its
    trainer is picked by a registry (`TRAINERS.build(...)`), so the registered class's methods run."""
    _write(
        tmp_path,
        {
            "pointcept/__init__.py": "",
            "pointcept/engines/__init__.py": "",
            "pointcept/engines/train.py": """
                TRAINERS = Registry("trainers")

                @TRAINERS.register_module("DefaultTrainer")
                class Trainer:
                    def train(self):
                        val_loader = self.build_val_loader(self.val_data)
                        for epoch in range(10):
                            for x in self.loader:
                                self.model(x).sum().backward()
                            self.after_epoch(val_loader)

                    def build_val_loader(self, val_data):
                        return DataLoader(val_data, sampler=DistributedSampler(val_data))

                    def after_epoch(self, loader):
                        self.model.eval()
                        total = torch.zeros(1)
                        with torch.no_grad():
                            for x in loader:
                                total += self.model(x).sum()
                        dist.all_reduce(total)
                        print("val loss", total.item())
                """,
            "tools/train.py": """
                from pointcept.engines.train import TRAINERS

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    TRAINERS.build(dict(type=cfg.train.type)).train()
                """,
        },
    )
    assert _found([tmp_path / "tools" / "train.py"]) == set()  # no marker: tools/ alone, its import not found
    (tmp_path / ".gitignore").write_text("*.pyc\n")
    assert ("train.py", "DDP016") in _found([tmp_path / "tools" / "train.py"])
    unregistered = (
        (tmp_path / "pointcept/engines/train.py")
        .read_text()
        .replace('@TRAINERS.register_module("DefaultTrainer")\n', "")
    )
    (tmp_path / "pointcept/engines/train.py").write_text(unregistered)
    assert ("train.py", "DDP016") not in _found([tmp_path / "tools" / "train.py"])  # a class nothing names or builds


def test_a_namespace_package_in_src_and_a_distributed_port_option_are_read(tmp_path):
    """fairchem's `main.py` imports `fairchem.core` from `src/fairchem/core/` (no `src/fairchem/__init__.py`) and
    its `--distributed-port` defaults to 13356."""
    _write(
        tmp_path,
        {
            "src/fairchem/core/__init__.py": "",
            "src/fairchem/core/cli.py": """
                def main():
                    parser = argparse.ArgumentParser()
                    parser.add_argument("--distributed-port", type=int, default=13356)
                    args = parser.parse_args()
                    dist.init_process_group("nccl", init_method=f"tcp://{host}:{args.distributed_port}")
                """,
            "main.py": """
                if __name__ == "__main__":
                    from fairchem.core.cli import main
                    main()
                """,
        },
    )
    assert ("cli.py", "DDP011") in _found([tmp_path / "main.py"])


def test_a_package_linted_as_a_folder_reads_what_its_modules_define(tmp_path):
    """GPT2's `src/gpt2/training/`: `__init__.py` imports the package's modules and runs nothing; a library folder
    is read whole, so the trainer's fixed rendezvous address is still reported."""
    _write(
        tmp_path,
        {
            "setup.py": "",
            "gpt2/__init__.py": "",
            "gpt2/training/__init__.py": "from gpt2.training.training import Trainer\n",
            "gpt2/training/training.py": """
                class Trainer:
                    def _train(self, rank):
                        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:8000", world_size=2, rank=rank)
                """,
        },
    )
    assert ("training.py", "DDP011") in _found([tmp_path / "gpt2" / "training"])


def test_a_name_given_a_reduced_value_no_longer_holds_one_ranks_results():
    """P5: `results = self.train_step(batch)` per rank, then `results = reduce_dict(epoch_results)` before the
    losses are printed: what is logged was combined over ranks."""
    source = """
def evaluate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x in loader:
            total += model(x).sum().item()
    return total

def train(model, loader, val_loader):
    results = evaluate(model, val_loader)
    results = reduce_dict(epoch_results)
    val_loss = results["total_loss"]
    print(f"val loss {val_loss}")

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
train(model, loader, val_loader)
"""
    assert "DDP017" not in _rules(source)
    assert "DDP017" in _rules(source.replace("    results = reduce_dict(epoch_results)\n", ""))


def test_a_data_module_that_loads_pretrained_weights_trains_nothing():
    """P5's test data module: a `DistributedSampler` under `if distributed:` and a tokenizer's `from_pretrained(...)`,
    no epoch loop that trains: no set_epoch to ask for."""
    source = """
def get_loader(ds, distributed):
    tokenizer = Tokenizer.from_pretrained("t5-small")
    sampler = DistributedSampler(ds) if distributed else None
    for row in ds.rows:
        for token in row:
            tokenizer.encode(token)
    return DataLoader(ds, sampler=sampler)

dist.init_process_group("nccl")
get_loader(ds, True)
"""
    assert "DDP002" not in _rules(source)
    assert "DDP002" in _rules(source.replace("tokenizer.encode(token)", "train_step(token)"))


def test_an_address_on_this_host_in_an_f_string_is_one_node():
    """SAM-Med3D: `init_method=f"tcp://127.0.0.1:{args.port}"`: every process on this host, so the global rank is
    the local one."""
    source = """
def main_worker(rank, args):
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=2)
    torch.cuda.set_device(rank)
    model = DDP(nn.Linear(2, 2).cuda(), device_ids=[dist.get_rank()])
"""
    assert "DDP013" not in _rules(source)
    assert "DDP013" in _rules(source.replace("tcp://127.0.0.1:", "tcp://{args.host}:"))


@pytest.mark.parametrize("merge", ["all_gather_object", "gather helper"])
def test_results_gathered_into_dictionaries_keyed_by_sample_count_a_padded_sample_once(tmp_path, merge):
    """voxceleb_trainer: features by file name, `all_gather_object(feats_all, feats)`, `feats.update(part)` for
    each part; Pointcept's testers: `record_sync = comm.gather(record)` merged with `record.update(...)`. A sampler
    in another module, whose evaluation sums over ranks, is still reported."""
    indent = " " * 20
    gather = (
        f"{indent}parts = [None] * dist.get_world_size()\n{indent}dist.all_gather_object(parts, feats)\n"
        if merge == "all_gather_object"
        else f"{indent}parts = gather(feats)\n"
    )
    _write(
        tmp_path,
        {
            "tester.py": """
                def gather(data):
                    out = [None] * dist.get_world_size()
                    dist.all_gather_object(out, data)
                    return out

                def test(model, ds):
                    loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
                    feats = {}
                    for x, name in loader:
                        feats[name] = model(x)
GATHER
                    merged = {}
                    for part in parts:
                        merged.update(part)
                    return merged
                """.replace("GATHER\n", gather),
            "evaluator.py": """
                def validate(model, ds):
                    model.eval()
                    loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
                    total = torch.zeros(1)
                    with torch.no_grad():
                        for x in loader:
                            total += model(x).sum()
                    dist.all_reduce(total)
                    return total
                """,
            "train.py": """
                from tester import test
                from evaluator import validate

                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    model = DDP(nn.Linear(2, 2).cuda())
                    validate(model, val_set)
                    test(model, test_set)
                """,
        },
    )
    found = _found([tmp_path / "train.py"])
    assert ("evaluator.py", "DDP016") in found and ("tester.py", "DDP016") not in found


def test_a_figure_computed_by_looping_over_merged_results_was_combined():
    """Pointcept's part-segmentation tester: `for _, meters in record.items():` over the record merged from every
    rank's part, then `logger.info("Val result: ...")`."""
    source = """
def test(model, ds):
    model.eval()
    loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
    record = {}
    with torch.no_grad():
        for x, name in loader:
            record[name] = model(x).item()
    record_sync = [None] * dist.get_world_size()
    dist.all_gather_object(record_sync, record)
    record = {}
    for r in record_sync:
        record.update(r)
    total = 0.0
    for _, iou in record.items():
        total += iou
    val_miou = total / len(record)
    print(f"Val result: mIoU {val_miou}")

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
test(model, val_set)
"""
    assert not {"DDP016", "DDP017"} & _rules(source)


def test_a_flag_whose_branch_makes_the_process_group_is_a_distributed_switch():
    """transfuser: `parallel = bool(args.parallel_training)`; `if parallel == True:` makes the process group, its
    `else:` makes a shuffling loader for one process, and `trainer.save()` is called under `if rank == 0:` or on
    that `else:`."""
    source = """
class Engine:
    def save(self):
        torch.save(self.model.state_dict(), "model.pth")

parallel = bool(args.parallel_training)
if parallel == True:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = DDP(nn.Linear(2, 2).cuda())
    loader = DataLoader(train_set, sampler=DistributedSampler(train_set))
else:
    rank = 0
    loader = DataLoader(train_set, shuffle=True)
trainer = Engine()
for epoch in range(10):
    loader.sampler.set_epoch(epoch)
    for x in loader:
        model(x).sum().backward()
    if parallel == True:
        if rank == 0:
            trainer.save()
    else:
        trainer.save()
"""
    assert not {"DDP015", "DDP018"} & _rules(source)
    renamed = source.replace(
        "if parallel == True:\n    dist.init", "if parallel == True:\n    pass\nif True:\n    dist.init"
    )
    assert {"DDP015", "DDP018"} <= _rules(renamed)


def test_a_save_under_a_step_test_and_one_rank_or_one_process_has_one_writer():
    """UER-py: `if step % n == 0 and (not self.dist_train or (self.dist_train and global_rank == 0)):` before
    `save_model(...)`, where `if self.dist_train:` is what makes the process group."""
    source = """
class Trainer:
    def __init__(self, args):
        self.dist_train = args.dist_train

    def train(self, model, global_rank, step):
        if self.dist_train:
            dist.init_process_group("nccl")
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            model = DDP(model.cuda())
        if step % 100 == 0 and (not self.dist_train or (self.dist_train and global_rank == 0)):
            torch.save(model.state_dict(), "model.bin")

Trainer(args).train(nn.Linear(2, 2), rank, 0)
"""
    assert "DDP015" not in _rules(source)
    assert "DDP015" in _rules(source.replace("(self.dist_train and global_rank == 0)", "self.dist_train"))


def test_data_parallel_in_the_other_arm_of_the_switch_that_wraps_in_ddp_is_a_single_process_mode():
    """PVD: `if opt.distribution_type == 'multi':` wraps in DDP, `elif opt.distribution_type == 'single':` in
    DataParallel."""
    source = """
def train(gpu, opt):
    model = nn.Linear(2, 2)
    if opt.distribution_type == 'multi':
        dist.init_process_group("nccl", rank=gpu)
        torch.cuda.set_device(gpu)
        model = DDP(model.cuda(gpu), device_ids=[gpu])
    elif opt.distribution_type == 'single':
        model = nn.DataParallel(model.cuda())

train(0, opt)
"""
    assert "DDP001" not in _rules(source)
    assert "DDP001" in _rules(source.replace("    elif opt.distribution_type == 'single':\n", "    if True:\n"))


def test_a_process_rank_named_proc_rank_selects_a_rank():
    """NATSpeech's trainer: `if self.proc_rank == 0 and not test: self.save_checkpoint(...)`."""
    source = """
class Trainer:
    def validate(self, model):
        if self.proc_rank == 0:
            self.save_checkpoint(model)

    def save_checkpoint(self, model):
        torch.save(model.state_dict(), "ckpt.pt")

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
Trainer().validate(DDP(nn.Linear(2, 2).cuda()))
"""
    assert "DDP015" not in _rules(source)


def test_clipping_in_the_programs_only_hook_of_that_name_is_seen_from_the_step():
    """NATSpeech: the trainer calls `task_ref.on_before_optimization(i)` on an object of unknown class, between the
    scaled backward and `scaler.step`; the program's one method of that name clips."""
    source = """
class Task:
    def on_before_optimization(self, i):
        torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)

def train(model, loader, optimizer, task_ref, scaler):
    for x in loader:
        scaler.scale(model(x).sum()).backward()
        task_ref.on_before_optimization(0)
        scaler.step(optimizer)
        scaler.update()
"""
    assert "DDP009" in _rules(source)
    two = source.replace(
        "class Task:", "class Other:\n    def on_before_optimization(self, i):\n        pass\n\nclass Task:"
    )
    assert "DDP009" not in _rules(two)  # which of two methods runs is not known: nothing said


def test_an_address_option_whose_port_is_put_into_the_environment_by_a_dictionary():
    """retinanet-examples: `--master` defaults to '127.0.0.1:29500' and `os.environ.update({'MASTER_PORT':
    args.master.split(':')[-1], ...})`."""
    source = """
parser = argparse.ArgumentParser()
parser.add_argument('--master', metavar='address:port', type=str, default='127.0.0.1:29500')
args = parser.parse_args()
os.environ.update({'MASTER_PORT': args.master.split(':')[-1], 'MASTER_ADDR': args.master.split(':')[0]})
dist.init_process_group("nccl", init_method="env://")
"""
    assert "DDP011" in _rules(source)
    assert "DDP011" not in _rules(source.replace("'MASTER_PORT': args.master", "'VISDOM_PORT': args.master"))


def test_each_training_sampler_never_told_its_epoch_is_reported():
    """retinanet-examples builds one loader for boxes and one for rotated boxes, and neither sampler is told its
    epoch."""
    source = """
def boxes(ds):
    return DataLoader(ds, sampler=DistributedSampler(ds))

def rotated(ds):
    return DataLoader(ds, sampler=DistributedSampler(ds))

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
loader = boxes(ds) if kind == "boxes" else rotated(ds)
for epoch in range(10):
    for x in loader:
        model(x).sum().backward()
"""
    findings = [f for f in lint_source("script.py", HEADER + textwrap.dedent(source)) if f.rule == "DDP002"]
    assert len(findings) == 2


def test_a_batch_moved_to_the_global_rank_breaks_on_a_second_node():
    """MONAI's BTCV: `args.rank = args.rank * args.ngpus_per_node + gpu`, then `data.cuda(args.rank)` in the
    training step while the model is on `args.gpu`."""
    source = """
def main_worker(gpu, args):
    args.rank = args.rank * args.ngpus_per_node + gpu
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(gpu)
    model = DDP(nn.Linear(2, 2).cuda(gpu), device_ids=[gpu])
    for x in loader:
        x = x.cuda(args.rank)
        model(x).sum().backward()
"""
    assert "DDP013" in _rules(source)
    assert "DDP013" not in _rules(source.replace("x.cuda(args.rank)", "x.cuda(gpu)"))


def test_results_each_rank_writes_to_its_file_and_rank_0_merges_by_id_are_combined_once():
    """HybrIK: each rank dumps `kpt_pred[img_id]` to `test_gt_kpt_rank_{rank}.pkl`; rank 0 loads every rank's file
    in `for r in range(opt.world_size):` and merges with `update`: neither one shard's figure nor padded twice."""
    source = """
import pickle as pk

def validate(m, opt, dataset):
    m.eval()
    loader = DataLoader(dataset, sampler=DistributedSampler(dataset, num_replicas=opt.world_size, rank=opt.rank))
    kpt_pred = {}
    with torch.no_grad():
        for x, img_ids in loader:
            kpt_pred[int(img_ids[0])] = m(x)
    with open(f"kpt_rank_{opt.rank}.pkl", "wb") as fid:
        pk.dump(kpt_pred, fid)
    dist.barrier()
    if opt.rank == 0:
        kpt_all_pred = {}
        for r in range(opt.world_size):
            with open(f"kpt_rank_{r}.pkl", "rb") as fid:
                kpt_all_pred.update(pk.load(fid))
        return dataset.evaluate(kpt_all_pred)
    return None

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
val_err = validate(DDP(nn.Linear(2, 2).cuda()), opt, val_set)
if opt.rank == 0:
    print(f"val error {val_err}")
"""
    assert not {"DDP016", "DDP017"} & _rules(source)


def test_a_flag_the_program_sets_true_only_on_some_ranks_guards_what_it_holds(tmp_path):
    """HybrIK's `init_dist` in another module: `if opt.rank % opt.ngpus_per_node == 0: opt.log = True else: opt.log =
    False`; the trainer saves under `if opt.log:`."""
    _write(
        tmp_path,
        {
            "env.py": """
                def init_dist(opt):
                    dist.init_process_group("nccl", rank=opt.rank)
                    torch.cuda.set_device(opt.gpu)
                    if opt.rank == 0:
                        opt.log = True
                    else:
                        opt.log = False
                """,
            "train.py": """
                from env import init_dist

                if __name__ == "__main__":
                    init_dist(opt)
                    m = DDP(nn.Linear(2, 2).cuda())
                    if opt.log:
                        torch.save(m.module.state_dict(), "model.pth")
                """,
        },
    )
    assert ("train.py", "DDP015") not in _found([tmp_path / "train.py"])
    (tmp_path / "env.py").write_text((tmp_path / "env.py").read_text().replace("if opt.rank == 0:", "if True:"))
    assert ("train.py", "DDP015") in _found([tmp_path / "train.py"])


def test_an_address_literal_whose_port_goes_on_in_random_digits_is_not_fixed():
    """aot-benchmark: `'tcp://127.0.0.1:123' + str(random.randint(0, 9)) + str(random.randint(0, 9))`."""
    source = """
import random
url = 'tcp://127.0.0.1:123' + str(random.randint(0, 9)) + str(random.randint(0, 9))
dist.init_process_group("nccl", init_method=url)
"""
    assert "DDP011" not in _rules(source)
    assert "DDP011" in _rules(
        source.replace(
            "'tcp://127.0.0.1:123' + str(random.randint(0, 9)) + str(random.randint(0, 9))", "'tcp://127.0.0.1:12345'"
        )
    )


def test_gpu_0_on_the_single_process_arm_of_a_configuration_switch():
    """VerticalAttentionOCR: `if self.params["training_params"]["use_ddp"]: ... else: torch.device("cuda:0")`."""
    source = """
class Manager:
    def __init__(self, params):
        self.params = params
        if self.params["training_params"]["use_ddp"]:
            dist.init_process_group("nccl")
            self.device = torch.device(int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cuda:0")
        self.model = DDP(nn.Linear(2, 2).to(self.device))

Manager(params)
"""
    assert "DDP006" not in _rules(source)


def test_a_local_rank_name_given_the_jobs_rank_is_the_jobs_rank():
    """crj1998/SR: `args.local_rank = dist.get_rank()` after the process group, then `if args.local_rank in [-1,
    0]: torch.save(...)`: rank 0 of the job, not of each node."""
    source = """
dist.init_process_group("nccl")
args.local_rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(nn.Linear(2, 2).cuda())
os.environ.get("NODE_RANK")
if args.local_rank in [-1, 0]:
    torch.save(model.module.state_dict(), "last.pth")
"""
    assert "DDP019" not in _rules(source)
    assert "DDP019" in _rules(source.replace("args.local_rank = dist.get_rank()\n", ""))


def test_a_clipping_object_of_unknown_class_clips_before_the_scaler_unscales():
    """VQ-Diffusion: `self.clip_grad_norm = instantiate_from_config(...)`, then `self.scaler.scale(loss).backward()`,
    `self.clip_grad_norm(self.model.parameters())`, `self.scaler.step(...)`."""
    source = """
class Solver:
    def train_step(self, batch):
        self.scaler.scale(self.model(batch).sum()).backward()
        self.clip_grad_norm(self.model.parameters())
        self.scaler.step(self.optimizer)
        self.scaler.update()
"""
    assert "DDP009" in _rules(source)
    unscaled = source.replace(
        "        self.clip_grad_norm(", "        self.scaler.unscale_(self.optimizer)\n        self.clip_grad_norm("
    )
    assert "DDP009" not in _rules(unscaled)


def test_a_name_the_process_group_is_given_as_its_rank_is_a_rank():
    """scaling_marl: `init_process_group(..., rank=self.replicate_rank)`; `if self.replicate_rank == 0 and ...:
    self.save()` has one writer, and a `terminate` flag set only there ends one rank's loop alone."""
    source = """
class Trainer:
    def setup(self):
        dist.init_process_group("nccl", rank=self.replicate_rank, world_size=self.num_trainers)
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        self.model = DDP(nn.Linear(2, 2).cuda())

    def save(self):
        torch.save(self.model.module.state_dict(), "model.pt")

    def process_task(self, task):
        if self.replicate_rank == 0:
            self.terminate = task == 1

    def run(self, loader):
        self.setup()
        for x in loader:
            self.model(x).sum().backward()
            self.process_task(self.queue.get())
            if self.terminate:
                break
            if self.replicate_rank == 0 and self.version % 10 == 0:
                self.save()

Trainer().run(loader)
"""
    found = _rules(source)
    assert "DDP015" not in found and "DDP014" in found


def test_fix_moves_every_batch_of_a_line_to_the_local_device(tmp_path, capsys):
    """MONAI's BTCV: `data, target = data.cuda(args.rank), target.cuda(args.rank)` — both moves of the line get the
    local device, so the fixed file lints clean for DDP013."""
    script = tmp_path / "train.py"
    script.write_text(
        HEADER
        + textwrap.dedent(
            """
            def main_worker(gpu, args):
                args.rank = args.rank * args.ngpus_per_node + gpu
                dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
                torch.cuda.set_device(gpu)
                model = DDP(nn.Linear(2, 2).cuda(gpu), device_ids=[gpu])
                for data, target in loader:
                    data, target = data.cuda(args.rank), target.cuda(args.rank)
                    model(data).sum().backward()
            """
        )
    )
    run_lint([str(script)], fix=True)
    text = script.read_text()
    assert text.count("args.rank % torch.cuda.device_count()") == 2
    ast.parse(text)
    assert not [f for f in lint_paths([str(script)]).findings if f.rule == "DDP013"]


def test_a_function_handed_to_every_process_is_no_rank_zero_path_and_a_namesake_main_is_not_its_caller(tmp_path):
    """NVAE: `Process(target=init_processes, args=(global_rank, size, main, args))` for each rank, and
    `init_processes(0, size, main, args)` in a one-process debug run; fid/fid_score.py calls its own `main()`. The
    evaluation sampler `main` builds runs on every rank: read where `main` is handed over, not at the namesake."""
    _write(
        tmp_path,
        {
            "fid_score.py": """
                def main():
                    print("fid")

                if __name__ == "__main__":
                    main()
                """,
            "train.py": """
                import fid_score

                def main(args):
                    valid_sampler = DistributedSampler(valid_data)
                    loader = DataLoader(valid_data, sampler=valid_sampler)
                    for x in loader:
                        model(x)

                def init_processes(rank, size, fn, args):
                    dist.init_process_group("gloo", rank=rank, world_size=size)
                    fn(args)

                if __name__ == "__main__":
                    if size > 1:
                        for rank in range(size):
                            p = Process(target=init_processes, args=(rank, size, main, args))
                            p.start()
                    else:
                        init_processes(0, size, main, args)
                """,
        },
    )
    assert ("train.py", "DDP021") not in _found([tmp_path / "train.py"])
    only_zero = (tmp_path / "train.py").read_text().replace("args=(rank, size, main, args)", "args=(rank, size)")
    (tmp_path / "train.py").write_text(only_zero.replace("init_processes(0, size, main, args)", "pass"))
    (tmp_path / "train.py").write_text(
        (tmp_path / "train.py").read_text().replace("fn(args)", "pass\n    if rank == 0:\n        main(args)")
    )
    assert ("train.py", "DDP021") in _found([tmp_path / "train.py"])


def test_a_folder_leaves_out_pytest_modules_but_a_test_module_named_alone_is_read(tmp_path):
    """ml-cvnets' tests/utils/test_common_utils.py wraps a toy model in DataParallel to test unwrapping it; rl_games'
    tests import the trainer's module to test one function. pytest runs them, not a launcher: no program."""
    _write(
        tmp_path,
        {
            "train.py": """
                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    model = DDP(nn.Linear(2, 2))
                """,
            "tests/test_utils.py": """
                def test_unwrap():
                    dist.init_process_group("gloo")
                    model = nn.DataParallel(nn.Linear(2, 2))
                    assert unwrap(model) is not model
                """,
        },
    )
    assert ("test_utils.py", "DDP001") not in _found([tmp_path])
    assert ("test_utils.py", "DDP001") in _found([tmp_path / "tests" / "test_utils.py"])
    scripted = (tmp_path / "tests" / "test_utils.py").read_text() + "\nif __name__ == '__main__':\n    test_unwrap()\n"
    (tmp_path / "tests" / "test_utils.py").write_text(scripted)
    assert ("test_utils.py", "DDP001") in _found([tmp_path])


def test_a_shuffle_flag_set_true_on_the_training_arm_shuffles():
    """UniTS' data_provider: `shuffle_flag = False` for test, `True` otherwise, then `DataLoader(data_set,
    shuffle=shuffle_flag)` with no sampler in a DDP program: the training loader reads the whole set on every rank."""
    source = """
def data_provider(args, flag):
    if flag == "test":
        shuffle_flag = False
    else:
        shuffle_flag = True
    return DataLoader(data_set, batch_size=args.batch_size, shuffle=shuffle_flag)

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(Net().cuda())
for x in data_provider(args, "train"):
    model(x).sum().backward()
"""
    assert "DDP018" in _rules(source)
    assert "DDP018" not in _rules(source.replace("shuffle_flag = True", "shuffle_flag = False"))


def test_a_module_importing_its_own_name_imports_the_package_of_that_name(tmp_path):
    """SevenNet's console script sevenn/main/sevenn.py: `from sevenn.scripts.train import train` means the package
    sevenn/, not the script itself (run as `python -m sevenn.main.sevenn` or an entry point)."""
    _write(
        tmp_path,
        {
            "pyproject.toml": "",
            "sevenn/__init__.py": "",
            "sevenn/main/__init__.py": "",
            "sevenn/scripts/__init__.py": "",
            "sevenn/scripts/train.py": """
                def train():
                    dist.init_process_group("gloo")
                    os.environ["MASTER_PORT"] = "29500"
                """,
            "sevenn/main/sevenn.py": """
                from sevenn.scripts.train import train

                if __name__ == "__main__":
                    train()
                """,
        },
    )
    assert ("train.py", "DDP011") in _found([tmp_path / "sevenn" / "main" / "sevenn.py"])


def test_a_port_option_under_a_group_prefix_is_a_port_option():
    """ml-cvnets: `--ddp.dist-port` defaulting to 30786, read with `getattr(opts, "ddp.dist_port", 6006)` into
    `tcp://{hostname}:{port}`."""
    source = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--ddp.dist-port", type=int, default=30786)
opts = parser.parse_args()
port = getattr(opts, "ddp.dist_port", 6006)
dist.init_process_group("gloo", init_method="tcp://{}:{}".format(socket.gethostname(), port), rank=0, world_size=1)
"""
    assert "DDP011" in _rules(source)
    assert "DDP011" not in _rules(source.replace("default=30786", "default=None"))


def test_a_subcommand_that_makes_no_process_group_saves_from_its_one_process(tmp_path):
    """SevenNet's `sevenn` command: `if args.command == 'train': run(args)` makes the group; `elif args.command ==
    'cp': checkpoint_cmd.run(args)` converts a checkpoint in one process and saves it: one writer."""
    _write(
        tmp_path,
        {
            "checkpoint_cmd.py": """
                def run(args):
                    torch.save(convert(args.checkpoint), "checkpoint_converted.pth")
                """,
            "cli.py": """
                import checkpoint_cmd

                def run(args):
                    dist.init_process_group("gloo")
                    model = DDP(Net())
                    train(model)

                def main():
                    args = parser.parse_args()
                    if args.command == "train":
                        run(args)
                    elif args.command == "cp":
                        checkpoint_cmd.run(args)

                if __name__ == "__main__":
                    main()
                """,
        },
    )
    assert ("checkpoint_cmd.py", "DDP015") not in _found([tmp_path / "cli.py"])
    (tmp_path / "cli.py").write_text(
        (tmp_path / "cli.py")
        .read_text()
        .replace("        run(args)\n", "        run(args)\n        checkpoint_cmd.run(args)\n", 1)
    )
    assert ("checkpoint_cmd.py", "DDP015") in _found([tmp_path / "cli.py"])


def test_a_loader_factory_asked_for_the_test_split_two_callers_up_pads_the_evaluation():
    """UniTS: `data_provider(args, config, flag, ddp=True)` builds `DistributedSampler(data_set)` for whatever split
    `_get_data(flag)` passes on, and `test()` asks `_get_data(flag='test')`, then gathers every rank's predictions:
    the padded samples are counted."""
    source = """
def data_provider(args, flag):
    data_set = Data(args.root, flag=flag)
    return DataLoader(data_set, batch_size=32, sampler=DistributedSampler(data_set))

def get_data(args, flag):
    return data_provider(args, flag)

def test(model, args):
    loader = get_data(args, flag="test")
    model.eval()
    preds = []
    with torch.no_grad():
        for x in loader:
            preds.append(model(x))
    dist.all_gather(gathered, torch.cat(preds))

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(Net().cuda())
test(model, args)
"""
    assert "DDP016" in _rules(source)
    assert "DDP016" not in _rules(source.replace('flag="test"', 'flag="train"'))


def test_a_wrapper_state_saved_and_loaded_back_into_the_wrapper_is_what_the_program_reads():
    """DROID-SLAM, UniTS, TransBTS: `model = DDP(...)`, `model.load_state_dict(torch.load(args.ckpt))` to resume, and
    `torch.save(model.state_dict(), PATH)` on rank 0: the files hold the keys the program reads back."""
    source = """
def train(gpu, args):
    dist.init_process_group("nccl", rank=gpu, world_size=2)
    torch.cuda.set_device(gpu)
    model = DDP(Net().cuda(), device_ids=[gpu])
    if args.ckpt is not None:
        model.load_state_dict(torch.load(args.ckpt))
    for step in range(10):
        model(x).sum().backward()
        if gpu == 0:
            torch.save(model.state_dict(), "checkpoints/last.pth")
"""
    assert "DDP007" not in _rules(source)
    assert "DDP007" in _rules(source.replace("model.load_state_dict", "model.module.load_state_dict"))


def test_a_port_written_once_is_reported_once_and_gpu_rank_is_a_rank():
    """PreSumm: `dist_init_method = 'tcp://localhost:10000'` then `init_process_group(init_method=dist_init_method)`
    is one fixed port (reported where it is written); `if self.gpu_rank == 0: self._save(step)` has one writer."""
    source = """
class Trainer:
    def __init__(self, gpu_rank):
        self.gpu_rank = gpu_rank

    def train(self, steps):
        for step in range(steps):
            if step % 100 == 0 and self.gpu_rank == 0:
                self._save(step)

    def _save(self, step):
        torch.save(self.model.state_dict(), "model_step_%d.pt" % step)

def multi_init(device_id, world_size, gpu_ranks):
    dist_init_method = 'tcp://localhost:10000'
    torch.distributed.init_process_group(
        backend='nccl', init_method=dist_init_method, world_size=world_size, rank=gpu_ranks[device_id])
    torch.cuda.set_device(device_id)
    Trainer(gpu_ranks[device_id]).train(1000)
"""
    found = lint_source("script.py", HEADER + textwrap.dedent(source))
    assert [f.rule for f in found if f.rule in ("DDP011", "DDP015")] == ["DDP011"]


def test_each_process_shown_its_own_gpu_at_the_top_of_the_script_owns_cuda_0():
    """tgl: `os.environ['CUDA_VISIBLE_DEVICES'] = str(args.local_rank)` before `import torch`, in a script each
    process runs under torch.distributed.launch: `cuda:0` is that process's own GPU."""
    source = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()
os.environ['CUDA_VISIBLE_DEVICES'] = str(args.local_rank)
dist.init_process_group("nccl")
model = DDP(Net().to("cuda:0"))
"""
    assert "DDP006" not in _rules(source)
    assert "DDP006" in _rules(source.replace("str(args.local_rank)", "'0,1'"))


def test_a_collective_on_a_group_of_its_own_may_be_called_by_that_groups_ranks_only():
    """tgl: trainers `if args.rank < args.num_gpus:` run a DDP model made with `process_group=nccl_group` (the trainers'
    group) and `barrier(group=nccl_group)`; the last rank, outside that group, never joins those collectives."""
    source = """
dist.init_process_group("gloo")
nccl_group = dist.new_group(ranks=list(range(num_gpus)), backend="nccl")
if dist.get_rank() < num_gpus:
    torch.cuda.set_device(local_rank)
    model = DDP(Net().cuda(), device_ids=[local_rank], process_group=nccl_group)
    for x in loader:
        model(x).sum().backward()
        dist.barrier(group=nccl_group)
"""
    assert "DDP010" not in _rules(source)
    assert "DDP010" in _rules(source.replace("dist.barrier(group=nccl_group)", "dist.barrier()"))


def test_a_runner_class_made_only_without_the_process_group_evaluates_in_one_process():
    """OpenP5: `SingleRunner(...)` is made in `single_main()`, run in the `else` of `if args.distributed and ngpus > 1:`;
    `DistributedRunner(SingleRunner)` defines its own `test_dataset_task`, so the single runner's logged accuracy is
    the whole test set's and its save has one writer."""
    source = """
class SingleRunner:
    def test_dataset_task(self, loader):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        print("accuracy", correct / len(loader.dataset))
        torch.save(self.model.state_dict(), "best.pt")

class DistributedRunner(SingleRunner):
    def test_dataset_task(self, loader):
        self.model.eval()
        correct = torch.zeros(1)
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum()
        dist.all_reduce(correct)

def single_main(args):
    SingleRunner().test_dataset_task(DataLoader(test_set))

def distributed_main(rank, args):
    dist.init_process_group("nccl", rank=rank, world_size=2)
    torch.cuda.set_device(rank)
    sampler = DistributedSampler(test_set, shuffle=False)
    DistributedRunner().test_dataset_task(DataLoader(test_set, sampler=sampler))

if args.distributed and ngpus > 1:
    mp.spawn(distributed_main, args=(args,), nprocs=ngpus)
else:
    single_main(args)
"""
    found = _rules(source)
    assert "DDP017" not in found and "DDP015" not in found
    inherited = source.replace(
        "class DistributedRunner(SingleRunner):\n    def test_dataset_task",
        "class DistributedRunner(SingleRunner):\n    def other",
    )
    assert "DDP015" in _rules(inherited)


def test_a_training_forward_through_the_inner_model_called_directly_bypasses_the_wrapper():
    """OpenP5's DistributedRunner: `output = self.model.module(input_ids=..., labels=...)` then `loss.backward()`
    with `self.model` the DDP wrapper: DDP's forward never runs, no gradient is averaged."""
    source = """
class Runner:
    def __init__(self, model, rank):
        self.model = DDP(model.cuda(), device_ids=[rank])

    def train(self, loader):
        for batch in loader:
            output = self.model.module(input_ids=batch[0], labels=batch[1])
            output["loss"].backward()

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
Runner(Net(), int(os.environ["LOCAL_RANK"])).train(loader)
"""
    assert "DDP020" in _rules(source)
    assert "DDP020" not in _rules(source.replace("self.model.module(input_ids", "self.model(input_ids"))


def test_a_class_looked_up_in_a_modules_dict_by_name_is_used_and_a_loader_only_data_parallel_is_no_path(tmp_path):
    """ProPainter: `core.__dict__[version].__dict__['Trainer'](config)` makes the trainer, whose flow step runs
    `self.netG.module.forward_bidirect_flow(...)`; RAFT's loader wraps in DataParallel only to load 'module.' keys,
    then `model = model.module`."""
    _write(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/trainer.py": """
                def initialize_raft(path):
                    model = torch.nn.DataParallel(RAFT())
                    model.load_state_dict(torch.load(path, map_location="cpu"))
                    model = model.module
                    return model

                class Trainer:
                    def __init__(self, config):
                        self.netG = DDP(Net().cuda(), device_ids=[config["local_rank"]])
                        self.flow = initialize_raft("raft.pth")

                    def train(self, loader):
                        for x in loader:
                            pred = self.netG.module.forward_bidirect_flow(x)
                            pred.sum().backward()
                """,
            "train.py": """
                import core
                import core.trainer

                def main_worker(rank, config):
                    dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=2)
                    torch.cuda.set_device(rank)
                    config["local_rank"] = rank
                    trainer = core.__dict__["trainer"].__dict__["Trainer"](config)
                    trainer.train(loader)

                if __name__ == "__main__":
                    mp.spawn(main_worker, args=(config,), nprocs=2)
                """,
        },
    )
    found = _found([tmp_path / "train.py"])
    assert ("trainer.py", "DDP020") in found and ("trainer.py", "DDP001") not in found
    (tmp_path / "core" / "trainer.py").write_text(
        (tmp_path / "core" / "trainer.py").read_text().replace("    model = model.module\n", "    pass\n")
    )
    assert ("trainer.py", "DDP001") in _found([tmp_path / "train.py"])


def test_a_sampler_whose_shuffle_flag_is_false_for_the_test_split_pads_the_evaluation():
    """3detr: `for split in ["train", "test"]:` with `shuffle = True` for train and `False` otherwise, one
    `DistributedSampler(datasets[split], shuffle=shuffle)` each, and the test outputs all-gathered into the AP."""
    source = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(Net().cuda())
loaders = {}
for split in ["train", "test"]:
    if split == "train":
        shuffle = True
    else:
        shuffle = False
    sampler = DistributedSampler(datasets[split], shuffle=shuffle)
    loaders[split] = DataLoader(datasets[split], sampler=sampler)

def evaluate(model, loader):
    model.eval()
    outputs = []
    with torch.no_grad():
        for x in loader:
            outputs.append(model(x))
    return all_gather_dict(outputs)

evaluate(model, loaders["test"])
"""
    assert "DDP016" in _rules(source)
    assert "DDP016" not in _rules(
        source.replace('["train", "test"]', '["train"]').replace("shuffle = False", "shuffle = True")
    )


def test_a_folder_leaves_out_hidden_folders_and_virtual_environments(tmp_path):
    """OpenP5 keeps Jupyter's autosaved `.ipynb_checkpoints/` copies of its scripts beside them; a repository may hold
    its `.venv/`: no program runs from either."""
    _write(
        tmp_path,
        {
            "train.py": """
                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    torch.save(model.state_dict(), "model.pt")
                """,
            ".ipynb_checkpoints/train-checkpoint.py": """
                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    torch.save(model.state_dict(), "model.pt")
                """,
            ".venv/lib/site.py": "nn.DataParallel(model)\ndist.init_process_group('gloo')\n",
        },
    )
    report = lint_paths([str(tmp_path)])
    assert {Path(f.file).name for f in report.findings} == {"train.py"} and report.files == 1
    assert ("train-checkpoint.py", "DDP015") in _found([tmp_path / ".ipynb_checkpoints" / "train-checkpoint.py"])


def test_a_function_spawned_through_its_modules_name_is_handed_to_every_process(tmp_path):
    """StudioGAN: `torch.multiprocessing.spawn(fn=loader.load_worker, ...)` under `if ddp and world_size > 1:`, and
    `loader.load_worker(local_rank=rank, ...)` in the single-process `else`: the worker runs on every rank, so an
    unguarded save in it has many writers."""
    _write(
        tmp_path,
        {
            "loader.py": """
                def save_model(model):
                    torch.save(model.module.state_dict(), "model.pt")

                def load_worker(local_rank, cfgs):
                    dist.init_process_group("nccl", rank=local_rank, world_size=2)
                    torch.cuda.set_device(local_rank)
                    save_model(model)
                """,
            "main.py": """
                import loader

                if __name__ == "__main__":
                    if cfgs.distributed_data_parallel and world_size > 1:
                        torch.multiprocessing.spawn(fn=loader.load_worker, args=(cfgs,), nprocs=world_size)
                    else:
                        loader.load_worker(local_rank=0, cfgs=cfgs)
                """,
        },
    )
    assert ("loader.py", "DDP015") in _found([tmp_path / "main.py"])


def test_a_random_sampler_an_inner_model_kept_by_the_object_and_an_unsharded_evaluation_loader():
    """hyperfuture's `sampler = data.RandomSampler(dataset) if mode == 'train' else ...` in a DDP program; cal-ql's
    `self._policy_module = self.policy.module` used for the training forward in another method; AI-system-work-4's
    `--eval_only` arm evaluating `DataLoader(val_dataset)` (no sampler) beside the sharded training arm."""
    random = """
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(Net().cuda())
sampler = data.RandomSampler(dataset) if mode == "train" else data.SequentialSampler(dataset)
loader = data.DataLoader(dataset, batch_size=8, sampler=sampler, shuffle=False)
for x in loader:
    model(x).sum().backward()
"""
    assert "DDP018" in _rules(random)
    assert "DDP018" not in _rules(random.replace("data.RandomSampler(dataset)", "DistributedSampler(dataset)"))
    kept = """
class BCTrainer:
    def setup(self, local_rank):
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
        self.policy = DDP(self.policy, device_ids=[local_rank])
        self._policy_module = self.policy.module

    def train(self, batch):
        loss = -self._policy_module.log_prob(batch).mean()
        loss.backward()

trainer = BCTrainer()
trainer.setup(int(os.environ["LOCAL_RANK"]))
trainer.train(batch)
"""
    assert "DDP020" in _rules(kept)
    assert "DDP020" not in _rules(kept.replace("self._policy_module.log_prob(batch)", "self.policy(batch)"))
    eval_only = """
def evaluate(model, loader):
    model.eval()
    scores = []
    with torch.no_grad():
        for x in loader:
            scores.append(model(x))
    return sum(scores) / len(scores)

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(Net().cuda())
if not args.eval_only:
    val_loader = DataLoader(val_dataset, sampler=DistributedSampler(val_dataset))
    train(model)
else:
    val_loader = DataLoader(val_dataset, batch_size=32)
    bleu = evaluate(model, val_loader)
    if dist.get_rank() == 0:
        print(f"Validation BLEU: {bleu:.2f}")
"""
    assert "DDP017" not in _rules(eval_only)
    assert "DDP017" in _rules(
        eval_only.replace(
            "DataLoader(val_dataset, batch_size=32)", "DataLoader(val_dataset, sampler=DistributedSampler(val_dataset))"
        )
    )


def test_a_converter_in_the_repositorys_script_folder_handles_the_prefix(tmp_path):
    """3D-EMGP: `script/baselines/train_*.py` save the wrapper's state; `script/finetune_qm9.py` loads them with
    `if k.startswith('module.model.'): new_dict[k[13:]] = v`."""
    _write(
        tmp_path,
        {
            "setup.py": "",
            "script/finetune.py": """
                def load_model(model, path):
                    state = torch.load(path)
                    new = {k[13:]: v for k, v in state.items() if k.startswith('module.model.')}
                    model.load_state_dict(new)
                """,
            "script/baselines/train_gpt.py": """
                if __name__ == "__main__":
                    dist.init_process_group("nccl")
                    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
                    model = DDP(Net().cuda())
                    if dist.get_rank() == 0:
                        torch.save(model.state_dict(), "model.pth")
                """,
        },
    )
    assert ("train_gpt.py", "DDP007") not in _found([tmp_path / "script" / "baselines"])
    (tmp_path / "script" / "finetune.py").unlink()
    assert ("train_gpt.py", "DDP007") in _found([tmp_path / "script" / "baselines"])


def test_data_parallel_in_a_method_only_the_single_process_option_calls_is_its_multi_gpu_path():
    """EfficientConformer: `model.parallel_strategy()` (DataParallel on each part) is called only under `if
    args.parallel and not args.distributed:`, beside `model.distribute_strategy(rank)` (DDP): no DDP001. Called
    on every run, it is."""
    source = """
class Transducer(nn.Module):
    def distribute_strategy(self, rank):
        self.encoder = DDP(self.encoder, device_ids=[rank])

    def parallel_strategy(self):
        self.encoder = nn.DataParallel(self.encoder)

dist.init_process_group("nccl")
model = Transducer()
if args.distributed:
    model.distribute_strategy(args.rank)
if args.parallel and not args.distributed:
    model.parallel_strategy()
"""
    assert "DDP001" not in _rules(source)
    assert "DDP001" in _rules(source.replace("if args.parallel and not args.distributed:", "if args.parallel:"))


def test_a_model_file_the_folders_programs_no_longer_import_is_no_program(tmp_path, capsys):
    """EfficientConformer's `models/model_s2s.py` holds only definitions, and `main.py` imports `models/` modules
    beside it but never it: nothing runs it, so its DataParallel is reported by no program. Where a module imports
    by a computed name (`importlib.import_module(f"models.{name}")`), it may be the one loaded: still read."""
    files = {
        "models/__init__.py": "",
        "models/transducer.py": """
            class Transducer(nn.Module):
                def forward(self, x):
                    return x
            """,
        "models/model_s2s.py": """
            class ModelS2S(nn.Module):
                def distribute_strategy(self, local_rank):
                    self.encoder = DDP(self.encoder, device_ids=[local_rank])

                def parallel_strategy(self):
                    self.encoder = nn.DataParallel(self.encoder)
            """,
        "main.py": """
            from models.transducer import Transducer

            if __name__ == "__main__":
                dist.init_process_group("gloo")
                model = DDP(Transducer())
            """,
    }
    _write(tmp_path, files)
    assert run_lint([str(tmp_path)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p[0]).name for p in report["programs"]] == ["main.py"]
    assert not report["findings"]
    # another repository given in the same call, which imports by a computed name, changes nothing here
    other = tmp_path.parent / (tmp_path.name + "_other")
    (other / ".git").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (other / "run.py").write_text("import importlib\nimportlib.import_module(name)\n")
    together, _ = fix_paths([str(tmp_path), str(other)])  # (--fix reads every path given in one process)
    assert sorted(Path(p[0]).name for p in together.programs) == ["main.py", "run.py"]
    (tmp_path / "main.py").write_text(
        (tmp_path / "main.py").read_text() + "    importlib.import_module(f'models.{args.model}')\n"
    )
    assert run_lint([str(tmp_path)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert ("model_s2s.py", "DDP001") in {(Path(f["file"]).name, f["rule"]) for f in report["findings"]}


def test_a_method_replaced_by_a_namesake_function_is_not_run_by_the_replacement(tmp_path, capsys):
    """cramming's DeepSpeed backend sets `engine.save_training_checkpoint = partial(save_training_checkpoint,
    self=engine)` (its own function); the torch backend's method of that name, called only by the training script
    under `is_main_process()`, is not run by an evaluation script that reads both modules and never saves."""
    _write(
        tmp_path,
        {
            "backend.py": """
                def save_training_checkpoint(self, path):
                    pass

                def load_deepspeed(engine):
                    engine.save_training_checkpoint = partial(save_training_checkpoint, self=engine)
                    return engine

                class TorchEngine:
                    def __init__(self, model):
                        self.model = DDP(model)

                    def save_training_checkpoint(self, path):
                        torch.save(self.model.state_dict(), path)
                """,
            "eval.py": """
                from backend import TorchEngine, load_deepspeed

                if __name__ == "__main__":
                    dist.init_process_group("gloo")
                    engine = load_deepspeed(TorchEngine(model))
                    engine.model.eval()
                """,
        },
    )
    assert run_lint([str(tmp_path / "eval.py")], as_json=True) == 0
    assert "DDP015" not in {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    (tmp_path / "eval.py").write_text((tmp_path / "eval.py").read_text() + "    engine.save_training_checkpoint('x')\n")
    assert run_lint([str(tmp_path / "eval.py")], as_json=True) == 0
    assert "DDP015" in {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}


def test_a_save_in_the_process_that_spawns_the_ranks_is_one_writer():
    """graphlearn's IGBH example builds its dataset — writing fp16 copies of the features — in its `__main__`
    block before `torch.multiprocessing.spawn(run_training_proc, ...)`: one process writes them. Built in the
    spawned function, every rank writes the same files."""
    source = """
import torch.multiprocessing as mp

class Features:
    def __init__(self, path):
        torch.save(torch.zeros(3), path + "/fp16.pt")

def run_training_proc(rank, world_size, data):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    model = DDP(nn.Linear(2, 2).cuda(), device_ids=[rank])

if __name__ == "__main__":
    data = Features(args.path)
    mp.spawn(run_training_proc, args=(2, data), nprocs=2)
"""
    assert "DDP015" not in _rules(source)
    moved = source.replace("    data = Features(args.path)\n", "    data = None\n").replace(
        "    torch.cuda.set_device(rank)\n", "    torch.cuda.set_device(rank)\n    Features(args.path)\n"
    )
    assert "DDP015" in _rules(moved)
    # the script's top level outside `__main__` runs again in each spawned process, which imports it
    top = source.replace("    data = Features(args.path)\n", "    data = None\n").replace(
        'if __name__ == "__main__":', 'Features(args.path)\n\nif __name__ == "__main__":'
    )
    assert "DDP015" in _rules(top)


def test_a_wrapper_held_under_a_second_name_is_saved_as_the_wrapper():
    """deepcam keeps `net_train = ddp_net` after `ddp_net = DDP(net, ...)` and saves `net_train.state_dict()`,
    which its restart loads into the plain `net`: the 'module.' keys do not fit (DDP007). The inner model under a
    second name saves plain keys."""
    source = """
net = nn.Linear(2, 2)
dist.init_process_group("gloo")
ddp_net = DDP(net)
net_train = ddp_net
for step in range(10):
    net_train(x).sum().backward()
if dist.get_rank() == 0:
    torch.save({"model": net_train.state_dict()}, "last.cpt")
net.load_state_dict(torch.load("last.cpt", weights_only=True)["model"])
"""
    assert "DDP007" in _rules(source)
    assert "DDP007" not in _rules(source.replace("net_train = ddp_net", "net_train = net"))


@pytest.mark.parametrize(
    "test, found",
    [
        ("not mask.any()", True),  # GP-Transformer: this rank's batch has no labelled rows
        ("epoch < start_epoch", False),  # the same turn on every rank
        ("x.shape[0] < 8", False),  # the short last batch: padded shards give every rank one
        ("batch_idx % 2 == 1", False),  # the batch's index, the same on every rank
    ],
)
def test_a_step_skipped_on_what_the_ranks_own_batch_holds_is_found(test, found):
    """A `continue` before the backward on a test of the rank's own batch: that rank skips the gradient all-reduce
    the others wait in (DDP014)."""
    source = f"""
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 1))
    start_epoch = 1
    for epoch in range(3):
        for batch_idx, (x, y) in enumerate(train_loader):
            mask = y[:, 0] > 0
            if {test}:
                continue
            loss = (model(x[mask]) - y[mask]).pow(2).mean()
            loss.backward()
            optimizer.step()
    """
    assert ("DDP014" in _rules(source)) is found


@pytest.mark.parametrize(
    "body, found",
    [
        ("dist.all_reduce(t)", True),  # only rank 0 gets past the return
        (
            "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):\n    state = model.state_dict()",
            True,
        ),
        (
            "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):\n    state = opt.state_dict()",
            False,
        ),
        ("state = model.state_dict()", False),  # no FULL_STATE_DICT: each rank's own, no gather
    ],
)
def test_a_collective_after_an_early_return_off_rank_0_is_reached_by_rank_0_only(body, found):
    """GeorgianTTS's `save_checkpoint` starts with `if rank != 0: return`, then gathers FSDP's full state dict
    (every rank must take part): rank 0 waits for ranks that never come (DDP010)."""
    source = f"""
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType

def save(rank, model, opt, t):
    if rank != 0:
        return
{textwrap.indent(body, "    ")}
    torch.save(t, "t.pt")

if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = FSDP(nn.Linear(2, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    t = torch.ones(1)
    for epoch in range(3):
        save(dist.get_rank(), model, opt, t)
"""
    assert ("DDP010" in _rules(source)) is found


@pytest.mark.parametrize(
    "after, found",
    [
        ("dist.barrier(group)", False),  # the group's own members: the ranks that left are not in it
        ("dist.all_reduce(t, group=group)", False),
        ("dist.all_reduce(t)", False),  # `rank >= size` with the world's size: no rank leaves
    ],
)
def test_ranks_past_a_count_leaving_before_a_collective_is_no_rank_0_branch(after, found):
    """CAGNET's `run(rank, size, ...)`: `group = dist.new_group(list(range(size)))`, `if rank >= size: return`,
    then `dist.barrier(group)`."""
    source = f"""
def run(rank, size, t):
    group = dist.new_group(list(range(size)))
    if rank >= size:
        return
    {after}

if __name__ == "__main__":
    dist.init_process_group("gloo")
    run(dist.get_rank(), dist.get_world_size(), torch.ones(1))
"""
    assert ("DDP010" in _rules(source)) is found


@pytest.mark.parametrize(
    "wrap, clip, found",
    [
        ("FSDP(nn.Linear(2, 2))", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", True),
        ("FSDP(nn.Linear(2, 2))", "clip_grad_norm_(model.parameters(), 1.0)", True),  # imported from torch
        ("FSDP(nn.Linear(2, 2))", "model.clip_grad_norm_(1.0)", False),  # FSDP's own, over every shard
        ("DDP(nn.Linear(2, 2))", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", False),  # whole grads
        ("FSDP(nn.Linear(2, 2))", "torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)", False),  # minChatGPT
        ("FSDP(nn.Linear(2, 2))", "step(model)", True),  # a helper handed the FSDP model
        ("FSDP(nn.Linear(2, 2))", "step(plain)", False),
    ],
)
def test_clipping_a_sharded_models_gradients_with_torchs_helper_clips_each_shard_alone(wrap, clip, found):
    """GeorgianTTS's `train_fsdp.py`: `torch.nn.utils.clip_grad_norm_` over an FSDP model's parameters (DDP029)."""
    source = f"""
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.nn.utils import clip_grad_norm_

def step(m):
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)

dist.init_process_group("gloo")
plain = nn.Linear(2, 2)  # a single-process trainer's model beside the sharded one
model = {wrap}
model(torch.randn(4, 2)).sum().backward()
{clip}
"""
    assert ("DDP029" in _rules(source)) is found


def test_a_step_skipped_on_a_ranks_own_error_before_the_backward_is_found():
    """Music-Source-Separation-Training's `--safe_mode`: `try: loss = forward_step(...)` / `except Exception:
    continue` before `scaler.scale(loss).backward()` — the rank that fails skips the backward the others wait in
    (DDP014), and so does GeorgianTTS's, whose `try` holds the backward too (an error in the forward skips it).
    Where the error is handled and the step goes on, or the skip comes after the backward, nothing."""
    source = """
dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
for x, y in loader:
    try:
        loss = model(x).sum()
    except Exception as e:
        print(f"Error: {e}")
        continue
    loss.backward()
    opt.step()
"""
    assert "DDP014" in _rules(source)
    assert "DDP014" not in _rules(source.replace("        continue\n", "        loss = model(x * 0).sum()\n"))
    inside = source.replace("    loss.backward()\n", "").replace(
        "        loss = model(x).sum()\n", "        loss = model(x).sum()\n        loss.backward()\n"
    )
    assert "DDP014" in _rules(inside)
    sharded = "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n" + inside.replace("DDP(", "FSDP(")
    assert "DDP014" in _rules(sharded)  # GeorgianTTS's train_fsdp.py: FSDP's backward waits for every rank too
    probe = """
dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
batch = 2
while True:
    try:
        loss = nn.Linear(2, 2)(torch.randn(batch, 2)).sum()
        loss.backward()
        batch *= 2
    except RuntimeError:
        break
"""
    assert "DDP014" not in _rules(probe)  # UniTS's `memory_check`: a probe of batch sizes, no pass over the data
    after = (
        source.replace("    loss.backward()\n    opt.step()\n", "")
        .replace("        loss = model(x).sum()\n", "        print(loss.item())\n")
        .replace(
            "for x, y in loader:\n",
            "for x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n",
        )
    )
    assert "DDP014" not in _rules(after)


@pytest.mark.parametrize("test, found", [("GPU_NUM > 1", False), ("GPU_NUM >= 2", False), ("GPU_NUM > 0", True)])
def test_the_else_of_a_process_count_test_that_makes_the_group_is_the_single_process_arm(test, found):
    """QMedSAM: `if GPU_NUM > 1:` makes the process group, and the `else` of the same test later makes the
    shuffling loader for one process (no DDP018). `GPU_NUM > 0` holds for a distributed run too."""
    source = f"""
    GPU_RANK = [0, 1, 2, 3]
    GPU_NUM = len(GPU_RANK)
    def main(rank, dataset):
        if {test}:
            dist.init_process_group("gloo", rank=rank, world_size=GPU_NUM)
        model = DDP(nn.Linear(2, 2)) if {test} else nn.Linear(2, 2)
        if {test}:
            loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset))
        else:
            loader = DataLoader(dataset, batch_size=4, shuffle=True)
        for epoch in range(3):
            for x in loader:
                model(x).sum().backward()
    """
    assert ("DDP018" in _rules(source)) is found


@pytest.mark.parametrize(
    "after, found",
    [
        (
            "valid_loss = np.average(valid_losses)\n            msg = f'valid_loss: {valid_loss:.5f}'\n            print(msg)",
            True,
        ),
        ("valid_loss = np.average(valid_losses)\n            print(f'valid_loss: {valid_loss:.5f}')", True),
        ("lr = optimizer.lr\n            print(f'lr: {lr}')", False),  # nothing the evaluation computed
    ],
)
def test_a_validation_filled_into_a_list_and_averaged_after_it_is_logged_unreduced(after, found):
    """KenMeSH's training function appends each batch's loss to `valid_losses` inside `with torch.no_grad():`, then
    `valid_loss = np.average(valid_losses)` and prints a message built from it: each rank its own shard's figure."""
    source = f"""
    import numpy as np
    def train(model, train_loader, valid_loader, optimizer, epochs):
        for epoch in range(epochs):
            valid_losses = []
            for x, y in train_loader:
                optimizer.zero_grad()
                (model(x) - y).pow(2).mean().backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                for x, y in valid_loader:
                    valid_losses.append((model(x) - y).pow(2).mean().item())
            {after}

    dist.init_process_group("gloo")
    val_sampler = DistributedSampler(val_set, shuffle=False)
    train(DDP(nn.Linear(2, 1)), DataLoader(train_set, sampler=DistributedSampler(train_set)),
          DataLoader(val_set, sampler=val_sampler), None, 3)
    """
    assert ("DDP017" in _rules(source)) is found


@pytest.mark.parametrize(
    "copy, found",
    [
        ("for (x,) in train_loader:\n        shard.append(x)", False),  # GOTHAM: read once, onto the GPU
        ("for epoch in range(2):\n        for (x,) in train_loader:\n            shard.append(x)", True),
        ("shard = list(train_loader)", True),  # handed on: where it is read again is not followed
    ],
)
def test_a_loader_read_in_one_pass_needs_no_set_epoch(copy, found):
    """GOTHAM's `train_ddp.py` copies its rank's shard onto the GPU in one pass over the sampler's loader, then
    trains for `max_iters` steps on slices of that tensor: the sampler's order is drawn once (no DDP002)."""
    source = f"""
def main(rank, dataset):
    dist.init_process_group("gloo")
    train_sampler = DistributedSampler(dataset)
    train_loader = DataLoader(dataset, batch_size=4, sampler=train_sampler)
    shard = []
    {copy}
    data = torch.cat(shard)
    model = DDP(nn.Linear(2, 2))
    for step in range(100):
        for split in ("train", "val"):
            pass
        model(data[step % len(data)]).sum().backward()
"""
    assert ("DDP002" in _rules(source)) is found


def test_a_shuffling_loader_replaced_under_the_test_that_makes_ddp_is_the_single_process_one():
    """DFC2025: `train_loader = DataLoader(trainset, shuffle=True)`, then `train_loader = DataLoader(trainset,
    sampler=DistributedSampler(trainset))` under `if torch.cuda.device_count() > 1 and args.use_ddp == 1:`, the very
    test under which the program makes its process group and wraps the model: no DDP018. Replaced under another
    test (`if len(args.gpu_ids) > 1:`), a DDP run may keep the shuffling loader: DDP018."""
    source = """
def loaders(args):
    train_loader = DataLoader(trainset, batch_size=8, shuffle=True)
    if torch.cuda.device_count() > 1 and args.use_ddp == 1:
        train_loader = DataLoader(trainset, sampler=DistributedSampler(trainset), batch_size=8)
    return train_loader

def main(args):
    loader = loaders(args)
    model = nn.Linear(2, 2)
    if torch.cuda.device_count() > 1 and args.use_ddp == 1:
        dist.init_process_group("gloo")
        model = DDP(model)
    for x in loader:
        model(x).sum().backward()

main(args)
"""
    assert "DDP018" not in _rules(source)
    other = source.replace(
        "    if torch.cuda.device_count() > 1 and args.use_ddp == 1:\n        train_loader",
        "    if len(args.gpu_ids) > 1:\n        train_loader",
    )
    assert "DDP018" in _rules(other)


def test_a_sampler_made_on_both_arms_of_a_rank_test_is_read_by_every_rank():
    """SUEF: `if is_master(): create_data_loaders(...)` (which calls `create_train_loader`) / `else:
    create_train_loader(...)` — the training loader's DistributedSampler is made on every rank (no DDP021). Made
    only through the rank-0 arm, rank 0 reads its shard alone."""
    source = """
def create_train_loader(ds):
    return DataLoader(ds, sampler=DistributedSampler(ds))

def create_data_loaders(ds, val):
    return create_train_loader(ds), DataLoader(val)

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
if dist.get_rank() == 0:
    train_loader, val_loader = create_data_loaders(ds, val)
else:
    train_loader = create_train_loader(ds)
for x in train_loader:
    model(x).sum().backward()
"""
    assert "DDP021" not in _rules(source)
    assert "DDP021" in _rules(source.replace("    train_loader = create_train_loader(ds)", "    train_loader = None"))


def test_a_module_imported_whole_runs_no_namesake_of_the_importers_own_function(tmp_path, capsys):
    """SUEF's single-process `main.py` calls its own `create_data_loaders`; `utils/utils.py` has a namesake that
    builds a DistributedSampler, and `training.py` (which main imports) imports `utils.utils` for other names: main's
    program runs none of utils' loaders, so it is no DDP program (no DDP018 on its RandomSampler loader). Called as
    `utils.create_data_loaders(...)`, the namesake runs."""
    _write(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/utils.py": """
                def create_data_loaders(ds):
                    return DataLoader(ds, sampler=DistributedSampler(ds))

                def log(x):
                    print(x)
                """,
            "training.py": """
                from utils import utils

                def train(model, loader):
                    for x in loader:
                        utils.log(model(x))
                """,
            "main.py": """
                from torch.utils.data import RandomSampler
                from training import train

                def create_data_loaders(ds):
                    return DataLoader(ds, sampler=RandomSampler(ds))

                if __name__ == "__main__":
                    train(nn.Linear(2, 2), create_data_loaders(ds))
                """,
        },
    )
    assert run_lint([str(tmp_path / "main.py")], as_json=True) == 0
    assert not json.loads(capsys.readouterr().out)["findings"]
    text = (tmp_path / "training.py").read_text().replace("utils.log(model(x))", "utils.create_data_loaders(x)")
    (tmp_path / "training.py").write_text(text)
    run_lint([str(tmp_path / "main.py")], as_json=True)
    assert "DDP018" in {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}


def test_an_evaluation_every_caller_gives_an_unsampled_loader_logs_the_whole_set():
    """HagAli22's final report: rank 0 calls `generate_evaluation_report(model, eval_loader, ...)` with `eval_loader
    = test_loader` (made with no sampler) on one arm and `eval_loader = DataLoader(self.val_dataset, ...)` on the
    other: the accuracy it logs is the whole set's (no DDP017). Given the training run's sharded loader, it is one
    rank's."""
    source = """
def generate_report(model, loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"accuracy {correct / len(loader.dataset)}")

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
train_loader = DataLoader(ds, sampler=DistributedSampler(ds))
val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds, shuffle=False))
for x, y in train_loader:
    model(x).sum().backward()
if dist.get_rank() == 0:
    if test_ds is not None:
        test_loader = DataLoader(test_ds, batch_size=8)
        eval_loader = test_loader
    else:
        eval_loader = DataLoader(val_ds, batch_size=8)
    generate_report(model.module, eval_loader)
"""
    assert "DDP017" not in _rules(source)
    assert "DDP017" in _rules(
        source.replace(
            "    generate_report(model.module, eval_loader)", "    generate_report(model.module, train_loader)"
        )
    )


def test_an_evaluation_on_some_ranks_of_the_sharded_training_loader_scores_one_shard():
    """aswa: after `if device != 0: continue` in the epoch loop, and under `if device == 0:` after it, rank 0 calls
    `utils.eval(loaders['train'], swa_model, ...)` — `loaders['train']` made with `sampler=DistributedSampler(...)`:
    rank 0 scores its shard as the whole training set (DDP021). The unsampled validation loader is read whole; a
    result kept under a name (`val_loss = evaluate(...)`) is DDP017's to follow."""
    source = """
loaders = {
    "train": DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set)),
    "val": DataLoader(val_set, batch_size=8),
}
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(nn.Linear(2, 2))
for epoch in range(3):
    for x in loaders["train"]:
        model(x).sum().backward()
    if rank != 0:
        continue
    print(evaluate(loaders["val"], model.module))
    res = {"train": evaluate(loaders["train"], model.module)}
if rank == 0:
    print(evaluate(loaders["train"], model.module))
"""
    lines = source.splitlines()
    found = {(f.rule, f.line) for f in lint_source("script.py", HEADER + textwrap.dedent(source))}
    offset = HEADER.count("\n")
    on_train = offset + lines.index('    res = {"train": evaluate(loaders["train"], model.module)}') + 1
    final = offset + lines.index('    print(evaluate(loaders["train"], model.module))') + 1
    val = offset + lines.index('    print(evaluate(loaders["val"], model.module))') + 1
    assert {("DDP021", on_train), ("DDP021", final)} <= found
    assert ("DDP021", val) not in found
    everyone = source.replace("    if rank != 0:\n        continue\n", "").replace(
        "if rank == 0:\n    print", "if True:\n    print"
    )
    assert "DDP021" not in _rules(everyone)


def test_a_port_fixed_in_a_settings_dataclass_is_reported_where_it_is_declared():
    """HagAli22's `DDPConfig` declares `master_port: str = "29500"`; the trainer joins it into
    `init_method=f"tcp://{self.config.master_addr}:{self.config.master_port}"` (DDP011, at the declaration). A port
    the class leaves without a default is the caller's."""
    source = """
from dataclasses import dataclass

@dataclass
class DDPConfig:
    master_addr: str = "127.0.0.1"
    master_port: str = "29500"

class Trainer:
    def __init__(self, config):
        self.config = config

    def worker(self, rank, world_size):
        dist.init_process_group("gloo", init_method=f"tcp://{self.config.master_addr}:{self.config.master_port}",
                                rank=rank, world_size=world_size)
        model = DDP(nn.Linear(2, 2))

Trainer(DDPConfig()).worker(0, 1)
"""
    found = {(f.rule, f.line) for f in lint_source("script.py", HEADER + textwrap.dedent(source))}
    line = HEADER.count("\n") + source.splitlines().index('    master_port: str = "29500"') + 1
    assert ("DDP011", line) in found
    assert "DDP011" not in _rules(source.replace('    master_port: str = "29500"', "    master_port: str"))


def test_a_shuffle_then_slice_split_each_rank_draws_its_own_way_unless_seeded_alike():
    """DFC2025 seeds numpy and torch but never Python's `random`, then `random.shuffle(paths)` and `paths[:k]` /
    `paths[k:]`: each rank splits differently (DDP023). `random.seed(args.seed)` on every rank, or a shuffle not
    split, is not."""
    source = """
import random

def loaders(paths, k):
    random.shuffle(paths)
    train, val = paths[:k], paths[k:]
    return DataLoader(train, sampler=DistributedSampler(train)), DataLoader(val)

dist.init_process_group("gloo")
np.random.seed(0)
torch.manual_seed(0)
model = DDP(nn.Linear(2, 2))
train_loader, val_loader = loaders(all_paths, 100)
"""
    assert "DDP023" in _rules(source)
    assert "DDP023" not in _rules(source.replace("np.random.seed(0)", "random.seed(0)"))
    assert "DDP023" in _rules(source.replace("np.random.seed(0)", "random.seed(0 + dist.get_rank())"))
    assert "DDP023" not in _rules(
        source.replace("    train, val = paths[:k], paths[k:]\n", "    train = val = paths\n")
    )
    helper = "def set_seed(seed):\n    {}.seed(seed)\n    torch.manual_seed(seed)\n\n"
    seeded = source.replace("np.random.seed(0)\ntorch.manual_seed(0)", "set_seed(0)")
    assert "DDP023" not in _rules(helper.format("random") + seeded)
    assert "DDP023" in _rules(helper.format("np.random") + seeded)  # (a helper seeding numpy only)


def test_a_rank_the_object_keeps_from_the_local_rank_is_the_local_one():
    """pretraining_different_gpt's DistributedManager keeps `self.rank = args.local_rank` and wraps with
    `device_ids=[self.rank]`: the local rank (no DDP013). Kept from the global rank, it is DDP013."""
    source = """
class Manager:
    def __init__(self, args):
        self.rank = args.local_rank

    def wrap(self, model):
        return DDP(model, device_ids=[self.rank], output_device=self.rank)

dist.init_process_group("nccl", init_method="env://")
torch.cuda.set_device(args.local_rank)
model = Manager(args).wrap(nn.Linear(2, 2).cuda())
"""
    assert "DDP013" not in _rules(source)
    assert "DDP013" in _rules(source.replace("self.rank = args.local_rank", "self.rank = dist.get_rank()"))


def test_barriers_in_a_context_managers_enter_and_exit_pair_up():
    """pretraining_different_gpt's `prioritize_thread`: `__enter__` waits at a barrier on the ranks that are not
    the chosen one, `__exit__` on the chosen one — every rank reaches one barrier (no DDP010). Only the `__exit__`
    half, the other ranks never meet it."""
    source = """
class prioritize_thread:
    def __init__(self, local_rank, selected_rank):
        self.local_rank = local_rank
        self.selected_rank = selected_rank

    def __enter__(self):
        if self.local_rank != self.selected_rank:
            dist.barrier()

    def __exit__(self, kind, value, traceback):
        if self.local_rank == self.selected_rank:
            dist.barrier()

dist.init_process_group("gloo")
with prioritize_thread(args.local_rank, 0):
    data = load()
model = DDP(nn.Linear(2, 2))
"""
    assert "DDP010" not in _rules(source)
    half = source.replace(
        "        if self.local_rank != self.selected_rank:\n            dist.barrier()\n", "        pass\n"
    )
    assert "DDP010" in _rules(half)


def test_a_port_set_where_nothing_makes_a_process_group_is_not_reported():
    """KoGPT2-Summarization's single-process `train.py` sets `os.environ['MASTER_PORT'] = '29500'` in its set-up
    and makes no process group: nothing reads the port (no DDP011). Its `distributed_train.py`, which makes one, is
    reported; so is a program handing the port to a framework that makes the group, or holding the worker that
    makes it where nothing is seen to call it (annotated-transformer's notebook)."""
    source = """
def init_process(config):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29500'
    torch.manual_seed(config.seed)

init_process(config)
model = nn.Linear(2, 2)
"""
    assert "DDP011" not in _rules(source)
    assert "DDP011" in _rules(source + 'dist.init_process_group("nccl")\n')
    assert "DDP011" in _rules("import lightning\n" + source)
    # a worker that makes the group, in a notebook-like script whose spawning function nothing calls
    assert "DDP011" in _rules(source + 'def worker(gpu):\n    dist.init_process_group("nccl", rank=gpu)\n')


def test_a_method_called_in_the_init_before_it_wraps_the_attribute_is_the_plain_models():
    """srgan_cosmo2d's Trainer logs `self.G_model.short_summary()` in `__init__`, then wraps `self.G_model =
    DDP(self.G_model)` further down: the call runs on the plain model (no DDP022). In another method, or after the
    wrap, the attribute holds the wrapper."""
    source = """
class Generator(nn.Module):
    def short_summary(self):
        return "G"

class Trainer:
    def __init__(self, local_rank):
        self.G_model = Generator().cuda()
        print(self.G_model.short_summary())
        self.G_model = DDP(self.G_model, device_ids=[local_rank])

    def report(self):
        return 1

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
trainer = Trainer(int(os.environ["LOCAL_RANK"]))
trainer.report()
"""
    assert "DDP022" not in _rules(source)
    after = source.replace("        print(self.G_model.short_summary())\n", "").replace(
        "device_ids=[local_rank])\n", "device_ids=[local_rank])\n        print(self.G_model.short_summary())\n"
    )
    assert "DDP022" in _rules(after)
    elsewhere = source.replace("        return 1\n", "        return self.G_model.short_summary()\n")
    assert "DDP022" in _rules(elsewhere)


def test_a_shuffling_loader_the_spawning_process_keeps_to_itself_is_no_ranks():
    """GrainGraphNN's `__main__` block makes `dummy_loader = DataLoader(..., shuffle=True)` for a warm-up pass,
    then `mp.spawn(dist_train, args=(..., train_list, ...))`: one process reads it, no rank trains on it (no
    DDP018). Handed to the ranks, every rank reads all of it."""
    source = """
import torch.multiprocessing as mp

def dist_train(rank, world_size, data):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))
    for x in data:
        model(x).sum().backward()

if __name__ == "__main__":
    dummy_loader = DataLoader(train_list[:128], batch_size=4, shuffle=True)
    for x in dummy_loader:
        nn.Linear(2, 2)(x)
    mp.spawn(dist_train, args=(2, train_list), nprocs=2, join=True)
"""
    assert "DDP018" not in _rules(source)
    assert "DDP018" in _rules(source.replace("args=(2, train_list)", "args=(2, dummy_loader)"))


def test_a_plain_state_loaded_into_the_wrapper_unless_the_load_comes_before_the_wrap():
    """CMUNeXt saves `{"net": model.module.state_dict()}` and resumes with `model.load_state_dict(checkpoint["net"])`
    after `model = DDP(model)`: the keys lack `module.` (DDP025). The DDP tutorial's Trainer loads its snapshot in
    a method its `__init__` calls before it wraps `self.model`: the plain model takes the plain keys."""
    source = """
class Trainer:
    def __init__(self, model, path):
        self.model = model
        if os.path.exists(path):
            self._load_snapshot(path)
        self.model = DDP(self.model)

    def _load_snapshot(self, path):
        snapshot = torch.load(path, weights_only=True)
        self.model.load_state_dict(snapshot["MODEL_STATE"])

    def _save_snapshot(self, path):
        torch.save({"MODEL_STATE": self.model.module.state_dict()}, path)

dist.init_process_group("gloo")
trainer = Trainer(nn.Linear(2, 2), "snap.pt")
trainer._save_snapshot("snap.pt")
"""
    assert "DDP025" not in _rules(source)
    late = source.replace(
        "            self._load_snapshot(path)\n        self.model = DDP(self.model)\n",
        "            pass\n        self.model = DDP(self.model)\n        self._load_snapshot(path)\n",
    )
    assert "DDP025" in _rules(late)
    script = """
dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
checkpoint = torch.load("best.pth", weights_only=True)
model.load_state_dict(checkpoint["net"])
torch.save({"net": model.module.state_dict(), "epoch": 1}, "best.pth")
"""
    assert "DDP025" in _rules(script)
    assert "DDP025" not in _rules(
        script.replace('model.load_state_dict(checkpoint["net"])', 'model.module.load_state_dict(checkpoint["net"])')
    )
    assert "DDP025" not in _rules(script.replace('"net": model.module.state_dict()', '"net": model.state_dict()'))


@pytest.mark.parametrize(
    "kept, found",
    [
        ('torch.load("best.pt", weights_only=True)', True),  # the file holds the plain keys
        ("copy.deepcopy(model.state_dict())", False),  # the wrapper's own state, kept in memory (FeasMPNN)
    ],
)
def test_a_whole_state_loaded_into_the_wrapper_counts_only_where_it_is_read_from_the_saved_file(kept, found):
    source = f"""
    import copy
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    best = copy.deepcopy(model.state_dict())
    for epoch in range(3):
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "best.pt")
    best = {kept}
    model.load_state_dict(best)
    """
    assert ("DDP025" in _rules(source)) is found


def test_a_name_only_the_main_block_defines_is_undefined_in_the_processes_spawn_starts():
    """GrainGraphNN's `criterion`, reached from the function `mp.spawn` starts, reads `args`, which only the
    `__main__` block assigns: spawn imports the script again without running that block, so every rank raises
    NameError (DDP026, also from inside a comprehension). Not where the name is also set at the top level, passed
    as a parameter, or where the processes are forked."""
    source = """
import torch.multiprocessing as mp

def criterion(out):
    return out.sum() * args.scale

def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))
    criterion(model(torch.randn(2, 2))).backward()

if __name__ == "__main__":
    args = parse()
    mp.spawn(worker, args=(2,), nprocs=2)
"""
    found = {(f.rule, f.line) for f in lint_source("script.py", HEADER + textwrap.dedent(source))}
    assert ("DDP026", HEADER.count("\n") + source.splitlines().index("    return out.sum() * args.scale") + 1) in found
    comprehension = source.replace("out.sum() * args.scale", "sum([o * args.scale for o in out])")
    assert "DDP026" in _rules(comprehension)
    assert "DDP026" not in _rules("args = None\n" + source)
    raised = source.replace("return out.sum() * args.scale", "raise ValueError(args.scale)")
    assert "DDP026" not in _rules(raised)  # (PointNeXt's unsupported dataset: an error either way)
    passed = source.replace("def criterion(out):", "def criterion(out, args=None):")
    assert "DDP026" not in _rules(passed)
    forked = source.replace(
        "mp.spawn(worker, args=(2,), nprocs=2)", "mp.start_processes(worker, args=(2,), nprocs=2, start_method='fork')"
    )
    assert "DDP026" not in _rules(forked)


def test_a_name_assigned_on_rank_0_only_and_read_on_every_rank_is_unbound_on_the_others():
    """GrainGraphNN's `train` sets `test_loss` under `if rank == 0:` in the epoch loop and prints it after the loop
    on every rank: UnboundLocalError on the other ranks (DDP027). Not where the name has a value before the test,
    where the other arm sets it, where the read is under the same test, or in a `try`."""
    source = """
def train(model, rank):
    for epoch in range(3):
        model(torch.randn(2, 2)).sum().backward()
        if rank == 0:
            test_loss = evaluate(model.module)
    print("loss", test_loss)

dist.init_process_group("gloo")
train(DDP(nn.Linear(2, 2)), dist.get_rank())
"""
    assert "DDP027" in _rules(source)
    assert "DDP027" not in _rules(
        source.replace("    for epoch in range(3):\n", "    test_loss = None\n    for epoch in range(3):\n")
    )
    both = source.replace(
        "            test_loss = evaluate(model.module)\n",
        "            test_loss = evaluate(model.module)\n        else:\n            test_loss = 0.0\n",
    )
    assert "DDP027" not in _rules(both)
    same_test = source.replace(
        '    print("loss", test_loss)\n', '    if rank == 0:\n        print("loss", test_loss)\n'
    )
    assert "DDP027" not in _rules(same_test)
    caught = source.replace(
        '    print("loss", test_loss)\n',
        '    try:\n        print("loss", test_loss)\n    except NameError:\n        pass\n',
    )
    assert "DDP027" not in _rules(caught)
    chain = source.replace(
        "        if rank == 0:\n            test_loss = evaluate(model.module)\n",
        "        if rank == 0:\n            test_loss = 1\n        elif rank == 1:\n            test_loss = 2\n"
        "        else:\n            raise ValueError(rank)\n",
    )
    assert "DDP027" not in _rules(chain)  # (every arm assigns or raises: coordconv's tensor ranks)
    assert "DDP027" in _rules(chain.replace("            raise ValueError(rank)\n", "            pass\n"))
    halves = source.replace(
        "        if rank == 0:\n            test_loss = evaluate(model.module)\n",
        "        if rank % 8 == 0:\n            test_loss = 1\n        if rank % 8 != 0:\n            test_loss = 2\n",
    )
    assert "DDP027" not in _rules(halves)  # (two tests that may cover every rank between them)


def test_a_group_call_in_the_process_that_spawns_the_ranks_raises_there():
    """GrainGraphNN's `__main__` block calls `dist.destroy_process_group()` after `mp.spawn(dist_train, ...)`: the
    spawning process never joined a group, so the call raises (DDP028); `dist.get_rank()` there too. Not in the
    function each process runs, not where the block makes a group itself, nor in a script that asks
    `dist.is_initialized()`."""
    source = """
import torch.multiprocessing as mp

def run(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))

if __name__ == "__main__":
    mp.spawn(run, args=(2,), nprocs=2)
    dist.destroy_process_group()
"""
    assert "DDP028" in _rules(source)
    assert "DDP028" in _rules(source.replace("dist.destroy_process_group()", "print(dist.get_rank())"))
    inside = source.replace("    dist.destroy_process_group()\n", "").replace(
        "    model = DDP(nn.Linear(2, 2))\n", "    model = DDP(nn.Linear(2, 2))\n    dist.destroy_process_group()\n"
    )
    assert "DDP028" not in _rules(inside)
    own = source.replace(
        "    mp.spawn(run, args=(2,), nprocs=2)\n",
        "    if spawn:\n        mp.spawn(run, args=(2,), nprocs=2)\n    else:\n        run(0, 1)\n",
    )
    assert "DDP028" not in _rules(own)
    asked = source.replace(
        "    dist.destroy_process_group()\n", "    if dist.is_initialized():\n        dist.destroy_process_group()\n"
    )
    assert "DDP028" not in _rules(asked)


@pytest.mark.parametrize(
    "test, found",
    [
        ('"LOCAL_RANK" in os.environ', False),  # a launcher set it: the same on every rank
        ('"RANK" in os.environ and "WORLD_SIZE" in os.environ', False),
        ('"LOCAL_RANK" not in os.environ', False),
        ('"LOCAL_RANK" in os.environ and int(os.environ["LOCAL_RANK"]) == 0', True),  # then rank 0 only
        ('int(os.environ["LOCAL_RANK"]) == 0', True),
        ('"RANK" not in os.environ or int(os.environ["RANK"]) == 0', True),  # YouReID: rank 0 where launched
    ],
)
def test_asking_whether_the_launcher_set_a_rank_variable_picks_no_ranks(test, found):
    """JaTSR's trainers end in `if "LOCAL_RANK" in os.environ: main()` (else: how to launch with torchrun): every
    process torchrun starts has the variable, so `main()`'s collectives are reached on every rank (DDP010)."""
    source = f"""
def main():
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    dist.barrier()

if __name__ == "__main__":
    if {test}:
        main()
"""
    assert ("DDP010" in _rules(source)) is found


@pytest.mark.parametrize(
    "users, found",
    [
        ('list_users("users.pt")', False),  # the program's own list, no loader, no rank: the whole list
        ("val_loader", True),  # the sharded loader
        ('list_users(f"users{rank}.pt")', True),  # each rank's own list
        ("next_users()", True),  # a call of nothing the program defines: unknown
    ],
)
def test_an_evaluation_over_a_list_the_program_builds_reads_the_whole_list(users, found):
    """DIN_v2's `evaluate_topk(eval_data=...)` on rank 0 goes over users listed by `get_topk_eval_data` (no
    loader, no sampler), beside a validation through a DistributedSampler: its hit rate is the whole list's
    (DDP017). The loop over `ks` runs no model and is not the data."""
    source = f"""
def list_users(path):
    return [torch.load(path)]

class Ranker:
    def evaluate_topk(self, users, ks=[5, 10]):
        self.model.eval()
        hits = []
        with torch.no_grad():
            for user in users:
                scores = self.model(user)
                for k in ks:
                    hits.append(float(scores.argmax() < k))
        return {{"hr": sum(hits) / len(hits)}}

def run(rank):
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    val_loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
    ranker = Ranker()
    users = None
    if rank == 0:
        users = {users.replace("rank", "rank")}
        metrics = ranker.evaluate_topk(users)
        print("HR", metrics["hr"])

if __name__ == "__main__":
    run(int(os.environ["RANK"]))
"""
    assert ("DDP017" in _rules(source)) is found


def test_a_callers_log_counts_for_the_method_its_object_runs_not_another_class_of_that_name():
    """DIN_v2 imports `RichTrainer`, whose `evaluate_topk` goes over a loader, and never makes one: its calls are
    `trainer.evaluate_topk(...)` with `trainer = SimpleDDPTrainer(...)`, whose method reads a whole list."""
    source = """
def list_users(path):
    return [torch.load(path)]

class Unused:
    def evaluate_topk(self, users):
        self.model.eval()
        hits = []
        with torch.no_grad():
            for batch in self.loader:
                hits.append(self.model(batch).mean())
        return {"hr": sum(hits)}

class Ranker:
    def evaluate_topk(self, users):
        self.model.eval()
        hits = []
        with torch.no_grad():
            for user in users:
                hits.append(self.model(user).mean())
        return {"hr": sum(hits)}

def run(rank):
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    val_loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
    ranker = Ranker()
    if rank == 0:
        metrics = ranker.evaluate_topk(list_users("users.pt"))
        print("HR", metrics["hr"])

if __name__ == "__main__":
    run(int(os.environ["RANK"]))
"""
    assert "DDP017" not in _rules(source)
    assert "DDP017" in _rules(source.replace("ranker = Ranker()", "ranker = Unused()"))


@pytest.mark.parametrize(
    "loader, found",
    [
        ("DataLoader(train_ds, batch_size=8)", True),  # STAR: the sampler made, the loader given none
        ("DataLoader(train_ds, batch_size=8, sampler=train_sampler)", False),
        ("DataLoader(train_ds, batch_size=8, sampler=None)", True),
        ("DataLoader(other_ds, batch_size=8)", False),  # another dataset's loader
        ("make_loader(train_ds, train_sampler)", False),  # handed on: used
        ("DataLoader(train_ds, **kwargs)", False),  # what `kwargs` holds is unknown
        ("DataLoader(train_ds, batch_size=8, shuffle=True)", True),  # DDP030 says it, not DDP018 as well
    ],
)
def test_a_distributed_sampler_no_loader_is_given_splits_nothing(loader, found):
    """STAR's `train_dist.py` makes `train_sampler = DistributedSampler(train_ds, ...)`, then
    `DataLoader(train_ds, batch_size=...)` with no sampler: every rank trains on the whole dataset (DDP030); telling
    that sampler its epoch (DDP002) would change nothing."""
    source = f"""
def run(rank, world_size, train_ds, other_ds, kwargs):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    train_sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank)
    train_loader = {loader}
    model = DDP(nn.Linear(2, 2))
    for epoch in range(3):
        for x in train_loader:
            model(x).sum().backward()

if __name__ == "__main__":
    mp.spawn(run, args=(2, ds, ds, {{}}), nprocs=2)
"""
    rules = _rules(source)
    assert ("DDP030" in rules) is found
    if found:
        assert "DDP002" not in rules and "DDP018" not in rules
        evaluation = source.replace("rank=rank)", "rank=rank, shuffle=False)")
        assert "DDP030" not in _rules(evaluation)  # an evaluation's sampler: reading the whole set is not wrong


@pytest.mark.parametrize(
    "body, found",
    [
        ("heads = heads.module\n    return heads[0](x).pow(2).mean()", True),  # DistillASR
        ("heads = heads.module\n    return heads.project(x).pow(2).mean()", True),
        ("heads = heads.module\n    return sum(p.sum() for p in heads.parameters())", False),  # no forward
        ("heads = heads.module\n    with torch.no_grad():\n        return heads[0](x).mean()", False),
        ("pass\n    return heads(x).pow(2).mean()", False),  # through the wrapper
        ("heads = heads.module\n    heads.eval()\n    return heads[0](x).mean()", False),  # an evaluation (CodeBERT)
    ],
)
def test_a_loss_helper_that_unwraps_the_model_it_is_given_bypasses_the_gradient_all_reduce(body, found):
    """DistillASR's `distill_loss(student, teacher, proj_layers)`: `if isinstance(proj_layers, DDP): proj_layers =
    proj_layers.module`, then `proj_layers[str(i)](...)`; the training step back-propagates the result, so the
    projections' gradients are never averaged over the ranks (DDP020)."""
    source = f"""
def distill_loss(x, heads):
    if isinstance(heads, DDP):
        {body}

def run(rank):
    dist.init_process_group("gloo")
    heads = DDP(nn.ModuleList([nn.Linear(2, 2)]))
    for x in loader:
        loss = distill_loss(x, heads)
        loss.backward()

if __name__ == "__main__":
    run(int(os.environ["RANK"]))
"""
    assert ("DDP020" in _rules(source)) is found


@pytest.mark.parametrize(
    "made, found",
    [
        ("Trainer(model)", True),  # DIN_v2: the object keeps the wrapper, rank 0 alone runs its forward
        ("Trainer(model.module)", False),  # the inner model: no collective
        ("Other(model)", False),  # a class whose `evaluate` runs no model
    ],
)
def test_a_method_of_an_object_that_keeps_the_wrapper_runs_its_forward_on_rank_0_alone(made, found):
    """DIN_v2's `trainer = SimpleDDPTrainer(model, ...)` with the DDP model, then `if is_main_process(rank):
    trainer.evaluate(valid_loader)`, whose `self.model(batch)` broadcasts rank 0's buffers while the other ranks
    wait elsewhere (DDP010)."""
    source = f"""
class Trainer:
    def __init__(self, model):
        self.model = model

    def evaluate(self, loader):
        with torch.no_grad():
            return [self.model(x) for x in loader]

class Other:
    def __init__(self, model):
        self.model = model

    def evaluate(self, loader):
        return len(loader)

def run(rank, loader):
    dist.init_process_group("gloo")
    model = DDP(nn.BatchNorm1d(2))
    trainer = {made}
    for x in loader:
        model(x).sum().backward()
        if rank == 0:
            trainer.evaluate(loader)

if __name__ == "__main__":
    run(int(os.environ["RANK"]), [])
"""
    assert ("DDP010" in _rules(source)) is found
    after = source.replace(
        "        if rank == 0:\n            trainer.evaluate(loader)\n",
        "    trainer.train_epoch_done = True\n    if rank == 0:\n        trainer.evaluate(loader)\n",
    )
    assert "DDP010" not in _rules(after)  # after the epoch loop: not the first forward after a training step


@pytest.mark.parametrize(
    "guarded, found",
    [
        ('optimizer.load_state_dict(torch.load("last.pt")["optimizer"])', True),  # protein_bert's resume
        ("scheduler.step()", True),
        ("trainer.step_scheduler(0.5)", True),  # DIN_v2: a method that steps the plateau scheduler
        ('torch.save(optimizer.state_dict(), "opt.pt")', False),  # read, not changed
        ('model.module.load_state_dict(torch.load("best.pt"))', False),  # the model, not the optimizer
        ("trainer.report()", False),
    ],
)
def test_an_optimizer_or_scheduler_changed_on_rank_0_alone_lets_the_replicas_drift(guarded, found):
    """protein_bert's `if rank == 0: optimizer.load_state_dict(...); scheduler.load_state_dict(...)` and DIN_v2's
    `if is_main_process(rank): trainer.step_scheduler(valid_auc)`: the other ranks keep their own moments or
    learning rate (DDP031), reported once per rank test."""
    source = f"""
class Trainer:
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def step_scheduler(self, metric):
        self.scheduler.step(metric)

    def report(self):
        print(self.scheduler)

def run(rank):
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    trainer = Trainer(scheduler)
    for epoch in range(3):
        model(torch.ones(2)).sum().backward()
        optimizer.step()
        if rank == 0:
            {guarded}
            {guarded}

if __name__ == "__main__":
    run(int(os.environ["RANK"]))
"""
    found_lines = [f.line for f in lint_source("script.py", HEADER + textwrap.dedent(source)) if f.rule == "DDP031"]
    assert len(found_lines) == (1 if found else 0)
    both = source.replace(
        f"        if rank == 0:\n            {guarded}\n            {guarded}\n", f"        {guarded}\n"
    )
    assert "DDP031" not in _rules(both)  # every rank


@pytest.mark.parametrize(
    "guarded, after, found",
    [
        ("run_epoch(model, loader, None)", "", False),  # fast-autoaugment: evaluation, no optimizer given
        ("run_epoch(model, loader, optimizer)", "", True),
        (
            'optimizer.load_state_dict(torch.load("o.pt"))',
            "hvd.broadcast_optimizer_state(optimizer, root_rank=0)",
            False,
        ),
        ('optimizer.load_state_dict(torch.load("o.pt"))', "dist.broadcast(epoch_t, 0)", True),  # something else
        ("optimizer.step()", "broadcast_model(model)", False),  # brain-agent: rank 0 steps, then sends its weights
    ],
)
def test_rank_0_optimizer_work_that_steps_nothing_or_is_broadcast_after_is_no_drift(guarded, after, found):
    """fast-autoaugment's `if is_master: run_epoch(model, validloader, criterion, None, ...)` steps no optimizer;
    Horovod's examples load the optimizer on rank 0, then `hvd.broadcast_optimizer_state(optimizer, root_rank=0)`."""
    source = f"""
def broadcast_model(model):
    for p in model.parameters():
        dist.broadcast(p.data, 0)

def run_epoch(model, loader, optimizer):
    for x in loader:
        loss = model(x).sum()
        if optimizer:
            loss.backward()
            optimizer.step()

def run(rank, loader, epoch_t):
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if rank == 0:
        {guarded}
    {after}
    run_epoch(model, loader, optimizer)

if __name__ == "__main__":
    run(int(os.environ["RANK"]), [], None)
"""
    assert ("DDP031" in _rules(source)) is found


def test_a_parameter_set_on_rank_0_only_further_down_is_the_callers_value_above():
    """tacotron2's `train(..., checkpoint_path, ...)` tests `if checkpoint_path is not None:` to resume, and only
    later, on rank 0, sets `checkpoint_path = os.path.join(...)` to save: the test above picks no ranks."""
    source = """
def train(checkpoint_path, rank, model, optimizer):
    if checkpoint_path is not None:
        dist.barrier()
    for epoch in range(3):
        model(torch.ones(2)).sum().backward()
        optimizer.step()
        if rank == 0:
            checkpoint_path = f"checkpoint_{epoch}"
            torch.save(model.module.state_dict(), checkpoint_path)

if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    train(None, dist.get_rank(), model, torch.optim.SGD(model.parameters(), lr=0.1))
"""
    assert "DDP010" not in _rules(source)
    looped = source.replace("    if checkpoint_path is not None:\n        dist.barrier()\n", "").replace(
        "        optimizer.step()\n",
        "        optimizer.step()\n        if checkpoint_path is not None:\n            dist.barrier()\n",
    )
    assert "DDP010" in _rules(looped)  # in the loop, after rank 0 set it: on rank 0 only


@pytest.mark.parametrize(
    "between, found",
    [
        ("", True),  # UniTabE: the scaled backward in one helper, the clip in another
        ("            self.scaler.unscale_(self.optimizer)\n", False),
    ],
)
def test_clipping_after_a_helper_that_back_propagates_a_scaled_loss_clips_scaled_gradients(between, found):
    """UniTabE's trainer: `self.backward_loss(loss)` runs `self.grad_scaler.scale(loss).backward()`, then
    `self.gradient_clip()` runs `clip_grad_norm_` with no `unscale_` anywhere (DDP009)."""
    source = f"""
class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.cuda.amp.GradScaler()

    def backward_loss(self, loss):
        self.scaler.scale(loss).backward()

    def gradient_clip(self):
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def train(self, loader):
        for x in loader:
            loss = self.model(x).sum()
            self.backward_loss(loss)
{between}            self.gradient_clip()
            self.scaler.step(self.optimizer)
            self.scaler.update()

if __name__ == "__main__":
    dist.init_process_group("nccl")
    model = DDP(nn.Linear(2, 2))
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1)).train([])
"""
    assert ("DDP009" in _rules(source)) is found


@pytest.mark.parametrize(
    "imported, found",
    [
        ("from torch.nn.parallel import DistributedDataParallel as DDP", True),
        ("from apex.parallel import DistributedDataParallel as DDP", False),  # ViT-pytorch-style `dist_main.py`
    ],
)
def test_apexs_wrapper_runs_no_collective_in_its_forward(imported, found):
    """OnlinePruductRetrieval's `dist_main.py` evaluates its apex `DDP(model, message_size=...)` on rank 0 alone:
    apex all-reduces in the backward and broadcasts nothing in the forward, so that evaluation does not hang."""
    source = f"""import torch
import torch.distributed as dist
from torch import nn
{imported}

def valid(model, loader):
    with torch.no_grad():
        return [model(x) for x in loader]

if __name__ == "__main__":
    dist.init_process_group("nccl")
    model = DDP(nn.BatchNorm1d(2))
    for step in range(10):
        model(torch.ones(2, 2)).sum().backward()
        if dist.get_rank() == 0:
            valid(model, [])
"""
    assert ("DDP010" in {f.rule for f in lint_source("script.py", source)}) is found


@pytest.mark.parametrize(
    "wrap, found",
    [
        ("train_loader = shard(train_loader)", False),  # SpikeReg: rebuilt with a DistributedSampler
        ("print(len(train_loader))", True),  # never rebuilt
    ],
)
def test_a_shuffling_loader_a_helper_rebuilds_with_a_distributed_sampler_is_the_single_process_one(wrap, found):
    """SpikeReg's `create_oasis_loaders` returns `DataLoader(train_ds, shuffle=True, ...)`; its caller hands the
    loaders to `_wrap_loaders_for_distributed`, whose nested `rebuild(loader)` makes `DistributedSampler(
    loader.dataset, ...)` and a new loader when WORLD_SIZE > 1 (DDP018)."""
    source = f"""
def make_loaders(ds):
    train_loader = DataLoader(ds, shuffle=True, batch_size=2)
    return train_loader

def shard(loader):
    def rebuild(one):
        sampler = DistributedSampler(one.dataset, shuffle=True)
        return DataLoader(one.dataset, sampler=sampler, batch_size=2)
    return rebuild(loader)

def run(ds):
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    train_loader = make_loaders(ds)
    {wrap}
    for epoch in range(2):
        train_loader.sampler.set_epoch(epoch)
        for x in train_loader:
            model(x).sum().backward()

if __name__ == "__main__":
    run(None)
"""
    assert ("DDP018" in _rules(source)) is found


@pytest.mark.parametrize(
    "correction, found",
    [
        ("        if i == 0 and rank < padded:\n            total -= 1\n", False),  # DejaVid
        ("        if i == 0 and rank == 0:\n            total -= 1\n", True),  # one rank, not the padded ones
        ("", True),
    ],
)
def test_an_evaluation_that_takes_the_padded_samples_off_before_reducing_counts_each_once(correction, found):
    """DejaVid's `engine_dist.py`: `padded = sampler.total_size - len(dataset)`, and on the ranks below that count
    the first sample of the first batch (the padding's repeat) comes off the counts before `dist.reduce` (DDP016)."""
    source = f"""
@torch.no_grad()
def evaluate(model, loader, rank, padded):
    model.eval()
    correct, total = torch.zeros(1), torch.zeros(1)
    for i, (x, y) in enumerate(loader):
        correct = (model(x).argmax(1) == y).sum()
        total = torch.tensor(len(y))
{correction}        dist.reduce(total, dst=0)
    return correct / total

if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2, 2))
    sampler = DistributedSampler(val_set, shuffle=False)
    loader = DataLoader(val_set, sampler=sampler)
    padded = sampler.total_size - len(val_set)
    print(evaluate(model, loader, dist.get_rank(), padded))
"""
    assert ("DDP016" in _rules(source)) is found


@pytest.mark.parametrize(
    "step, found",
    [
        # UniTabE's `train`: tasks skipped on the rank's own NaN loss, the backward only `if loss_flag:`
        (
            "loss, flag = 0.0, False\n"
            "for task in tasks:\n"
            "    result = model(x, task)\n"
            "    if torch.isnan(result['loss']):\n"
            "        continue\n"
            "    flag = True\n"
            "    loss = loss + result['loss']\n"
            "if flag:\n"
            "    self.backward_loss(loss)\n",
            True,
        ),
        (  # the same after an out-of-memory error of the rank's own
            "loss, flag = 0.0, False\n"
            "for task in tasks:\n"
            "    try:\n"
            "        result = model(x, task)\n"
            "    except RuntimeError:\n"
            "        continue\n"
            "    flag = True\n"
            "    loss = loss + result['loss']\n"
            "if flag:\n"
            "    self.backward_loss(loss)\n",
            True,
        ),
        (  # `train_bp_immediately`: the backward through the helper inside the task loop
            "for task in tasks:\n"
            "    result = model(x, task)\n"
            "    if torch.isnan(result['loss']):\n"
            "        continue\n"
            "    self.backward_loss(result['loss'])\n",
            True,
        ),
        (  # a task the batch does not hold: not a rank's failure
            "loss, flag = 0.0, False\n"
            "for task in tasks:\n"
            "    if task not in x:\n"
            "        continue\n"
            "    flag = True\n"
            "    loss = loss + model(x, task)['loss']\n"
            "if flag:\n"
            "    self.backward_loss(loss)\n",
            False,
        ),
        (  # a NaN test of something that is no loss, and the same on every rank
            "for task in tasks:\n"
            "    result = model(x, task)\n"
            "    if torch.isnan(self.lr):\n"
            "        continue\n"
            "    self.backward_loss(result['out'])\n",
            False,
        ),
    ],
)
def test_a_task_skipped_on_a_ranks_own_failure_before_a_helpers_backward_leaves_the_others_waiting(step, found):
    """UniTabE's three training loops skip a task on the rank's own NaN loss or out-of-memory error, and either
    back-propagate through `self.backward_loss(...)` only `if loss_flag:` after the task loop, or call it inside
    the loop after the test: a rank that skips does not join the gradient all-reduce (DDP014)."""
    source = f"""
class Trainer:
    def backward_loss(self, loss):
        loss.backward()

    def train(self, model, loader, tasks):
        for x in loader:
{textwrap.indent(step, "            ")}
if __name__ == "__main__":
    dist.init_process_group("nccl")
    model = DDP(nn.Linear(2, 2))
    Trainer().train(model, DataLoader(ds, sampler=DistributedSampler(ds)), ["a"])
"""
    assert ("DDP014" in _rules(source)) is found


@pytest.mark.parametrize(
    "read, found",
    [
        ("load(optimizer=model.optimizer, scheduler=model.scheduler)", True),  # Superpoints_Registration's resume
        ("load(optimizer=model.module.optimizer)", False),  # the inner model's
        ("load(device=model.device_ids)", False),  # the wrapper's own
        ("load(layer=model.encoder)", False),  # a submodule `__init__` makes: not told apart here
        ("model.optimizer = None", False),  # set on the wrapper, not read
        ("model.optimizer = None\n    load(optimizer=model.optimizer)", False),  # LLM-SRec: the wrapper's own now
    ],
)
def test_an_attribute_of_the_model_class_read_on_the_wrapper_raises(read, found):
    """Superpoints_Registration's `GenericModel(torch.nn.Module)` sets `self.optimizer` in `configure_optimizers`;
    the trainer wraps the model in DDP and then reads `model.optimizer` to resume: AttributeError (DDP022), once
    for the statement."""
    source = f"""
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)
        self.optimizer = None
        self.scheduler = None

    def configure_optimizers(self):
        self.optimizer = torch.optim.AdamW(self.parameters())

def fit(model, local_rank):
    model.configure_optimizers()
    model = DDP(model, device_ids=[local_rank])
    {read}

if __name__ == "__main__":
    dist.init_process_group("nccl")
    fit(Net(), int(os.environ["LOCAL_RANK"]))
"""
    found_lines = [f.line for f in lint_source("script.py", HEADER + textwrap.dedent(source)) if f.rule == "DDP022"]
    assert len(found_lines) == (1 if found else 0)

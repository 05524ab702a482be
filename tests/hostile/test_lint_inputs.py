"""`ddptrain lint` and `--fix` on hostile inputs: files it must not damage (links, line endings, encodings, modes,
read-only files, a file edited meanwhile) and folders that could trap it (import cycles, imports climbing out of
the folder, a link loop, undecodable files)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from ddptrain.tools.lint import run_lint

from ..tools.test_lint_syspath import SAVER, _repository

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "lint_samples" / "cases"
DDP = "import torch.distributed as dist\ndist.init_process_group('gloo')\n"


def test_fix_keeps_line_endings_encoding_mode_and_writes_through_a_link(tmp_path):
    real = tmp_path / "real" / "train.py"
    real.parent.mkdir()
    text = (CASES / "ddp011_port_literal_mistake.py").read_text().replace("\n", "\r\n")
    text = text.replace('"""ddptrain', '"""caf\u00e9: ddptrain', 1)
    real.write_bytes(text.encode("utf-8"))
    real.chmod(0o750)
    link = tmp_path / "train.py"
    link.symlink_to(real)
    assert run_lint([str(link)], fix=True) == 0
    assert link.is_symlink()  # the link is kept; the file it points to is fixed
    after = real.read_bytes()
    assert after.count(b"\r\n") == text.count("\r\n") and b"\n" not in after.replace(b"\r\n", b"")
    assert b'os.environ.setdefault("MASTER_PORT", "12355")' in after and "caf\u00e9".encode() in after
    assert stat.S_IMODE(real.stat().st_mode) == 0o750
    assert not list(tmp_path.rglob("*.ddptrain-fix"))


def test_a_file_changed_while_being_fixed_is_left_alone(tmp_path, monkeypatch, capsys):
    import ddptrain.tools.lint as lint

    script = tmp_path / "train.py"
    shutil.copy(CASES / "ddp011_port_literal_mistake.py", script)
    real_fix_paths = lint.fix_paths

    def edited_meanwhile(paths, rules=None):
        result = real_fix_paths(paths, rules)
        with open(script, "a") as handle:
            handle.write("# the user's edit\n")
        return result

    monkeypatch.setattr(lint, "fix_paths", edited_meanwhile)
    assert run_lint([str(script)], fix=True) == 2
    assert script.read_text().endswith("# the user's edit\n") and 'os.environ["MASTER_PORT"]' in script.read_text()
    assert "changed while it was being fixed" in capsys.readouterr().err


def test_a_read_only_file_is_not_fixed(tmp_path, capsys):
    script = tmp_path / "train.py"
    shutil.copy(CASES / "ddp011_port_literal_mistake.py", script)
    before = script.read_bytes()
    script.chmod(0o444)
    try:
        assert run_lint([str(script)], fix=True) == 2
        assert script.read_bytes() == before
        assert "read-only; left as it is" in capsys.readouterr().err
    finally:
        script.chmod(0o644)


def test_an_import_cycle_a_climbing_import_and_a_link_loop_end_in_findings(tmp_path, capsys):
    outside = tmp_path / "outside.py"
    outside.write_text(DDP + "import os\nos.environ['MASTER_PORT'] = '1'\n")  # must not be read: not in the folder
    folder = tmp_path / "project"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "a.py").write_text(DDP + "from . import b\nfrom .... import outside\n")
    (folder / "pkg" / "b.py").write_text("from . import a\nimport torch\ntorch.cuda.device('cuda:0')\n")
    (folder / "pkg" / "loop").symlink_to(folder / "pkg", target_is_directory=True)
    (folder / "run.sh").write_text("python ../outside.py\n")
    assert run_lint([str(folder)], as_json=True) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] == []
    assert not any("outside" in f["file"] for f in report["findings"])
    assert all("outside" not in path for program in report["programs"] for path in program)


def test_a_file_that_is_not_utf8_is_reported_and_the_rest_linted(tmp_path, capsys):
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\n".encode("latin-1"))
    (tmp_path / "train.py").write_text(DDP + "import os\nos.environ['MASTER_PORT'] = '1'\n")
    assert run_lint([str(tmp_path)], as_json=True) == 2
    report = json.loads(capsys.readouterr().out)
    assert any("latin1.py: cannot parse" in error for error in report["errors"])
    assert [f["rule"] for f in report["findings"]] == ["DDP011"]


def test_a_file_that_starts_with_a_byte_order_mark_is_linted_and_fixed_with_it_kept(tmp_path, capsys):
    """Editors on Windows save UTF-8 with a byte-order mark; Python runs such a file, so lint reads it (it said
    "cannot parse" and exited 2), and --fix keeps the mark and every other byte."""
    text = (CASES / "ddp002_no_set_epoch_mistake.py").read_text()
    script = tmp_path / "train.py"
    script.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert run_lint([str(tmp_path)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] == [] and [f["rule"] for f in report["findings"]] == ["DDP002"]
    assert run_lint([str(script)], fix=True) == 0
    after = script.read_bytes()
    assert after.startswith(b"\xef\xbb\xbf") and after.count(b"\xef\xbb\xbf") == 1
    assert b".set_epoch(epoch)" in after
    capsys.readouterr()
    assert run_lint([str(script)], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_huge_strings_and_deep_inheritance_are_read_in_bounded_time(tmp_path, capsys):
    """A megabyte-long 'tcp://...' string (the port pattern must not backtrack on it) and a chain of 300 classes,
    each the base of the next (class reachability follows subclasses): read, one finding, no recursion error."""
    import time

    chain = "\n".join(f"class C{i}(C{i - 1}):\n    pass" for i in range(1, 300))
    source = (
        DDP
        + "LONG = 'tcp://"
        + "a:1" * 300_000
        + "x'\n"
        + "class C0:\n    def save(self):\n        pass\n"
        + chain
        + "\nimport os\nos.environ['MASTER_PORT'] = '12355'\n"
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    started = time.monotonic()
    assert run_lint([str(script)], as_json=True) == 0
    assert time.monotonic() - started < 30  # seconds; a backtracking pattern takes minutes
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["rule"], f["line"]) for f in findings] == [("DDP011", source.count("\n"))]


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path, monkeypatch, capsys):
    """Folders of different repositories are read side by side in forked workers (--jobs); one killed meanwhile
    (the system's out-of-memory killer) ends the command with a message naming the fix, not a wait forever."""
    import os
    import signal

    import ddptrain.tools.lint as lint

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.py").write_text(DDP)
    parent = os.getpid()
    read_group = lint._lint_group

    def killed_in_a_worker(group, rules):
        if os.getpid() != parent and group[0].endswith("two"):
            os.kill(os.getpid(), signal.SIGKILL)
        return read_group(group, rules)

    monkeypatch.setattr(lint, "_lint_group", killed_in_a_worker)
    assert run_lint([str(tmp_path / "one"), str(tmp_path / "two")], jobs=2) == 2
    assert "a lint worker process ended without its report" in capsys.readouterr().err
    assert run_lint([str(tmp_path / "one"), str(tmp_path / "two")], jobs=1) == 0  # the fix the message names


def test_installed_packages_and_far_away_folders_put_on_sys_path_are_not_read(tmp_path, capsys):
    """`sys.path.insert(0, '/usr/lib/python3/dist-packages')` or a folder far above the repository would make
    lint read installed libraries (torch: thousands of files): left to Python."""
    far = tmp_path / "site-packages" / "utils"
    far.mkdir(parents=True)
    (far / "saver.py").write_text(SAVER)
    repository = tmp_path / "a" / "b" / "c" / "d" / "repo"
    script = _repository(repository, f"import sys\nsys.path.insert(0, {str(tmp_path / 'site-packages')!r})\n")
    (repository / "lib" / "utils" / "saver.py").unlink()
    assert run_lint([str(script)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "_init_paths.py"]


def test_helpers_that_all_call_one_another_are_read_in_bounded_time(tmp_path, capsys):
    """Forty evaluation helpers, each calling all the others (whether any combines over ranks is asked through every
    call, four levels deep): each is read once, the command ends and the shard's unreduced metric is found."""
    import time

    names = [f"helper{i}" for i in range(40)]
    calls = "\n".join(f"        {name}(model, loader)" for name in names)
    helpers = "\n".join(
        f"def {name}(model, loader):\n    model.eval()\n    if loader is None:\n{calls}\n    return 0\n"
        for name in names
    )
    source = (
        DDP
        + "from torch.utils.data import DataLoader, DistributedSampler\n"
        + helpers
        + "def evaluate(model, loader):\n    model.eval()\n    acc = helper0(model, loader)\n"
        + "    print('val accuracy', acc)\n"
        + "if __name__ == '__main__':\n    dist.init_process_group('gloo')\n"
        + "    evaluate(model, DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)))\n"
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    started = time.monotonic()
    assert run_lint([str(script)], as_json=True) == 0
    assert time.monotonic() - started < 30  # seconds; read once per path, it takes hours
    findings = json.loads(capsys.readouterr().out)["findings"]
    line = source.splitlines().index("    print('val accuracy', acc)") + 1
    assert ("DDP017", line) in [(f["rule"], f["line"]) for f in findings]


def test_classes_that_inherit_from_each_other_end_the_method_lookup(tmp_path, capsys):
    """`class A(B)` and `class B(A)` (an error only when Python runs it) with `self.metric = A()` and
    `self.metric.update(...)` in an evaluation: the lookup of `update` through the bases ends, the command too."""
    source = (
        DDP
        + "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        + "class A(B):\n    pass\nclass B(A):\n    pass\n"
        + "class Other:\n    def update(self, pred, label):\n        pass\n"  # a method of that name elsewhere
        + "class Runner:\n    def __init__(self):\n        self.metric = A()\n"
        + "    def validate(self, model, loader):\n        model.eval()\n"
        + "        for x, y in loader:\n            self.metric.update(model(x), y)\n"
        + "        print('val accuracy', self.metric.accuracy)\n"
        + "if __name__ == '__main__':\n"
        + "    loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))\n"
        + "    Runner().validate(model, loader)\n"
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    assert run_lint([str(script)], as_json=True) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    line = source.splitlines().index("        print('val accuracy', self.metric.accuracy)") + 1
    assert ("DDP017", line) in [(f["rule"], f["line"]) for f in findings]


def test_config_files_that_loop_are_huge_or_undecodable_are_skipped_not_followed(tmp_path, capsys):
    """DDP011 reads the repository's YAML files for a configured rendezvous port: a folder link back to the root
    is not followed, a file over 1 MB or of binary junk is skipped or read as far as it decodes, and the port in
    the one readable config is still found."""
    from ..tools.test_lint_configs import TRAINER

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "trainer.py").write_text(TRAINER)
    (repo / "config").mkdir()
    (repo / "config" / "loop").symlink_to(repo, target_is_directory=True)
    (repo / "config" / "huge.yaml").write_text("dist_config:\n  dist_url: tcp://h:12345\n" + "# x\n" * 300_000)
    (repo / "config" / "junk.yml").write_bytes(b"\xff\xfe\x00dist_config:\n\x00\x80  dist_url: \xc3\n" * 1000)
    (repo / "config" / "link.yaml").symlink_to(repo / "config" / "huge.yaml")
    assert run_lint([str(repo / "trainer.py")], as_json=True) == 0
    assert [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DDP011"] == []
    (repo / "config" / "real.yaml").write_text("dist_config:\n  dist_url: 'tcp://127.0.0.1:23456'\n")
    assert run_lint([str(repo / "trainer.py")], as_json=True) == 0
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DDP011"]
    assert [(Path(f["file"]).name, f["line"]) for f in found] == [("trainer.py", 10)]


def test_json_configs_nested_past_the_limit_or_broken_are_skipped(tmp_path, capsys):
    """A JSON file nested 10,000 deep (past Python's recursion limit), one cut off mid-way and one that is a list:
    lint ends, reads none of them as a config, and finds the port of the real one."""
    from ..tools.test_lint_configs import TRAINER

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "trainer.py").write_text(TRAINER)
    (repo / "deep.json").write_text('{"dist_config": ' * 10_000 + '{"dist_url": "tcp://h:12345"}' + "}" * 10_000)
    (repo / "cut.json").write_text('{"dist_config": {"dist_url": "tcp://h:12345"')
    (repo / "list.json").write_text('[{"dist_config": {"dist_url": "tcp://h:12345"}}]')
    assert run_lint([str(repo / "trainer.py")], as_json=True) == 0
    assert [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DDP011"] == []
    (repo / "real.json").write_text('{"dist_config": {"dist_url": "tcp://h:12345"}}')
    assert run_lint([str(repo / "trainer.py")], as_json=True) == 0
    assert [f["line"] for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DDP011"] == [10]


def test_a_fifo_among_the_config_files_and_launch_scripts_does_not_block(tmp_path, capsys):
    """A FIFO named `config.yaml` or `run.sh` in the repository (no writer: reading it would wait forever) is not
    read; the real launch script beside it still is."""
    from ..tools.test_lint_configs import PER_NODE_SAVE

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "train.py").write_text(PER_NODE_SAVE)
    os.mkfifo(repo / "config.yaml")
    os.mkfifo(repo / "run.sh")
    (repo / "launch.sh").write_text("torchrun --standalone --nproc_per_node=8 train.py\n")
    assert run_lint([str(repo / "train.py")], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []  # one node: no DDP019
    assert run_lint([str(repo)], as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_a_fifo_config_where_the_program_reads_its_rendezvous_address_does_not_block(tmp_path, capsys):
    """The trainer takes `init_method` from its configuration, so DDP011 reads the repository's YAML files: a FIFO
    named `default.yaml` among them (no writer) is not opened to wait, and the real config's port is still found."""
    from ..tools.test_lint_configs import TRAINER

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "trainer.py").write_text(TRAINER)
    (repo / "config").mkdir()
    os.mkfifo(repo / "config" / "default.yaml")
    (repo / "config" / "real.yaml").write_text("dist_config:\n  dist_url: 'tcp://127.0.0.1:23456'\n")
    assert run_lint([str(repo / "trainer.py")], as_json=True) == 0
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DDP011"]
    assert [(Path(f["file"]).name, f["line"]) for f in found] == [("trainer.py", 10)]


def test_a_fifo_or_a_huge_script_beside_the_trainer_is_not_read_for_the_wrappers_prefix(tmp_path, capsys):
    """DDP007 reads the scripts beside the entry point for one that strips 'module.': a FIFO there (no writer) is
    not opened to wait, a script over 1 MB is skipped, and the finding stands."""
    from ..tools.test_lint_configs import RENAME, WRAPPER_SAVE

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "train.py").write_text(WRAPPER_SAVE)
    os.mkfifo(repo / "pipe.py")
    (repo / "huge.py").write_text(RENAME + "#" * (2 << 20))
    assert run_lint([str(repo / "train.py")], as_json=True) == 0
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP007"]


def test_a_fifo_module_in_the_folder_sys_path_0_leads_to_does_not_block(tmp_path, capsys):
    """tools/train.py puts its parent folder on the path (`os.path.dirname(sys.path[0])`) and imports `helpers`
    from there, which is a FIFO with no writer: skipped (no module read from it), the real module beside it read."""
    (tmp_path / "tools").mkdir()
    os.mkfifo(tmp_path / "helpers.py")
    (tmp_path / "saving.py").write_text(SAVER)
    script = tmp_path / "tools" / "train.py"
    script.write_text(
        "import os, sys\nsys.path.append(os.path.dirname(sys.path[0]))\nimport torch.distributed as dist\n"
        "from helpers import log\nfrom saving import save\n\n"
        'if __name__ == "__main__":\n    dist.init_process_group("gloo")\n    save(model)\n'
    )
    assert run_lint([str(script)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["programs"][0]] == ["train.py", "saving.py"]
    assert [(Path(f["file"]).name, f["rule"]) for f in report["findings"]] == [("saving.py", "DDP015")]


def test_objects_guarded_by_each_other_and_models_built_of_each_other_end(tmp_path, capsys):
    """Two trainers each made under the other's `if self.logger is not None:`, a model class that builds itself,
    and a class hierarchy that loops (`class A(B)`, `class B(A)`) overriding a method: the rank-test, buffer and
    override lookups end (each is depth-bounded), and the one sure mistake, a save on every rank, is still found."""
    source = (
        DDP
        + "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "class A(B):\n    def run(self):\n        pass\nclass B(A):\n    def run(self):\n        pass\n"
        + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = Net()\n"
        + "class First:\n    def __init__(self, logger=None):\n        self.logger = logger\n"
        + "    def step(self):\n        if self.logger is not None:\n            Second(logger=self.logger).step()\n"
        + "class Second:\n    def __init__(self, logger=None):\n        self.logger = logger\n"
        + "    def step(self):\n        if self.logger is not None:\n            First(logger=self.logger).step()\n"
        + "model = DDP(Net())\n"
        + "A().run()\nFirst(logger=print).step()\nSecond().step()\n"
        + "model(torch.ones(1)).sum().backward()\n"
        + "torch.save(model.module.state_dict(), 'model.pt')\n"
    )
    assert ("DDP015", _line(source, "torch.save(model.module.state_dict(), 'model.pt')")) in _found(
        tmp_path, source, capsys
    )


def test_logged_names_built_from_each_other_and_helpers_asked_for_splits_by_themselves_end(tmp_path, capsys):
    """A logged figure traced back through assignments that loop (`info = results`, `results = info`), a loader
    helper that asks itself for the "val" split, and a trainer whose `self.ddp` flag its own method constructs:
    each lookup is bounded, the run ends, and the shard's logged metric is still found (DDP017)."""
    source = (
        DDP
        + "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from torch.utils.data import DataLoader, DistributedSampler\n"
        + "def build(split, depth=0):\n    eval_sampler = DistributedSampler(ds)\n"
        + "    if depth < 3:\n        build('val', depth + 1)\n    return DataLoader(ds, sampler=eval_sampler)\n"
        + "class Trainer:\n    def __init__(self, ddp=False):\n        self.ddp = ddp\n"
        + "    def again(self):\n        if self.ddp:\n            Trainer(ddp=self.ddp).again()\n"
        + "def evaluate(model, loader):\n    model.eval()\n    eval_loss = 0.0\n    results = {}\n"
        + "    with torch.no_grad():\n        for x in loader:\n            eval_loss += model(x).item()\n"
        + "    info = results\n    results = info\n    results['loss'] = eval_loss\n    print(info)\n"
        + "model = DDP(net)\nTrainer().again()\nevaluate(model, build('val'))\n"
        + "model(torch.ones(1)).sum().backward()\n"
    )
    assert ("DDP017", _line(source, "    print(info)")) in _found(tmp_path, source, capsys)


def _found(tmp_path: Path, source: str, capsys) -> list:
    """(rule, line) of what `ddptrain lint` reports on `source` saved as one script."""
    script = tmp_path / "train.py"
    script.write_text(source)
    run_lint([str(script)], as_json=True)
    return [(f["rule"], f["line"]) for f in json.loads(capsys.readouterr().out)["findings"]]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


def test_writers_without_a_path_and_addresses_that_are_no_host_are_read_without_a_guess(tmp_path, capsys):
    """Odd shapes of what DDP015 and DDP013 now read: `plt.savefig()` and `save_image(x)` with no path, a path
    given through `**kwargs`, `MASTER_ADDR` set to a number or to an option, a sampler name rebound in a tuple.
    Nothing is reported for a write whose path is unknown, an address that is not this host keeps the program
    multi-node (DDP013 still found), and the one real concurrent write is still found."""
    source = (
        DDP
        + "import os\nimport torch\nimport matplotlib.pyplot as plt\nfrom torchvision.utils import save_image\n"
        + "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from torch.utils.data import DataLoader, DistributedSampler\n"
        + "os.environ['MASTER_ADDR'] = 5\nos.environ['MASTER_ADDR'] = args.addr\n"
        + "torch.cuda.set_device(dist.get_rank())\n"
        + "model = DDP(net)\n"
        + "sampler = DistributedSampler(ds, shuffle=train)\nsampler, other = sampler, None\n"
        + "loader = DataLoader(ds, sampler=sampler if train else None)\n"
        + "plt.savefig()\nsave_image(x)\nsave_image(x, **paths)\nplt.savefig(fname=None)\n"
        + "save_image(x, 'grid.png')\n"
        + "model(torch.ones(1)).sum().backward()\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP015", _line(source, "save_image(x, 'grid.png')")) in found
    assert [rule for rule, _ in found].count("DDP015") == 1
    assert ("DDP013", _line(source, "torch.cuda.set_device(dist.get_rank())")) in found


def test_splits_and_seeds_in_odd_shapes_are_read_without_a_guess(tmp_path, capsys):
    """DDP023's inputs in shapes a real program may hold: `random_split(*parts)` and `random_split(**split)` (a
    generator may be among them), `random_split()`, a seed call with no argument, a seeding helper that calls itself
    and is given a rank's seed. The run ends, the odd splits are left alone, and the plain split is found once."""
    source = (
        DDP
        + "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from torch.utils.data import random_split\n"
        + "def set_seed(seed, depth=0):\n    if depth < 3:\n        set_seed(seed, depth + 1)\n"
        + "    torch.manual_seed(seed)\n"
        + "torch.manual_seed()\nset_seed(args.seed + dist.get_rank())\n"
        + "model = DDP(net)\n"
        + "a = random_split(*parts)\nb = random_split()\nc = random_split(**split)\n"
        + "train_set, val_set = random_split(dataset, [900, 100])\n"
        + "model(torch.ones(1)).sum().backward()\n"
    )
    found = _found(tmp_path, source, capsys)
    line = _line(source, "train_set, val_set = random_split(dataset, [900, 100])")
    assert [hit for hit in found if hit[0] == "DDP023"] == [("DDP023", line)]


def test_port_defaults_passed_around_in_circles_and_odd_metric_hooks_end(tmp_path, capsys):
    """The twenty-first set's inputs in shapes that could trap a reader: a port helper that passes its port to
    itself, `fire.Fire()` with no function, `MetricsLambda()` with no hook or a lambda, an `or` of a call and a
    subscript, a gathered result sliced with a step. The run ends; the fire command's fixed port is still found
    once, at its default."""
    source = (
        DDP
        + "import os\nimport fire\nimport torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from ignite.metrics import MetricsLambda\n"
        + "def setup(port, depth=0):\n    if depth < 3:\n        setup(port=port, depth=depth + 1)\n"
        + "    os.environ['MASTER_PORT'] = str(port)\n"
        + "def run(hps='teeny', port=29500):\n    setup(port=port)\n"
        + "def gather_all(x):\n    out = [x]\n    dist.all_gather(out, x)\n    return torch.cat(out)[::2]\n"
        + "model = DDP(net)\nMetricsLambda()\nMetricsLambda(lambda v: v, metric)\nfire.Fire()\n"
        + "if check() or flags['rank']:\n    torch.save(model.module.state_dict(), 'last.pt')\n"
        + "model(torch.ones(1)).sum().backward()\n"
        + "if __name__ == '__main__':\n    fire.Fire(run)\n"
    )
    found = _found(tmp_path, source, capsys)
    assert [hit for hit in found if hit[0] == "DDP011"] == [
        ("DDP011", _line(source, "def run(hps='teeny', port=29500):"))
    ]


def test_apply_calls_and_log_helpers_in_odd_shapes_are_read_without_a_guess(tmp_path, capsys):
    """The twenty-second set's inputs in shapes that could mislead: `df.apply(f)` on a DataFrame, a gather layer
    whose `forward` calls itself, a print helper given `*args`, `DataParallel` under an `or` of a world-size test.
    The run ends; the DataFrame's `apply` combines nothing, so the shard's logged accuracy is still found."""
    source = (
        DDP
        + "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from torch.utils.data import DataLoader, DistributedSampler\n"
        + "class Loop(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        + "        return Loop.apply(x)\n"
        + "def print0(*args):\n    print(*args)\n"
        + "def evaluate(model):\n    model.eval()\n    correct = 0\n"
        + "    with torch.no_grad():\n"
        + "        for x, y in DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False)):\n"
        + "            correct += (model(x).argmax(1) == y).sum().item()\n"
        + "    table = df.apply(str)\n    acc = correct / len(val_set)\n    print0('val acc', acc)\n"
        + "model = DDP(net)\n"
        + "if world_size > 1 or debug:\n    helper = nn.DataParallel(helper)\n"
        + "evaluate(model)\nmodel(torch.ones(1)).sum().backward()\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP017", _line(source, "    print0('val acc', acc)")) in found


def test_imports_by_name_getattrs_relative_paths_and_choices_in_odd_shapes_end_in_the_repository(tmp_path, capsys):
    """The twenty-third set's inputs in shapes that could mislead or trap: `import_module` given an empty name, a
    relative one, a path, a library's name, a name only computed, a module that imports itself by name;
    `__import__()` with nothing; `getattr` with one argument or an empty attribute; a script climbing with
    `sys.path.append('../../../..')` out of its repository; an imported module's relative `sys.path` entry (where it
    is started is unknown); `choices=None`, `choices=range(3)`, choices held in a name; `global` names. Nothing
    outside the repository is read, the run ends, and the one real finding (a port reaching the rendezvous through
    `config["port"]`) is found once."""
    outside = tmp_path / "outside.py"
    outside.write_text("import torch\ntorch.save({}, 'x.pt')\n")  # would be every rank's save if it were read
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "loop.py").write_text("import importlib\nimportlib.import_module('loop')\n")
    (repo / "helper.py").write_text("import sys\nsys.path.append('..')\nimport outside\n")
    script = repo / "scripts" / "train.py"
    script.write_text(
        "import argparse, importlib, sys\nsys.path.append('../../../..')\nsys.path.append('..')\n"
        "import torch, torch.distributed as dist\nimport helper\n"
        "for name in ['', '.', '..x', '/etc/passwd', 'os', 'loop', 'a..b']:\n"
        "    pass\n"
        "importlib.import_module('')\nimportlib.import_module('.')\nimportlib.import_module('..x')\n"
        "importlib.import_module('/etc/passwd')\nimportlib.import_module('os')\nimportlib.import_module('loop')\n"
        "importlib.import_module('a..b')\nimportlib.import_module(name)\n__import__()\n"
        "getattr(helper)\ngetattr(helper, '')\n"
        "RUNS = 0\n"
        "def count():\n    global RUNS\n    RUNS = RUNS + 1\n"
        "if __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--a', choices=None)\n    parser.add_argument('--b', choices=range(3))\n"
        "    parser.add_argument('--c', choices=CHOICES)\n"
        "    parser.add_argument('--port', default='5678')\n"
        "    args = parser.parse_args()\n    count()\n"
        "    config = {'port': args.port}\n"
        "    dist.init_process_group('gloo', init_method='tcp://127.0.0.1:' + str(config['port']), rank=0,"
        " world_size=1)\n"
    )
    assert run_lint([str(script)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(f["rule"], Path(f["file"]).name) for f in report["findings"]] == [("DDP011", "train.py")]
    read = {Path(p).resolve() for p in report["programs"][0]}
    assert outside.resolve() not in read and all(repo.resolve() in p.parents for p in read)
    assert (repo / "loop.py").resolve() in read and (repo / "helper.py").resolve() in read


def test_download_markers_and_registries_in_odd_shapes_are_read_without_a_guess(tmp_path, capsys):
    """The twenty-fourth set's reading surfaces in shapes that could trap or mislead: a `.gitignore` that is a FIFO,
    a LICENSE that is a folder, a COPYING link that points at itself, a `.gitignore` far above the repository (past
    the levels a top is looked for); registry decorators with no call, a bare name, nested attributes, and a
    registry's `build` never called. The run ends, the top is the folder with the markers, what no `build` reaches
    is not read as running, and the one registered class that is built is."""
    far = tmp_path / "a" / "b" / "c" / "d" / "e"
    (tmp_path / ".gitignore").write_text("*\n")  # above the levels a repository's top is looked for
    repo = far / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tools").mkdir()
    os.mkfifo(repo / ".gitignore")
    (repo / "LICENSE").mkdir()
    (repo / "COPYING").symlink_to(repo / "COPYING")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "engines.py").write_text(
        "import torch\nimport torch.distributed as dist\n"
        "TRAINERS = Registry('t')\nHOOKS = Registry('h')\n"
        "@TRAINERS.register_module()\nclass Built:\n    def train(self):\n"
        "        torch.save({}, 'every_rank.pt')\n"
        "@HOOKS.register_module\nclass NeverBuilt:\n    def after(self):\n        torch.save({}, 'hook.pt')\n"
        "@register\nclass Bare:\n    def run(self):\n        torch.save({}, 'bare.pt')\n"
        "@a.b.c.register('x')\nclass Deep:\n    def go(self):\n        torch.save({}, 'deep.pt')\n"
    )
    script = repo / "tools" / "train.py"
    script.write_text(
        "import torch.distributed as dist\nfrom pkg.engines import TRAINERS\n"
        "if __name__ == '__main__':\n    dist.init_process_group('gloo')\n"
        "    TRAINERS.build(dict(type='Built')).train()\n"
    )
    assert run_lint([str(script)], as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(f["rule"], Path(f["file"]).name, f["line"]) for f in report["findings"]] == [("DDP015", "engines.py", 8)]
    read = {Path(p).resolve() for p in report["programs"][0]}
    assert (repo / "pkg" / "engines.py").resolve() in read and all(repo.resolve() in p.parents for p in read)


def test_rank_names_flags_environment_dictionaries_and_merges_in_odd_shapes_are_read_without_a_guess(tmp_path, capsys):
    """The twenty-fifth and twenty-sixth sets' forms in shapes that could mislead: `rank=` given a call, a
    subscript or nothing (`**kwargs`); a flag set True under a rank test in one place and on every rank in another;
    `os.environ.update(**env)`, a dictionary with `**spread` and non-string keys; `range()` with no argument and
    a loop over the world size that loads nothing; `clip_grad` as a program function that unscales first. The run
    ends; the flag set on every rank guards nothing (its save is found), the program's own clipping helper that
    unscales is read through, not taken for a bare clip."""
    source = (
        DDP
        + "import os, torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "dist.init_process_group('gloo', rank=get_rank())\ndist.init_process_group('gloo', rank=ranks[0])\n"
        + "dist.init_process_group('gloo', **kwargs)\n"
        + "os.environ.update(**env)\nos.environ.update({**spread, 1: 'x', 'MASTER_ADDR': host})\n"
        + "def clip_grad(scaler, optimizer, params):\n    scaler.unscale_(optimizer)\n"
        + "    torch.nn.utils.clip_grad_norm_(params, 1.0)\n"
        + "def step(model, loader, scaler, optimizer):\n    for x in loader:\n"
        + "        scaler.scale(model(x).sum()).backward()\n        clip_grad(scaler, optimizer, model.parameters())\n"
        + "        scaler.step(optimizer)\n        scaler.update()\n"
        + "def merge(parts):\n    for r in range():\n        pass\n    for r in range(world_size):\n"
        + "        parts.append(r)\n    return parts\n"
        + "if get_rank() == 0:\n    opt.log = True\nopt.log = True\n"
        + "model = DDP(net)\nstep(model, loader, scaler, optimizer)\nmerge([])\n"
        + "if opt.log:\n    torch.save(model.module.state_dict(), 'model.pt')\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP015", _line(source, "    torch.save(model.module.state_dict(), 'model.pt')")) in found
    assert not [rule for rule, _ in found if rule == "DDP009"]


def test_listed_folders_self_imports_test_modules_and_command_chains_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The twenty-seventh set's reading in shapes that could trap or mislead: an imported name that is a FIFO, a
    link to nowhere or a folder named like a module; a script that imports its own name where no package has it; a
    `test_*.py` with test functions beside one with a `__main__` guard; a command chain whose arms call a function
    that calls itself, nested chains, and `Process(args=(*rest, main))`. The run ends, nothing outside the
    repository is read, the script with a guard is a program and the one that pytest collects is not, and the save
    reached from the arm that makes the process group is found once."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / ".git").mkdir()
    os.mkfifo(repo / "pkg" / "fifo_mod.py")
    (repo / "pkg" / "gone.py").symlink_to(repo / "pkg" / "nowhere.py")
    (repo / "pkg" / "folder_mod.py").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "selfish.py").write_text("import selfish\nfrom selfish import thing\n")
    (repo / "test_units.py").write_text(
        "import torch.nn as nn\ndef test_wrap():\n    assert nn.DataParallel(nn.Linear(1, 1))\n"
    )
    (repo / "test_script.py").write_text(
        "import torch.distributed as dist\nimport torch.nn as nn\ndef test_x():\n    pass\n"
        "if __name__ == '__main__':\n    dist.init_process_group('gloo')\n    nn.DataParallel(nn.Linear(1, 1))\n"
    )
    (repo / "cli.py").write_text(
        "import torch, selfish\nimport torch.distributed as dist\n"
        "from pkg import fifo_mod, gone, folder_mod\nfrom multiprocessing import Process\n"
        "def loop(n):\n    return loop(n - 1) if n else 0\n"
        "def run(args):\n    dist.init_process_group('gloo')\n    torch.save({}, 'every_rank.pt')\n"
        "def convert(args):\n    loop(3)\n    torch.save({}, 'converted.pt')\n"
        "def main(args):\n    if args.command == 'train':\n        run(args)\n"
        "    elif args.command == 'cp':\n        if args.deep:\n            convert(args)\n"
        "        elif args.deeper:\n            loop(2)\n    else:\n        loop(1)\n"
        "if __name__ == '__main__':\n    Process(target=main, args=(*rest, main)).start()\n"
        "    Process(target=main, args=[main]).start()\n"
    )
    assert run_lint([str(repo)], as_json=True) == 0  # (warnings only)
    report = json.loads(capsys.readouterr().out)
    found = [(Path(f["file"]).name, f["rule"], f["line"]) for f in report["findings"]]
    assert ("cli.py", "DDP015", 9) in found and not [f for f in found if f[2] == 12]
    assert ("test_script.py", "DDP001", 7) in found and not [f for f in found if f[0] == "test_units.py"]
    read = {Path(p).resolve() for program in report["programs"] for p in program}
    assert all(repo.resolve() in p.parents for p in read)
    assert not {repo / "pkg" / "fifo_mod.py", repo / "pkg" / "gone.py"} & read


def test_groups_visible_devices_dict_lookups_class_cycles_and_hidden_folders_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The twenty-eighth set's reading in shapes that could trap or mislead: `group=None`, `group=dist.group.WORLD`,
    `process_group=make_group()`; `CUDA_VISIBLE_DEVICES` set from a rank in a loop and to an empty string;
    `x.__dict__[0]`, `x.__dict__[name]`; classes that inherit from each other in a cycle, each made only on the
    single-process arm; a hidden folder holding a link to its own parent. The run ends, a barrier given no real
    group is still reported, the hidden folder is not read, and the folder named itself (hidden) is."""
    repo = tmp_path / "repo"
    (repo / ".cache").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".cache" / "loop").symlink_to(repo)
    (repo / ".cache" / "copy.py").write_text("import torch.nn as nn\nnn.DataParallel(model)\n")
    source = (
        "import os, torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "for rank in range(2):\n    os.environ['CUDA_VISIBLE_DEVICES'] = str(rank)\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = ''\n"
        "trainer = core.__dict__[0]\ntrainer = core.__dict__[name]\n"
        "class A(B):\n    def go(self):\n        torch.save({}, 'a.pt')\n"
        "class B(A):\n    def go(self):\n        torch.save({}, 'b.pt')\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 0:\n    dist.barrier(group=None)\n    dist.barrier(group=dist.group.WORLD)\n"
        "    model = DDP(net, process_group=make_group())\n"
        "if not args.distributed:\n    A().go()\n    B().go()\n"
    )
    (repo / "train.py").write_text(source)
    assert run_lint([str(repo)], as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    found = [(Path(f["file"]).name, f["rule"], f["line"]) for f in report["findings"]]
    barriers = [
        _line(source, "    dist.barrier(group=None)"),
        _line(source, "    dist.barrier(group=dist.group.WORLD)"),
    ]
    assert [("train.py", "DDP010", line) for line in barriers] == [f for f in found if f[1] == "DDP010"]
    assert not [f for f in found if f[0] == "copy.py"] and report["files"] == 1
    assert run_lint([str(repo / ".cache")], as_json=True) == 0
    assert "copy.py" in json.loads(capsys.readouterr().out)["programs"][0][0]


def test_random_samplers_inner_models_and_evaluation_loaders_in_odd_shapes_are_read_without_a_guess(tmp_path, capsys):
    """The twenty-ninth set's reading in shapes that could mislead: a sampler name assigned a RandomSampler on one
    arm and a DistributedSampler on the other, `sampler=RandomSampler` given through `**kwargs`, an inner model kept
    as `self.a.b = self.c.module`, an evaluation given `DataLoader(*parts)` or `DataLoader(ds, **options)`, and a
    file named `script` where a converter folder is looked for. The run ends; only the loader that every rank reads
    whole in its own order is reported."""
    (tmp_path / "script").write_text("not a folder\n")
    (tmp_path / ".git").mkdir()
    source = (
        DDP
        + "import os, torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "if args.distributed:\n    s = DistributedSampler(ds)\nelse:\n    s = RandomSampler(ds)\n"
        + "shared = DataLoader(ds, sampler=s)\n"
        + "whole = DataLoader(ds, sampler=RandomSampler(ds))\n"
        + "hidden = DataLoader(ds, **{'sampler': RandomSampler(ds)})\n"
        + "class T:\n    def setup(self):\n        self.c = DDP(net)\n        self.a.b = self.c.module\n"
        + "    def step(self, x):\n        self.c(x).sum().backward()\n"
        + "def evaluate(model, loader):\n    return sum(model(x) for x in loader)\n"
        + "acc = evaluate(net, DataLoader(*parts))\nacc2 = evaluate(net, DataLoader(ds, **options))\n"
        + "print(acc, acc2)\n"
        + "for x in shared:\n    T().step(x)\nfor x in whole:\n    T().step(x)\n"
    )
    found = _found(tmp_path, source, capsys)
    assert [rule for rule, line in found if rule == "DDP018"] == ["DDP018"]
    assert ("DDP018", _line(source, "whole = DataLoader(ds, sampler=RandomSampler(ds))")) in found
    assert not [rule for rule, _ in found if rule == "DDP020"]


def test_unwrapping_arms_aliases_spawning_scripts_and_skipped_errors_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirtieth set's reading in shapes that could mislead: an arm beside one that unwraps another model, a
    wrapper aliased to itself and in a cycle (`a = b`, `b = a`), `mp.spawn()` with nothing to start, a save in the
    `__main__` block of a script that spawns nothing, `except: continue` with no backward after it, and a folder
    holding an empty module, a module of definitions that fails to parse, and one that only imports. The run ends;
    what is reported is what each shape is."""
    source = (
        DDP
        + "import torch\nimport torch.multiprocessing as mp\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "class Net(torch.nn.Module):\n    def predict(self, x):\n        return x\n"
        + "model = DDP(Net())\nother = DDP(Net())\n"
        + "if flag:\n    other.module.predict(1)\nelse:\n    model.predict(1)\n"
        + "a = model\nb = a\na = b\n"
        + "for x in loader:\n    try:\n        y = model(x)\n    except Exception:\n        continue\n    print(y)\n"
        + "mp.spawn()\n"
        + "if __name__ == '__main__':\n    torch.save(a.state_dict(), 'same.pt')\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP022", _line(source, "    model.predict(1)")) in found  # the other arm unwrapped another model
    assert ("DDP015", _line(source, "    torch.save(a.state_dict(), 'same.pt')")) in found  # no process started
    assert ("DDP007", _line(source, "    torch.save(a.state_dict(), 'same.pt')")) in found  # `a` is the wrapper
    assert not [rule for rule, _ in found if rule == "DDP014"]  # nothing back-propagated after the skip
    folder = tmp_path / "repo"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "__init__.py").write_text("")
    (folder / "models" / "empty.py").write_text("")
    (folder / "models" / "broken.py").write_text("class Broken(:\n    pass\n")
    (folder / "models" / "imports.py").write_text("import torch\nfrom torch import nn\n")
    (folder / "models" / "used.py").write_text("class Used:\n    pass\n")
    (folder / "train.py").write_text(DDP + "from models.used import Used\nif __name__ == '__main__':\n    Used()\n")
    assert run_lint([str(folder)], as_json=True) == 2  # broken.py does not parse: said, not hidden
    report = json.loads(capsys.readouterr().out)
    assert [Path(p[0]).name for p in report["programs"]] == ["train.py"]
    assert len(report["errors"]) == 1 and "broken.py: cannot parse" in report["errors"][0]


def test_replaced_loaders_dictionary_entries_skipped_ranks_settings_ports_and_shuffles_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-first set's reading in shapes that could mislead: a shuffling loader "replaced" by one with
    `sampler=None`, loaders kept under an integer key, a computed key and beside `**others`, a rank skip in a
    `while` loop, a settings field `master_port: str = "auto"`, `random.shuffle(self.paths)` and `random.seed()` with
    no seed. The run ends; what is reported is what each shape is."""
    source = (
        DDP
        + "import random\nimport torch\nfrom dataclasses import dataclass\n"
        + "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "from torch.utils.data import DataLoader, DistributedSampler\n"
        + "@dataclass\nclass Settings:\n    master_port: str = 'auto'\n"
        + "def work(cfg):\n    dist.init_process_group('gloo', init_method=f'tcp://{cfg.host}:{cfg.master_port}')\n"
        + "work(Settings())\n"
        + "model = DDP(torch.nn.Linear(2, 2))\n"
        + "train_loader = DataLoader(ds, shuffle=True)\n"
        + "if args.use_ddp:\n    train_loader = DataLoader(ds, sampler=None)\n"
        + "loaders = {0: DataLoader(ds, sampler=DistributedSampler(ds)), **others}\n"
        + "random.seed()\n"
        + "paths = list(range(10))\nrandom.shuffle(paths)\ntrain, val = paths[:8], paths[8:]\n"
        + "random.shuffle(self_paths.items)\n"
        + "while True:\n    if dist.get_rank() != 0:\n        break\n"
        + "    evaluate(loaders[0], model.module)\n    evaluate(loaders[key], model.module)\n    break\n"
        + "for x in train_loader:\n    model(x).sum().backward()\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP018", _line(source, "train_loader = DataLoader(ds, shuffle=True)")) in found  # no sampler came
    assert ("DDP023", _line(source, "random.shuffle(paths)")) in found  # `random.seed()`: each rank its own seed
    assert not [rule for rule, _ in found if rule == "DDP011"]  # no number in the field
    # the integer key's entry is the sharded loader; a computed key names nothing known
    assert [line for rule, line in found if rule == "DDP021"] == [
        _line(source, "    evaluate(loaders[0], model.module)")
    ]


def test_kept_ranks_half_context_managers_and_ports_without_a_group_in_odd_shapes_end_without_a_guess(tmp_path, capsys):
    """The thirty-second set's reading in shapes that could mislead: `self.rank` set from the local rank in one
    method and from the global rank in another, a class with `__enter__` and no `__exit__` holding a rank-0 barrier,
    `__exit__` written as an attribute instead of a method, and `MASTER_PORT` set in a script that makes no group.
    The run ends; a rank that may be the global one is still reported, the lone barrier too, the unused port not."""
    source = (
        DDP
        + "import os, torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        + "class M:\n    def __init__(self, args):\n        self.rank = args.local_rank\n"
        + "    def reset(self):\n        self.rank = dist.get_rank()\n"
        + "    def wrap(self, m):\n        return DDP(m, device_ids=[self.rank])\n"
        + "class Half:\n    __exit__ = None\n    def __enter__(self):\n        if dist.get_rank() == 0:\n            dist.barrier()\n"
        + "M(args).wrap(torch.nn.Linear(2, 2))\nwith Half():\n    pass\n"
    )
    found = _found(tmp_path, source, capsys)
    assert ("DDP013", _line(source, "        return DDP(m, device_ids=[self.rank])")) in found
    assert ("DDP010", _line(source, "            dist.barrier()")) in found
    single = tmp_path / "single"
    single.mkdir()
    assert (
        run_lint(
            [str(_written(single, "import os\nos.environ['MASTER_PORT'] = '29500'\nprint('one process')\n"))],
            as_json=True,
        )
        == 0
    )
    assert not json.loads(capsys.readouterr().out)["findings"]


def _written(folder: Path, text: str) -> Path:
    script = folder / "train.py"
    script.write_text(text)
    return script


def test_local_rank_options_plain_state_loads_and_handed_down_configs_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-third set's reading in shapes that could mislead: a `--local_rank` option the program also sets
    from LOCAL_RANK, a usage note naming both launchers, `load_state_dict(**kw)` and a checkpoint read by a
    computed key, a dictionary saved with `**extra`, a config read through a computed key and a parameter handed to
    itself, a loader kept in a tuple by the spawning process, odd spawns (a method, a lambda, a recursive helper),
    names bound on rank 0 by a walrus, a loop or a tuple, and group calls in the spawning process made on other
    objects or inside a lambda. The run ends; what cannot be told is not reported, the plain load by a constant
    key, the unset names and the spawning process's own barrier still are."""
    header = DDP + "import argparse, os, torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
    option = (
        "p = argparse.ArgumentParser()\np.add_argument('--local_rank', type=int, default=0)\nargs = p.parse_args()\n"
    )
    used = "torch.cuda.set_device(args.local_rank)\n"
    set_in_code = header + "# torchrun --nproc_per_node=2 train.py\n" + option
    set_in_code += "args.local_rank = int(os.environ['LOCAL_RANK'])\n" + used
    assert "DDP024" not in {rule for rule, _ in _found(tmp_path, set_in_code, capsys)}
    both = header + "# torchrun train.py, or python -m torch.distributed.launch train.py\n" + option + used
    assert "DDP024" not in {rule for rule, _ in _found(tmp_path, both, capsys)}
    loads = (
        header
        + "model = DDP(torch.nn.Linear(2, 2))\nkw = {}\nkey = 'net'\nck = torch.load('a.pt', weights_only=True)\n"
        + "model.load_state_dict(**kw)\nmodel.load_state_dict(ck[key])\nmodel.load_state_dict(ck[0])\n"
        + "model.load_state_dict(ck['net'])\n"
        + "torch.save({**kw, 'net': model.module.state_dict()}, 'a.pt')\n"
    )
    assert [hit for hit in _found(tmp_path, loads, capsys) if hit[0] == "DDP025"] == [
        ("DDP025", _line(loads, "model.load_state_dict(ck['net'])"))
    ]
    configs = (
        header
        + "def train(hp, depth):\n    dist.init_process_group('gloo', init_method=hp.dist_url)\n"
        + "    if depth:\n        train(hp, depth - 1)\n"
        + "name = 'x'\ncfg = load(args)\ntrain(cfg[name].hparams, 2)\ntrain(load(args).hparams, 2)\n"
    )
    assert "DDP011" not in {rule for rule, _ in _found(tmp_path, configs, capsys)}
    (tmp_path / "config.yaml").write_text('hparams:\n  dist_url: "tcp://localhost:12345"\n')
    init = "    dist.init_process_group('gloo', init_method=hp.dist_url)"
    assert ("DDP011", _line(configs, init)) in _found(tmp_path, configs, capsys)  # (through the second call)
    own = (  # an object's own setting, read in a method called with no arguments
        header
        + "class T:\n    def setup(self):\n        os.environ['MASTER_PORT'] = str(self.cfg.port)\n"
        + "        dist.init_process_group('gloo')\nT().setup()\n"
    )
    assert "DDP011" not in {rule for rule, _ in _found(tmp_path, own, capsys)}
    spawned = (
        header
        + "import torch.multiprocessing as mp\nfrom torch.utils.data import DataLoader\n"
        + "def run(rank, data):\n    model = DDP(torch.nn.Linear(2, 2))\n"
        + "if __name__ == '__main__':\n    a, b = DataLoader(x, shuffle=True), DataLoader(y, shuffle=True)\n"
        + "    mp.spawn(run, args=(a,), nprocs=2)\n"
    )
    found = _found(tmp_path, spawned, capsys)
    assert ("DDP018", _line(spawned, "    a, b = DataLoader(x, shuffle=True), DataLoader(y, shuffle=True)")) in found
    odd_spawns = (  # a spawned method, a lambda, a recursive helper, a name deleted in the block, a walrus
        header
        + "import torch.multiprocessing as mp\n"
        + "def helper(n):\n    return helper(n - 1) if n else cfg\n"
        + "def run(rank):\n    model = DDP(torch.nn.Linear(2, 2))\n    return helper(3)\n"
        + "class T:\n    def go(self, rank):\n        return cfg\n"
        + "if __name__ == '__main__':\n    del os\n    if (cfg := 1):\n        pass\n"
        + "    mp.spawn(T().go, nprocs=2)\n    mp.spawn(lambda r: cfg, nprocs=2)\n    mp.spawn(run, nprocs=2)\n"
    )
    assert [hit for hit in _found(tmp_path, odd_spawns, capsys) if hit[0] == "DDP026"] == [
        ("DDP026", _line(odd_spawns, "    return helper(n - 1) if n else cfg"))
    ]
    ranked = (  # names bound on rank 0 by a walrus, a loop, a comprehension, a tuple; read at the top level
        header
        + "model = DDP(torch.nn.Linear(2, 2))\nif dist.get_rank() == 0:\n    writer = open('log.txt', 'w')\n"
        + "    if (n := 3):\n        pass\n    for i in range(2):\n        pass\n    sq = [j * j for j in range(3)]\n"
        + "    a, (b, *c) = 1, (2, 3)\n"
        + "print([j for j in range(2)], n, i, b, c)\nwriter.close()\n"
    )
    found = [hit for hit in _found(tmp_path, ranked, capsys) if hit[0] == "DDP027"]
    assert found == [("DDP027", _line(ranked, "print([j for j in range(2)], n, i, b, c)"))]  # (once, at the first read)
    launcher = (  # group calls of other objects, a full name, one in a lambda the block never calls
        header
        + "import torch.multiprocessing as mp\ndef run(rank):\n    model = DDP(torch.nn.Linear(2, 2))\n"
        + "if __name__ == '__main__':\n    mp.spawn(run, nprocs=2)\n    pool.barrier()\n    comm_stats.get_rank()\n"
        + "    later = lambda: dist.barrier()\n    torch.distributed.barrier()\n"
    )
    assert [hit for hit in _found(tmp_path, launcher, capsys) if hit[0] == "DDP028"] == [
        ("DDP028", _line(launcher, "    torch.distributed.barrier()"))
    ]
    starred = "from settings import *\n" + odd_spawns
    assert "DDP026" not in {rule for rule, _ in _found(tmp_path, starred, capsys)}


def test_sharded_state_dicts_clipping_early_returns_skipped_batches_and_ports_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-fourth set's reading in shapes that could mislead: `state_dict_type` given no arguments, given the
    type by a variable, or used with `as`; `dist.barrier(None)`; an early return whose test is a call; a clip given
    a list, a generator or a module attribute; a port chosen between a number and an option; a port offset by a
    parameter some caller leaves unknown; a `try` in a `while` loop that ends at the iterator's end; a `finally`; a
    batch test through a walrus. The run ends; what cannot be told is not reported, and the plain cases still are."""
    header = DDP + "import os, torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    header += "from torch.distributed.fsdp import StateDictType\nmodel = FSDP(torch.nn.Linear(2, 2))\n"
    states = header + (
        "def save(rank, kind):\n    if rank != 0:\n        return\n"
        "    with FSDP.state_dict_type():\n        a = model.state_dict()\n"
        "    with FSDP.state_dict_type(model, kind):\n        b = model.state_dict()\n"
        "    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT) as ctx:\n        c = model.state_dict()\n"
        "    dist.barrier(None)\n"
        "def quiet(rank):\n    if os.environ.get('QUIET'):\n        return\n    dist.barrier()\n"
        "for epoch in range(2):\n    save(dist.get_rank(), StateDictType.FULL_STATE_DICT)\n    quiet(dist.get_rank())\n"
    )
    assert [hit for hit in _found(tmp_path, states, capsys) if hit[0] == "DDP010"] == [
        ("DDP010", _line(states, "        c = model.state_dict()")),  # FULL_STATE_DICT written out, after the return
        ("DDP010", _line(states, "    dist.barrier(None)")),  # None is the default group
    ]
    clips = header + (
        "params = list(model.parameters())\n"
        "torch.nn.utils.clip_grad_norm_(params, 1.0)\n"
        "torch.nn.utils.clip_grad_norm_((p for p in model.parameters()), 1.0)\n"
        "torch.nn.utils.clip_grad_norm_(model.module.parameters(), 1.0)\n"
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    )
    assert [hit for hit in _found(tmp_path, clips, capsys) if hit[0] == "DDP029"] == [
        ("DDP029", _line(clips, "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"))
    ]
    ports = DDP.replace("dist.init_process_group('gloo')\n", "") + (
        "import os, sys, argparse\np = argparse.ArgumentParser()\np.add_argument('--port')\nargs = p.parse_args()\n"
        "def setup(offset):\n    os.environ['MASTER_PORT'] = str(12355 + offset)\n    dist.init_process_group('gloo')\n"
        "os.environ['MASTER_PORT'] = '8888' if args.port is None else args.port\n"
        "setup(int(sys.argv[1]))\nsetup(offset=len(sys.argv))\n"
    )
    assert "DDP011" not in {rule for rule, _ in _found(tmp_path, ports, capsys)}
    loops = DDP + (
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(torch.nn.Linear(2, 2))\nit = iter(train_loader)\n"
        "while True:\n    try:\n        x = next(it)\n        model(x).sum().backward()\n"
        "    except StopIteration:\n        break\n"
        "for x, y in train_loader:\n    try:\n        loss = model(x).sum()\n    finally:\n        pass\n"
        "    if not (m := y > 0).any():\n        continue\n    loss.backward()\n"
    )
    assert [hit for hit in _found(tmp_path, loops, capsys) if hit[0] == "DDP014"] == [
        ("DDP014", _line(loops, "        continue"))  # the rank's own batch, through a walrus; not the iterator's end
    ]


def test_paths_from_callers_process_count_switches_one_pass_loaders_and_filled_lists_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-fifth set's reading in shapes that could mislead: a path handed through `**kwargs` or through a
    second helper's parameter, a process-count test written the other way round (`1 < GPU_NUM`), a loader also
    handed to `iter()` or kept in a tuple, a validation list kept on `self` and extended from a generator. The run
    ends; what cannot be told keeps the finding it had (the save, the shuffling loader, the missing set_epoch), and
    the unreduced figure is still found."""
    header = DDP + "import os, torch\nimport numpy as np\nfrom torch import nn\n"
    header += "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    header += "from torch.utils.data import DataLoader, DistributedSampler\n"
    paths = header + (
        "def save(net, save_path, **kw):\n    torch.save(net.state_dict(), save_path)\n"
        "def again(net, save_path):\n    save(net, save_path)\n"
        "rank = dist.get_rank()\nnet = DDP(nn.Linear(2, 2))\nkw = {'save_path': f'm{rank}.pt'}\n"
        "for epoch in range(2):\n    save(net, **kw)\n    again(net, f'model_rank{rank}.pt')\n"
    )
    save = "    torch.save(net.state_dict(), save_path)"
    assert ("DDP015", _line(paths, save)) in _found(tmp_path, paths, capsys)
    switch = header + (
        "GPU_NUM = 4\n"
        "def run(ds):\n    if GPU_NUM > 1:\n        model = DDP(nn.Linear(2, 2))\n    else:\n        model = nn.Linear(2, 2)\n"
        "    if 1 < GPU_NUM:\n        loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
        "    else:\n        loader = DataLoader(ds, shuffle=True)\n"
        "    for epoch in range(2):\n        for x in loader:\n            model(x).sum().backward()\n"
    )
    shuffled = "        loader = DataLoader(ds, shuffle=True)"
    assert ("DDP018", _line(switch, shuffled)) in _found(tmp_path, switch, capsys)
    once = header + (
        "def run(ds):\n    s = DistributedSampler(ds)\n    loader = DataLoader(ds, sampler=s)\n"
        "    first = next(iter(loader))\n    pair = (loader, 1)\n    for x in loader:\n        pass\n"
        "    model = DDP(nn.Linear(2, 2))\n"
        "    for step in range(10):\n        for k in range(2):\n            model(first).sum().backward()\n"
    )
    assert ("DDP002", _line(once, "    s = DistributedSampler(ds)")) in _found(tmp_path, once, capsys)
    lists = header + (
        "class T:\n    def fit(self, model, train_loader, val_loader, opt):\n        for epoch in range(3):\n"
        "            for x in train_loader:\n                model(x).sum().backward()\n"
        "            self.losses = []\n            with torch.no_grad():\n                for x in val_loader:\n"
        "                    self.losses.append(model(x).sum().item())\n"
        "                    self.losses.extend(v for v in [1])\n"
        "            val_loss = np.mean(self.losses)\n            print(f'val loss {val_loss}')\n"
        "vs = DistributedSampler(val_set, shuffle=False)\n"
        "T().fit(DDP(nn.Linear(2, 1)), DataLoader(train_set, sampler=DistributedSampler(train_set)),"
        " DataLoader(val_set, sampler=vs), None)\n"
    )
    shown = "            print(f'val loss {val_loss}')"
    assert ("DDP017", _line(lists, shown)) in _found(tmp_path, lists, capsys)


def test_launcher_tests_unused_samplers_unwrapping_helpers_and_rank_0_optimizers_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-sixth set's reading in shapes that could mislead: a launcher variable asked through
    `os.environ.keys()` or a dictionary of the environment, a sampler kept in a tuple or handed to a loader by
    attribute, a dataset given by keyword, an unwrap through `getattr`, optimizers kept in a dictionary, a helper that
    calls itself. The run ends; what cannot be told is not reported, and the plain shapes are still found."""
    header = DDP + "import os, torch\nfrom torch import nn\n"
    header += "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    header += "from torch.utils.data import DataLoader, DistributedSampler\n"
    launched = header + (
        "env = dict(os.environ)\n"
        "def main():\n    model = DDP(nn.Linear(2, 2))\n    dist.barrier()\n"
        "if 'LOCAL_RANK' in os.environ.keys():\n    main()\n"
        "if 'LOCAL_RANK' in env:\n    main()\n"
    )
    assert not [hit for hit in _found(tmp_path, launched, capsys) if hit[0] == "DDP010"]
    samplers = header + (
        "def run(ds, other):\n"
        "    s, t = DistributedSampler(ds), None\n    a = DataLoader(ds, batch_size=2)\n"
        "    u = DistributedSampler(other)\n    b = DataLoader(other)\n    b.sampler = u\n"
        "    v = DistributedSampler(ds)\n    c = DataLoader(dataset=ds, batch_size=2)\n"
        "    model = DDP(nn.Linear(2, 2))\n"
        "    for epoch in range(2):\n        for x in c:\n            model(x).sum().backward()\n"
    )
    assert [hit for hit in _found(tmp_path, samplers, capsys) if hit[0] == "DDP030"] == [
        ("DDP030", _line(samplers, "    c = DataLoader(dataset=ds, batch_size=2)"))
    ]
    unwraps = header + (
        "def kd_loss(x, heads, n=2):\n    heads = getattr(heads, 'module', heads)\n"
        "    if n:\n        return kd_loss(x, heads, n - 1)\n    return heads(x).sum()\n"
        "def plain_loss(x, heads):\n    if isinstance(heads, DDP):\n        heads = heads.module\n"
        "    return heads(x).sum()\n"
        "heads = DDP(nn.Linear(2, 2))\n"
        "for x in [torch.ones(2)]:\n    loss = kd_loss(x, heads) + plain_loss(x, heads)\n    loss.backward()\n"
    )
    assert [hit for hit in _found(tmp_path, unwraps, capsys) if hit[0] == "DDP020"] == [
        ("DDP020", _line(unwraps, "        heads = heads.module"))
    ]
    optimizers = header + (
        "model = DDP(nn.Linear(2, 2))\n"
        "optimizers = {'g': torch.optim.SGD(model.parameters(), lr=0.1)}\n"
        "opt = optimizers['g']\nsched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
        "for epoch in range(2):\n    model(torch.ones(2)).sum().backward()\n"
        "    if dist.get_rank() == 0:\n        optimizers['g'].step()\n        opt.step()\n"
        "    if dist.get_rank() == 0:\n        sched.step()\n"
    )
    assert [hit for hit in _found(tmp_path, optimizers, capsys) if hit[0] == "DDP031"] == [
        ("DDP031", _line(optimizers, "        sched.step()"))
    ]


def test_helper_backwards_rebuilt_loaders_model_attributes_and_apex_wrappers_in_odd_shapes_end_without_a_guess(
    tmp_path, capsys
):
    """The thirty-seventh set's reading in shapes that could mislead: a backward helper that calls itself, a hook
    registration named for the backward, loaders rebuilt by a helper that calls itself, an attribute asked with
    `hasattr` or `getattr` on the wrapper, apex imported under another name. The run ends; what cannot be told is
    not reported, and the plain shapes are still found."""
    header = DDP + "import os, torch\nfrom torch import nn\n"
    header += "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    header += "from torch.utils.data import DataLoader, DistributedSampler\n"
    helpers = header + (
        "scaler = torch.cuda.amp.GradScaler()\n"
        "def backward_loss(loss, n=1):\n    if n:\n        return backward_loss(loss, n - 1)\n"
        "    scaler.scale(loss).backward()\n"
        "def clip(model):\n    nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "def train(model):\n"
        "    for x in [torch.ones(2)]:\n        loss = model(x).sum()\n"
        "        if torch.isnan(loss):\n            model.register_backward_hook(print)\n            continue\n"
        "        backward_loss(loss)\n        clip(model)\n"
        "train(DDP(nn.Linear(2, 2)))\n"
    )
    found = _found(tmp_path, helpers, capsys)
    assert ("DDP009", _line(helpers, "        clip(model)")) in found
    assert ("DDP014", _line(helpers, "            continue")) in found
    rebuilt = header + (
        "def shard(loader, depth=1):\n    if depth:\n        return shard(loader, depth - 1)\n"
        "    return DataLoader(loader.dataset, sampler=DistributedSampler(loader.dataset))\n"
        "def run(ds):\n    loader = DataLoader(ds, shuffle=True)\n    loader = shard(loader)\n"
        "    other = DataLoader(ds, shuffle=True)\n    model = DDP(nn.Linear(2, 2))\n"
        "    for epoch in range(2):\n        loader.sampler.set_epoch(epoch)\n"
        "        for x, y in zip(loader, other):\n            model(x).sum().backward()\n"
        "run(None)\n"
    )
    assert [hit for hit in _found(tmp_path, rebuilt, capsys) if hit[0] == "DDP018"] == [
        ("DDP018", _line(rebuilt, "    other = DataLoader(ds, shuffle=True)"))  # made after the rebuild: kept
    ]
    attributes = header + (
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.optimizer = None\n"
        "    def forward(self, x):\n        return x\n"
        "model = DDP(Net())\n"
        "if hasattr(model, 'optimizer'):\n    print(model.optimizer)\n"
        "print(getattr(model, 'optimizer', None))\n"
        "print(model.optimizer)\n"
    )
    assert [hit for hit in _found(tmp_path, attributes, capsys) if hit[0] == "DDP022"] == [
        ("DDP022", _line(attributes, "print(model.optimizer)"))
    ]
    apex = DDP + (
        "import torch\nfrom torch import nn\nimport apex.parallel as ap\n"
        "model = ap.DistributedDataParallel(nn.BatchNorm1d(2))\n"
        "for step in range(2):\n    model(torch.ones(2, 2)).sum().backward()\n"
        "    if dist.get_rank() == 0:\n        with torch.no_grad():\n            model(torch.ones(2, 2))\n"
    )
    assert [hit for hit in _found(tmp_path, apex, capsys) if hit[0] == "DDP010"] == []

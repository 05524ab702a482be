"""The lint cache (cache.py): an unchanged repository is answered from it with the same report; anything its report
could depend on — a module edited to the same size and time, a module appearing where an import looks, a sibling
in a folder no import can name, a configuration file, the rules chosen, the linter's own code — makes it read again."""

from __future__ import annotations

import os
from pathlib import Path

from ddptrain.tools.lint import cache as lint_cache
from ddptrain.tools.lint import lint_paths, select
from ddptrain.tools.lint.cache import Cache

from .test_lint_configs import TRAINER, _repository

MAIN = """\
import torch
import torch.distributed as dist
from helpers import save

def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(2, 2)
    save(model, dist.get_rank())

if __name__ == "__main__":
    main()
"""
# The same size: one writes one path from every rank (DDP015), the other one file per rank.
SHARED = 'import torch\n\ndef save(model, rank):\n    torch.save(model.state_dict(), "xxxxxxxxxx")\n'
PER_RANK = 'import torch\n\ndef save(model, rank):\n    torch.save(model.state_dict(), f"{rank}.pt")\n'


def _found(paths, cache, rules=None):
    report = lint_paths([str(p) for p in paths], rules, 1, cache)
    return sorted((Path(f.file).name, f.line, f.rule) for f in report.findings), report


def test_an_unchanged_repository_is_answered_from_the_cache_with_the_same_report(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    cache = Cache(tmp_path / "cache")
    cold, first = _found([repo], cache)
    warm, second = _found([repo], cache)
    assert cold == warm == [("helpers.py", 4, "DDP015")]
    assert cache.hits == 1
    assert (second.files, second.programs, second.problems) == (first.files, first.programs, first.problems)
    assert _found([repo], None)[0] == cold  # and what no cache says


def test_a_module_edited_to_the_same_size_and_time_is_read_again(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "train.py"], cache)[0] == [("helpers.py", 4, "DDP015")]
    helpers = repo / "helpers.py"
    before = helpers.stat()
    helpers.write_text(PER_RANK)
    os.utime(helpers, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (helpers.stat().st_size, helpers.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert _found([repo / "train.py"], cache)[0] == []
    assert cache.hits == 0


def test_a_module_that_appears_where_an_import_looks_is_read(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "train.py"], cache)[0] == []  # `from helpers import save`: not in the repository yet
    (repo / "helpers.py").write_text(SHARED)
    assert _found([repo / "train.py"], cache)[0] == [("helpers.py", 4, "DDP015")]


def test_a_sibling_in_a_folder_no_import_can_name_is_read_again(tmp_path):
    """`11-ddp-demo/train.py` given alone: its folder is no identifier, yet its imports are looked for there."""
    repo = _repository(tmp_path / "repo", {"11-ddp-demo/train.py": MAIN, "11-ddp-demo/helpers.py": PER_RANK})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "11-ddp-demo" / "train.py"], cache)[0] == []
    (repo / "11-ddp-demo" / "helpers.py").write_text(SHARED)
    assert _found([repo / "11-ddp-demo" / "train.py"], cache)[0] == [("helpers.py", 4, "DDP015")]


def test_a_port_edited_in_a_configuration_file_is_read_again(tmp_path):
    config = "dist_config:\n  dist_backend: nccl\n  dist_url: env://\n"
    repo = _repository(tmp_path / "repo", {"trainer.py": TRAINER, "config/default.yaml": config})
    cache = Cache(tmp_path / "cache")
    ports = lambda: [f for f in _found([repo / "trainer.py"], cache)[0] if f[2] == "DDP011"]  # noqa: E731
    assert ports() == []
    (repo / "config" / "default.yaml").write_text(config.replace("env://", '"tcp://localhost:54321"'))
    assert ports() == [("trainer.py", 10, "DDP011")]


def test_a_launch_script_edited_is_read_again(tmp_path):
    """DDP019 depends on how the repository's shell scripts launch the program: one node, or several."""
    from .test_lint_configs import PER_NODE_SAVE

    repo = _repository(tmp_path / "repo", {"train.py": PER_NODE_SAVE, "run.sh": "torchrun --standalone train.py\n"})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "train.py"], cache)[0] == []
    (repo / "run.sh").write_text("torchrun --nnodes=4 train.py\n")
    assert _found([repo / "train.py"], cache)[0] == [("train.py", 13, "DDP019")]


def test_a_script_added_beside_the_trainer_is_read_again(tmp_path):
    """DDP007 reads the scripts beside the entry point for one that converts the wrapper's keys."""
    from .test_lint_configs import RENAME, WRAPPER_SAVE

    repo = _repository(tmp_path / "repo", {"train.py": WRAPPER_SAVE})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "train.py"], cache)[0] == [("train.py", 9, "DDP007")]
    (repo / "rename.py").write_text(RENAME)
    assert _found([repo / "train.py"], cache)[0] == []


def test_other_rules_or_another_version_of_the_linter_are_another_entry(tmp_path, monkeypatch):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    cache = Cache(tmp_path / "cache")
    assert _found([repo], cache)[0] == [("helpers.py", 4, "DDP015")]
    assert _found([repo], cache, select([], ["DDP015"]))[0] == []
    monkeypatch.setattr(lint_cache, "code_version", lambda: "another version")
    assert _found([repo], cache)[0] == [("helpers.py", 4, "DDP015")]
    assert cache.hits == 0


def test_a_marker_that_moves_the_repository_root_is_seen(tmp_path):
    """A folder given inside a repository reads the repository's configuration files; a pyproject.toml added in
    that folder (no Python file changes) makes the folder its own repository, without them."""
    config = 'dist_config:\n  dist_url: "tcp://localhost:54321"\n'
    repo = _repository(tmp_path / "repo", {"sub/trainer.py": TRAINER, "config/default.yaml": config})
    cache = Cache(tmp_path / "cache")
    assert _found([repo / "sub"], cache)[0] == [("trainer.py", 10, "DDP011")]
    (repo / "sub" / "pyproject.toml").write_text("[project]\nname = 'sub'\n")
    assert _found([repo / "sub"], cache)[0] == []
    assert _found([repo / "sub"], None)[0] == []

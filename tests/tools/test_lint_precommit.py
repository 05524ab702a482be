"""The pre-commit hook this repository defines (`.pre-commit-hooks.yaml`), run by the real `pre-commit` tool in a
scratch repository: it fails a commit with a DDP mistake, naming the line, and passes the corrected file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MISTAKE = """import torch.distributed as dist
from torch.utils.data import DataLoader

dist.init_process_group("gloo")
loader = DataLoader(dataset, batch_size=32, shuffle=True)
"""
FIXED = """import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
"""


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


@pytest.mark.slow
def test_the_hook_fails_a_mistake_and_passes_its_fix(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is a dev dependency: pip install -e '.[dev]'")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: pre-commit try-repo reads the hook from one")
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text(MISTAKE)
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),  # nothing written to the user's cache
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # this ddptrain
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "ddptrain-lint", "--files", "train.py"]
    failed = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "train.py:5 DDP018 error DataLoader(shuffle=True) without a DistributedSampler" in failed.stdout
    (repo / "train.py").write_text(FIXED)
    passed = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ddptrain lint (DDP mistakes)" in passed.stdout and "Passed" in passed.stdout

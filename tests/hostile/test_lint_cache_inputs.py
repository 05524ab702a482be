"""The lint cache folder as a hostile input: entries that are corrupt, forged, huge, FIFOs or folders; a cache
folder that cannot be written; a folder shared with the user's own files; two linters filling it at once; a FIFO
named like a module in the repository. The answer is always the report a call without the cache gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ddptrain.tools.lint import cache as lint_cache
from ddptrain.tools.lint import lint_paths, run_lint, select
from ddptrain.tools.lint.cache import Cache, group_key

from ..tools.test_lint_cache import MAIN, SHARED, _found, _repository

EXPECTED = [("helpers.py", 4, "DDP015")]


def _entry(cache: Cache, repo: Path) -> Path:
    return cache.entry(group_key([str(repo)], select()))


def test_a_corrupt_truncated_forged_or_huge_entry_is_made_again(tmp_path, monkeypatch):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    cache = Cache(tmp_path / "cache")
    assert _found([repo], cache)[0] == EXPECTED
    entry = _entry(cache, repo)
    good = json.loads(entry.read_text())
    forged = dict(good, findings=[{"file": 3, "line": "x"}])
    wrong_kind = dict(good, programs="not a list")
    for content in (
        b"{not json",
        entry.read_bytes()[:40],
        b"\xff\xfe",
        json.dumps(forged).encode(),
        json.dumps(wrong_kind).encode(),
        b"[1, 2]",
        b"[" * 100000,
    ):
        entry.write_bytes(content)
        assert _found([repo], cache)[0] == EXPECTED, content[:30]
        assert json.loads(entry.read_text())["findings"] == good["findings"]  # written whole again
    assert cache.hits == 0
    monkeypatch.setattr(lint_cache, "MAX_ENTRY_BYTES", 10)
    assert _found([repo], cache)[0] == EXPECTED and cache.hits == 0  # over the size read: not read


def test_an_entry_that_is_a_fifo_or_a_folder_does_not_block_and_is_not_used(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    cache = Cache(tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    entry = _entry(cache, repo)
    os.mkfifo(entry)
    assert _found([repo], cache)[0] == EXPECTED  # (a blocking open would wait here for a writer forever)
    assert entry.is_file()  # replaced by a whole entry
    entry.unlink()
    entry.mkdir()
    assert _found([repo], cache)[0] == EXPECTED
    assert cache.problem is not None and str(tmp_path / "cache") in cache.problem
    assert entry.is_dir()  # a folder it did not make is left as it is


def test_a_cache_folder_that_cannot_be_written_costs_only_the_cache(tmp_path, capsys):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be\n")
    status = run_lint([str(repo)], as_json=True, cache_folder=blocker)
    captured = capsys.readouterr()
    assert status == 0
    assert [(Path(f["file"]).name, f["line"], f["rule"]) for f in json.loads(captured.out)["findings"]] == EXPECTED
    notes = [line for line in captured.err.splitlines() if line.startswith("note: lint cache")]
    assert len(notes) == 1 and str(blocker) in notes[0] and "linting without it" in notes[0]
    assert blocker.read_text() == "a file where the cache folder should be\n"


def test_pruning_deletes_only_the_oldest_entries_and_never_other_files(tmp_path, monkeypatch):
    monkeypatch.setattr(lint_cache, "MAX_ENTRIES", 2)
    folder = tmp_path / "cache"
    folder.mkdir()
    mine = [folder / "notes.txt", folder / "ddptrain-lint-mine.txt", folder / ".ddptrain-lint-fresh.part"]
    for file in mine:
        file.write_text("the user's\n")
    old_part = folder / ".ddptrain-lint-killed.part"  # what a killed writer left two hours ago
    old_part.write_text("{")
    os.utime(old_part, (os.path.getmtime(old_part) - 7200,) * 2)
    cache = Cache(folder)
    repos = [_repository(tmp_path / f"repo{i}", {"train.py": MAIN, "helpers.py": SHARED}) for i in range(4)]
    for index, repo in enumerate(repos):
        assert _found([repo], cache)[0] == EXPECTED
        os.utime(_entry(cache, repo), (1_000_000 + index,) * 2)
    entries = sorted(p.name for p in folder.glob("ddptrain-lint-*.json"))
    assert entries == sorted(_entry(cache, r).name for r in repos[2:])  # the two newest
    assert all(file.read_text() == "the user's\n" for file in mine)
    assert not old_part.exists()


def test_two_linters_filling_one_cache_at_once_both_give_the_report(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    others = [_repository(tmp_path / f"other{i}", {"train.py": MAIN, "helpers.py": SHARED}) for i in range(6)]
    paths = [str(repo), *(str(o) for o in others)]
    lint = [sys.executable, "-m", "ddptrain", "lint", "--json"]
    command = [*lint, "--cache-dir", str(tmp_path / "cache"), *paths]
    alone = subprocess.run([*lint, "--no-cache", *paths], capture_output=True, text=True, timeout=120)
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert all(json.loads(out) == json.loads(alone.stdout) for out in outputs)
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert json.loads(again.stdout) == json.loads(alone.stdout)
    assert not list((tmp_path / "cache").glob(".*.part"))


def test_a_fifo_named_like_a_module_in_the_repository_does_not_block(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    os.mkfifo(repo / "pipe.py")
    command = [sys.executable, "-m", "ddptrain", "lint", "--json", "--cache-dir", str(tmp_path / "cache"), str(repo)]
    for _ in range(2):  # made, then compared
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        found = [(Path(f["file"]).name, f["line"], f["rule"]) for f in json.loads(done.stdout)["findings"]]
        assert found == EXPECTED


def test_lint_paths_without_a_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    lint_paths([str(repo)])
    run_lint([str(repo)])
    assert not (tmp_path / "home").exists()


def test_files_named_with_undecodable_bytes_or_a_newline_are_kept_and_compared(tmp_path):
    repo = _repository(tmp_path / "repo", {"train.py": MAIN, "helpers.py": SHARED})
    odd = os.fsdecode(os.fsencode(str(repo)) + b"/caf\xe9.py")
    Path(odd).write_text(SHARED)
    (repo / "new\nline.py").write_text("x = 1\n")
    cache = Cache(tmp_path / "cache")
    cold, first = _found([repo], cache)
    warm, second = _found([repo], cache)
    assert cache.hits == 1 and cache.problem is None
    assert cold == warm and (first.programs, first.files) == (second.programs, second.files)
    assert ("helpers.py", 4, "DDP015") in cold
    Path(odd).write_text(SHARED.replace('"xxxxxxxxxx"', 'f"{rank}.pt"'))
    assert _found([repo], cache)[0] == _found([repo], None)[0]
    assert cache.hits == 1  # the undecodable name's file changed: read again

"""`make-dataset --out`: a folder that holds the user's own files, a file or a FIFO where the folder should be, more
images than the disk takes, and a run cut short. Refused in one line naming `--out` and the fix, with nothing of the
user's touched — or, for its own unfinished folder, written again."""

import json
import os
import time

from ddptrain.tools.demodata import MARKER, dataset_spec

from ..conftest import run_cli


def _make(out, *extra, check=False):
    return run_cli(["make-dataset", "--out", out, "--classes", 2, "--per-class", 2, *extra], check=check, timeout=120)


def _snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_folder_holding_the_users_files_is_refused_and_left_as_it_was(tmp_path):
    """ownership: `--out ~/project` (or a folder of photos sharing a class's name) is not written into."""
    project = tmp_path / "project"
    (project / "disc").mkdir(parents=True)
    (project / "disc" / "disc_0000.jpg").write_bytes(b"the user's own picture")
    (project / "notes.txt").write_text("keep me\n")
    before = _snapshot(project)
    done = _make(project)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "--out" in line]
    assert len(errors) == 1 and str(project) in errors[0] and "did not write" in errors[0]
    assert "new or empty folder" in errors[0]
    assert _snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["disc", "notes.txt"]


def test_a_file_or_a_fifo_where_the_folder_should_be_is_refused_without_blocking(tmp_path):
    """file kinds: a regular file and a FIFO (opening one for writing would wait for a reader for ever)."""
    plain = tmp_path / "out.txt"
    plain.write_text("not a folder\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for out in (plain, fifo):
        started = time.monotonic()
        done = _make(out)
        assert done.returncode == 2 and f"--out {out} is not a folder" in done.stderr
        assert time.monotonic() - started < 60
    assert plain.read_text() == "not a folder\n" and not (tmp_path / MARKER).exists()


def test_more_images_than_the_disk_takes_are_refused_before_any_is_written(tmp_path):
    """size: `--per-class 10**12` is refused at once, naming the space it needs and the space there is."""
    out = tmp_path / "huge"
    done = _make(out, "--per-class", 10**12)
    assert done.returncode == 2 and f"--out {out}:" in done.stderr and "GB are free there" in done.stderr
    assert not any(out.rglob("*.jpg"))


def test_a_run_cut_short_can_be_run_again_into_its_own_folder(tmp_path):
    """signals / crashes: killed after its marker and a few images (one of them half-written), make-dataset
    finishes the folder when run again, and the marker then says the folder is complete."""
    out = tmp_path / "shapes"
    (out / "disc").mkdir(parents=True)
    (out / MARKER).write_text(json.dumps({**dataset_spec(2, 2, 0), "complete": False}) + "\n")
    (out / "disc" / "disc_0000.jpg").write_bytes(b"\xff\xd8\xff half an image")
    done = _make(out, check=True)
    assert "wrote 4 images" in done.stderr
    assert json.loads((out / MARKER).read_text()) == dataset_spec(2, 2, 0)
    assert (out / "disc" / "disc_0000.jpg").read_bytes()[-2:] == b"\xff\xd9"  # a whole JPEG now
    again = _make(out, "--per-class", 3, check=True)  # and a finished one may be re-made with other numbers
    assert "wrote 6 images" in again.stderr

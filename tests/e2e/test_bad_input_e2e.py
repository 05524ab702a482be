"""Bad data and bad configuration: a clear message, or a counted skip and a run that completes."""

from __future__ import annotations

import os
import re
import socket
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from ddptrain.util import counted

from ..conftest import TINY as TINY_RUN
from ..conftest import read_metrics, run_cli, write_synthetic

TINY = [*TINY_RUN, "--epochs", 1]


def _png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge image: the decompression-bomb guard must stop it."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def awkward(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("awkward") / "data root with spaces"
    write_synthetic(root, classes=2, per_class=10)
    disc = root / "disc"
    (disc / sorted(disc.glob("*.jpg"))[0].name).rename(disc / "fleur d'été 🌼.jpg")  # unicode and spaces
    (disc / "bomb.png").write_bytes(_png_claiming(30000, 30000))
    (disc / "notes.gif").write_bytes(b"GIF89a unsupported extension, never read")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_synthetic(elsewhere, classes=3, per_class=10)
    os.symlink(elsewhere / "star", root / "star", target_is_directory=True)  # symlinked class folder
    return root


def test_awkward_files_are_read_or_skipped_and_training_completes(awkward, tmp_path):
    run_dir = tmp_path / "run"
    run_cli(["train", "--data", awkward, "--out", run_dir, *TINY, "--nproc", 2])
    assert (run_dir / "class_indices.json").read_text().count('"') == 12  # disc, ring, star
    listed = (run_dir / "splits" / "train.txt").read_text() + (run_dir / "splits" / "val.txt").read_text()
    assert "fleur d'été 🌼.jpg" in listed and "star/" in listed and "notes.gif" not in listed
    record = read_metrics(run_dir)[0]
    assert record["skipped_images"] >= 1  # the bomb, skipped and counted
    assert (
        f"epoch 1: {counted(record['skipped_images'], 'unreadable image')} skipped ("
        in (run_dir / "train.log").read_text()
    )


def test_class_with_too_few_images_for_validation_is_named(tmp_path):
    root = write_synthetic(tmp_path / "d", classes=3, per_class=6)
    for extra in sorted((root / "star").glob("*.jpg"))[1:]:
        extra.unlink()  # one image: nothing left for validation
    proc = run_cli(["train", "--data", root, "--out", tmp_path / "run", *TINY])
    assert (
        "no validation image for class star (too few images for --val-split 0.25): its accuracy is not measured"
        in proc.stderr
    )


@pytest.mark.parametrize(
    "layout,message", [("single", "at least two"), ("empty", "has no images"), ("none", "no class sub-folders")]
)
def test_unusable_folders_are_clear_errors(tmp_path, layout, message):
    root = tmp_path / "d"
    root.mkdir()
    if layout in ("single", "empty"):
        write_synthetic(root, classes=1 if layout == "single" else 2, per_class=3)
    if layout == "empty":
        (root / "zzz").mkdir()
    proc = run_cli(["train", "--data", root, "--out", tmp_path / "run", *TINY], check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


def test_resume_with_another_model_or_a_new_class_lists_the_differences(tmp_path):
    root = write_synthetic(tmp_path / "d", classes=2, per_class=6)
    run_cli(["train", "--data", root, "--out", tmp_path / "run", *TINY])
    proc = run_cli(
        [
            "train",
            "--data",
            root,
            "--out",
            tmp_path / "run",
            *TINY,
            "--model",
            "resnet18",
            "--epochs",
            2,
            "--resume",
            "auto",
        ],
        check=False,
    )
    assert proc.returncode != 0 and "model timm:test_resnet vs --model resnet18" in proc.stderr
    write_synthetic(root, classes=3, per_class=6)  # a new class folder appears
    proc = run_cli(
        ["train", "--data", root, "--out", tmp_path / "run", *TINY, "--epochs", 2, "--resume", "auto"], check=False
    )
    assert proc.returncode != 0 and "cannot resume" in proc.stderr and "'star'" in proc.stderr


TORCHRUN_LOG_LINE = re.compile(r"^[IWE]\d{4} .*torch/distributed/", re.MULTILINE)  # torchrun's own log format


@pytest.mark.parametrize("verbose", [False, True])
def test_batch_larger_than_a_rank_shard(tmp_path, tiny_shapes, verbose):
    scratch = tmp_path / "tmp"  # the temporary folder of the launcher and its workers
    scratch.mkdir()
    proc = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            tmp_path / "run",
            *TINY,
            "--batch-size",
            64,
            "--nproc",
            2,
            *(["--verbose"] if verbose else []),
        ],
        check=False,
        env_extra={"TMPDIR": str(scratch)},
    )
    assert proc.returncode != 0 and "less than one optimizer step of --batch-size 64" in proc.stderr
    # every rank found the same problem: it is said once, then the launcher's one-line summary
    assert proc.stderr.count("less than one optimizer step") == 1, proc.stderr
    assert "worker processes failed" in proc.stderr
    assert bool(TORCHRUN_LOG_LINE.search(proc.stderr)) == verbose, proc.stderr  # torchrun's lines: --verbose only
    # nothing left behind: neither torchrun's `torchelastic_*` error-file folder nor the workers' report tokens
    # (torch's compile cache, one per user and reused by every run, is torch's to keep)
    assert sorted(p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_a_batch_larger_than_the_data_on_one_process_says_so_without_fewer_processes(tmp_path, tiny_shapes):
    proc = run_cli(["train", "--data", tiny_shapes, "--out", tmp_path / "run", *TINY, "--batch-size", 512], check=False)
    assert proc.returncode != 0
    assert re.search(r"\d+ training images are less than one optimizer step of --batch-size 512", proc.stderr)
    assert "lower the batch size" in proc.stderr and "fewer processes" not in proc.stderr, proc.stderr


def test_busy_master_port_is_named(tmp_path, tiny_shapes):
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = run_cli(
            ["train", "--data", tiny_shapes, "--out", tmp_path / "run", *TINY, "--nproc", 2, "--master-port", port],
            check=False,
        )
    assert proc.returncode == 2 and f"--master-port {port} is already in use" in proc.stderr


def test_unwritable_out_is_refused_before_start(tmp_path, tiny_shapes):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    proc = run_cli(["train", "--data", tiny_shapes, "--out", blocker / "run", *TINY, "--nproc", 2], check=False)
    assert proc.returncode == 2 and "cannot write to --out" in proc.stderr


def test_unreachable_master_fails_after_the_rendezvous_timeout_with_an_explanation(tmp_path, tiny_shapes):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            tmp_path / "run",
            *TINY,
            "--nproc",
            1,
            "--nnodes",
            2,
            "--node-rank",
            1,
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            port,
            "--rdzv-timeout",
            3,
        ],
        check=False,
        timeout=90,
    )
    assert proc.returncode != 0
    assert (
        "the launcher failed on node 1" in proc.stderr and "init timeout: The processes did not all meet" in proc.stderr
    ), proc.stderr[-2000:]


def test_an_image_over_the_pixel_cap_is_skipped_and_counted(tmp_path):
    """70 Mpx: under PIL's own warning threshold (89 Mpx), so PIL alone would decode it — 70 MB in a loader worker."""
    root = write_synthetic(tmp_path / "d", classes=2, per_class=6)
    Image.new("L", (8400, 8400)).save(root / "disc" / "scan.png")  # compresses to a few hundred KB
    proc = run_cli(["train", "--data", root, "--out", tmp_path / "run", *TINY, "--val-split", 0])
    record = read_metrics(tmp_path / "run")[0]
    assert record["skipped_images"] >= 1
    assert "scan.png: 8400x8400 = 71 Mpx, over the --max-image-pixels limit of 64 Mpx" in proc.stderr

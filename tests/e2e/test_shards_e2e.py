"""Training from a shard set (local and over HTTP) and from a CSV manifest, compared bit for bit with the
runs they must equal."""

from __future__ import annotations

import csv
import http.server
import re
import sys
import threading
from pathlib import Path

import pytest

from ..conftest import (
    RESUME_FLAGS,
    assert_same_weights,
    cli_env,
    fault_env,
    json_lines,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
)

EXIT_PREEMPTED = 75


@pytest.fixture(scope="module")
def shard_set(tiny_shapes, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards") / "set"
    done = run_cli(
        ["shard", "--data", tiny_shapes, "--out", out, "--shard-size", "64KB", "--val-split", 0.25, "--seed", 3]
        + ["--progress-every", 1e-6]  # a line after every image
    )
    (out.parent / "console.txt").write_text(done.stderr)
    return out


def test_shard_reports_progress_in_lines_where_stderr_is_a_pipe(shard_set):
    console = (shard_set.parent / "console.txt").read_text()
    lines = re.findall(r"^shard: (\d+)/(\d+) images \(\d+%\), [\d.]+ images/s, ends in ~\d+s$", console, re.M)
    assert lines and lines[-1] == ("36", "36"), console[-2000:]  # tiny_shapes: 3 classes x 12 images
    assert "\r" not in console  # no bar frames in a pipe


@pytest.fixture(scope="module")
def from_shards(shard_set, tmp_path_factory) -> Path:
    """RESUME_FLAGS on 2 processes from the local shard set, never interrupted."""
    run_dir = tmp_path_factory.mktemp("from-shards") / "run"
    done = run_cli(["train", "--data", shard_set, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2])
    assert "(shards layout)" in done.stderr
    return run_dir


def test_sigterm_mid_epoch_on_shards_resumes_to_the_same_weights(shard_set, from_shards, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", shard_set, "--out", run_dir, *RESUME_FLAGS]
    cmd += ["--nproc", 2, "--log-every", 1]
    with started(cmd, cli_env(fault_env("signal:SIGTERM", rank=0, step=4))) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert saved["partial"]["epoch"] == 1 and saved["partial"]["position"]["lanes"] == 2
    run_cli(["train", "--data", shard_set, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--resume", "auto"])
    assert_same_weights(run_dir, from_shards)


def test_eval_of_a_shard_set_counts_each_validation_image_once_and_matches_the_run(shard_set, from_shards):
    checkpoint = from_shards / "checkpoints" / "last.pt"
    done = run_cli(["eval", "--checkpoint", checkpoint, "--data", shard_set, "--nproc", 2, "--progress-every", 1e-6])
    report = json_lines(done.stdout)
    assert re.search(r"^eval: (\d+/\d+|\d+) batches", done.stderr, re.M), done.stderr[-2000:]  # rank 0's progress
    last = read_metrics(from_shards)[-1]
    assert len(report) == 1 and report[0]["samples"] == 9 and report[0]["skipped"] == 0
    assert report[0]["top1"] == last["val_top1"] and report[0]["loss"] == pytest.approx(last["val_loss"], rel=1e-5)


class _FlakyServer(http.server.SimpleHTTPRequestHandler):
    """Serves the shard folder; the first GET of each name in `fail_once` answers 503."""

    fail_once: set = set()

    def do_GET(self):  # noqa: N802 (http.server's name)
        name = self.path.rsplit("/", 1)[-1]
        if name in self.fail_once:
            self.fail_once.discard(name)
            self.send_error(503, "injected failure")
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def test_http_shards_with_a_failed_download_train_like_local_shards(shard_set, from_shards, tmp_path):
    handler = type("Handler", (_FlakyServer,), {"fail_once": {"train-000001.tar"}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(shard_set)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    cache = {"DDPTRAIN_SHARD_CACHE": str(tmp_path / "cache")}
    try:
        run_dir = tmp_path / "run"
        run_cli(["train", "--data", url, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2], env_extra=cache)
        assert handler.fail_once == set(), "the injected failure was met and retried"
        assert_same_weights(run_dir, from_shards)

        (shard_set / "train-000002.tar").rename(tmp_path / "away.tar")
        try:
            failed = run_cli(
                ["train", "--data", url, "--out", tmp_path / "run2", *RESUME_FLAGS, "--nproc", 1],
                check=False,
                env_extra={"DDPTRAIN_SHARD_CACHE": str(tmp_path / "cache2")},
            )
        finally:
            (tmp_path / "away.tar").rename(shard_set / "train-000002.tar")
        assert failed.returncode != 0
        line = f"shard {url}train-000002.tar is not on the server (HTTP 404"
        assert line in failed.stderr, failed.stderr[-3000:]
        assert "Traceback" not in failed.stderr, failed.stderr[-3000:]
    finally:
        httpd.shutdown()


def test_a_csv_manifest_trains_like_the_folder_it_lists(tiny_shapes, straight, tmp_path):
    manifest = tmp_path / "lists" / "train.csv"
    manifest.parent.mkdir()
    with open(manifest, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label"])
        for image in sorted(Path(tiny_shapes).glob("*/*.jpg"), reverse=True):  # any row order
            writer.writerow([image, image.parent.name])
    run_dir = tmp_path / "run"
    done = run_cli(["train", "--data", manifest, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2])
    assert "(manifest layout)" in done.stderr
    assert_same_weights(run_dir, straight)


def test_a_shard_set_in_s3_stopped_mid_epoch_resumes_to_the_local_sets_weights(
    shard_set, from_shards, s3_store, tmp_path
):
    """The shard set uploaded with boto3 to a real S3-compatible store; SIGTERM mid-epoch, then --resume auto."""
    url = s3_store.upload(shard_set, "runs", "shards")
    env = {**s3_store.env(), "DDPTRAIN_SHARD_CACHE": str(tmp_path / "cache")}
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", url, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2]
    with started([*cmd, "--log-every", 1], cli_env({**env, **fault_env("signal:SIGTERM", rank=0, step=4)})) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    run_cli(["train", "--data", url, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--resume", "auto"], env_extra=env)
    assert_same_weights(run_dir, from_shards)
    checkpoint = from_shards / "checkpoints" / "last.pt"
    report = json_lines(run_cli(["eval", "--checkpoint", checkpoint, "--data", url], env_extra=env).stdout)[0]
    last = read_metrics(from_shards)[-1]
    assert report["samples"] == 9 and report["top1"] == last["val_top1"]
    assert report["loss"] == pytest.approx(last["val_loss"], rel=1e-5)


def test_a_parquet_manifest_stopped_mid_epoch_resumes_to_the_folders_weights(tiny_shapes, straight, tmp_path):
    """The same rows as the CSV above, written by pyarrow; SIGTERM mid-epoch, then --resume auto."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    images = sorted(Path(tiny_shapes).glob("*/*.jpg"), reverse=True)
    manifest = tmp_path / "train.parquet"
    pq.write_table(pa.table({"path": [str(p) for p in images], "label": [p.parent.name for p in images]}), manifest)
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", manifest, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2]
    with started([*cmd, "--log-every", 1], cli_env(fault_env("signal:SIGTERM", rank=0, step=4))) as launcher:
        output, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == EXIT_PREEMPTED, output[-4000:]
    run_cli(["train", "--data", manifest, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2, "--resume", "auto"])
    assert_same_weights(run_dir, straight)
    checkpoint = run_dir / "checkpoints" / "last.pt"
    every = [["eval", "--checkpoint", checkpoint, "--data", data, "--split", "all"] for data in (manifest, tiny_shapes)]
    parquet, folder = (json_lines(run_cli(args).stdout)[0] for args in every)
    assert parquet["samples"] == folder["samples"] == 36 and parquet["top1"] == folder["top1"]
    assert parquet["loss"] == pytest.approx(folder["loss"], rel=1e-5)

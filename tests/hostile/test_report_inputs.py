"""The report reads what a run's files name: a split file edited to point outside the data folder, a link out of
it, or an image damaged since training is not followed or left out — never read, never a crash."""

import pytest

from ddptrain.tools.report import load_run

from ..tools.test_report_html import trained_run  # noqa: F401 - the fixture: a real run with best.pt and a split


@pytest.mark.slow
def test_a_tampered_split_or_a_damaged_image_never_reaches_outside_the_data_folder(trained_run, tmp_path):  # noqa: F811
    """The page reads the images its run's split names: a line naming ../ or a link out of the data folder is not
    followed, and an image that became unreadable is left out; the rest are still shown."""
    import shutil as files

    run, data = tmp_path / "run", tmp_path / "data"
    files.copytree(trained_run, run, symlinks=True)
    files.copytree(load_run(run).config["data"], data)  # the module's run keeps its own data intact
    secret = tmp_path / "secret.jpg"
    files.copy(next(data.rglob("*.jpg")), secret)
    (data / "disc" / "link-out.jpg").symlink_to(secret)
    split = run / "splits" / "val.txt"
    lines = split.read_text().splitlines()
    victim = lines[1].split("\t")[0]
    (data / victim).write_bytes(b"\xff\xd8 no longer an image")
    split.write_text("\n".join([*lines, "../secret.jpg\tdisc", "disc/link-out.jpg\tdisc"]) + "\n")
    from ddptrain.tools.worst import worst_images

    scored, note = worst_images(run, str(data), count=100)
    shown = {item.path for item in scored}
    assert shown and victim not in shown and not shown & {"../secret.jpg", "disc/link-out.jpg"}
    images = len(lines) - 1  # the split file's first line is its header
    assert len(scored) == images - 1  # every readable image inside the folder, and only those
    assert note == (  # not "scored N of N": the damaged image was tried, and left out
        f"scored {images - 1} of {images + 2} validation images with checkpoints/best.pt (1 unreadable image left out)"
    )


def test_a_run_named_twice_is_drawn_once_and_the_repeat_is_said(tmp_path, caplog):
    """Duplicates: `report runs/a runs/a/ link-to-a` drew three runs A, B, C with the same curves, each described
    by an option 'a'; the run is drawn once, and each repeat gets a warning line naming it."""
    import logging
    import warnings

    from ddptrain.tools.report import write_report

    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    rows = [
        f'{{"epoch": {e}, "train_loss": 1.0, "val_loss": 1.1, "val_top1": 0.5, "val_top5": 1.0, "lr": 0.1, '
        f'"images_per_sec": 10.0, "epoch_time_s": 2.0, "world_size": 2}}'
        for e in range(2)
    ]
    (run / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "link").symlink_to(run)
    with caplog.at_level(logging.WARNING, logger="ddptrain"), warnings.catch_warnings():
        warnings.simplefilter("error")  # and no plotting warning for a run that recorded no input wait
        report = write_report([str(run), f"{run}/", str(tmp_path / "link")], tmp_path / "out", thumbnails=False)
    lines = report.read_text().splitlines()
    assert f"Runs: `{run}`" in lines  # one run, named as first given
    assert sum(line.startswith("| a | 2 | 2 |") for line in lines) == 1  # one row of final metrics
    repeats = [r.getMessage() for r in caplog.records if "again; drawn once" in r.getMessage()]
    assert repeats == [
        f"report: {run}/ is the run {run} again; drawn once",
        f"report: {tmp_path / 'link'} is the run {run} again; drawn once",
    ]

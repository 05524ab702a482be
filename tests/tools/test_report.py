"""`ddptrain report`: figures that hold the run's numbers, valid PNGs, and a report.md that embeds them."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from ddptrain.config import Config
from ddptrain.tools.report import (
    ReportError,
    label_runs,
    load_run,
    plot_curves,
    plot_throughput,
    shows_top5,
    summary_row,
    write_report,
)

CLASSES = ["disc", "ring", "star"]


def fake_run(folder: Path, world_size: int, sync_bn: bool, epochs: int = 3) -> Path:
    """A run directory shaped exactly like the trainer's (metrics.jsonl, config.yaml, best_eval.json)."""
    folder.mkdir(parents=True)
    config = Config.from_flat({"data": "data/x", "out": str(folder), "sync_bn": sync_bn, "nproc": world_size}).to_flat()
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    lines = []
    for epoch in range(epochs):
        lines.append(
            json.dumps(
                {
                    "epoch": epoch,
                    "step": 10 * (epoch + 1),
                    "train_loss": 1.5 / (epoch + 1) + 0.1 * sync_bn,
                    "val_loss": 1.6 / (epoch + 1),
                    "val_top1": 0.4 + 0.2 * epoch,
                    "val_top5": 0.9 + 0.05 * epoch,
                    "val_samples": 30,
                    "lr": 0.05 * (1 - epoch / epochs),
                    "images_per_sec": 100.0 * world_size + epoch,
                    "epoch_time_s": 12.0 / world_size + epoch,
                    "data_wait_frac": 0.05 * (epoch + 1),
                    "data_wait_frac_max": 0.1 * (epoch + 1),
                    "skipped_images": 0,
                    "world_size": world_size,
                }
            )
        )
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    confusion = [[9, 1, 0], [2, 7, 1], [0, 0, 10]]
    (folder / "best_eval.json").write_text(
        json.dumps(
            {
                "epoch": epochs - 1,
                "samples": 30,
                "top1": 26 / 30,
                "top5": 1.0,
                "loss": 0.4,
                "skipped": 0,
                "class_names": CLASSES,
                "confusion": confusion,
                "checkpoint": "checkpoints/best.pt",
            }
        )
    )
    return folder


def assert_plotted_png(path: Path) -> None:
    """A valid PNG of a real figure: decodes, has a sensible size, and is not a blank canvas."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("L"), dtype=np.float32)
    assert pixels.shape[0] >= 300 and pixels.shape[1] >= 400, (path, pixels.shape)
    assert (pixels < 200).mean() > 0.01, f"{path} is nearly empty"  # axes, lines, bars and text drawn


def test_one_run_gives_every_figure_and_a_report(tmp_path):
    run = fake_run(tmp_path / "demo", world_size=2, sync_bn=False)
    report = write_report([run])
    assert report == run / "report" / "report.md"
    for name in ("curves.png", "throughput.png", "epoch_time.png", "confusion.png"):
        assert_plotted_png(run / "report" / name)
        assert f"]({name})" in report.read_text()
    text = report.read_text()
    # run, ranks, epochs, final top-1, final val loss: no top-5 column with 3 classes (it would always be 1)
    assert "| demo | 2 | 3 | 0.8000 | 0.5333 |" in text and "top-5" not in text
    assert "0.8000 (3)" in text  # best top-1 and its epoch


def test_curves_carry_the_metrics_of_each_run(tmp_path):
    runs = [load_run(fake_run(tmp_path / "a", 1, False)), load_run(fake_run(tmp_path / "b", 2, True))]
    label_runs(runs)
    assert [r.label for r in runs] == ["1r sb-", "2r sb+"]
    fig = plot_curves(runs)
    loss_ax, acc_ax, lr_ax = fig.axes
    lines = {line.get_label(): line for line in loss_ax.get_lines()}
    assert set(lines) == {
        "1r sb-: train",
        "1r sb-: val",
        "2r sb+: train",
        "2r sb+: val",
    }
    train_b = lines["2r sb+: train"]
    assert list(train_b.get_xdata()) == [1, 2, 3]
    assert list(train_b.get_ydata()) == pytest.approx([1.6, 0.85, 0.6])
    top1 = [line for line in acc_ax.get_lines() if line.get_label().endswith("top-1")]
    assert [list(line.get_ydata()) for line in top1] == [pytest.approx([0.4, 0.6, 0.8])] * 2
    assert [line.get_label() for line in lr_ax.get_lines()] == [r.label for r in runs]


def test_two_runs_overlay_and_compare_epoch_time(tmp_path):
    runs = [fake_run(tmp_path / "one", 1, False), fake_run(tmp_path / "two", 2, True)]
    report = write_report(runs, tmp_path / "cmp")
    names = sorted(p.name for p in (tmp_path / "cmp").glob("*.png"))
    assert names == ["confusion-1-one.png", "confusion-2-two.png", "curves.png", "epoch_time.png", "throughput.png"]
    for name in names:
        assert_plotted_png(tmp_path / "cmp" / name)
    text = report.read_text()
    assert "## How the runs differ" in text and "| sync_bn | False | True |" in text and "| ranks | 1 | 2 |" in text
    assert "| 1r sb- | 1 | 3 |" in text and "| 2r sb+ | 2 | 3 |" in text
    assert "| 2r sb+ | `" in text and "| 2 ranks, sync-bn on |" in text  # the runs table says what a label stands for


def test_a_run_without_best_eval_says_how_to_make_one(tmp_path):
    run = fake_run(tmp_path / "old", 1, False)
    (run / "best_eval.json").unlink()
    text = write_report([run]).read_text()
    assert not (run / "report" / "confusion.png").exists()
    assert f"ddptrain eval --checkpoint {run}/checkpoints/best.pt" in text


def test_a_folder_that_is_not_a_run_is_named(tmp_path):
    with pytest.raises(ReportError, match="no metrics.jsonl"):
        write_report([tmp_path])


def test_a_damaged_metrics_line_is_named_and_a_cut_short_last_one_left_out(tmp_path, caplog):
    run = fake_run(tmp_path / "r", 1, False)
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"epoch": 3, "train_lo\n')  # a write cut short by a crash
    with caplog.at_level("WARNING", logger="ddptrain"):
        assert load_run(run).epochs[-1]["epoch"] == 2  # the three whole epochs, 0..2
    assert "left out an unreadable last line" in caplog.text
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"epoch": 4}\n')  # now the damaged line sits in the middle: someone edited the file
    with pytest.raises(ReportError, match=r"metrics.jsonl:4 is not a metrics line"):
        write_report([run])


def test_an_option_one_run_leaves_unset_gives_no_none_in_its_label(tmp_path):
    """Seen on real runs: 'dmsNone ep5' beside 'dms256 ep2' (--data-max-side unset in one)."""
    runs = [load_run(fake_run(tmp_path / name, 2, False)) for name in ("a", "b", "c")]
    runs[1].config["data_max_side"] = 256
    for run, epochs in zip(runs, (5, 2, 4)):
        run.config["epochs"] = epochs
    label_runs(runs)
    assert [r.label for r in runs] == ["ep5", "dms256 ep2", "ep4"]
    assert runs[0].description == "data-max-side unset, epochs 5"  # the legend table says it


def test_top5_is_a_column_where_it_can_be_below_1(tmp_path):
    run = load_run(fake_run(tmp_path / "a", 2, False))
    assert "final top-5" not in summary_row(run, shows_top5([run]))
    run.best_eval["class_names"] = [f"c{i}" for i in range(6)]
    assert summary_row(run, shows_top5([run]))["final top-5"] == "1.0000"


def test_a_run_of_few_classes_beside_one_of_many_gets_no_top5(tmp_path):
    """Beside a run of 6 classes, a run of 3 showed its top-5 of 1.0 in the table and as a line on the chart."""
    few, many = (load_run(fake_run(tmp_path / name, 2, False)) for name in ("few", "many"))
    many.best_eval["class_names"] = [f"c{i}" for i in range(6)]
    runs = [few, many]
    label_runs(runs)
    assert [summary_row(run, shows_top5(runs))["final top-5"] for run in runs] == ["–", "1.0000"]
    labels = [line.get_label() for line in plot_curves(runs).axes[1].get_lines()]
    assert [label for label in labels if "top-5" in label] == [f"{many.label}: top-5"]


def test_the_throughput_axis_starts_at_0_and_leaves_room_above_the_fastest_epoch(tmp_path):
    """Seen on a page: a steady 150 img/s ran along the top edge of its chart (the top was the data's own margin)."""
    runs = [load_run(fake_run(tmp_path / "a", 2, False)), load_run(fake_run(tmp_path / "b", 1, False))]
    label_runs(runs)
    speed_ax = plot_throughput(runs).axes[0]
    fastest = max(max(run.series("images_per_sec")[1]) for run in runs)  # 202 img/s, run a's last epoch
    bottom, top = speed_ax.get_ylim()
    assert bottom == 0 and top >= 1.05 * fastest

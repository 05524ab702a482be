"""`report.html` opened in a real browser (headless Chromium, Debian's `chromium`): it renders without console
errors, every figure and every thumbnail loads, and a screenshot is kept; a damaged image is caught the same way.
The figures: no layout warnings, labels beside the bars, top-5 left out where it cannot say anything, short legends."""

import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from ddptrain.tools.report import label_runs, load_run, plot_confusion, plot_curves, write_report

from ..conftest import run_cli, write_synthetic
from .test_report import fake_run

SCREENSHOTS = Path(__file__).resolve().parents[1] / ".screenshots"  # kept after the run, for a person to look at


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium here: `make test` installs Debian's chromium package (scripts/install-chromium.sh)")


def _open(page: Path, screenshot: Path) -> tuple:
    """(the DOM after load, the console's lines) of `page` in headless Chromium, and a screenshot of it."""
    browser = _chromium()
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    common += ["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--window-size=1300,2600"]
    try:
        dom = subprocess.run(
            [*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
        )
        subprocess.run(
            [*common, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120, check=True
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"Chromium could not start here: {str(error)[:300]}")
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    return dom.stdout, console


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A real run with a best checkpoint and a validation split, so the page has thumbnails."""
    root = tmp_path_factory.mktemp("html")
    data = write_synthetic(root / "data", classes=3, per_class=10)
    run_dir = root / "run"
    run_cli(
        ["train", "--data", data, "--out", run_dir, "--model", "timm:test_resnet", "--img-size", 32]
        + ["--batch-size", 4, "--epochs", 2, "--nproc", 2, "--workers", 0, "--optimizer", "adamw", "--lr", 3e-3]
    )
    return run_dir


@pytest.mark.slow
def test_the_page_renders_with_every_figure_and_thumbnail_and_no_console_error(trained_run):
    proc = run_cli(["report", trained_run])
    page = trained_run / "report" / "report.html"
    assert page.is_file() and "report.html" in proc.stderr + proc.stdout
    # a caption too narrow for `class/file.jpg` wraps after the folder, not inside the file's name
    assert re.search(r"<span class=path>[^<>/]+/<wbr>[^<>/]+\.\w+</span>", page.read_text())
    SCREENSHOTS.mkdir(exist_ok=True)
    dom, console = _open(page, SCREENSHOTS / "report-one-run.png")
    assert not console, console
    assert '<span class="missing">' not in dom
    images = re.findall(r"<img [^>]*src=\"data:image/(png|jpeg);base64,[A-Za-z0-9+/=]{100,}", dom)
    assert images.count("png") == 4  # curves, throughput, epoch time, confusion
    assert images.count("jpeg") >= 6  # the worst-classified validation images (6 of them here)
    assert "Worst-classified validation images" in dom and "Per class, worst first" in dom
    assert (SCREENSHOTS / "report-one-run.png").stat().st_size > 20_000


@pytest.mark.slow
def test_a_figure_that_does_not_load_is_caught(trained_run, tmp_path):
    """The check above can fail: a page whose first figure is damaged shows 'missing' and logs an error."""
    page = trained_run / "report" / "report.html"
    if not page.is_file():
        run_cli(["report", trained_run])
    damaged = tmp_path / "damaged.html"
    damaged.write_text(re.sub(r"base64,[A-Za-z0-9+/=]{40}", "base64,!!!!", page.read_text(), count=1))
    dom, console = _open(damaged, tmp_path / "damaged.png")
    assert '<span class="missing">missing: ' in dom and any("missing image" in line for line in console)


def test_several_runs_get_short_labels_and_a_table_of_what_they_stand_for(tmp_path):
    runs = []
    for i, (ranks, sync) in enumerate([(1, False), (2, True), (4, False)]):
        runs.append(fake_run(tmp_path / f"r{i}", ranks, sync))
    loaded = [load_run(path) for path in runs]
    label_runs(loaded)
    assert all(len(run.label) <= 28 for run in loaded), [run.label for run in loaded]
    assert [run.label for run in loaded] == ["1r sb-", "2r sb+", "4r sb-"]
    assert loaded[1].description == "2 ranks, sync-bn on"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied" and the like
        report = write_report(runs, tmp_path / "out", thumbnails=False)
    text = report.read_text()
    assert "| run | folder | options that differ |" in text and "| 2r sb+ |" in text
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<td>2 ranks, sync-bn on</td>" in page


def test_a_long_difference_becomes_a_letter_explained_in_the_table(tmp_path):
    paths = [fake_run(tmp_path / "a", 2, False), fake_run(tmp_path / "b", 2, True)]
    for path, lr in zip(paths, (0.1, 0.025)):
        config = path / "config.yaml"
        text = re.sub(r"(?m)^(\s*)lr: .*$", rf"\g<1>lr: {lr}", config.read_text())
        text = re.sub(r"(?m)^(\s*)weight_decay: .*$", r"\g<1>weight_decay: 0.3", text)
        config.write_text(text.replace("model: resnet18", f"model: timm:a_long_model_name_{lr}"))
    loaded = [load_run(path) for path in paths]
    label_runs(loaded)
    assert [run.label for run in loaded] == ["A", "B"]
    assert "model timm:a_long_model_name_0.1" in loaded[0].description


def test_per_class_bars_carry_their_labels_beside_them_and_many_classes_show_the_ends(tmp_path):
    run = load_run(fake_run(tmp_path / "r", 1, False))
    names = [f"class{i:03d}" for i in range(200)]
    run.best_eval.update(
        class_names=names,
        confusion=[[(i % 7) if j == i else (1 if j == (i + 1) % 200 else 0) for j in range(200)] for i in range(200)],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = plot_confusion(run)
    bars = figure.axes[1]  # the confusion matrix, the per-class bars, the colour bar
    shown = [tick.get_text() for tick in bars.get_yticklabels()]
    assert len(shown) == 30 and "15 worst and the 15 best of 200" in bars.get_title()
    for text in bars.texts:  # every label starts right of its bar's end
        bar_end = float(text.get_text().split()[0])
        assert text.xy[0] >= bar_end - 1e-9


def test_top5_is_not_drawn_where_there_are_five_classes_or_fewer(tmp_path):
    run = load_run(fake_run(tmp_path / "r", 1, False))
    label_runs([run])
    accuracy = plot_curves([run]).axes[1]
    assert [line.get_label() for line in accuracy.get_lines()] == ["top-1"]

"""`ddptrain report`: figures and a report.md from one or more run directories.

Everything comes from files the run already wrote: `metrics.jsonl` (one object per epoch),
`config.yaml` (the legend: what differs between the runs) and `best_eval.json` (the best
checkpoint's evaluation: confusion matrix and per-class accuracy). Nothing is recomputed.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import yaml

from ..config import format_channels, migrate, parse_channels
from ..config.sections import EVAL_METRICS
from ..errors import ConfigError, DdptrainError
from ..util import DamagedLine, first_line, markdown_table, read_epoch_records, top5_says_something

log = logging.getLogger("ddptrain")

# How the report treats an option whose value differs between runs: named in figure legends and in the differences
# table (LEGEND, the recipe: every option not listed below), in the table only (TABLE: paths, logging, fault
# tolerance), or never (HIDDEN: where a run was written, how its processes met).
LEGEND, TABLE, HIDDEN = "legend", "table", "hidden"
ROLES = {
    **dict.fromkeys(
        ("data", "max_image_pixels", "max_image_mb", "fetch_timeout", "workers", "stop_after_epochs", "log_every")
        + ("progress_every",)
        + ("save_every_steps", "keep_last", "eval_every", "log_to", "rdzv_endpoint", "rdzv_conf", "rdzv_timeout")
        + ("iface", "max_restarts", "dist_timeout"),
        TABLE,
    ),
    **dict.fromkeys(
        ("out", "resume", "overwrite", "nproc", "nnodes", "node_rank", "master_addr", "master_port", "rdzv_id"), HIDDEN
    ),
}


def report_role(flat_key: str) -> str:
    """LEGEND, TABLE or HIDDEN for a key of a saved config (unknown keys, e.g. a newer ddptrain's: LEGEND)."""
    return ROLES.get(flat_key, LEGEND)


MAX_ANNOTATED_CLASSES = 15  # beyond this the confusion matrix cells carry no numbers
MAX_CLASS_BARS = 30  # per-class accuracy bars: beyond this, the worst and the best 15, and a note
MAX_LABEL = 28  # a longer legend label becomes a letter, explained in the runs table
MAX_LABELLED_BARS = 15  # beyond this the epoch-time bars carry no numbers
COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


class ReportError(DdptrainError):
    pass


@dataclass
class Run:
    path: Path
    config: Dict
    epochs: List[Dict]
    best_eval: Optional[Dict]
    label: str = ""  # in legends and table headers: short
    description: str = ""  # what the label stands for: every option that differs, in full

    @property
    def world_size(self) -> Optional[int]:
        return self.epochs[-1].get("world_size") if self.epochs else None

    @property
    def classes(self) -> Optional[int]:
        return len(self.best_eval["class_names"]) if self.best_eval and "class_names" in self.best_eval else None

    def steady_epochs(self) -> List[Dict]:
        """The epochs after the first, whose time and throughput carry no start-up cost (all, if only one)."""
        return self.epochs[1:] or self.epochs

    def series(self, key: str) -> tuple:
        """(epoch numbers from 1, values) for the epochs that have `key`."""
        points = [(e["epoch"] + 1, e[key]) for e in self.epochs if e.get(key) is not None]
        return tuple(zip(*points)) if points else ((), ())


def load_run(path: str | Path) -> Run:
    path = Path(path)
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise ReportError(
            f"{path} is not a run directory (no metrics.jsonl); give the --out folder of a "
            "`ddptrain train` run that finished at least one epoch"
        )
    try:
        records, cut_short = read_epoch_records(metrics)
    except DamagedLine as error:
        raise ReportError(str(error)) from None
    if cut_short is not None:
        log.warning("%s: left out an unreadable last line (a write cut short, or an epoch being written)", metrics)
    by_epoch = {record["epoch"]: record for record in records}  # a redone epoch (after a resume) replaces the old
    if not by_epoch:
        raise ReportError(f"{metrics} is empty: the run has not finished an epoch yet")
    config_file, best_file = path / "config.yaml", path / "best_eval.json"
    best = json.loads(best_file.read_text()) if best_file.is_file() else None
    return Run(path, _read_config(config_file), [by_epoch[k] for k in sorted(by_epoch)], best)


def _read_config(path: Path) -> Dict:
    """A run's config.yaml as flat options in the current format (any version it was written in), per-channel
    values as text, so runs written by different ddptrain versions compare alike."""
    if not path.is_file():
        return {}
    raw = yaml.safe_load(path.read_text()) or {}
    try:
        flat = migrate(raw, str(path)) if isinstance(raw, dict) else {}
    except ConfigError as error:
        raise ReportError(str(error)) from None
    for key, value in flat.items():
        channels = parse_channels(value) if key in ("mean", "std") else None
        if channels is not None:
            flat[key] = format_channels(channels)
    return flat


def label_runs(runs: List[Run]) -> None:
    """Each run's legend: the options in which it differs from the others (and its number of ranks)."""
    if len(runs) == 1:
        runs[0].label = runs[0].description = runs[0].path.name
        return
    # Legends are short: they leave out paths, fault-tolerance and logging settings and the plumbing
    # (the number of processes is shown as "ranks", measured, instead of --nproc/--nnodes).
    keys = sorted(k for k in {k for run in runs for k in run.config} if report_role(k) == LEGEND)
    differing = [k for k in keys if len({repr(run.config.get(k)) for run in runs}) > 1]
    ranks_differ = len({run.world_size for run in runs}) > 1
    for run in runs:
        parts = [f"{run.world_size} rank{'s' if run.world_size != 1 else ''}"] if ranks_differ else []
        run.description = ", ".join(parts + [_describe_option(k, run.config.get(k)) for k in differing])
        short = [f"{run.world_size}r"] if ranks_differ else []
        named = [_abbreviate(k, run.config.get(k)) for k in differing if run.config.get(k) is not None]  # unset: none
        run.label = " ".join(short + named) or run.path.name
    labels = [run.label for run in runs]
    if max(map(len, labels)) > MAX_LABEL or len(set(labels)) < len(labels):
        for i, run in enumerate(runs):  # too long for a legend, or not telling runs apart: letters, and a table
            run.label = _letter(i)
    for run in runs:
        run.description = run.description or run.path.name


SHORT = {"optimizer": "opt", "schedule": "sched", "epochs": "ep", "momentum": "mom", "strategy": "", "amp": "amp"}


def _letter(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def _abbreviate(key: str, value) -> str:
    """batch_size 32 -> bs32, weight_decay 0.0001 -> wd0.0001, model timm:test_resnet -> test_resnet."""
    words = key.split("_")
    name = SHORT.get(key) or (key if len(key) <= 5 else key[:3]) if len(words) == 1 else "".join(w[0] for w in words)
    if isinstance(value, bool):
        return f"{name}{'+' if value else '-'}"
    text = str(value).split(":")[-1].split("/")[-1] if isinstance(value, str) else str(value)
    return f"{name}{text}" if key != "model" else text


def _describe_option(key: str, value) -> str:
    name = key.replace("_", "-")
    if value is None:
        return f"{name} unset"
    if isinstance(value, bool):
        return f"{name} {'on' if value else 'off'}"
    return f"{name} {value}"


def config_differences(runs: List[Run]) -> List[Dict]:
    """One row per option whose value differs between the runs (plus the measured number of ranks)."""
    rows = []
    if len({run.world_size for run in runs}) > 1:
        rows.append({"option": "ranks", **{run.label: run.world_size for run in runs}})
    for key in sorted(k for k in {k for run in runs for k in run.config} if report_role(k) != HIDDEN):
        values = [run.config.get(key) for run in runs]
        if len({repr(v) for v in values}) > 1:
            rows.append({"option": key, **{run.label: "–" if v is None else v for run, v in zip(runs, values)}})
    return rows


# ---- figures --------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(ax, title: str, ylabel: str, xlabel: str = "epoch", categories: bool = False) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if not categories:  # epochs are whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _plot(ax, run: Run, key: str, color: str, label: str, **kw) -> None:
    xs, ys = run.series(key)
    if xs:
        ax.plot(xs, ys, color=color, label=label, marker="o", markersize=3, **kw)


def plot_curves(runs: List[Run]):
    """Loss, accuracy and learning rate per epoch, one colour per run."""
    plt = _pyplot()
    fig, (loss_ax, acc_ax, lr_ax) = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
    several = len(runs) > 1
    top5 = shows_top5(runs)
    for i, run in enumerate(runs):
        color, name = COLORS[i % len(COLORS)], (run.label + ": " if several else "")
        _plot(loss_ax, run, "train_loss", color, f"{name}train")
        _plot(loss_ax, run, "val_loss", color, f"{name}val", linestyle="--")
        _plot(acc_ax, run, "val_top1", color, f"{name}top-1")
        if top5 and shows_top5([run]):  # a run of 5 classes or fewer beside one of more: its top-5 is always 1
            _plot(acc_ax, run, "val_top5", color, f"{name}top-5", linestyle=":")
        _plot(lr_ax, run, "lr", color, run.label)
    losses = [v for run in runs for key in ("train_loss", "val_loss") for v in run.series(key)[1] if v and v > 0]
    spread = bool(losses) and max(losses) / min(losses) > 100  # one diverged epoch would flatten the rest
    _style(loss_ax, "loss (solid: train, dashed: validation)" + (", log scale" if spread else ""), "cross-entropy")
    if spread:
        loss_ax.set_yscale("log")
    _style(acc_ax, "validation accuracy" + (" (solid: top-1, dotted: top-5)" if top5 else ", top-1"), "accuracy")
    acc_ax.set_ylim(0, 1.02)
    _style(lr_ax, "learning rate at the end of each epoch", "lr")
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for ax in (loss_ax, acc_ax):
        ax.legend(fontsize=8)
    if several:
        lr_ax.legend(fontsize=8)
    return fig


def plot_throughput(runs: List[Run]):
    """Images per second (all ranks together) and the share of step time spent waiting for data."""
    plt = _pyplot()
    fig, (speed_ax, wait_ax) = plt.subplots(1, 2, figsize=(11, 4.0), layout="constrained")
    for i, run in enumerate(runs):
        color = COLORS[i % len(COLORS)]
        _plot(speed_ax, run, "images_per_sec", color, run.label)
        xs, ys = run.series("data_wait_frac")
        if xs:
            wait_ax.plot(xs, [100 * y for y in ys], color=color, marker="o", markersize=3, label=f"{run.label}: mean")
        xs, ys = run.series("data_wait_frac_max")
        if xs:
            wait_ax.plot(
                xs,
                [100 * y for y in ys],
                color=color,
                marker="^",
                markersize=3,
                linestyle="--",
                label=f"{run.label}: slowest rank",
            )
    _style(speed_ax, "training throughput (all ranks)", "images / s")
    peak = max((v for run in runs for v in run.series("images_per_sec")[1] if v), default=0.0)
    speed_ax.set_ylim(0, 1.1 * peak if peak > 0 else None)  # from 0, with room above the fastest epoch's point
    _style(wait_ax, "time waiting for the input pipeline", "% of step time")
    wait_ax.set_ylim(0, 100)
    wait_ax.axhline(20, color="#999999", linewidth=0.8, linestyle=":")
    wait_ax.annotate(
        "input-bound above 20%", (0.01, 21), xycoords=("axes fraction", "data"), fontsize=8, color="#666666"
    )
    for ax in (speed_ax, wait_ax):
        if ax.get_legend_handles_labels()[0]:  # a run from before data_wait_frac was recorded draws no wait line
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not recorded by this run", transform=ax.transAxes, ha="center", color="#666666")
    return fig


def plot_epoch_time(runs: List[Run]):
    """One run: seconds per epoch. Several: each run's mean epoch time after the first epoch (which
    carries start-up), whiskers from its fastest to its slowest epoch."""
    plt = _pyplot()
    if len(runs) == 1:
        xs, ys = runs[0].series("epoch_time_s")
        labels, values, spans = [str(x) for x in xs], list(ys), None
        title, top = "time per epoch (training + evaluation + checkpoint)", max(ys, default=0.0)
    else:
        times = [
            [e["epoch_time_s"] for e in run.steady_epochs() if e.get("epoch_time_s") is not None] or [0.0]
            for run in runs
        ]
        labels = [run.label for run in runs]
        values = [sum(t) / len(t) for t in times]
        spans = [[v - min(t) for v, t in zip(values, times)], [max(t) - v for v, t in zip(values, times)]]
        title = "mean time per epoch, first epoch excluded\n(whiskers: fastest and slowest epoch)"
        top = max(map(max, times))
    fig, ax = plt.subplots(figsize=(min(12.0, max(5.0, 0.9 * len(labels) + 3)), 4.0), layout="constrained")
    colors = [COLORS[i % len(COLORS)] for i in range(len(labels))] if len(runs) > 1 else COLORS[0]
    ax.bar(range(len(labels)), values, color=colors, yerr=spans, capsize=4 if spans else 0)
    if len(labels) <= MAX_LABELLED_BARS:  # above each bar (and its whisker), in the text colour
        heights = [v + (spans[1][i] if spans else 0.0) for i, v in enumerate(values)]
        for x, (value, height) in enumerate(zip(values, heights)):
            ax.text(x, height + 0.02 * top, f"{value:.1f}s", ha="center", va="bottom", fontsize=9)
    ax.set_ylim(0, max(top, 1e-9) * 1.18)
    _style(ax, title, "seconds", xlabel="epoch" if len(runs) == 1 else "run", categories=True)
    every = 1 if len(runs) > 1 else -(-len(labels) // MAX_LABELLED_BARS)  # runs: each; epochs: every few
    ax.set_xticks(range(0, len(labels), every), labels[::every], fontsize=8 if len(runs) > 1 else None)
    return fig


def plot_confusion(run: Run):
    """The best checkpoint's confusion matrix (rows: true class, normalised) and per-class accuracy."""
    plt = _pyplot()
    best = run.best_eval
    if best is None:
        raise ReportError(f"{run.path} has no best_eval.json: no confusion matrix to draw")
    names, matrix = best["class_names"], best["confusion"]
    n = len(names)
    rows = [[cell / max(sum(row), 1) for cell in row] for row in matrix]
    side = min(14.0, 3.0 + 0.45 * n)
    fig, (cm_ax, acc_ax) = plt.subplots(
        1, 2, figsize=(2 * side + 1, side), gridspec_kw={"width_ratios": [1.1, 1]}, layout="constrained"
    )
    image = cm_ax.imshow(rows, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=cm_ax, fraction=0.046, pad=0.04, label="share of the true class")
    ticks = range(n) if n <= 60 else []
    cm_ax.set_xticks(list(ticks), [names[i] for i in ticks], rotation=45, ha="right", fontsize=8)
    cm_ax.set_yticks(list(ticks), [names[i] for i in ticks], fontsize=8)
    cm_ax.set_xlabel("predicted class")
    cm_ax.set_ylabel("true class")
    if n <= MAX_ANNOTATED_CLASSES:
        for r in range(n):
            for c in range(n):
                cm_ax.text(
                    c,
                    r,
                    str(matrix[r][c]),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if rows[r][c] > 0.5 else "black",
                )
    cm_ax.set_title(f"confusion matrix, {best['samples']} validation images", fontsize=11)
    accs = [row[i] / max(sum(row), 1) for i, row in enumerate(matrix)]
    order = sorted(range(n), key=lambda i: accs[i])  # worst class at the top
    half = MAX_CLASS_BARS // 2
    shown = order if n <= MAX_CLASS_BARS else order[:half] + order[-half:]
    bars = acc_ax.barh(range(len(shown)), [accs[i] for i in shown], color=COLORS[0])
    acc_ax.set_yticks(range(len(shown)), [names[i] for i in shown], fontsize=8)
    counts = [f"{accs[i]:.3f} ({matrix[i][i]}/{sum(matrix[i])})" for i in shown]
    acc_ax.bar_label(bars, labels=counts, label_type="edge", padding=3, fontsize=8)  # beside the bar, never on it
    acc_ax.invert_yaxis()
    acc_ax.set_xlim(0, 1.3)  # room for the labels of full bars
    acc_ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    acc_ax.axvline(best["top1"], color=COLORS[3], linestyle="--", linewidth=1)
    which = "worst first" if n <= MAX_CLASS_BARS else f"the {half} worst and the {half} best of {n}"
    acc_ax.set_title(f"per-class accuracy, {which}\n(dashed: overall {best['top1']:.3f})", fontsize=11)
    acc_ax.set_xlabel("top-1 accuracy")
    acc_ax.grid(True, axis="x", alpha=0.3)
    if n > MAX_CLASS_BARS:
        acc_ax.axhline(half - 0.5, color="#999999", linewidth=0.8, linestyle=":")
    when = f" (epoch {best['epoch'] + 1})" if "epoch" in best else ""
    fig.suptitle(f"{run.label}: best checkpoint{when}, top-1 {best['top1']:.3f}", fontsize=12)
    return fig


# ---- the report -----------------------------------------------------------------------------------
def shows_top5(runs: List[Run]) -> bool:
    """Whether top-5 says anything: with 5 classes or fewer it is always 1 (a run that recorded none may have more)."""
    return any(run.classes is None or top5_says_something(run.classes) for run in runs)


def summary_row(run: Run, top5: bool = True) -> Dict:
    last = run.epochs[-1]
    metric = last.get("eval_metric", "top1")  # --eval-metric; runs before it existed picked by top-1
    sign = -1.0 if EVAL_METRICS.get(metric) == "min" else 1.0
    evaluated = [e for e in run.epochs if f"val_{metric}" in e] or run.epochs
    best = max(evaluated, key=lambda e: sign * e.get(f"val_{metric}", -math.inf * sign))
    steady = run.steady_epochs()
    return {
        "run": run.label,
        "ranks": run.world_size,
        "epochs": last["epoch"] + 1,
        "final top-1": _fmt(last.get("val_top1"), 4),
        **({"final top-5": _fmt(last.get("val_top5") if shows_top5([run]) else None, 4)} if top5 else {}),
        "final val loss": _fmt(last.get("val_loss"), 4),
        "best (epoch)": f"{metric} {best.get(f'val_{metric}', 0.0):.4f} ({best['epoch'] + 1})",
        "images/s": _fmt(_mean(e.get("images_per_sec") for e in steady), 1),
        "epoch time s": _fmt(_mean(e.get("epoch_time_s") for e in steady), 2),
    }


def _mean(values) -> Optional[float]:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _fmt(value: Optional[float], decimals: int) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def _distinct(run_dirs: Sequence[str | Path]) -> List[str | Path]:
    """The run folders, each once: a folder named twice (`runs/a runs/a/`, or through a link) would be drawn as two
    runs with the same curves; it is kept where it was first named, and the repeat is said."""
    seen: Dict[Path, str | Path] = {}
    for path in run_dirs:
        where = Path(path).resolve()
        if where in seen:
            log.warning("report: %s is the run %s again; drawn once", path, seen[where])
        else:
            seen[where] = path
    return list(seen.values())


def write_report(run_dirs: Sequence[str | Path], out: Optional[str | Path] = None, thumbnails: bool = True) -> Path:
    """Write the figures, report.md and report.html; return the report.md path. `thumbnails`: score each run's
    validation images with its best checkpoint for the page's worst-classified images (needs torch)."""
    runs = [load_run(path) for path in _distinct(run_dirs)]
    label_runs(runs)
    out_dir = Path(out) if out else (runs[0].path / "report" if len(runs) == 1 else Path("report"))
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        "curves.png": ("Loss, accuracy and learning rate", plot_curves(runs)),
        "throughput.png": ("Throughput and input wait", plot_throughput(runs)),
        "epoch_time.png": ("Epoch time", plot_epoch_time(runs)),
    }
    missing = []
    for i, run in enumerate(runs):
        if run.best_eval is None or run.best_eval.get("confusion") is None:
            missing.append(run)
            continue
        name = "confusion.png" if len(runs) == 1 else f"confusion-{i + 1}-{_slug(run.path.name)}.png"
        whose = "" if len(runs) == 1 else f" of {run.label}"
        title = f"Best checkpoint{whose}: confusion matrix and per-class accuracy"
        figures[name] = (title, plot_confusion(run))
    plt = _pyplot()
    for name, (_, fig) in figures.items():
        fig.savefig(out_dir / name, dpi=100)
        plt.close(fig)
    titles = {name: title for name, (title, _) in figures.items()}
    report = out_dir / "report.md"
    summary = [summary_row(run, shows_top5(runs)) for run in runs]
    report.write_text(_markdown(runs, summary, titles, missing))
    worst = {run.label: _worst_of(run, thumbnails) for run in runs}
    from .reporthtml import page

    legend = [{"run": run.label, "folder": str(run.path), "options that differ": run.description} for run in runs]
    text = page(runs, titles, out_dir, summary, legend, config_differences(runs), worst)
    (out_dir / "report.html").write_text(text, encoding="utf-8")
    log.info("wrote %s, report.html and %d figures in %s", report.name, len(figures), out_dir)
    return report


def _worst_of(run: Run, thumbnails: bool) -> tuple:
    if not thumbnails:
        return [], ""
    from .worst import worst_images

    try:
        return worst_images(run.path, run.config.get("data"))
    except ImportError as error:  # torch is not importable here
        return [], f"no thumbnails: scoring images needs torch ({error})"
    except (DdptrainError, OSError, ValueError) as error:
        return [], f"no thumbnails: {first_line(error)}"


def _markdown(runs: List[Run], summary: List[Dict], figures: Dict[str, str], missing: List[Run]) -> str:
    """`summary`: each run's summary_row; `figures`: file name -> section title, in order."""
    columns = list(summary[0])
    lines = [
        "# ddptrain report",
        "",
        "Runs: " + ", ".join(f"`{run.path}`" for run in runs),
        "",
        "## Final metrics",
        "",
        markdown_table(columns, summary),
        "",
        "images/s and epoch time: mean over the epochs after the first (start-up excluded).",
        "",
    ]
    if len(runs) > 1:
        legend = [{"run": run.label, "folder": f"`{run.path}`", "options that differ": run.description} for run in runs]
        lines += ["## Runs", "", markdown_table(["run", "folder", "options that differ"], legend), ""]
        differences = config_differences(runs)
        if differences:
            lines += [
                "## How the runs differ",
                "",
                markdown_table(["option"] + [r.label for r in runs], differences),
                "",
            ]
    for name, title in figures.items():
        lines += [f"## {title}", "", f"![{title}]({name})", ""]
    for run in missing:
        if run.best_eval is not None:  # more classes than a confusion matrix is kept for
            lines += [
                f"`{run.path}`: {len(run.best_eval['class_names'])} classes, too many for a confusion matrix; "
                "per-class counts are in its `best_eval.json`.",
                "",
            ]
            continue
        lines += [
            f"No `best_eval.json` in `{run.path}` (a run from before it was written): make one with "
            f"`ddptrain eval --checkpoint {run.path}/checkpoints/best.pt --data DATA > "
            f"{run.path}/best_eval.json`.",
            "",
        ]
    return "\n".join(lines)

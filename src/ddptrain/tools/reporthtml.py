"""`report.html`: one self-contained page (figures and thumbnails inlined, no network) with what `report.md` has —
the final metrics, the figures — and what a browser shows better: the per-class table, the worst-classified
validation images of the best checkpoint, the options (those that differ, for several runs), the timing."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .worst import Scored

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f5f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img.figure { max-width: 100%; border: 1px solid #eee; }
.grid { display: flex; flex-wrap: wrap; gap: 0.8em; }
.thumb { width: 150px; font-size: 0.8em; } .thumb img { width: 112px; height: 112px; object-fit: contain; }
.thumb .path { overflow-wrap: anywhere; color: #555; }
.wrong { color: #b22; } .note { color: #666; font-size: 0.85em; } .missing { color: #b22; font-weight: bold; }
"""

# An image that fails to load says so on the page and in the console (which the tests read).
ON_ERROR = (
    "this.outerHTML='<span class=missing>missing: '+this.alt+'</span>';console.error('ddptrain report: missing image');"
)
TIMING_KEYS = (
    ("images/s (all ranks)", "images_per_sec", "{:.1f}"),
    ("epoch time, s", "epoch_time_s", "{:.2f}"),
    ("step time, s", "step_time_s", "{:.3f}"),
    ("waiting for data, mean rank", "data_wait_frac", "{:.0%}"),
    ("waiting for data, slowest rank", "data_wait_frac_max", "{:.0%}"),
    ("step time spread between ranks", "step_time_spread", "{:.0%}"),
    ("peak memory, MB", "max_mem_mb", "{:.0f}"),
)


def page(
    runs,
    figures: Dict[str, str],
    folder: Path,
    summary: List[Dict],
    legend: List[Dict],
    differences: List[Dict],
    worst: Dict[str, tuple],
) -> str:
    """The page. `figures`: PNG file name in `folder` -> title; `worst`: run label -> (scored images, note)."""
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>ddptrain report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>ddptrain report</h1>",
        "<h2>Final metrics</h2>",
        _table(list(summary[0]), summary),
        "<p class=note>images/s and epoch time: mean over the epochs after the first (start-up excluded).</p>",
    ]
    if len(runs) > 1:
        parts += ["<h2>Runs</h2>", _table(["run", "folder", "options that differ"], legend)]
        if differences:
            parts += ["<h2>How the runs differ</h2>", _table(list(differences[0]), differences)]
    for name, title in figures.items():
        parts += [f"<h2>{html.escape(title)}</h2>", _image(folder / name, title, "figure")]
    for run in runs:
        parts += _per_class(run, len(runs) > 1)
        scored, note = worst.get(run.label, ([], ""))
        parts += _worst(run.label if len(runs) > 1 else "", scored, note)
        parts += _timing(run, len(runs) > 1)
    if len(runs) == 1:
        options = [{"option": k, "value": _text(v)} for k, v in sorted(runs[0].config.items())]
        parts += ["<h2>Options</h2>", "<details><summary>every option of the run (config.yaml)</summary>"]
        parts += [_table(["option", "value"], options), "</details>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def _per_class(run, several: bool) -> List[str]:
    best = run.best_eval
    if not best or best.get("confusion") is None:
        return []
    names, matrix = best["class_names"], best["confusion"]
    rows = []
    for i, name in enumerate(names):
        count, correct = sum(matrix[i]), matrix[i][i]
        others = [(matrix[i][j], names[j]) for j in range(len(names)) if j != i and matrix[i][j]]
        confused = max(others)[1] + f" ({max(others)[0]})" if others else "–"
        rows.append(
            {
                "class": name,
                "images": count,
                "correct": correct,
                "accuracy": correct / max(count, 1),
                "taken for": confused,
            }
        )
    rows.sort(key=lambda row: row["accuracy"])
    for row in rows:
        row["accuracy"] = f"{row['accuracy']:.3f}"
    whose = f" — {run.label}" if several else ""
    return [f"<h2>Per class, worst first{html.escape(whose)}</h2>", _table(list(rows[0]), rows)]


def _worst(label: str, scored: Sequence[Scored], note: str) -> List[str]:
    whose = f" — {label}" if label else ""
    parts = [f"<h2>Worst-classified validation images{html.escape(whose)}</h2>"]
    if note:
        parts.append(f"<p class=note>{html.escape(note)}</p>")
    cells = []
    for item in scored:
        true = f"{item.true_prob:.2f}" if item.true_prob is not None else "not in top-5"
        verdict = "wrong" if item.predicted != item.true else ""
        cells.append(
            f'<div class=thumb><img src="{item.thumbnail}" alt="{html.escape(item.path)}" onerror="{ON_ERROR}">'
            f"<br><span class=path>{_breakable(item.path)}</span><br>true <b>{html.escape(item.true)}</b> ({true})<br>"
            f"<span class={verdict or 'right'}>predicted <b>{html.escape(item.predicted)}</b> "
            f"({item.predicted_prob:.2f})</span></div>"
        )
    if cells:
        parts.append("<div class=grid>" + "".join(cells) + "</div>")
    return parts


def _breakable(path: str) -> str:
    """A file's path that a narrow caption wraps after a folder's `/` (`triangle/` then `triangle_0478.jpg`), and
    inside a name only where one name alone is wider than the caption."""
    return "/<wbr>".join(html.escape(part) for part in path.split("/"))


def _timing(run, several: bool) -> List[str]:
    steady = run.steady_epochs()
    rows = []
    for title, key, form in TIMING_KEYS:
        values = [e[key] for e in steady if isinstance(e.get(key), (int, float))]
        if values:
            rows.append(
                {"measure": title, "mean": form.format(sum(values) / len(values)), "worst": form.format(max(values))}
            )
    if not rows:
        return []
    whose = f" — {run.label}" if several else ""
    return [
        f"<h2>Timing{html.escape(whose)}</h2>",
        _table(["measure", "mean", "worst"], rows),
        "<p class=note>over the epochs after the first; the run's train.log has the start-up breakdown.</p>",
    ]


def _image(path: Path, title: str, css: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii") if path.is_file() else ""
    return f'<img class={css} src="data:image/png;base64,{data}" alt="{html.escape(title)}" onerror="{ON_ERROR}">'


def _table(columns: List[str], rows: List[Dict]) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(row.get(c)) for c in columns) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"<td class=num>{html.escape(_text(value))}</td>"
    return f"<td>{html.escape(_text(value))}</td>"


def _text(value: Optional[object]) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)

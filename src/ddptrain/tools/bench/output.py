"""Every benchmark ends the same way: a markdown table on stdout (or one JSON object with --json),
and `NAME.json` + `NAME.png` in the output folder."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ...util import format_cell, markdown_table


def bar_chart(path: Path, title: str, labels: List[str], values: List[float], ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(labels) + 2), 3.8))
    wrapped = [textwrap.fill(label, 16) for label in labels]
    bars = ax.bar(wrapped, values, color="#4c72b0")
    ax.bar_label(bars, labels=[format_cell(v) for v in values], padding=2, fontsize=8)
    ax.set_ylim(0, max(values + [1e-9]) * 1.15)  # room for the value labels
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def emit(
    name: str,
    result: Dict,
    columns: Sequence[str],
    rows: List[Dict],
    out_dir: Optional[str],
    as_json: bool,
    chart: Optional[Dict] = None,
    out=None,
) -> None:
    """Print and save one benchmark's result. `chart`: {"label": column, "value": column, "ylabel": text}."""
    out = out or sys.stdout
    result = {**result, "rows": rows}
    if out_dir:
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        if chart and rows:
            bar_chart(
                folder / f"{name}.png",
                chart.get("title", name),
                [str(r[chart["label"]]) for r in rows],
                [float(r[chart["value"]]) for r in rows],
                chart["ylabel"],
            )
    if as_json:
        print(json.dumps(result), file=out)
    else:
        print(markdown_table(columns, rows), file=out)
        for key, value in result.items():
            if key != "rows" and not isinstance(value, (list, dict)):
                print(f"{key}: {format_cell(value)}", file=out)

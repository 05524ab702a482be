"""The validation images a run's best checkpoint classifies worst, for the report's thumbnails: each image of the run's
validation split (`splits/val.txt`, read from the run's data folder) through `predict`, ranked by the probability
the model gives its true class (wrong and confident first)."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from ..data import splitfile
from ..util import counted

MAX_IMAGES = 2000  # validation images scored at most (the first ones of the split): the report stays quick
THUMBNAIL_PX = 112


@dataclass
class Scored:
    path: str  # as in the split file, relative to the data folder
    true: str
    predicted: str
    predicted_prob: float
    true_prob: Optional[float]  # None: the true class was not among the top-k
    thumbnail: str  # a data: URI (JPEG)


def worst_images(run_dir: Path, data: Optional[str], count: int = 12) -> Tuple[List[Scored], str]:
    """The `count` worst-classified validation images of the run, and a note on what was (not) done."""
    best, split = run_dir / "checkpoints" / "best.pt", run_dir / "splits" / "val.txt"
    if not best.is_file() or not split.is_file():
        return [], "no thumbnails: the run has no checkpoints/best.pt or splits/val.txt"
    if not data or not Path(data).is_dir():
        return [], f"no thumbnails: the run's data folder {data} is not on this machine"
    entries = splitfile.read(split)
    root = Path(data).resolve()
    named = [(relative, true) for _, relative, true in entries if _inside(root, relative)]
    if not named:
        return [], f"no thumbnails: none of the validation images is under {data}"
    scored = _score(best, data, named[:MAX_IMAGES])
    scored.sort(key=lambda s: s.true_prob if s.true_prob is not None else -s.predicted_prob)
    unread = min(len(named), MAX_IMAGES) - len(scored)
    note = f"scored {len(scored)} of {len(entries)} validation images with checkpoints/best.pt" + (
        f" ({counted(unread, 'unreadable image')} left out)" if unread else ""
    )
    return scored[:count], note


def _inside(root: Path, relative: str) -> bool:
    """A regular file under `root` (a split file naming ../ or a link out of the folder is not followed)."""
    path = (root / relative).resolve()
    return path.is_relative_to(root) and path.is_file()


def _score(best: Path, data: str, named: List[Tuple[str, str]]) -> List[Scored]:
    from .inference import run_predict

    buffer = io.StringIO()
    run_predict(str(best), [str(Path(data) / relative) for relative, _ in named], topk=5, device="cpu", out=buffer)
    out: List[Scored] = []
    for (relative, true), line in zip(named, buffer.getvalue().splitlines()):
        answer = json.loads(line)
        if "topk" not in answer:
            continue
        probs = {entry["class"]: entry["prob"] for entry in answer["topk"]}
        top = answer["topk"][0]
        thumbnail = _thumbnail(Path(data) / relative)
        if thumbnail is None:
            continue
        out.append(Scored(relative, true, top["class"], top["prob"], probs.get(true), thumbnail))
    return out


def _thumbnail(path: Path) -> Optional[str]:
    """A small JPEG of the image as a data: URI; None for what predict could read but PIL cannot shrink."""

    from ..data.images import UNREADABLE_ERRORS, ImageLimits, open_upright, read_image_file

    try:  # upright, as the model saw it
        small = open_upright(read_image_file(path, ImageLimits()), min_side=THUMBNAIL_PX)
        small.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
        buffer = io.BytesIO()
        small.save(buffer, format="JPEG", quality=85)
    except UNREADABLE_ERRORS:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

"""WebDataset tar shards written by the `webdataset` package itself (not by ddptrain), for the tar-set tests."""

from __future__ import annotations

from pathlib import Path

import webdataset as wds


def write_wds(folder: Path, pattern: str, images: list, maxcount: int = 8, drop=()) -> Path:
    """`images` ((path, class name, class number)) as WebDataset shards by the webdataset package: each sample a
    jpg, a cls (the number), a txt (the name) and a json ({"meta": {"label": name}}); keys in `drop` lose their cls."""
    folder.mkdir(parents=True, exist_ok=True)
    with wds.ShardWriter(str(folder / pattern), maxcount=maxcount, verbose=0) as sink:
        for path, name, number in images:
            sample = {"__key__": f"{Path(path).stem}", "jpg": Path(path).read_bytes(), "txt": name}
            sample["json"] = {"meta": {"label": name}}
            if sample["__key__"] not in drop:
                sample["cls"] = number
            sink.write(sample)
    return folder


def folder_images(folder: Path):
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    return [(p, name, i) for i, name in enumerate(classes) for p in sorted((folder / name).glob("*.jpg"))]

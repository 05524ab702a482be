"""`ddptrain bench input`: images/s per CPU core of ddptrain's input pipeline against its limit — decoding the
same files alone — and against the tutorial's pipeline.

All run in this one process on one thread (so images/s is images/s per core), on the same files, batch by batch
in alternation, with a RandomResizedCrop (area 0.08-1) + horizontal flip to --img-size:

- decode only: read the file, decode all of it to RGB (libjpeg-turbo, as the loader's full-size path);
- seed (the tutorial): PIL open -> torchvision RandomResizedCrop -> ToTensor -> Normalize, per image;
- ddptrain: ImageDataset (crop box drawn from the header; the JPEG decoded at 1/2, 1/4 or 1/8 where that box
  allows; crop + resize in one uint8 step; flip) -> collate to a uint8 batch -> to the device -> normalise the
  whole batch there. The figure counts every step up to the normalised float tensor on the device;
- ddptrain, full decode: the same with every image decoded at full size (`--decode full`).

With --restart-markers every pipeline runs on copies of the files rewritten as `ddptrain shard --restart-markers`
stores them (the same pixels, segments a crop's region can be decoded from alone), and decoding the files as given
is timed beside them, so the loader can be set against either.

Then the stages' split (from a profile of the loader's code in this process) and, for each worker count, the
training loader's images/s against decoding alone through the same number of DataLoader workers.
"""

from __future__ import annotations

import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import DataLoader, Dataset

from ...data.crops import size_of
from ...data.datasets import Batch, ImageDataset, collate
from ...data.images import ImageLimits, decode_rgb, read_image_file, region_decoder
from ...data.loaders import LoaderSettings, training_images
from ...data.presize import Presize
from ...data.restarts import with_restart_markers
from ...data.transforms import IMAGENET_MEAN, IMAGENET_STD, Augment, Preprocess, normalize, train_transform
from .photos import write_photos

BATCH = 32


def seed_pipeline(size: int) -> Callable[[str], torch.Tensor]:
    from PIL import Image
    from torchvision import transforms

    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )

    def load(path: str) -> torch.Tensor:
        with open(path, "rb") as handle:
            return transform(Image.open(handle).convert("RGB"))

    return load


def _seed_batch(load, files: List[str], device: torch.device) -> None:
    torch.stack([load(path) for path in files]).to(device)


def _ddptrain_batch(dataset: ImageDataset, first: int, count: int, device: torch.device) -> float:
    """Loads a batch and normalises it on `device`; returns the seconds the normalisation took (the device's work,
    not the loader's: on a CPU-only machine the model's process does it)."""
    batch = collate([dataset[(index, 0)] for index in range(first, first + count)])
    start = time.perf_counter()
    normalize(batch.images.to(device, non_blocking=True))
    _sync(device)
    return time.perf_counter() - start


def decode_only(path: str) -> int:
    """The limit: read the file and decode all of it to RGB with the loader's own libjpeg-turbo (torchvision's,
    as the loader's full-size path); nothing else."""
    data = read_image_file(path, ImageLimits())
    return size_of(decode_rgb(data))[0]


class DecodeOnly(Dataset):
    """`decode_only` per file, in loader workers like the training loader's, handing back nothing but a number."""

    def __init__(self, files: List[str]):
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index) -> int:
        return decode_only(self.files[index[0] if isinstance(index, tuple) else index])


def _time_gpu_decode(files: List[str], size: int, device: torch.device) -> float:
    """`--decode gpu`: this process reads the files and draws the crop boxes; the device decodes each batch with
    nvJPEG, crops, resizes, flips and normalises it."""
    transform = train_transform(size, 0.08)
    dataset = ImageDataset([(path, 0) for path in files], transform, seed=0, encoded=True)
    start = time.perf_counter()
    for first in range(0, len(files), BATCH):
        items = [dataset[(index, 0)] for index in range(first, min(first + BATCH, len(files)))]
        collate(items, prepare=transform).to_device(device)
    _sync(device)
    return time.perf_counter() - start


def _time_all(
    files: List[str],
    size: int,
    device: torch.device,
    augment: Augment = Augment(),
    presized: Optional[List[str]] = None,
    originals: Optional[List[str]] = None,
) -> Dict[str, float]:
    """Seconds for each pipeline over all files, alternating batch by batch (each first in turn) so that the
    machine's drifting load falls on all alike: the seed's, decoding alone, ddptrain's (reduced-size decoding where the crop allows),
    ddptrain's with full-size decoding and, given `presized` copies of the files, ddptrain's on those; given the
    `originals` the files are copies of, decoding those alone."""
    load = seed_pipeline(size)
    sources = {"ddptrain": (files, True), "ddptrain_full": (files, False)}
    if presized:
        sources["ddptrain_presized"] = (presized, True)
    datasets = {
        name: ImageDataset(
            [(path, 0) for path in paths],
            train_transform(size, 0.08, Preprocess(), augment, reduced=reduced),
            seed=0,
            substitute=True,
        )
        for name, (paths, reduced) in sources.items()
    }
    run: Dict[str, Callable] = {
        "seed": lambda first, count: _seed_batch(load, files[first : first + count], device),
        "decode_only": lambda first, count: [decode_only(path) for path in files[first : first + count]],
        **(
            {"decode_only_original": lambda first, count: [decode_only(p) for p in originals[first : first + count]]}
            if originals
            else {}
        ),
        **{name: partial(_ddptrain_batch, dataset, device=device) for name, dataset in datasets.items()},
    }
    seconds = dict.fromkeys(run, 0.0)
    normalizing = dict.fromkeys(datasets, 0.0)  # each loader's normalisation, taken out of its own time
    names = list(run)
    for batch, first in enumerate(range(0, len(files), BATCH)):
        count = min(BATCH, len(files) - first)
        shift = batch % len(names)  # each pipeline goes first in turn: no order effect (caches, drift)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            normalized = run[name](first, count)
            _sync(device)
            seconds[name] += time.perf_counter() - start
            if name in normalizing:
                normalizing[name] += normalized
    return {**seconds, **{f"{name} normalize": spent for name, spent in normalizing.items()}}


def presized_copies(files: List[str], folder: Path, max_side: int, quality: int, marked: bool = False) -> List[str]:
    """The files as `ddptrain shard --max-side` would store them (larger ones re-encoded, the rest as they are;
    `marked`: re-encoded ones with restart markers, as with --restart-markers)."""
    presize = Presize(max_side, quality)

    def convert(data: bytes) -> bytes:
        smaller = presize.apply(data)
        return ((with_restart_markers(smaller) if marked else None) or smaller) if smaller else data

    return _copies(files, folder, convert)


def restart_copies(files: List[str], folder: Path) -> List[str]:
    """The files as `ddptrain shard --restart-markers` stores them (rewritten losslessly with restart markers)."""
    return _copies(files, folder, lambda data: with_restart_markers(data) or data)


def _copies(files: List[str], folder: Path, convert: Callable[[bytes], bytes]) -> List[str]:
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for index, path in enumerate(files):
        copy = folder / f"{index:06d}.jpg"
        copy.write_bytes(convert(Path(path).read_bytes()))
        copies.append(str(copy))
    return copies


STAGES = (  # (stage, file suffix, functions) whose inclusive time a profile of the loader attributes to it
    ("read", "data/index.py", ("read",)),
    ("decode", "data/images.py", ("decode_rgb", "decode_region")),
    ("crop box", "data/crops.py", ("box",)),
    ("crop + resize + flip", "data/crops.py", ("resize_region",)),
    ("augment", "data/transforms.py", ("augmented",)),
    ("collate", "data/datasets.py", ("collate",)),
)


def stage_split(files: List[str], size: int, augment: Augment, reduced: bool) -> Dict[str, float]:
    """Microseconds per image in each stage of one worker's work (read, decode, crop box, crop/resize/flip,
    augment, collate), from a cProfile of the loader's own code over the files; "augment" is what runs after the
    resize (policies, erasing)."""
    import cProfile
    import pstats

    dataset = ImageDataset(
        [(path, 0) for path in files], train_transform(size, 0.08, Preprocess(), augment, reduced), substitute=True
    )
    profile = cProfile.Profile()
    profile.enable()
    for first in range(0, len(files), BATCH):
        collate([dataset[(index, 0)] for index in range(first, min(first + BATCH, len(files)))])
    profile.disable()
    inclusive = {
        (file, name): row[3]
        for (file, _, name), row in pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
    }

    def seconds(suffix: str, functions: Tuple[str, ...]) -> float:
        return sum(t for (file, name), t in inclusive.items() if name in functions and file.endswith(suffix))

    split = {stage: seconds(suffix, functions) for stage, suffix, functions in STAGES}
    total = sum(t for (file, name), t in inclusive.items() if name == "__getitem__" and file.endswith("datasets.py"))
    split["other"] = max(0.0, total + split["collate"] - sum(split.values()))
    return {stage: round(1e6 * t / len(files), 1) for stage, t in split.items()}


def worker_rates(
    files: List[str], size: int, workers: int, rounds: int, originals: Optional[List[str]] = None
) -> Dict[str, float]:
    """Images/s of decoding alone and of the training loader, both through DataLoaders with `workers` workers over
    the same files, epochs alternating (and of decoding the `originals` alone, given those)."""
    settings = LoaderSettings(BATCH, workers, pin_memory=False, normalize_in_workers=False)
    samples = [(path, 0) for path in files]
    loaders = {
        "decode_only": DataLoader(DecodeOnly(files), batch_size=BATCH, num_workers=workers),
        "ddptrain": training_images(samples, Preprocess(img_size=size), 0.08, 0, 0, 1, settings),
    }
    if originals:
        loaders["decode_only_original"] = DataLoader(DecodeOnly(originals), batch_size=BATCH, num_workers=workers)
    best = dict.fromkeys(loaders, float("inf"))
    for _ in range(rounds + 1):  # the first pass starts the workers and warms the page cache
        for name, loader in loaders.items():
            start = time.perf_counter()
            images = sum(len(batch[1] if isinstance(batch, Batch) else batch) for batch in loader)
            best[name] = min(best[name], (time.perf_counter() - start) / max(images, 1))
    return {name: 1.0 / per_image for name, per_image in best.items()}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _files(root: Path, count: int) -> List[str]:
    files = sorted(str(p) for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[:count]
    if not files:
        raise FileNotFoundError(f"no JPEG files under {root}")
    return files


def _against_decoding(seconds: Dict[str, float], images: int, stages: Dict, per_workers: List[Dict]) -> Dict:
    """Images/s of each pipeline, and the loader's as a fraction of decoding alone (its normalisation, the device's
    work, taken out: each pipeline's own, measured in the same run)."""
    rate = {name: images / spent for name, spent in seconds.items() if not name.endswith(" normalize")}
    loaders = [name for name in ("ddptrain", "ddptrain_full", "ddptrain_presized") if name in seconds]
    loader = {name: images / (seconds[name] - seconds[f"{name} normalize"]) for name in loaders}
    result = {
        "seed_images_per_sec_per_core": rate["seed"],
        "ddptrain_images_per_sec_per_core": rate["ddptrain"],
        "ratio": rate["ddptrain"] / rate["seed"],
        "decode_only_images_per_sec_per_core": rate["decode_only"],
        "ddptrain_full_decode_images_per_sec_per_core": rate["ddptrain_full"],
        "loader_images_per_sec_per_core": loader["ddptrain"],
        "normalize_us_per_image": 1e6 * seconds["ddptrain normalize"] / images,
        "fraction_of_decode_only": loader["ddptrain"] / rate["decode_only"],
        "full_decode_fraction_of_decode_only": loader["ddptrain_full"] / rate["decode_only"],
        "stages_us_per_image": stages,
        "workers": [{**row, **_fractions(row)} for row in per_workers],
    }
    if "decode_only_original" in rate:
        result["decode_only_original_images_per_sec_per_core"] = rate["decode_only_original"]
        result["fraction_of_original_decode_only"] = loader["ddptrain"] / rate["decode_only_original"]
    if "ddptrain_presized" in loader:
        result["ddptrain_presized_images_per_sec_per_core"] = rate["ddptrain_presized"]
        result["presized_fraction_of_decode_only"] = loader["ddptrain_presized"] / rate["decode_only"]
    return result


def _fractions(row: Dict[str, float]) -> Dict[str, float]:
    fractions = {"fraction_of_decode_only": row["ddptrain"] / row["decode_only"]}
    if "decode_only_original" in row:
        fractions["fraction_of_original_decode_only"] = row["ddptrain"] / row["decode_only_original"]
    return fractions


def _timed_rounds(
    files: List[str],
    size: int,
    device: torch.device,
    augment: Augment,
    rounds: int,
    presized: Optional[List[str]],
    originals: Optional[List[str]],
) -> Dict[str, float]:
    """`_time_all`'s seconds summed over `rounds`, after a batch that warms the page cache and the code paths."""
    _time_all(files[:BATCH], size, device, augment, presized, originals)
    seconds: Dict[str, float] = {}
    for _ in range(rounds):
        for name, spent in _time_all(files, size, device, augment, presized, originals).items():
            seconds[name] = seconds.get(name, 0.0) + spent
    return seconds


def run_input_bench(
    data: Optional[str],
    count: int,
    size: int,
    rounds: int,
    device_kind: str,
    policy: Optional[str] = None,
    worker_counts: Sequence[int] = (1, 2),
    max_side: Optional[int] = None,
    quality: int = 90,
    restart_markers: bool = False,
) -> dict:
    device = torch.device(
        "cuda" if device_kind == "cuda" or (device_kind == "auto" and torch.cuda.is_available()) else "cpu"
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: the figures are per core
    augment = Augment(policy)
    try:
        with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
            files = _files(Path(data) if data else write_photos(Path(tmp) / "photos", count), count)
            originals = None
            if restart_markers:
                originals, files = files, restart_copies(files, Path(tmp) / "restart-markers")
            presized = (
                presized_copies(files, Path(tmp) / "presized", max_side, quality, restart_markers) if max_side else None
            )
            seconds = _timed_rounds(files, size, device, augment, rounds, presized, originals)
            stages = {
                "reduced": stage_split(files, size, augment, reduced=True),
                "full": stage_split(files, size, augment, reduced=False),
            }
            per_workers = [
                {"workers": workers, **worker_rates(files, size, workers, rounds, originals)}
                for workers in worker_counts
            ]
            gpu_seconds = 0.0
            if device.type == "cuda":
                _time_gpu_decode(files[:BATCH], size, device)
                gpu_seconds = sum(_time_gpu_decode(files, size, device) for _ in range(rounds))
    finally:
        torch.set_num_threads(threads)
    images = len(files) * rounds
    result = _against_decoding(seconds, images, stages, per_workers)
    if presized:
        result["presized"] = {"max_side": max_side, "quality": quality}
    if gpu_seconds:
        result["ddptrain_gpu_decode_images_per_sec_per_core"] = images / gpu_seconds
        result["gpu_decode_ratio"] = result["seed_images_per_sec_per_core"] * gpu_seconds / images
    return {
        **result,
        "images": len(files),
        "region_decoding": region_decoder() is not None,
        "img_size": size,
        "device": str(device),
        "rounds": rounds,
        "auto_augment": policy,
        "source": data or "generated 500x375 JPEGs, quality 90",
        "restart_markers": restart_markers,
    }

"""`ddptrain bench NAME`: reproducible performance measurements, each printed as a markdown table (or
one JSON object with --json) and saved as JSON + a PNG chart under --out."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ...util import counted
from .output import emit

NAMES = ["overhead", "scaling", "precision", "input", "startup", "recipe", "store", "memory"]

# What each benchmark measures and what it costs, for `ddptrain bench --help`.
ABOUT = {
    "overhead": "training images/s of one process: ddptrain's loop against a plain PyTorch loop on the same data "
    "(trains --epochs, twice per round: minutes on a CPU)",
    "scaling": "images/s and efficiency at 1..--nproc processes (trains --epochs per process count: minutes)",
    "precision": "images/s and memory in fp32, bf16, fp16 (trains --epochs per precision; --synthetic: seconds)",
    "input": "the training loader against decoding the same JPEGs alone, per core and through 1 and 2 workers, with "
    "the time split into stages (--shards: files vs shard sets) (under a minute for 256 files)",
    "startup": "time from the command to the first optimizer step, phase by phase (--rounds short runs; --files: "
    "with folders of up to millions of files, which it writes first: long)",
    "recipe": "accuracy of the default recipe against the demo's and a fixed-LR one on the same data "
    "(trains 3 x --epochs: several minutes)",
    "store": "load on the rendezvous store from simulated ranks' heartbeats, old and new (--seconds per pattern "
    "and rank count)",
    "memory": "per-process memory (weights, gradients, optimizer state, activations, peak) under ddp, fsdp, "
    "fsdp + gradient checkpointing (a few --steps per variant, each in fresh processes)",
}


def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="bench-results", help="folder for NAME.json and NAME.png")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def _device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto: cuda when a GPU is visible"
    )


def _rounds_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=2, help="repetitions; the median (input: best) is kept")


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc", type=int, default=2, help="processes (scaling: 1..N)")
    parser.add_argument(
        "--model",
        default=None,
        help="default resnet18 (startup, recipe: timm:test_resnet; memory: timm:vit_base_patch16_224)",
    )
    parser.add_argument("--img-size", type=int, default=None, help="default 64 (input: 224, startup: 32)")
    parser.add_argument("--batch-size", type=int, default=None, help="per process (default 32; recipe: 16)")


def _training_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="image folder to use (default: generated)")
    parser.add_argument("--epochs", type=int, default=None, help="default 3 (recipe: 10)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--per-class",
        type=int,
        default=None,
        help="generated images per class (default 128 in 5 classes; startup: 12 in 3)",
    )


def _options_of(name: str) -> list:
    training = [_device_option, _rounds_option, _model_options, _training_options]
    return {
        "overhead": training,
        "scaling": training,
        "precision": [*training, _precision_options, _steps_option],
        "input": [_device_option, _rounds_option, _input_options],
        "startup": [*training, _startup_options],
        "recipe": training,
        "store": [_store_options],
        "memory": [_device_option, _model_options, _steps_option, _memory_options],
    }[name]


def _all_options() -> tuple:
    return (
        _output_options,
        _device_option,
        _rounds_option,
        _model_options,
        _training_options,
        _input_options,
        _precision_options,
        _store_options,
        _startup_options,
        _memory_options,
        _steps_option,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per benchmark, each with its own options (`bench NAME --help`); what another benchmark's
    code reads but this one does not take keeps its default."""
    everything = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")
    for add in _all_options():
        add(everything)
    defaults = vars(everything.parse_args([]))
    sub = parser.add_subparsers(dest="name", required=True, metavar="NAME", title="benchmarks")
    for name in NAMES:
        bench = sub.add_parser(name, help=ABOUT[name], description=ABOUT[name])
        for add in [_output_options, *_options_of(name)]:
            add(bench)
        own = {action.dest for action in bench._actions}
        bench.set_defaults(**{dest: value for dest, value in defaults.items() if dest not in own})


def _memory_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants",
        default="ddp,fsdp,fsdp+gc",
        help="memory: strategies to compare, from ddp, fsdp, fsdp+gc (FSDP with gradient checkpointing)",
    )


def _input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="a folder of JPEGs to use (default: generated photos)")
    parser.add_argument("--img-size", type=int, default=None, help="crop size (default 224)")
    parser.add_argument("--count", type=int, default=256, help="input: number of JPEGs")
    parser.add_argument("--workers", type=int, default=1, help="input --shards: loader workers")
    parser.add_argument(
        "--max-side",
        type=int,
        default=None,
        help="input: also time the loader on copies of the files pre-sized as `ddptrain shard --max-side N` would",
    )
    parser.add_argument(
        "--restart-markers",
        action="store_true",
        help="input: time every pipeline on copies of the files rewritten as `ddptrain shard --restart-markers` "
        "stores them (the same pixels; a crop decodes only its part), and decoding the files as given beside them",
    )
    parser.add_argument(
        "--worker-counts",
        default="1,2",
        help="input: the DataLoader worker counts to compare the loader with decoding alone at (default 1,2; 0: none)",
    )
    parser.add_argument(
        "--auto-augment",
        choices=["randaugment", "trivialaugment", "autoaugment"],
        default=None,
        help="input: ddptrain's pipeline with this augmentation policy too (as `train --auto-augment`)",
    )
    parser.add_argument(
        "--shards",
        action="store_true",
        help="input: one epoch of the training loader from a folder of files vs shards made from it (local, HTTP)",
    )
    parser.add_argument("--shard-size", default="64MB", help="input --shards: largest shard (default 64MB)")
    parser.add_argument(
        "--cold", action="store_true", help="input --shards: drop the page cache before each pass (root)"
    )


def _precision_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compile", action="store_true", help="precision: also with torch.compile")
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="precision: random tensors on the device instead of JPEGs (model and step alone)",
    )


def _steps_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps: precision --synthetic per variant (default 30), memory after one warm-up (default 3)",
    )


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ranks",
        default="64,128,256,512",
        help="store: simulated ranks, comma-separated (one store connection and thread each)",
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="store: measured seconds per pattern")
    parser.add_argument("--step-rate", type=float, default=10.0, help="store: optimizer steps/s of each rank")
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="store: the new heartbeat's interval here (the default run's is min(5 s, --dist-timeout / 10))",
    )
    parser.add_argument("--clients", type=int, default=4, help="store: client processes the ranks are spread over")


def _startup_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--files",
        default=None,
        help="startup: comma list of folder sizes (e.g. 10000,50000,200000): time to first step and the memory of "
        "every rank and loader worker on N tiny files in 1000 classes",
    )
    parser.add_argument(
        "--settle", type=float, default=20.0, help="startup --files: seconds trained before the 2nd memory sample"
    )
    parser.add_argument(
        "--files-cache",
        default=None,
        help="startup --files: where the generated folders are kept between runs (default: a temporary folder)",
    )
    parser.add_argument(
        "--copy-sizes",
        default="1281167",
        help="startup --files: also measure the file list alone in a worker at these sizes (default: ImageNet's)",
    )
    parser.add_argument(
        "--checkout", default=None, help="startup --files: measure the ddptrain source tree here (e.g. an older commit)"
    )


def run_bench(args: argparse.Namespace) -> int:
    import torch

    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    if args.name == "input":
        return _input_bench(args, device)
    if args.name == "startup":
        return _startup_bench(args, device)
    if args.name == "recipe":
        return _recipe_bench(args, device)
    if args.name == "store":
        return _store_bench(args)
    if args.name == "memory":
        return _memory_bench(args, device)
    args.model, args.batch_size, args.epochs = args.model or "resnet18", args.batch_size or 32, args.epochs or 3
    if args.name == "precision" and args.synthetic:
        return _synthetic_precision_bench(args, device)
    return _training_bench(args, device)


def _memory_bench(args: argparse.Namespace, device: str) -> int:
    from ...checks import check_model_source
    from .memory import run_memory_bench

    model, size, batch = args.model or "timm:vit_base_patch16_224", args.img_size or 224, args.batch_size or 4
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    check_model_source(model)  # a misspelled name, before a process per variant and rank starts
    result, rows = run_memory_bench(model, size, batch, args.nproc, device, args.steps or 3, variants)
    columns = ["variant", "parameters MB", "gradients MB", "optimizer MB", "states MB", "activations MB", "peak MB"]
    chart = {
        "label": "variant",
        "value": "peak MB",
        "ylabel": "peak MB per process",
        "title": f"{model}, {size} px, batch {batch} per process, {args.nproc} processes ({device})",
    }
    measured = [row for row in rows if "error" not in row]
    emit("memory", result, [*columns, "images/s"], rows, args.out, args.json, chart if measured else None)
    for row in rows:
        if "error" in row:
            print(f"{row['variant']}: {row['error']}", file=sys.stderr)
    return 0 if len(measured) == len(rows) else 1


def _shard_input_bench(args: argparse.Namespace) -> int:
    from ...data.shards import parse_size
    from .shards import run_shard_bench

    size = args.img_size or 224
    result = run_shard_bench(
        args.data, args.count, size, args.rounds, args.workers, parse_size(args.shard_size), args.cold
    )
    chart = {
        "label": "source",
        "value": "images/s",
        "ylabel": "images/s",
        "title": f"input from files vs shards, {size} px",
    }
    emit(
        "input-shards",
        result,
        ["source", "images/s", "read only, images/s"],
        result["rows"],
        args.out,
        args.json,
        chart,
    )
    return 0


def _input_bench(args: argparse.Namespace, device: str) -> int:
    from ...data import restarts
    from .input import run_input_bench

    if args.shards:
        return _shard_input_bench(args)

    counts = [int(n) for n in args.worker_counts.split(",") if n.strip() and int(n) > 0]
    if args.restart_markers:
        restarts.require()
    result = run_input_bench(
        args.data,
        args.count,
        args.img_size or 224,
        args.rounds,
        device,
        args.auto_augment,
        counts,
        args.max_side,
        restart_markers=args.restart_markers,
    )
    rows = _input_rows(result, args)
    chart = {
        "label": "pipeline",
        "value": "images/s/core",
        "ylabel": "images/s per core",
        "title": f"input pipeline, {result['img_size']} px crops, {result['device']}",
    }
    emit("input", result, ["pipeline", "images/s/core", "of decode only"], rows, args.out, args.json, chart)
    if not args.json:
        print(_input_details(result))
    return 0


def _input_rows(result: dict, args: argparse.Namespace) -> list:
    """The table's rows: each pipeline's images/s per core and its fraction of decoding alone."""
    policy = f", {args.auto_augment}" if args.auto_augment else ""
    decode = result["decode_only_images_per_sec_per_core"]
    smallest = "the crop's region, reduced-size" if result["region_decoding"] else "reduced-size (no region decoder)"
    marked = " (copies with restart markers)" if args.restart_markers else ""
    rows = [
        {
            "pipeline": f"decode only (read + full decode to RGB){marked}",
            "images/s/core": decode,
            "of decode only": 1.0,
        },
        *(
            {"pipeline": name, "images/s/core": result[key], "of decode only": result[key] / decode}
            for name, key in (
                ("decode only, the files as given", "decode_only_original_images_per_sec_per_core"),
                ("seed (PIL, ToTensor, Normalize)", "seed_images_per_sec_per_core"),
                (f"ddptrain ({smallest} decode, uint8){policy}", "ddptrain_images_per_sec_per_core"),
                (f"ddptrain, full-size decode{policy}", "ddptrain_full_decode_images_per_sec_per_core"),
                (f"ddptrain on copies pre-sized to {args.max_side} px", "ddptrain_presized_images_per_sec_per_core"),
            )
            if key in result
        ),
    ]
    if "ddptrain_gpu_decode_images_per_sec_per_core" in result:
        rows.append(
            {
                "pipeline": "ddptrain, GPU decode (nvJPEG)",
                "images/s/core": result["ddptrain_gpu_decode_images_per_sec_per_core"],
            }
        )
    return rows


def _input_details(result: dict) -> str:
    from .output import markdown_table

    stages = result["stages_us_per_image"]
    names = list(stages["reduced"])
    split = markdown_table(
        ["decoding", *names],
        [{"decoding": kind, **stages[kind]} for kind in ("reduced", "full")],
    )
    given = ["loader / decode of the files as given"] if result.get("restart_markers") else []
    workers = markdown_table(
        ["workers", "decode only, images/s", "loader, images/s", "loader / decode only", *given],
        [
            {
                "workers": row["workers"],
                "decode only, images/s": row["decode_only"],
                "loader, images/s": row["ddptrain"],
                "loader / decode only": row["fraction_of_decode_only"],
                **(
                    {"loader / decode of the files as given": row["fraction_of_original_decode_only"]}
                    if "fraction_of_original_decode_only" in row
                    else {}
                ),
            }
            for row in result["workers"]
        ],
    )
    return (
        f"\nstages, microseconds per image (one process, profiled):\n{split}\n\nthrough DataLoader workers:\n{workers}"
    )


def _synthetic_precision_bench(args: argparse.Namespace, device: str) -> int:
    from .synthetic import synthetic_precision

    size = args.img_size or 224
    rows = synthetic_precision(args.model, size, args.batch_size, args.steps or 30, device, args.compile)
    result = {
        "model": args.model,
        "img_size": size,
        "batch_size": args.batch_size,
        "device": device,
        "input": "synthetic",
        "best_images_per_sec": max(r["images/s"] for r in rows),
    }
    chart = {
        "label": "variant",
        "value": "images/s",
        "ylabel": "training images/s",
        "title": f"synthetic input: {args.model}, {size} px, {device}",
    }
    emit(
        "precision-synthetic",
        result,
        ["variant", "images/s", "speed-up", "peak MiB", "note"],
        rows,
        args.out,
        args.json,
        chart,
    )
    return 0


def _training_bench(args: argparse.Namespace, device: str) -> int:
    from . import training

    with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
        data = Path(args.data) if args.data else _generate(Path(tmp) / "data", args.per_class or 128)
        work = training.Workload(
            data, args.model, args.img_size or 64, args.batch_size, args.epochs, args.workers, device
        )
        if args.name == "overhead":
            result, rows = training.overhead(work, Path(tmp), args.nproc, args.rounds)
            columns, chart = ["loop", "images/s", "runs"], {"label": "loop", "value": "images/s"}
        elif args.name == "scaling":
            result, rows = training.scaling(work, Path(tmp), args.nproc, args.rounds)
            columns = ["processes", "batch per process", "images/s", "efficiency", "runs"]
            for row in rows:
                row["label"] = counted(row["processes"], "process")
            chart = {"label": "label", "value": "images/s"}
        else:
            result, rows = training.precision(work, Path(tmp), args.nproc, args.compile)
            columns, chart = (
                ["variant", "images/s", "speed-up", "peak MiB", "note"],
                {"label": "variant", "value": "images/s"},
            )
    result.update(
        {
            "model": work.model,
            "img_size": work.img_size,
            "batch_size": work.batch_size,
            "epochs": work.epochs,
            "device": device,
        }
    )
    chart.update({"ylabel": "training images/s", "title": f"{args.name}: {work.model}, {work.img_size} px, {device}"})
    emit(args.name, result, columns, rows, args.out, args.json, chart)
    return 0


def _files_bench(args: argparse.Namespace) -> int:
    from . import scale

    sizes = [int(n) for n in args.files.split(",")]
    with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
        cache = Path(args.files_cache or Path(tmp) / "folders")
        checkout = Path(args.checkout) if args.checkout else None
        results = scale.scale(sizes, cache, Path(tmp), args.nproc, args.workers, args.settle, checkout)
    classes = {str(n): scale.classes_for(n) for n in sizes}
    result = {"nproc": args.nproc, "workers": args.workers, "classes": classes, "settle_s": args.settle}
    result.update({"checkout": args.checkout or "this", "sizes": results})
    # The file list alone, in a worker that has read every entry (one epoch), also at --copy-sizes (ImageNet's).
    extra = [int(n) for n in args.copy_sizes.split(",") if n]
    result["worker_copy"] = {str(n): scale.worker_copy(n) for n in [*sizes, *extra]}
    table = scale.rows(results, args.settle)
    emit("startup-files", result, list(table[0]), table, args.out, args.json)
    return 0


def _startup_bench(args: argparse.Namespace, device: str) -> int:
    from .startup import startup

    if args.files:
        return _files_bench(args)

    model, size = args.model or "timm:test_resnet", args.img_size or 32
    with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
        data = Path(args.data) if args.data else _generate(Path(tmp) / "data", args.per_class or 12, classes=3)
        result, rows = startup(data, Path(tmp), args.nproc, args.rounds, device, model, size)
    result.update({"model": model, "img_size": size, "device": device})
    emit(
        "startup",
        result,
        ["phase", "seconds", "share"],
        rows,
        args.out,
        args.json,
        {
            "label": "phase",
            "value": "seconds",
            "ylabel": "seconds (median)",
            "title": f"time to the first optimizer step: {args.nproc} processes, {device}, {model}",
        },
    )
    return 0


def _recipe_bench(args: argparse.Namespace, device: str) -> int:
    from . import recipe

    with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
        data = Path(args.data) if args.data else _generate(Path(tmp) / "data", args.per_class or 128)
        work = recipe.RecipeWork(
            data,
            args.model or "timm:test_resnet",
            args.img_size or 64,
            args.batch_size or 16,
            args.epochs or 10,
            args.workers,
            args.nproc,
            device,
        )
        result, rows = recipe.compare(
            work, Path(tmp), args.per_class or 128, lambda line: print(line, file=sys.stderr, flush=True)
        )
    title = f"{work.model}, {work.img_size} px, {work.nproc} processes, {device}"
    result.update({"model": work.model, "img_size": work.img_size, "epochs": work.epochs, "nproc": work.nproc})
    result.update({"batch_size": work.batch_size, "device": device, "data": str(args.data or "generated")})
    columns = ["recipe", "start", "best val_top1", "final val_top1", "final val_top1 EMA"]
    columns += ["train s/epoch", "s/epoch with eval"]
    emit("recipe", result, columns, rows, args.out, args.json)
    if args.out:
        recipe.figure(Path(args.out) / "recipe.png", rows, title)
    return 0


def _store_bench(args: argparse.Namespace) -> int:
    from ...util import markdown_table
    from .store import store_bench

    ranks = [int(n) for n in str(args.ranks).split(",") if n.strip()]
    result, rows, projected = store_bench(
        ranks, args.seconds, args.step_rate, args.interval, args.clients, lambda line: print(line, file=sys.stderr)
    )
    for row in rows:
        row["label"] = f"{row['ranks']} {row['pattern']}"
    columns = ["ranks", "pattern", "offered writes/s", "achieved writes/s", "set p50 us", "set p99 us"]
    columns += ["probe p50 ms", "probe p99 ms", "server CPU %", "server us/write", "backlog s", "saturated"]
    chart = {
        "label": "label",
        "value": "achieved writes/s",
        "ylabel": "writes/s applied by the store",
        "title": f"one TCPStore, heartbeat writes ({args.step_rate:g} steps/s; new: every {args.interval:g} s)",
    }
    emit("store", result, columns, rows, args.out, args.json, chart)
    if not args.json:
        print(f"\nprojection ({result['projection_note']}; new at {result['projection_interval_s']:g} s):")
        columns = ["ranks", "design", "writes/s", "share of measured ceiling", "server core", "fits"]
        print(markdown_table(columns, projected))
    return 0


def _generate(folder: Path, per_class: int, classes: int = 5) -> Path:
    from ..demodata import make_dataset

    return make_dataset(folder, classes=classes, per_class=per_class, seed=0, progress=False)

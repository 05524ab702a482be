"""N ranks train exactly like one process on the global batch — through ddptrain's own engine,
samplers and model wrapping, on real gloo processes."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from ddptrain.data.datasets import Batch, ImageDataset, Item, collate
from ddptrain.data.loaders import LoaderSettings, eval_loader, train_loader
from ddptrain.data.samplers import EpochSampler
from ddptrain.data.transforms import Augment, Preprocess, train_transform
from ddptrain.models import place_model, unwrap, wrap_ddp
from ddptrain.train.evaluate import evaluate
from ddptrain.train.loop import EpochPlan, StepSettings, train_one_epoch
from ddptrain.train.optim import LrSchedule, build_optimizer
from ddptrain.train.precision import resolve_precision

from ..dist_harness import run_ranks, run_single

pytestmark = pytest.mark.slow  # every test here starts real gloo processes

PER_RANK_BATCH = 4
STEPS = 3
WORLD = 2
CLIP = 0.05


def _fp16_on_cpu_reason() -> str | None:
    try:
        torch.amp.GradScaler("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            torch.ones(2, 2) @ torch.ones(2, 2)
    except Exception as error:  # the installed torch lacks it
        return f"fp16 autocast/GradScaler on CPU unsupported by torch {torch.__version__}: {error}"
    return None


SCENARIOS = {  # name: (grad_accum, clip_grad, amp, sync_bn)
    "plain": (1, None, "off", False),
    "accum": (2, None, "off", False),
    "clip": (1, CLIP, "off", False),
    "sync_bn": (1, None, "off", True),
    "bf16_compress": (1, None, "off", False),  # --grad-compress bf16 on the ranks; exact math in the reference
}
COMPRESSED = {"bf16_compress": "bf16"}
if _fp16_on_cpu_reason() is None:
    SCENARIOS["fp16"] = (1, None, "fp16", False)


def _net(batch_norm: bool = False) -> nn.Module:
    torch.manual_seed(0)
    norm = [nn.BatchNorm2d(6)] if batch_norm else []
    return nn.Sequential(nn.Conv2d(3, 6, 3), *norm, nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(24, 3))


def _global_data(samples: int):
    gen = torch.Generator().manual_seed(1)
    return torch.randn(samples, 3, 8, 8, generator=gen), torch.randint(0, 3, (samples,), generator=gen)


def _rank_batches(rank: int, world: int, grad_accum: int):
    """Micro-batch m of step k on rank r is slice ((k*accum + m)*world + r); concatenated over ranks and
    micro-steps, step k covers exactly the single process's k-th global batch."""
    images, labels = _global_data(STEPS * grad_accum * WORLD * PER_RANK_BATCH)
    size = PER_RANK_BATCH * (WORLD // world)  # a single process takes every rank's share at once
    batches = []
    for k in range(STEPS):
        for m in range(grad_accum):
            start = ((k * grad_accum + m) * world + rank) * size
            batches.append(Batch(images[start : start + size], labels[start : start + size], ()))
    return batches


def _train(rt, grad_accum: int, clip, amp: str, sync_bn: bool, reference: bool, compress: str = "off"):
    model = wrap_ddp(place_model(_net(sync_bn), rt.device, rt.world_size, sync_bn, False), rt.device, compress)
    all_reduces = []
    if compress == "off":
        model.register_comm_hook(None, lambda state, bucket: (all_reduces.append(1), allreduce_hook(None, bucket))[1])
    optimizer = build_optimizer(model, "sgd", 0.5, 0.9, 0.01, rt.device)
    settings = StepSettings(
        grad_accum=1 if reference else grad_accum, clip_grad=clip, log_every=1, channels_last=False, label_smoothing=0.0
    )
    if reference and grad_accum > 1:  # one process, one batch per step holding every micro-batch
        batches = _rank_batches(0, 1, grad_accum)
        batches = [
            Batch(
                torch.cat([b.images for b in batches[i : i + grad_accum]]),
                torch.cat([b.labels for b in batches[i : i + grad_accum]]),
                (),
            )
            for i in range(0, len(batches), grad_accum)
        ]
    else:
        batches = _rank_batches(rt.rank, rt.world_size, grad_accum)
    train_one_epoch(
        model,
        batches,
        optimizer,
        LrSchedule(0.5, 1, 0.0, 1.0),
        resolve_precision(amp, rt.device),
        settings,
        rt,
        EpochPlan(epoch=0, global_step=0),
    )
    state = {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()}
    return {"state": state, "all_reduces": len(all_reduces)}


def _all_scenarios(rt, reference: bool = False):
    return {
        name: _train(rt, *spec, reference=reference, compress="off" if reference else COMPRESSED.get(name, "off"))
        for name, spec in SCENARIOS.items()
    }


@pytest.fixture(scope="module")
def equivalence():
    return run_ranks(_all_scenarios, WORLD), run_single(_all_scenarios, True)


@pytest.mark.parametrize("scenario", ["plain", "accum", "clip", "sync_bn", "fp16", "bf16_compress"])
def test_two_ranks_equal_one_process_on_the_global_batch(equivalence, scenario):
    if scenario not in SCENARIOS:
        pytest.skip(_fp16_on_cpu_reason())
    ranks, single = equivalence
    tolerance = {"fp16": 2e-3, "bf16_compress": 1e-2}.get(scenario, 1e-5)
    for name, value in single[scenario]["state"].items():
        assert torch.equal(ranks[0][scenario]["state"][name], ranks[1][scenario]["state"][name])  # ranks agree
        torch.testing.assert_close(ranks[0][scenario]["state"][name], value, rtol=tolerance, atol=tolerance, msg=name)
    initial = _net(SCENARIOS[scenario][3]).state_dict()
    moved = any(not torch.equal(value, initial[name]) for name, value in single[scenario]["state"].items())
    assert moved  # the steps did something


def _augmented(rt, paths):
    """3 steps of the plain scenario, the batches made by ddptrain's dataset with RandAugment and random erasing on:
    each image's draws depend on (seed, epoch, index) only, so the union of the ranks' batches is the single
    process's batch, augmented alike."""
    preprocess = Preprocess(img_size=16)
    transform = train_transform(16, 0.5, preprocess, Augment("randaugment", 9, 0.5))
    dataset = ImageDataset([(path, i % 3) for i, path in enumerate(paths)], transform, seed=7)
    size = PER_RANK_BATCH * (WORLD // rt.world_size)
    batches = []
    for k in range(STEPS):
        start = (k * rt.world_size + rt.rank) * size
        items = [dataset[(i, 0)] for i in range(start, start + size)]
        batches.append(collate(items, normalized=True, stats=preprocess.stats))
    model = wrap_ddp(place_model(_net(), rt.device, rt.world_size, False, False), rt.device, "off")
    optimizer = build_optimizer(model, "sgd", 0.5, 0.9, 0.01, rt.device)
    settings = StepSettings(grad_accum=1, clip_grad=None, log_every=1, channels_last=False, label_smoothing=0.0)
    precision = resolve_precision("off", rt.device)
    train_one_epoch(model, batches, optimizer, LrSchedule(0.5, 1, 0.0, 1.0), precision, settings, rt, EpochPlan(0, 0))
    return {"state": {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()}}


def test_per_image_augmentations_keep_two_ranks_equal_to_one_process(tmp_path):
    from PIL import Image

    gen = torch.Generator().manual_seed(3)
    paths = []
    for i in range(STEPS * WORLD * PER_RANK_BATCH):
        pixels = torch.randint(0, 256, (20, 24, 3), generator=gen, dtype=torch.uint8).numpy()
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(pixels).save(paths[-1])
    ranks, single = run_ranks(_augmented, WORLD, paths), run_single(_augmented, paths)
    for name, value in single["state"].items():
        torch.testing.assert_close(ranks[0]["state"][name], value, rtol=1e-5, atol=1e-5, msg=name)
        assert torch.equal(ranks[0]["state"][name], ranks[1]["state"][name])


def test_accumulation_micro_steps_do_not_communicate(equivalence):
    ranks, _ = equivalence
    per_step = ranks[0]["plain"]["all_reduces"] / STEPS  # gradient buckets all-reduced per optimizer step
    assert per_step >= 1
    assert ranks[0]["accum"]["all_reduces"] == per_step * STEPS  # not per micro-step: no_sync held


def test_clipping_binds_in_the_clip_scenario():
    model = _net()
    images, labels = _global_data(WORLD * PER_RANK_BATCH)
    nn.functional.cross_entropy(model(images), labels).backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert norm > 2 * CLIP  # so the "clip" scenario above compares runs where clipping changed the step


# ---- sharding and augmentation draws -------------------------------------------------------------


class _IndexDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, item):
        index = item[0]
        return Item(torch.tensor([float(index)]), index % 3, ())


class _CopyDataset(_IndexDataset):
    def __getitem__(self, item):
        index, _epoch, copy = item
        return Item(torch.tensor([float(index), float(copy)]), 0, ())


def _settings(batch_size: int, workers: int) -> LoaderSettings:
    return LoaderSettings(batch_size, workers, pin_memory=False, normalize_in_workers=False)


def _train_loader(dataset, rt, workers: int, seed: int = 7, repeats: int = 1):
    """ddptrain's training loader: EpochSampler shards, 4 images per rank and step."""
    settings = _settings(4, workers)
    sampler = EpochSampler(len(dataset), rt.rank, rt.world_size, seed, repeats)
    return train_loader(
        dataset, sampler, settings, seed, rt.rank, collate_fn=settings.image_collate(Preprocess().stats)
    )


def _shards(rt, image_path: str):
    loader = _train_loader(_IndexDataset(), rt, workers=0)
    order = {}
    for epoch in (0, 1, 0):
        loader.sampler.set_epoch(epoch)
        order.setdefault(epoch, []).append([int(x) for b in loader for x in b.images.flatten().tolist()])
    # identical images everywhere: any difference in the output comes from the augmentation draws alone
    same = ImageDataset([(image_path, 0)] * 8, train_transform(32, 0.08), seed=7, substitute=True)
    augmented = _train_loader(same, rt, workers=1)
    augmented.sampler.set_epoch(0)
    images = torch.cat([b.images for b in augmented])
    repeated = _train_loader(_CopyDataset(), rt, workers=1, repeats=WORLD)  # --repeated-aug 2
    repeated.sampler.set_epoch(1)
    copies = [[tuple(int(v) for v in row) for row in b.images.tolist()] for b in repeated]
    repeated_images = _train_loader(same, rt, workers=0, repeats=WORLD)
    repeated_images.sampler.set_epoch(0)
    copy_images = torch.cat([b.images for b in repeated_images])
    return {"epoch0": order[0], "epoch1": order[1][0], "images": images, "copies": copies, "copy_images": copy_images}


@pytest.fixture(scope="module")
def shards(tiny_shapes):
    return run_ranks(_shards, WORLD, str(sorted(tiny_shapes.rglob("*.jpg"))[0]))


def test_training_shards_are_disjoint_and_cover_all_but_the_tail(shards):
    r0, r1 = shards[0]["epoch0"][0], shards[1]["epoch0"][0]
    assert len(r0) == len(r1) == 8  # 23 samples: 11 per rank, 2 full batches of 4, the rest dropped
    assert not set(r0) & set(r1)


def test_order_changes_between_epochs_and_repeats_for_the_same_epoch(shards):
    for rank in shards:
        assert rank["epoch0"][0] == rank["epoch0"][1]
        assert rank["epoch1"] != rank["epoch0"][0]


def test_ranks_never_draw_the_same_augmentation(shards):
    a, b = shards[0]["images"], shards[1]["images"]
    assert len(a) == len(b) == 4
    for x in a:
        assert not any(torch.equal(x, y) for y in b)
    assert not torch.equal(a[0], a[1])


def test_repeated_augmentation_sends_each_images_copies_to_both_ranks_at_the_same_step(shards):
    r0, r1 = shards[0]["copies"], shards[1]["copies"]
    assert len(r0) == len(r1) == 2  # 23 positions per epoch, as without repetition: 11 per rank, 2 batches of 4
    for step0, step1 in zip(r0, r1):
        for (index0, copy0), (index1, copy1) in zip(step0, step1):
            assert index0 == index1 and (copy0, copy1) == (0, 1)  # same image, other rank, other copy
    indices = [index for step in r0 for index, _ in step]
    assert len(set(indices)) == len(indices)  # never the same image twice on one rank
    a, b = shards[0]["copy_images"], shards[1]["copy_images"]
    assert len(a) == len(b) == 4
    assert not any(torch.equal(x, y) for x, y in zip(a, b))  # each copy draws its own crop and flip


# ---- exact evaluation ----------------------------------------------------------------------------


class _TensorDataset(torch.utils.data.Dataset):
    def __init__(self, count: int):
        gen = torch.Generator().manual_seed(count)
        self.images = torch.randn(count, 3, 8, 8, generator=gen)
        self.labels = torch.randint(0, 3, (count,), generator=gen)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return Item(self.images[index], int(self.labels[index]), ())


def _evaluate(rt, counts):
    model = wrap_ddp(place_model(_net(), rt.device, rt.world_size, False, False), rt.device)
    results = {}
    for count in counts:
        settings = _settings(2, workers=0)
        loader = eval_loader(
            _TensorDataset(count),
            rt.rank,
            rt.world_size,
            settings,
            collate_fn=settings.image_collate(Preprocess().stats),
        )
        result = evaluate(model, loader, resolve_precision("off", rt.device), 3, rt)
        results[count] = {
            "samples": result.samples,
            "top1": result.top1,
            "top5": result.top5,
            "loss": result.loss,
            "per_class": result.per_class_count + result.per_class_correct,
            "local": len(loader.sampler),
        }
    return results


@pytest.mark.parametrize("world,counts", [(2, [7, 1]), (3, [7, 2])])
def test_evaluation_counts_every_sample_once_and_matches_one_process(world, counts):
    ranks = run_ranks(_evaluate, world, counts)
    single = run_single(_evaluate, counts)
    for count in counts:
        assert sum(r[count]["local"] for r in ranks) == count
        if count < world:
            assert min(r[count]["local"] for r in ranks) == 0  # a rank with nothing to do did not hang
        for rank in ranks:
            got, want = rank[count], single[count]
            assert got["samples"] == count
            assert (got["top1"], got["top5"], got["per_class"]) == (want["top1"], want["top5"], want["per_class"])
            assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)


# ---- SyncBatchNorm -------------------------------------------------------------------------------


def _bn_stats(rt):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=1.0))
    model = wrap_ddp(place_model(net, rt.device, rt.world_size, True, False), rt.device)
    images, _ = _global_data(WORLD * PER_RANK_BATCH)
    share = len(images) // rt.world_size
    model.train()
    model(images[rt.rank * share : (rt.rank + 1) * share])
    bn = unwrap(model)[1]
    return {"type": type(bn).__name__, "mean": bn.running_mean.clone(), "var": bn.running_var.clone()}


def test_sync_bn_uses_the_global_batch_statistics():
    ranks = run_ranks(_bn_stats, WORLD)
    single = run_single(_bn_stats)
    assert ranks[0]["type"] == "GlobalBatchNorm" and single["type"] == "BatchNorm2d"  # CPU: ddptrain's own
    for rank in ranks:
        torch.testing.assert_close(rank["mean"], single["mean"], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rank["var"], single["var"], rtol=1e-5, atol=1e-6)

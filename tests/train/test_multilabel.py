"""--task multilabel through ddptrain's own engine on real gloo processes: N ranks train like one process on the
global batch (binary cross-entropy, label smoothing, Mixup on multi-hot targets), and mAP / F1 are exact over
uneven ranks; and the metrics against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from ddptrain.data.datasets import Batch, Item
from ddptrain.data.loaders import eval_loader
from ddptrain.models import place_model, unwrap, wrap_ddp
from ddptrain.train.evaluate import evaluate
from ddptrain.train.loop import EpochPlan, StepSettings, train_one_epoch
from ddptrain.train.metrics import average_precision, multilabel_result
from ddptrain.train.mixing import Mixing
from ddptrain.train.optim import LrSchedule, build_optimizer
from ddptrain.train.precision import resolve_precision

from ..dist_harness import run_ranks, run_single
from .test_semantics import PER_RANK_BATCH, STEPS, WORLD, _net, _settings

CLASSES = 3


def _multi_hot(count: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    targets = (torch.rand(count, CLASSES, generator=gen) < 0.4).float()
    targets[targets.sum(1) == 0, 0] = 1.0  # every image has a class
    return targets


def _batches(rank: int, world: int, single: bool = False):
    gen = torch.Generator().manual_seed(1)
    count = STEPS * WORLD * PER_RANK_BATCH
    images, targets = torch.randn(count, 3, 8, 8, generator=gen), _multi_hot(count, 2)
    if single:  # class indices: the single-label loss
        targets = targets.argmax(1)
    size = PER_RANK_BATCH * (WORLD // world)
    return [
        Batch(images[s : s + size], targets[s : s + size], ())
        for s in ((k * world + rank) * size for k in range(STEPS))
    ]


def _train(rt, mixup: float, weights=None, single: bool = False):
    model = wrap_ddp(place_model(_net(), rt.device, rt.world_size, False, False), rt.device)
    optimizer = build_optimizer(model, "sgd", 0.5, 0.9, 0.01, rt.device)
    # Mixup pairs images inside each rank's batch with a draw of its own: with it on, the ranks' agreement is checked
    mixing = Mixing(mixup, 0.0, CLASSES, 0.1, seed=5) if mixup else None
    settings = StepSettings(1, None, 1, False, label_smoothing=0.1, mixing=mixing, class_weights=weights)
    batches = _batches(rt.rank, rt.world_size, single)
    train_one_epoch(
        model,
        batches,
        optimizer,
        LrSchedule(0.5, 1, 0.0, 1.0),
        resolve_precision("off", rt.device),
        settings,
        rt,
        EpochPlan(epoch=0, global_step=0),
    )
    return {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()}


def _both(rt):
    weights = torch.tensor([0.5, 2.0, 1.0])
    return {
        "plain": _train(rt, 0.0),
        "mixup": _train(rt, 0.4),
        "weighted": _train(rt, 0.0, weights),  # --class-weights: BCE's positive weights
        "weighted_single": _train(rt, 0.0, weights, single=True),  # and cross-entropy's class weights
    }


@pytest.mark.slow
def test_two_ranks_train_a_multilabel_or_class_weighted_model_like_one_process_on_the_global_batch():
    ranks, single = run_ranks(_both, WORLD), run_single(_both)
    initial = _net().state_dict()
    for name in single["plain"]:
        for scenario in ("plain", "weighted", "weighted_single"):
            want = single[scenario][name]
            torch.testing.assert_close(ranks[0][scenario][name], want, rtol=1e-5, atol=1e-5, msg=f"{scenario} {name}")
        assert torch.equal(ranks[0]["mixup"][name], ranks[1]["mixup"][name])  # the ranks agree with Mixup on
    assert any(not torch.equal(v, initial[k]) for k, v in single["plain"].items())  # the steps did something
    assert any(not torch.equal(v, single["plain"][k]) for k, v in single["weighted"].items())  # the weights did


class _Images(torch.utils.data.Dataset):
    def __init__(self, count: int):
        gen = torch.Generator().manual_seed(count)
        self.images = torch.randn(count, 3, 8, 8, generator=gen)
        self.targets = _multi_hot(count, count).numpy()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return Item(self.images[index], self.targets[index], ())


def _evaluate(rt, count: int):
    model = wrap_ddp(place_model(_net(), rt.device, rt.world_size, False, False), rt.device)
    settings = _settings(2, workers=0)
    loader = eval_loader(
        _Images(count), rt.rank, rt.world_size, settings, collate_fn=settings.image_collate(((0.5,) * 3, (0.5,) * 3))
    )
    result = evaluate(model, loader, resolve_precision("off", rt.device), CLASSES, rt, threshold=0.5)
    return {
        "samples": result.samples,
        "map": result.map,
        "macro_f1": result.macro_f1,
        "micro_f1": result.micro_f1,
        "loss": result.loss,
        "top1": result.top1,
        "per_class": result.per_class_correct + result.per_class_count,
        "local": len(loader.sampler),
    }


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 8])
def test_map_and_f1_are_exact_over_uneven_ranks(world):
    ranks, single = run_ranks(_evaluate, world, 7), run_single(_evaluate, 7)
    assert sum(r["local"] for r in ranks) == 7 and single["samples"] == 7
    for rank in ranks:
        assert {k: rank[k] for k in ("samples", "map", "macro_f1", "micro_f1", "top1", "per_class")} == {
            k: single[k] for k in ("samples", "map", "macro_f1", "micro_f1", "top1", "per_class")
        }
        assert rank["loss"] == pytest.approx(single["loss"], rel=1e-6)  # float32 sums per batch


def test_average_precision_and_f1_match_hand_computed_values():
    # ranks 1..4: positive, negative, positive, negative -> precision 1 at recall 1/2, 2/3 at recall 1
    assert average_precision(torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([1, 0, 1, 0]).bool()) == pytest.approx(
        0.5 * 1 + 0.5 * 2 / 3
    )
    # a tie is one threshold, whatever order the images came in
    for order in ([1, 0], [0, 1]):
        assert average_precision(torch.tensor([0.5, 0.5]), torch.tensor(order).bool()) == pytest.approx(0.5)
    scores = torch.tensor([[0.9, 0.2, 0.6], [0.1, 0.8, 0.4], [0.7, 0.3, 0.2]], dtype=torch.float64)
    targets = torch.tensor([[1, 0, 1], [0, 1, 1], [0, 0, 0]], dtype=torch.float64)
    result = multilabel_result(scores, targets, loss_sum=1.8, skipped=0, threshold=0.5)
    # at 0.5: class 0 tp 1 fp 1; class 1 tp 1; class 2 tp 1 fn 1 -> micro 2*3 / (2*3 + 1 + 1)
    assert result.micro_f1 == pytest.approx(6 / 8)
    assert result.macro_f1 == pytest.approx((2 / 3 + 1 + 2 / 3) / 3)
    assert result.top1 == pytest.approx(2 / 3) and result.loss == pytest.approx(1.8 / 9)
    assert result.per_class_correct == [1, 1, 1] and result.per_class_count == [1, 1, 2]

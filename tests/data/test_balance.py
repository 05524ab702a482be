"""Class imbalance: --class-weights (auto, a file) and the balanced sampler's deterministic weighted epochs."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ddptrain.data.balance import class_weights, sample_weights
from ddptrain.data.index import SampleIndex
from ddptrain.data.samplers import EpochSampler
from ddptrain.errors import ConfigError

CLASSES = ["common", "rare"]


def _samples(counts):
    pairs = [(f"{c}/{i}.jpg", label) for label, (c, n) in enumerate(zip(CLASSES, counts)) for i in range(n)]
    return SampleIndex.from_pairs("/d", pairs)


def test_auto_weights_make_each_class_weigh_alike_and_a_file_names_every_class(tmp_path):
    samples = _samples([90, 10])
    assert class_weights("auto", samples, CLASSES).tolist() == pytest.approx([100 / (2 * 90), 100 / (2 * 10)])
    assert class_weights("none", samples, CLASSES) is None
    multi = SampleIndex.from_label_sets("/d", [("a", [0]), ("b", [0, 1]), ("c", [0]), ("d", [0])], 2)
    assert class_weights("auto", multi, CLASSES).tolist() == pytest.approx([1 / 4, 3 / 1])  # negatives / positives
    good = tmp_path / "w.json"
    good.write_text(json.dumps({"rare": 5, "common": 0.5}))
    assert class_weights(str(good), samples, CLASSES).tolist() == [0.5, 5.0]


@pytest.mark.parametrize(
    "content, message",
    [
        ({"common": 1}, r"no weight for rare"),
        ({"common": 1, "rare": 2, "cat": 3}, r"classes the data does not have: cat"),
        ({"common": 1, "rare": -2}, r"every weight must be a number of 0 or more"),
        ([1, 2], r"write a JSON object"),
        ("{not json", r"not a JSON file of class: weight"),
    ],
)
def test_a_weights_file_that_does_not_fit_is_refused_naming_it(tmp_path, content, message):
    path = tmp_path / "w.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ConfigError, match=message):
        class_weights(str(path), _samples([3, 3]), CLASSES)


def _epoch(sampler, epoch, start=0):
    sampler.set_epoch(epoch, start)
    return list(sampler)


def test_a_balanced_epoch_draws_the_classes_evenly_with_the_same_length_and_is_a_function_of_seed_and_epoch():
    samples = _samples([900, 100])
    weights = sample_weights(samples, 2)
    sampler = EpochSampler(len(samples), 0, 1, seed=3, weights=weights)
    drawn = _epoch(sampler, 0)
    assert len(drawn) == 1000 and drawn == _epoch(EpochSampler(1000, 0, 1, seed=3, weights=weights), 0)
    assert drawn != _epoch(sampler, 1)
    rare = sum(1 for index, _, _ in drawn if samples.labels[index] == 1)
    assert 420 < rare < 580  # about half, though a tenth of the images
    copies = Counter(index for index, _, _ in drawn)
    repeated = next(index for index, n in copies.items() if n > 1)
    assert sorted(copy for index, _, copy in drawn if index == repeated) == list(range(copies[repeated]))


def test_a_balanced_epoch_splits_over_ranks_and_resumes_mid_epoch_without_repeating_a_position():
    samples = _samples([30, 6])
    weights = sample_weights(samples, 2)
    whole = _epoch(EpochSampler(36, 0, 1, seed=1, weights=weights), 2)
    ranks = [_epoch(EpochSampler(36, r, 2, seed=1, weights=weights), 2) for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == sorted(whole)
    resumed = [_epoch(EpochSampler(36, r, 3, seed=1, weights=weights), 2, start=12) for r in range(3)]
    assert sorted(whole[:12] + resumed[0] + resumed[1] + resumed[2]) == sorted(whole)
    with pytest.raises(ValueError, match="neither repeated augmentation nor whole shards"):
        EpochSampler(36, 0, 1, seed=1, repeats=2, weights=weights)

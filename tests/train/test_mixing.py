"""Mixup/CutMix: draws are a pure function of (seed, epoch, step, rank, micro-batch); targets stay distributions."""

import torch

from ddptrain.train.mixing import Mixing, soft_cross_entropy, soft_targets

BOTH = Mixing(mixup=0.8, cutmix=1.0, num_classes=3, label_smoothing=0.1, seed=42)


def test_draws_differ_across_ranks_and_steps_and_repeat_for_the_same_ones():
    assert BOTH.draw(0, 5, 1, 0) == BOTH.draw(0, 5, 1, 0)  # a resumed run draws what the first one drew
    others = {BOTH.draw(0, 5, rank, 0) for rank in range(4)} | {BOTH.draw(0, step, 1, 0) for step in range(4)}
    assert len(others) == 8  # every rank and every step its own draw
    kinds = {BOTH.draw(0, step, 0, 0)[0] for step in range(20)}
    assert kinds == {True, False}  # with both on, some batches get CutMix and some Mixup


def test_mixup_blends_the_batch_with_itself_reversed_and_the_targets_alike():
    images, labels = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 0])
    mixup = Mixing(mixup=0.8, cutmix=0.0, num_classes=3, label_smoothing=0.0, seed=1)
    _, lam, _, _ = mixup.draw(2, 7, 0, 0)
    mixed, targets = mixup.apply(images, labels, 2, 7, 0, 0)
    torch.testing.assert_close(mixed, lam * images + (1 - lam) * images.flip(0))
    torch.testing.assert_close(targets[0], torch.tensor([lam, 0.0, 0.0]) + torch.tensor([1 - lam, 0.0, 0.0]))
    torch.testing.assert_close(targets[1], torch.tensor([0.0, lam, 1 - lam]))


def test_cutmix_pastes_a_box_and_weights_the_targets_by_its_area():
    images, labels = torch.zeros(2, 1, 10, 10), torch.tensor([0, 1])
    images[1] = 1.0
    cutmix = Mixing(mixup=0.0, cutmix=1.0, num_classes=2, label_smoothing=0.0, seed=3)
    mixed, targets = cutmix.apply(images, labels, 0, 1, 0, 0)
    pasted = mixed[0].mean().item()  # the share of image 0 that now comes from image 1
    assert 0 < pasted < 1 and torch.equal(images[0], torch.zeros(1, 10, 10))  # the input is left as it was
    torch.testing.assert_close(targets[0], torch.tensor([1 - pasted, pasted]))


def test_label_smoothing_is_folded_into_the_soft_targets():
    targets = soft_targets(torch.tensor([2]), 4, 0.2)
    torch.testing.assert_close(targets, torch.tensor([[0.05, 0.05, 0.85, 0.05]]))
    logits = torch.randn(1, 4)
    plain = torch.nn.functional.cross_entropy(logits, torch.tensor([2]), label_smoothing=0.2)
    torch.testing.assert_close(soft_cross_entropy(logits, targets), plain)

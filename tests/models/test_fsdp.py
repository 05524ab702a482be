"""FSDP's blocks, gradient checkpointing, and the evaluation of a sharded model on real gloo processes."""

from __future__ import annotations

import copy

import pytest
import timm
import torch
import torchvision
from torch import nn

from ddptrain.data.datasets import Batch
from ddptrain.errors import ConfigError
from ddptrain.models.fsdp import block_units, shard_model
from ddptrain.models.gradckpt import enable_grad_checkpointing
from ddptrain.train.evaluate import evaluate
from ddptrain.train.precision import resolve_precision

from ..dist_harness import run_ranks, run_single


def small_torchvision_vit() -> nn.Module:
    return torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=3, num_heads=2, hidden_dim=16, mlp_dim=32, num_classes=4
    )


def test_blocks_are_a_resnets_residual_blocks_and_a_vits_encoder_layers():
    resnet = torchvision.models.resnet18(num_classes=4)
    assert [type(u).__name__ for u in block_units(resnet)] == ["BasicBlock"] * 8
    assert [type(u).__name__ for u in block_units(small_torchvision_vit())] == ["EncoderBlock"] * 3
    vit = timm.create_model("test_vit", num_classes=4)
    assert block_units(vit) == list(vit.blocks) and len(vit.blocks) > 1
    assert block_units(nn.Linear(3, 4)) == []  # sharded as one unit


def _step(model: nn.Module, images: torch.Tensor, labels: torch.Tensor):
    model.train()
    nn.functional.cross_entropy(model(images), labels).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return grads, {name: b.clone() for name, b in model.named_buffers()}


@pytest.mark.parametrize("build", [lambda: torchvision.models.resnet18(num_classes=4), small_torchvision_vit])
def test_grad_checkpointing_changes_neither_gradients_nor_batchnorm_statistics(build):
    torch.manual_seed(0)
    plain = build()
    checkpointed = copy.deepcopy(plain)
    assert enable_grad_checkpointing(checkpointed).startswith("torch.utils.checkpoint around")
    images, labels = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    want_grads, want_buffers = _step(plain, images, labels)
    got_grads, got_buffers = _step(checkpointed, images, labels)
    for name in want_grads:
        torch.testing.assert_close(got_grads[name], want_grads[name], rtol=0, atol=1e-6)
    for name in want_buffers:  # a plain checkpoint would update the running statistics twice
        assert got_buffers[name].equal(want_buffers[name]), name


def test_grad_checkpointing_uses_timms_own_where_the_model_has_it_and_refuses_a_model_without_blocks():
    vit = timm.create_model("test_vit", num_classes=4)
    assert enable_grad_checkpointing(vit) == "timm's set_grad_checkpointing" and vit.grad_checkpointing
    resnet = timm.create_model("test_resnet", num_classes=4)  # timm's own would update BatchNorm twice
    assert enable_grad_checkpointing(resnet).startswith("torch.utils.checkpoint around")
    with pytest.raises(ConfigError, match="--grad-checkpointing: Linear has no stack of blocks"):
        enable_grad_checkpointing(nn.Linear(3, 4))


def _uneven_batches(rank: int):
    """Rank 0 holds 3 batches of 2 images, rank 1 one batch and then one whose images all failed to load."""
    torch.manual_seed(7)
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    labels = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    if rank == 0:
        return [Batch(images[i : i + 2], labels[i : i + 2], ()) for i in (0, 2, 4)]
    empty = Batch(images[:0], labels[:0], ("broken.jpg",))
    return [Batch(images[6:8], labels[6:8], ()), empty]


def _evaluate(rt, sharded: bool):
    torch.manual_seed(0)
    model = timm.create_model("test_resnet", num_classes=4)
    if sharded:
        shard_model(model, rt.device, None)
    loader = _uneven_batches(rt.rank) if rt.world_size > 1 else _uneven_batches(0) + _uneven_batches(1)
    result = evaluate(model, loader, resolve_precision("off", rt.device), 4, rt, img_size=32)
    return {"top1": result.top1, "loss": result.loss, "samples": result.samples, "skipped": result.skipped}


def test_a_sharded_model_evaluates_uneven_shards_without_hanging_and_counts_each_image_once():
    ranks = run_ranks(_evaluate, 2, True)
    whole = run_single(_evaluate, False)
    assert ranks[0] == ranks[1]
    assert ranks[0]["samples"] == whole["samples"] == 8 and ranks[0]["skipped"] == whole["skipped"] == 1
    assert ranks[0]["top1"] == whole["top1"]
    assert ranks[0]["loss"] == pytest.approx(whole["loss"], abs=1e-5)

import torch

from ddptrain.data.datasets import ImageDataset, augmentation_seed, collate
from ddptrain.data.samplers import EpochSampler, ShardSampler
from ddptrain.data.transforms import train_transform


def test_shard_sampler_gives_each_index_to_exactly_one_rank():
    for length, world in [(7, 2), (1, 3), (10, 3), (0, 2)]:
        shards = [list(ShardSampler(length, r, world)) for r in range(world)]
        flat = sorted(i for shard in shards for i in shard)
        assert flat == list(range(length))


def _shard(rank, world, epoch, start=0, length=21):
    sampler = EpochSampler(length, rank, world, seed=5)
    sampler.set_epoch(epoch, start)
    items = list(sampler)
    assert len(items) == len(sampler) and all(e == epoch for _, e in items)
    return [i for i, _ in items]


def test_epoch_sampler_disjoint_shards_and_new_order_each_epoch():
    r0, r1 = _shard(0, 2, 0), _shard(1, 2, 0)
    assert len(r0) == len(r1) == 10 and not set(r0) & set(r1)
    assert _shard(0, 2, 1) != r0 and _shard(0, 2, 0) == r0


def test_epoch_sampler_matches_torch_distributed_sampler():
    from torch.utils.data import DistributedSampler

    for rank in range(3):
        reference = DistributedSampler(list(range(20)), num_replicas=3, rank=rank, shuffle=True, seed=5, drop_last=True)
        reference.set_epoch(4)
        assert _shard(rank, 3, 4, length=20) == list(reference)


def test_resuming_mid_epoch_neither_repeats_nor_skips():
    world, batch, steps_done = 2, 3, 2
    full = [_shard(r, world, 7) for r in range(world)]
    consumed = steps_done * batch * world
    rest = [_shard(r, world, 7, start=consumed) for r in range(world)]
    for rank in range(world):  # same world size: exactly the uninterrupted remainder of each shard
        assert rest[rank] == full[rank][steps_done * batch :]
    seen = [i for shard in full for i in shard[: steps_done * batch]]
    on_three = [i for r in range(3) for i in _shard(r, 3, 7, start=consumed)]  # another world size
    assert not set(seen) & set(on_three)
    assert len(set(seen) | set(on_three)) == 21 - (21 - consumed) % 3


def test_augmentation_depends_on_sample_and_epoch_only(tiny_shapes):
    samples = [(str(p), 0) for p in sorted(tiny_shapes.rglob("*.jpg"))[:3]]
    dataset = ImageDataset(samples, train_transform(32, 0.2), None, seed=1, substitute=True)
    first = dataset[(0, 0)].image
    assert torch.equal(first, dataset[(0, 0)].image)
    assert not torch.equal(first, dataset[(0, 1)].image)  # another epoch, another crop
    assert augmentation_seed(1, 0, 0) != augmentation_seed(1, 0, 1)
    before = torch.get_rng_state()
    dataset[(1, 0)]
    assert torch.equal(before, torch.get_rng_state())  # the global RNG is left alone


def test_unreadable_training_file_is_substituted_and_reported(tmp_path, tiny_shapes):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    good = sorted(tiny_shapes.rglob("*.jpg"))[0]
    dataset = ImageDataset([(str(bad), 1), (str(good), 0)], train_transform(32, 0.2), None, substitute=True)
    item = dataset[(0, 0)]
    assert item.image is not None and item.label == 0
    assert len(item.failures) == 1 and "broken.jpg" in item.failures[0]


def test_unreadable_eval_file_is_left_out_and_counted(tmp_path, tiny_shapes):
    bad = tmp_path / "empty.png"
    bad.write_bytes(b"")
    good = sorted(tiny_shapes.rglob("*.jpg"))[0]
    dataset = ImageDataset([(str(bad), 1), (str(good), 0)], train_transform(32, 0.2), None)
    batch = collate([dataset[0], dataset[1]])
    assert batch.labels.tolist() == [0] and len(batch.failures) == 1

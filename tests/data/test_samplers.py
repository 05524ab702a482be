import torch

from ddptrain.data.datasets import ImageDataset, augmentation_seed, collate
from ddptrain.data.samplers import EpochSampler, ExactEvalSampler
from ddptrain.data.transforms import train_transform


def test_shard_sampler_gives_each_index_to_exactly_one_rank():
    for length, world in [(7, 2), (1, 3), (10, 3), (0, 2)]:
        shards = [list(ExactEvalSampler(length, r, world)) for r in range(world)]
        flat = sorted(i for shard in shards for i in shard)
        assert flat == list(range(length))


def _items(rank, world, epoch, start=0, length=21, repeats=1):
    sampler = EpochSampler(length, rank, world, seed=5, repeats=repeats)
    sampler.set_epoch(epoch, start)
    items = list(sampler)
    assert len(items) == len(sampler) and all(e == epoch for _, e, _ in items)
    return items


def _shard(rank, world, epoch, start=0, length=21):
    return [i for i, _, _ in _items(rank, world, epoch, start, length)]


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


def test_repeated_augmentation_puts_each_images_copies_on_different_ranks():
    length, world, repeats = 40, 4, 3
    shards = [_items(r, world, epoch=2, length=length, repeats=repeats) for r in range(world)]
    assert sum(len(s) for s in shards) == length  # an epoch keeps its length
    copies = {}
    for rank, shard in enumerate(shards):
        for step, (index, _, copy) in enumerate(shard):
            copies.setdefault(index, []).append((rank, copy, step))
    for index, placed in copies.items():
        ranks = [rank for rank, _, _ in placed]
        assert len(set(ranks)) == len(ranks), f"index {index} twice on one rank: {placed}"
        assert sorted(copy for _, copy, _ in placed) == list(range(len(placed)))  # copies 0, 1, ...: own draws
    assert sum(len(p) == repeats for p in copies.values()) >= length // repeats - 1  # only the cut one is short
    assert len({step for p in copies.values() for _, _, step in p if len(p) == repeats}) > 1


def test_repeated_augmentation_resumes_mid_epoch_on_another_world_size():
    length, repeats = 36, 2
    full = [_items(r, 2, 3, length=length, repeats=repeats) for r in range(2)]
    consumed = 3 * 2 * 2  # 3 steps of 2 per rank
    rest = [_items(r, 2, 3, start=consumed, length=length, repeats=repeats) for r in range(2)]
    assert rest == [shard[3 * 2 :] for shard in full]  # same world size: exactly the uninterrupted remainder
    done = [item[::2] for shard in full for item in shard[: 3 * 2]]
    on_three = [item[::2] for r in range(3) for item in _items(r, 3, 3, start=consumed, length=length, repeats=2)]
    stream = sorted(done + on_three)
    assert len(stream) == length and len(set(stream)) == length  # no (index, copy) repeated or skipped


def test_augmentation_depends_on_sample_and_epoch_only(tiny_shapes):
    samples = [(str(p), 0) for p in sorted(tiny_shapes.rglob("*.jpg"))[:3]]
    dataset = ImageDataset(samples, train_transform(32, 0.2), seed=1, substitute=True)
    first = dataset[(0, 0)].image
    assert torch.equal(first, dataset[(0, 0)].image)
    assert not torch.equal(first, dataset[(0, 1)].image)  # another epoch, another crop
    assert augmentation_seed(1, 0, 0) != augmentation_seed(1, 0, 1)
    assert not torch.equal(first, dataset[(0, 0, 1)].image)  # a repeated copy draws its own augmentation
    assert torch.equal(first, dataset[(0, 0, 0)].image)
    before = torch.get_rng_state()
    dataset[(1, 0)]
    assert torch.equal(before, torch.get_rng_state())  # the global RNG is left alone


def test_unreadable_training_file_is_substituted_and_reported(tmp_path, tiny_shapes):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    good = sorted(tiny_shapes.rglob("*.jpg"))[0]
    dataset = ImageDataset([(str(bad), 1), (str(good), 0)], train_transform(32, 0.2), substitute=True)
    item = dataset[(0, 0)]
    assert item.image is not None and item.label == 0
    assert len(item.failures) == 1 and "broken.jpg" in item.failures[0]


def test_unreadable_eval_file_is_left_out_and_counted(tmp_path, tiny_shapes):
    bad = tmp_path / "empty.png"
    bad.write_bytes(b"")
    good = sorted(tiny_shapes.rglob("*.jpg"))[0]
    dataset = ImageDataset([(str(bad), 1), (str(good), 0)], train_transform(32, 0.2))
    batch = collate([dataset[0], dataset[1]])
    assert batch.labels.tolist() == [0] and len(batch.failures) == 1

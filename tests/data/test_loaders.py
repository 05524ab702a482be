import torch

from ddptrain.data.datasets import ImageDataset, augmentation_seed, collate
from ddptrain.data.loaders import EpochSampler, ShardSampler
from ddptrain.data.transforms import train_transform


def test_shard_sampler_gives_each_index_to_exactly_one_rank():
    for length, world in [(7, 2), (1, 3), (10, 3), (0, 2)]:
        shards = [list(ShardSampler(length, r, world)) for r in range(world)]
        flat = sorted(i for shard in shards for i in shard)
        assert flat == list(range(length))


def test_epoch_sampler_disjoint_shards_and_new_order_each_epoch():
    data = list(range(21))

    def shard(rank, epoch):
        sampler = EpochSampler(data, num_replicas=2, rank=rank, shuffle=True, seed=5, drop_last=True)
        sampler.set_epoch(epoch)
        return [i for i, e in sampler if e == epoch]

    r0, r1 = shard(0, 0), shard(1, 0)
    assert len(r0) == len(r1) == 10 and not set(r0) & set(r1)
    assert shard(0, 1) != r0 and shard(0, 0) == r0


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

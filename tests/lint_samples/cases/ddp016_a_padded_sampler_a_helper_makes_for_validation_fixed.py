"""ddptrain lint sample ddp016_a_padded_sampler_a_helper_makes_for_validation: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.utils import data
from torch.utils.data import DataLoader, DistributedSampler


def make_data_sampler(dataset, shuffle, distributed):
    if distributed:
        return DistributedSampler(dataset, shuffle=shuffle)
    return data.RandomSampler(dataset) if shuffle else data.SequentialSampler(dataset)


def make_batch_sampler(sampler, images_per_batch):
    return data.BatchSampler(sampler, images_per_batch, drop_last=False)


@torch.no_grad()
def validate(model, val_dataset):
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = data.Subset(val_dataset, range(rank, len(val_dataset), world))  # each image on one rank, no padding
    loader = DataLoader(mine, batch_sampler=make_batch_sampler(data.SequentialSampler(mine), 4))
    correct = torch.zeros(2)
    for images, labels in loader:
        correct += torch.tensor([(model(images).argmax(1) == labels).sum().item(), labels.numel()])
    dist.all_reduce(correct)
    return (correct[0] / correct[1]).item()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    dataset = data.TensorDataset(torch.randn(10, 4), torch.zeros(10, dtype=torch.long))
    print(validate(torch.nn.Linear(4, 2), dataset))

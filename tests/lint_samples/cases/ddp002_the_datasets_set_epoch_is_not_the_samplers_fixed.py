"""ddptrain lint sample ddp002_the_datasets_set_epoch_is_not_the_samplers: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Clips(Dataset):
    def __init__(self):
        self.epoch = 0

    def set_epoch(self, epoch):  # the augmentation's schedule
        self.epoch = epoch

    def __len__(self):
        return 64

    def __getitem__(self, index):
        return torch.randn(4) * (1 + self.epoch), torch.randn(1)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    dataset = Clips()
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loader.dataset.set_epoch(epoch)
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()

"""ddptrain lint sample ddp018_a_helper_every_caller_asks_for_datasets: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def get_data(batch_size, return_datasets=False):
    train = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if return_datasets:
        return train
    return DataLoader(train, batch_size=batch_size, shuffle=True)  # for one process


if __name__ == "__main__":
    dist.init_process_group("gloo")
    train = get_data(8, return_datasets=True)
    loader = DataLoader(train, batch_size=8, sampler=DistributedSampler(train)) if True else train
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()

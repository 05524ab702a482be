"""ddptrain lint sample ddp018_a_loader_in_the_else_of_a_dist_flag: the mistake (lines marked `# expect:` get exactly those findings)."""
import torch
import torch.distributed as dist_api
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def setting(batch_size, dist=False):
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if dist:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True)  # expect: DDP018 (no fix)
    else:
        loader = DataLoader(data, batch_size=batch_size, shuffle=True)  # one process: shuffling is right
    return loader


def train(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()


if __name__ == "__main__":
    dist_api.init_process_group("gloo")
    train(DDP(torch.nn.Linear(4, 1)), setting(8, dist=True), 3)

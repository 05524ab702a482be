"""ddptrain lint sample ddp014_a_step_skipped_on_a_rank_whose_loss_is_not_finite: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            if not torch.isfinite(loss):
                optimizer.zero_grad()
                continue  # expect: DDP014
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    model = DDP(torch.nn.Linear(4, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), 3)

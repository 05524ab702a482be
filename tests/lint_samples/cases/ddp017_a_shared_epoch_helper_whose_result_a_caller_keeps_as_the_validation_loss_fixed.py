"""ddptrain lint sample ddp017_a_shared_epoch_helper_whose_result_a_caller_keeps_as_the_validation_loss: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, model, rank):
        self.model, self.rank = model, rank
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def run_epoch(self, loader, training=True):
        total = 0.0
        for x, y in loader:
            if training:
                self.model.train()
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            else:
                self.model.eval()
                with torch.no_grad():
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
            total += loss.item()
        return total / len(loader)

    def train(self, train_loader, val_loader, epochs):
        for epoch in range(epochs):
            train_loader.sampler.set_epoch(epoch)
            self.run_epoch(train_loader)
            val_loss = self.run_epoch(val_loader, training=False)
            mean = torch.tensor(val_loss)
            dist.all_reduce(mean)
            val_loss = mean.item() / dist.get_world_size()
            if self.rank == 0:
                print(f"epoch {epoch} val loss {val_loss:.4f}")


if __name__ == "__main__":
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    train_loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    val_loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=False, drop_last=True))
    Trainer(DDP(torch.nn.Linear(4, 1)), dist.get_rank()).train(train_loader, val_loader, 3)

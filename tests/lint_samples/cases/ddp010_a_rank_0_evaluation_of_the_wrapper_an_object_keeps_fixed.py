"""ddptrain lint sample ddp010_a_rank_0_evaluation_of_the_wrapper_an_object_keeps: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    @torch.no_grad()
    def test(self):
        correct = 0
        for images, labels in self.loader:
            correct += (self.model(images).argmax(1) == labels).sum().item()
        return correct

    def build(self, epochs):
        for epoch in range(epochs):
            correct = self.test()  # every rank: the forward broadcasts rank 0's buffers to all
            if rank == 0:
                print(epoch, correct)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(4, 2))
    trainer = Trainer(model, [(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))])
    trainer.build(3)

"""ddptrain lint sample ddp015_a_save_reached_only_from_the_rank_0_branch: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist


class Checkpoint:
    def save(self, model, iteration):
        torch.save(model.state_dict(), f"model_{iteration}.pt")  # expect: DDP015


class Trainer:
    def __init__(self, model, rank=None):
        self.model, self.rank, self.ckp = model, rank, Checkpoint()

    def train(self, iterations):
        for i in range(iterations):
            if self.rank is None or self.rank >= 0:  # evaluate and save in one process
                self.test(i + 1)

    def test(self, iteration=-1):
        if iteration >= 0:
            self.ckp.save(self.model, iteration)

    def final(self):
        self.test(-1)  # every rank: scores the last model, saves nothing


if __name__ == "__main__":
    dist.init_process_group("gloo")
    trainer = Trainer(torch.nn.Linear(2, 2), rank=dist.get_rank())
    trainer.train(10)
    trainer.final()

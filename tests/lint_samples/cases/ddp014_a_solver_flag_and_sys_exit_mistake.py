"""ddptrain lint sample ddp014_a_solver_flag_and_sys_exit: the mistake (lines marked `# expect:` get exactly those findings)."""
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Solver:
    def __init__(self, rank):
        self.rank = rank
        self.model = DDP(nn.Linear(8, 2))
        self.stop = False
        self.best = float("inf")

    def train(self):
        self.model(torch.zeros(4, 8)).sum().backward()

    def validate(self):
        loss = torch.zeros(1)
        dist.all_reduce(loss)
        if self.rank == 0:  # early stopping decided on rank 0 only
            self.stop = loss.item() >= self.best
            self.best = min(self.best, loss.item())


def main():
    dist.init_process_group("gloo")
    solver = Solver(dist.get_rank())
    for epoch in range(100):
        solver.train()
        solver.validate()
        if solver.stop:
            sys.exit()  # expect: DDP014


if __name__ == "__main__":
    main()

"""ddptrain lint sample ddp014_exit_on_rank_zero: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(8, 2))
    for step in range(1000):
        loss = model(torch.zeros(4, 8)).sum()
        loss.backward()
        done = torch.tensor(float(dist.get_rank() == 0 and loss.item() < 1e-3))
        dist.broadcast(done, src=0)
        if done.item():
            exit()


if __name__ == "__main__":
    main()

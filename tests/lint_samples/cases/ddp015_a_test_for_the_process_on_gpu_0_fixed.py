"""ddptrain lint sample ddp015_a_test_for_the_process_on_gpu_0: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class SelfPlay:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def learn(self, iterations):
        for iteration in range(iterations):
            self.train()
            if self.model.device == torch.device("cuda:0"):  # the process on GPU 0 alone
                torch.save(self.optimizer.state_dict(), f"optimizer_{iteration}.pt")

def worker(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    SelfPlay(DDP(build().to(f"cuda:{rank}"), device_ids=[rank]), optimizer).learn(100)


if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, args=(torch.cuda.device_count(),), nprocs=torch.cuda.device_count())

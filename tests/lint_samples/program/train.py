"""A DDP program in two files: the epoch loop calls a helper in engine.py that set_epoch()s the sampler and
saves through save_on_master; `ddptrain lint` on the folder finds nothing wrong."""
import os

import engine
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

EPOCHS = 3


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    dataset = torch.utils.data.TensorDataset(torch.zeros(8, 3))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=2, sampler=sampler)
    model = DDP(torch.nn.Linear(3, 2).cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(EPOCHS):
        engine.run_epoch(model, loader, sampler, optimizer, epoch)
        engine.save_on_master({"model": model.module.state_dict()}, "last.pt")


if __name__ == "__main__":
    main()

"""ddptrain lint sample ddp005_set_device_in_a_helper_never_called: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def init_slurm(num_gpus):
    proc_id = int(os.environ["SLURM_PROCID"])
    torch.cuda.set_device(proc_id % num_gpus)
    dist.init_process_group("nccl")


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    model = DDP(nn.Linear(8, 2).to(local_rank), device_ids=[local_rank])
    model(torch.zeros(4, 8, device=local_rank)).sum().backward()


if __name__ == "__main__":
    main()

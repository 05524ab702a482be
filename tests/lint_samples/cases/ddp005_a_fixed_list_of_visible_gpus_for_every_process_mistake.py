"""ddptrain lint sample ddp005_a_fixed_list_of_visible_gpus_for_every_process: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size):
    dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=world_size)  # expect: DDP005
    model = DDP(torch.nn.Linear(2, 2).cuda(rank), device_ids=[rank])


if __name__ == "__main__":
    os.environ["CUDA_VISIBLE_DEVICES"] = "2, 3"  # both processes see both GPUs
    os.environ.setdefault("MASTER_ADDR", "localhost")
    mp.spawn(worker, args=(2,), nprocs=2)

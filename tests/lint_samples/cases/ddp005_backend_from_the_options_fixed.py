"""ddptrain lint sample ddp005_backend_from_the_options: the fixed; `ddptrain lint` finds nothing here."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="nccl")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=args.backend)
    model = DDP(build_model().to(f"cuda:{local_rank}"), device_ids=[local_rank])
    train(model)


if __name__ == "__main__":
    main()

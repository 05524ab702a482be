"""ddptrain lint sample ddp007_a_wrapper_returned_on_one_path_of_a_helper: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def set_model(model, device, distributed=False):
    if distributed:
        model = nn.parallel.DistributedDataParallel(model.to(device), device_ids=[device])
    else:
        model = model.to(device)
    return model


def main():
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    model = set_model(nn.Linear(2, 2), local_rank, distributed=distributed)
    for epoch in range(3):
        if local_rank == 0:
            torch.save(getattr(model, "module", model).state_dict(), "model.pt")


if __name__ == "__main__":
    main()

"""ddptrain lint sample ddp007_saved_and_resumed_through_the_wrapper: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_checkpoint(path, model, optimizer):
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if os.path.exists("last.pt"):
        load_checkpoint("last.pt", model.module, optimizer)
    for epoch in range(3):
        if dist.get_rank() == 0:
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")  # loads into a plain model too

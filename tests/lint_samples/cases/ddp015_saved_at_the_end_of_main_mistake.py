"""ddptrain lint sample ddp015_saved_at_the_end_of_main: the mistake (lines marked `# expect:` get exactly those findings)."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(nn.Linear(8, 2))
    model(torch.zeros(4, 8)).sum().backward()
    multi_gpu = True
    if multi_gpu:
        torch.save(model.module.state_dict(), "final.pt")  # expect: DDP015
    else:
        torch.save(model.state_dict(), "final.pt")


if __name__ == "__main__":
    main()

"""ddptrain lint sample ddp015_save_method_called_on_every_rank: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Model:
    def __init__(self, net, rank):
        self.net = DDP(net.cuda(rank), device_ids=[rank])

    def save(self, step):
        torch.save(self.net.module.state_dict(), f"{step}_net.pth")  # expect: DDP015


def main():
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    model = Model(build_net(), rank)
    for step in range(1, 10001):
        train_step(model, step)
        if step % 1000 == 0:
            model.save(step)


if __name__ == "__main__":
    main()

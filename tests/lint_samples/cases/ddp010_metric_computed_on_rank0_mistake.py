"""ddptrain lint sample ddp010_metric_computed_on_rank0: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torchmetrics import Accuracy


def main():
    dist.init_process_group("nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    model = DDP(build_model().to(rank), device_ids=[rank])
    acc = Accuracy(task="multiclass", num_classes=10).to(rank)
    for epoch in range(10):
        for x, y in loader:
            acc.update(model(x.to(rank)).argmax(1), y.to(rank))
        if dist.get_rank() == 0:
            print(f"epoch {epoch} accuracy {acc.compute():.4f}")  # expect: DDP010
        acc.reset()


if __name__ == "__main__":
    main()

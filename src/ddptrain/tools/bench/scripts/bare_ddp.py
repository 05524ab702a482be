"""The minimal hand-written DDP training loop of the usual tutorial, as a yardstick for ddptrain.

Run it with torchrun:  python -m torch.distributed.run --nproc-per-node 2 PATH/bare_ddp.py --data DIR
It prints one JSON line per epoch on rank 0 with the steady-state images/s summed over ranks
(the same definition ddptrain writes to metrics.jsonl).
"""

import argparse
import json
import os
import time
from pathlib import Path
from typing import Optional

import torch
import torch.distributed as dist
import torchvision
from PIL import Image
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import transforms

STEADY_AFTER = 2  # same warm-up exclusion as ddptrain


class FolderDataset(Dataset):
    def __init__(self, root, transform):
        classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
        self.samples = [(str(f), i) for i, c in enumerate(classes) for f in sorted((Path(root) / c).glob("*.jpg"))]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        return self.transform(Image.open(path).convert("RGB")), label


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=1)
    return parser.parse_args()


def make_loader(args, use_cuda: bool):
    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(args.img_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    dataset = FolderDataset(args.data, transform)
    sampler: DistributedSampler = DistributedSampler(dataset, shuffle=True, seed=42, drop_last=True)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.workers,
        pin_memory=use_cuda,
        drop_last=True,
        persistent_workers=args.workers > 0,
    )
    return loader, sampler, len({label for _, label in dataset.samples})


def train_epoch(model, loader, optimizer, loss_fn, device, use_cuda: bool) -> tuple:
    """(images per second on this rank after the first steps, the last loss)."""
    model.train()
    epoch_start, steady_images = time.perf_counter(), 0
    steady_start: Optional[float] = None
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if steady_start is not None:
            steady_images += len(labels)
        if step + 1 == STEADY_AFTER:
            if use_cuda:
                torch.cuda.synchronize()
            steady_start = time.perf_counter()
    if use_cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - (steady_start if steady_start is not None else epoch_start)
    return steady_images / elapsed, loss.item()


def main():
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    loader, sampler, num_classes = make_loader(args, use_cuda)
    model = DDP(
        torchvision.models.get_model(args.model, num_classes=num_classes).to(device),
        device_ids=[local_rank] if use_cuda else None,
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        speed, loss = train_epoch(model, loader, optimizer, loss_fn, device, use_cuda)
        if rank == 0:
            print(json.dumps({"epoch": epoch, "images_per_sec": speed * world, "loss": loss}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

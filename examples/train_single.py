"""A typical single-GPU training script: ImageFolder data, a torchvision ResNet, SGD, accuracy per epoch.

examples/train_ddp.py is this script converted to DistributedDataParallel with ddptrain's library API
(`diff examples/train_single.py examples/train_ddp.py` shows every change).

    python examples/train_single.py --data DIR   # DIR/train/<class>/*.jpg and DIR/val/<class>/*.jpg
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", required=True, help="a folder holding train/ and val/, one sub-folder per class in each"
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="model.pt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    transform = transforms.Compose(
        [
            transforms.Resize((args.img_size, args.img_size)),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    train_set = datasets.ImageFolder(f"{args.data}/train", transform)
    val_set = datasets.ImageFolder(f"{args.data}/val", transform)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.workers)

    model = models.resnet18(weights=None, num_classes=len(train_set.classes)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()

        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for images, labels in val_loader:
                images, labels = images.to(device), labels.to(device)
                correct += (model(images).argmax(dim=1) == labels).sum().item()
                total += labels.numel()
        print(f"epoch {epoch + 1}: loss {loss.item():.4f}  val accuracy {correct / total:.3f} ({correct}/{total})")

    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()

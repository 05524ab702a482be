"""ddptrain lint sample ddp017_lightning_log_without_sync_dist: the fixed; `ddptrain lint` finds nothing here."""
import pytorch_lightning as pl
import torch
import torchmetrics
from pytorch_lightning.callbacks import ModelCheckpoint


class Segmenter(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.val_iou = torchmetrics.JaccardIndex(task="binary")  # a Metric object syncs its own state

    def _common_step(self, batch, stage):
        image, mask = batch
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self(image), mask)
        self.log(f"{stage}_loss", loss, on_epoch=True, sync_dist=True)  # the mean over every rank's batches
        return loss

    def training_step(self, batch, batch_idx):
        return self._common_step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self.val_iou(self(batch[0]), batch[1])
        self.log("val_iou", self.val_iou)
        return self._common_step(batch, "val")


if __name__ == "__main__":
    checkpoint = ModelCheckpoint(monitor="val_loss", save_top_k=3)
    trainer = pl.Trainer(devices=8, strategy="ddp", callbacks=[checkpoint])
    trainer.fit(Segmenter(), train_loader, val_loader)

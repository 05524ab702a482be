"""ddptrain: image-classification training from one device to many with DistributedDataParallel."""

__version__ = "0.1.0"

"""`--decode gpu`: loader workers read the files and draw each image's crop box from its header (the same draws as
the CPU path, crops.TrainCrop / EvalCrop), and hand over the JPEG bytes; the device decodes the whole batch with
nvJPEG (torchvision.io.decode_jpeg on CUDA), crops, resizes and flips there. A file nvJPEG does not take (PNG,
CMYK JPEG) is made ready by the worker as on the CPU path and travels as pixels.

The same code runs on a CPU device (torchvision's CPU decoder), which is how the tests check it without a GPU.

On CUDA the batch is decoded and cropped on a stream of its own, which is drained before each nvJPEG call: nvJPEG's
hardware engine may write its output before the work already queued on its stream has run, and PyTorch's caching
allocator hands out a block as soon as it is freed on that stream, so decoding on the training stream can overwrite
tensors the previous step's queued kernels still read (seen as a NaN loss within a few steps, ResNet-50 at 224 px
on an H200). On its own stream the decoder only ever waits for its own work, and torchvision's wait for the
decode's end no longer waits for the training step queued before it."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch

from .crops import Box, stack

log = logging.getLogger("ddptrain")

Plan = Tuple[Box, Tuple[int, int]]  # the crop box, and the full (width, height) it is in


@dataclass(frozen=True)
class EncodedImage:
    """One image as a worker hands it over: JPEG bytes and where to crop them."""

    data: torch.Tensor  # uint8, the file's bytes
    plan: Plan
    name: str = ""  # the sample's file, for a warning


@dataclass
class Encoded:
    """A batch's images for the device to finish: per position, an EncodedImage or ready uint8 pixels, and the
    transform (a transforms.Prepare) whose crop the device makes."""

    images: List[object]  # EncodedImage | torch.Tensor
    prepare: Any

    def __len__(self) -> int:
        return len(self.images)

    def decode(self, device: torch.device) -> torch.Tensor:
        """(N, 3, size, size) uint8 on `device`, ready for the current stream. A JPEG the device's decoder refuses
        (damaged past its header) is replaced by another image of the batch, with a warning that names it."""
        if device.type != "cuda":
            return self._decode(device)
        caller, own = torch.cuda.current_stream(device), _stream(device)
        with torch.cuda.stream(own):
            own.synchronize()  # no kernel of the previous batch still reads a block nvJPEG may now be given
            batch = self._decode(device)
        caller.wait_stream(own)
        batch.record_stream(caller)  # freed only once the caller's work on it has run
        return batch

    def _decode(self, device: torch.device) -> torch.Tensor:
        todo = [i for i, image in enumerate(self.images) if isinstance(image, EncodedImage)]
        pictures = _decode_all([self.images[i].data for i in todo], device)  # type: ignore[attr-defined]
        out: List[Optional[torch.Tensor]] = [
            None if isinstance(image, EncodedImage) else image.to(device, non_blocking=True)  # type: ignore[attr-defined]
            for image in self.images
        ]
        for i, picture in zip(todo, pictures):
            if picture is not None:
                box, full = self.images[i].plan  # type: ignore[attr-defined]
                out[i] = self.prepare.finish(picture, box, full)
        good = [image for image in out if image is not None]
        if len(good) < len(out):
            if not good:
                raise RuntimeError(f"the device could decode none of a batch of {len(out)} JPEG images")
            failed = [self.images[i].name or "?" for i, image in enumerate(out) if image is None]  # type: ignore[attr-defined]
            log.warning(
                "%s could not be decoded on %s (the header reads, the image data does not); each is replaced by "
                "another image of the batch: check or remove %s",
                ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else ""),
                device,
                "them" if len(failed) > 1 else "it",
            )
            out = [image if image is not None else good[i % len(good)] for i, image in enumerate(out)]
        return stack(out)  # type: ignore[arg-type]


_STREAMS: Dict[int, torch.cuda.Stream] = {}


def _stream(device: torch.device) -> torch.cuda.Stream:
    """The decoding stream of `device` (one per device and process)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _STREAMS:
        _STREAMS[index] = torch.cuda.Stream(device=index)
    return _STREAMS[index]


def _decode_all(data: List[torch.Tensor], device: torch.device) -> List[Optional[torch.Tensor]]:
    """Decode all at once (nvJPEG's batched decode on CUDA); if that fails, one by one, None for those that fail."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if not data:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision >= 0.24 announces a future move of its decoders
        try:
            return list(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
        except RuntimeError:
            pass
        pictures: List[Optional[torch.Tensor]] = []
        for one in data:
            try:
                pictures.append(decode_jpeg(one, mode=ImageReadMode.RGB, device=device))
            except RuntimeError:
                pictures.append(None)
        return pictures


def gpu_decode_available() -> Tuple[bool, str]:
    """Whether `--decode gpu` can run here, and why not."""
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except ImportError as error:  # pragma: no cover - torchvision always has it
        return False, str(error)
    return True, ""

"""`--decode gpu`: loader workers read the files and draw each image's crop box from its header (the same draws as
the CPU path, crops.TrainCrop / EvalCrop), and hand over the JPEG bytes; the device decodes the whole batch with
nvJPEG (torchvision.io.decode_jpeg on CUDA), crops, resizes and flips there. A file nvJPEG does not take (PNG,
CMYK JPEG) is made ready by the worker as on the CPU path and travels as pixels.

The same code runs on a CPU device (torchvision's CPU decoder), which is how the tests check it without a GPU."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch

from .crops import Box, stack

log = logging.getLogger("ddptrain")

Plan = Tuple[Box, Tuple[int, int]]  # the crop box, and the full (width, height) it is in


@dataclass(frozen=True)
class EncodedImage:
    """One image as a worker hands it over: JPEG bytes and where to crop them."""

    data: torch.Tensor  # uint8, the file's bytes
    plan: Plan


@dataclass
class Encoded:
    """A batch's images for the device to finish: per position, an EncodedImage or ready uint8 pixels, and the
    transform (a transforms.Prepare) whose crop the device makes."""

    images: List[object]  # EncodedImage | torch.Tensor
    prepare: Any

    def __len__(self) -> int:
        return len(self.images)

    def decode(self, device: torch.device) -> torch.Tensor:
        """(N, 3, size, size) uint8 on `device`. A JPEG the device's decoder refuses (damaged past its header) is
        replaced by another image of the batch, with a warning naming nothing more than the count (the CPU path
        names the file)."""
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
            log.warning(
                "%d image(s) of a batch could not be decoded on %s; replaced by others of the batch",
                len(out) - len(good),
                device,
            )
            out = [image if image is not None else good[i % len(good)] for i, image in enumerate(out)]
        return stack(out)  # type: ignore[arg-type]


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

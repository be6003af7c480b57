"""Where the encoder and the classifier run: ``--device auto|cpu|cuda``, decided in one place.

Usage::

    device = resolve_device("auto")        # "cuda" when torch sees a CUDA device, else "cpu"
    providers = onnx_providers(device)     # onnxruntime: CUDA's provider where installed, else the CPU's

``auto`` picks CUDA when ``torch.cuda.is_available()``; ``cuda`` insists on it and says what to do when
torch sees none. onnxruntime (the classifier, and the encoder's ``onnx`` backend) takes its CUDA
execution provider when the device is ``cuda`` and the installed onnxruntime has that provider
(``onnxruntime-gpu``), and its CPU provider otherwise. The CUDA path is untested: the development
machine has no GPU (docs: Install and encoders).
"""

from __future__ import annotations

import contextlib
import logging

from .errors import PatternCNNError

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "cuda")
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


class DeviceError(PatternCNNError, RuntimeError):
    """The device asked for is unknown or not there; the message says which to use instead."""


def resolve_device(device: str = "auto") -> str:
    """``auto``, ``cpu`` or ``cuda`` -> the device to run on, ``cpu`` or ``cuda``.

    Raises:
        DeviceError: an unknown name, or ``cuda`` where torch sees no CUDA device.
    """
    if not isinstance(device, str) or device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "cpu":
        return "cpu"
    import torch

    seen = torch.cuda.is_available()
    if device == "cuda" and not seen:
        raise DeviceError("device cuda (--device cuda): torch sees no CUDA device on this machine; use cpu (or auto, "
                          "which takes CUDA only when torch sees it)")
    return "cuda" if seen else "cpu"


def onnx_providers(device: str) -> list[str]:
    """onnxruntime's execution providers for a resolved device: CUDA's first where installed, the CPU's always."""
    if device == "cuda":
        import onnxruntime as ort

        if CUDA_PROVIDER in ort.get_available_providers():
            return [CUDA_PROVIDER, CPU_PROVIDER]
        log.info("onnxruntime has no CUDA provider here (install onnxruntime-gpu for it); it runs on the CPU")
    return [CPU_PROVIDER]


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with torch on ``n`` threads, then restore the caller's setting (a library call must not
    change the process's thread count for good)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

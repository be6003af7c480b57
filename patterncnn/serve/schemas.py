"""The service's request and response models: the OpenAPI schema and the validation of every body.

Request models are strict (a string is not a number, 1.0 is not an integer, a number is not a
string), so whatever breaks the schema gets a 422 before any handler runs, except a ``/predict`` task, which gets no
prediction (:class:`UnusableTask`) while the others get theirs. The service's own
bodies (:class:`ClosedModel`: ``/v1/classify``, ``/v1/analyze``) refuse a key they do not know,
naming the ones they take (a misspelt ``sep`` would otherwise be dropped without a word); the
Label Studio ML backend's (``/setup``, ``/predict``) ignore unknown keys, since Label Studio sends
more than they read (``params``, ``model_version``, each task's annotations and metadata).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..experiments.analyze import check_texts

# Separator positions are token indices; the bound keeps them machine integers.
Position = Annotated[int, Field(ge=0, le=2**31 - 1)]
# Validation stops at a list's first bad position: 2,000,000 bad ones made as many errors (2 GB, helper 96's review).
Seps = Optional[Annotated[list[Position], Field(fail_fast=True)]]


def _numbers_only(value: Any, handler: ValidatorFunctionWrapHandler) -> list[list[float]]:
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("map_type", "not a rectangular list of numbers (send T lists of T numbers)") from None


MapRows = Annotated[list[list[float]], WrapValidator(_numbers_only),
                    Field(description="one T × T attention map, row by row")]
MapId = str | Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


class StrictModel(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class ClosedModel(StrictModel):
    """A body only people and our own clients send: a key the model does not know is refused, naming the known."""

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or name for name, f in cls.model_fields.items()]
            unknown = [k for k in data if k not in known]
            if unknown:
                raise PydanticCustomError("unknown_key", "unknown key {key}: the body takes {known}",
                                          {"key": repr(unknown[0])[:60],
                                           "known": ", ".join(f'"{k}"' for k in known)})
        return data


class ClassifyRequest(ClosedModel):
    """Maps to classify: ``maps`` (or one ``map``), with optional ``ids`` and ``seps`` (one entry per map)."""

    maps: Optional[list[MapRows]] = Field(None, description="T × T maps (T may differ between maps)")
    map: Optional[MapRows] = Field(None, description="one map, instead of maps")
    ids: Optional[list[MapId]] = Field(None, description="one id per map (default: 0, 1, ...)")
    seps: Optional[list[Seps]] = Field(None, description="per map, the positions of its separator tokens, or null")

    @model_validator(mode="after")
    def _one_entry_per_map(self) -> "ClassifyRequest":
        if self.map is None and self.maps is None:
            raise ValueError('send "maps" (a list of T×T lists) or "map" (one T×T list)')
        if self.map is not None and self.maps is not None:
            raise ValueError('send "maps" or "map", not both: which one to classify would be a guess')
        if self.map is None and not self.maps:
            raise ValueError('"maps" must be a non-empty list of square 2-D lists')
        n = len(self.map_list)
        if self.ids and len(self.ids) != n:
            raise ValueError(f'"ids" has {len(self.ids)} entries for {n} maps')
        if self.seps is not None and len(self.seps) != n:
            raise ValueError('"seps" must be a list with one list of separator positions (or null) per map')
        return self

    @property
    def map_list(self) -> list[list[list[float]]]:
        return [self.map] if self.map is not None else list(self.maps or [])

    @property
    def id_list(self) -> list[str]:
        return [str(x) for x in self.ids] if self.ids else [str(i) for i in range(len(self.map_list))]


class AnalyzeRequest(ClosedModel):

    text: str = Field(description="a sentence")
    text_pair: Optional[str] = Field(None, description="the second sentence of a pair")

    @model_validator(mode="after")
    def _not_blank(self) -> "AnalyzeRequest":
        try:
            check_texts(self.texts)
        except ValueError as e:
            raise ValueError(f'{e} (send {{"text": "a sentence"}}, and optionally "text_pair")') from None
        return self

    @property
    def texts(self) -> tuple[str, ...]:
        return (self.text,) + ((self.text_pair,) if self.text_pair is not None else ())


class TaskData(StrictModel):
    map_npy: Optional[str] = Field(None, description="the map as a base64 .npy (what `annotate push` sends)")
    seps: Seps = None


class Task(StrictModel):
    id: Optional[MapId] = None
    data: TaskData = Field(default_factory=TaskData)


class UnusableTask(BaseModel):
    """A ``/predict`` task that breaks :class:`Task`'s schema (``seps`` as a string from a CSV import, ``data`` not an
    object, ...): it gets no prediction, and the others get theirs. Until 2026-11-29 one such task made the whole
    request a 422, and Label Studio stored nothing for any task (helper 90's review)."""

    id: Any = None  # the task's id if it has a usable one
    errors: list[dict]  # pydantic's errors, without the input (a task holds its map)


def _each_task(value: Any, handler: ValidatorFunctionWrapHandler) -> Task | UnusableTask:
    try:
        return handler(value)
    except ValidationError as e:
        key = value.get("id") if isinstance(value, dict) else None
        usable = isinstance(key, str) and len(key) <= 256 or type(key) is int and -(2**63) <= key < 2**63
        return UnusableTask(id=key if usable else None, errors=e.errors(include_input=False, include_url=False))


class _AnyTask:
    """The schema of a /predict task: :class:`Task`, or anything else, which gets no prediction (so the spec does not
    promise a 422 for a task that breaks Task's schema)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        return {"anyOf": [handler(core_schema), {"description": "anything else: no prediction for this task"}]}


PredictTask = Annotated[Task, WrapValidator(_each_task), _AnyTask]  # a task that breaks Task's schema: UnusableTask


ProjectId = Annotated[str, Field(max_length=256)] | int


MAX_TASKS = 100_000  # tasks in one /predict: Label Studio sends every selected task at once
MAX_CONFIG = 1_000_000  # characters of a labeling config (real ones are a few kB; XML is parsed in full)
LabelConfig = Optional[Annotated[str, Field(max_length=MAX_CONFIG)]]


class SetupRequest(StrictModel):
    project: Optional[ProjectId] = None
    label_config: LabelConfig = Field(None, alias="schema", description=(
        f"the project's labeling config (XML, at most {MAX_CONFIG} characters)"))


class PredictRequest(StrictModel):
    max_items: ClassVar[dict[str, int]] = {"tasks": MAX_TASKS}  # bounded before any task is validated

    tasks: list[PredictTask] = Field(max_length=MAX_TASKS, description=(
        f"the tasks to pre-annotate (at most {MAX_TASKS}); classified max_batch at a time; a task that breaks this "
        f"schema gets no prediction (an empty list), the others theirs"))
    project: Optional[ProjectId] = None
    label_config: LabelConfig = Field(None, description=f"the labeling config (at most {MAX_CONFIG} characters)")


class Error(BaseModel):
    detail: str = Field(description="what is wrong, and how to fix it")


class Health(BaseModel):
    status: str
    model_class: str
    version: str


class Labels(BaseModel):
    labels: list[str]


class ClassifierInfo(BaseModel):
    path: str
    model_version: str
    sha256: str = Field(description="SHA-256 of the classifier file as it was when the server started (what it serves)")
    file_now: Optional[str] = Field(description=(
        "SHA-256 of the file at path now (null if it is gone): another value than sha256 means the file was replaced "
        "after the server started, which still serves the one it loaded; restart it to serve the new one"))
    metadata: dict[str, Any]
    omitted: list[str] = Field(default_factory=list, description=(
        "metadata tables left out of this answer (dotted keys); GET /v1/model?full=true returns them"))


class EncoderShape(BaseModel):
    layers: int
    heads: int
    max_length: int


class Limits(BaseModel):
    max_t: int
    max_batch: int
    max_body_bytes: int
    max_json_bytes: int
    max_decoded_bytes: int
    max_inflight_bytes: int


class ModelInfo(BaseModel):
    patterncnn: str
    classifier: ClassifierInfo
    encoder: Optional[dict[str, Any]]
    encoder_shape: Optional[EncoderShape]
    limits: Limits


class MapResult(BaseModel):
    id: str
    label: str
    probs: dict[str, float]
    warning: Optional[str] = None


class ClassifyResponse(BaseModel):
    results: list[MapResult]
    model_version: str
    note: Optional[str] = Field(None, description="when maps came without separator positions: what that changes, "
                                                   "and how to send them")


class AnalyzeResponse(BaseModel):
    tokens: list[str]
    seps: list[int]
    labels: list[list[str]] = Field(description="(L, H) label names")
    probs: list[list[list[float]]] = Field(description="(L, H, 5) probabilities in label_order")
    label_order: list[str]
    encoder: str
    model_version: str


class SetupResponse(BaseModel):
    model_version: str


class Versions(BaseModel):
    versions: list[str] = Field(description="the model versions served: the classifier's")


class WebhookResponse(BaseModel):
    status: str = Field(description="'ignored': patterncnn does not learn from Label Studio's events")
    detail: str


class ChoiceValue(BaseModel):
    choices: list[str]


class ChoiceResult(BaseModel):
    from_name: str
    to_name: str
    type: str
    value: ChoiceValue
    score: float


class Prediction(BaseModel):
    model_version: str
    score: float
    result: list[ChoiceResult]


class PredictResponse(BaseModel):
    results: list[Union[Prediction, list[Prediction]]] = Field(
        description="one per task, in order: its prediction, or an empty list for a task without a usable map (Label "
                    "Studio then stores none for it, and asks again next time)")
    model_version: str

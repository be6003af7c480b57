"""How the service refuses a request: a 4xx whose ``detail`` names the fix, never a traceback."""

from __future__ import annotations

import re

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from .schemas import Error


class BadInput(HTTPException):
    """A refused request: ``status`` (4xx) and a message that says what to send instead."""

    def __init__(self, message: str, status: int = 422, headers: dict[str, str] | None = None):
        super().__init__(status_code=status, detail=message, headers=headers)


def describe(errors: list[dict], shown: int = 3, whole: str = "the body") -> str:
    """One line from pydantic's errors: ``invalid request: <what> at <where>; ...`` (``whole``: what was validated)."""
    parts = []
    for e in errors[:shown]:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        what = re.sub(r" or instance of \w+", "", str(e.get("msg", "bad input")).removeprefix("Value error, "))
        if not where and e.get("type") in ("model_type", "model_attributes_type", "dict_type"):
            what = f"{whole} must be a JSON object"
        parts.append(f"{what} at {where}" if where else what)
    more = f"; and {len(errors) - shown} more" if len(errors) > shown else ""
    return "invalid request: " + "; ".join(parts) + more


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 for a body that breaks the schema, in one line."""
    return JSONResponse({"detail": describe(list(exc.errors()))}, status_code=422)


def error_responses(*statuses: int) -> dict:
    """The OpenAPI ``responses`` entry for these error statuses (all are :class:`schemas.Error`)."""
    what = {400: "malformed body", 401: "missing or wrong API token", 408: "body not sent in time",
            413: "body, batch or decoded maps over the limits", 415: "unsupported content type",
            422: "the body is well-formed but unusable",
            503: "this server has no encoder, or too many request bodies in memory (retry after Retry-After seconds)"}
    return {s: {"model": Error, "description": what[s]} for s in statuses}

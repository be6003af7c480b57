"""Property-based fuzzing of every route, from the service's own OpenAPI schema (schemathesis + hypothesis).

Each operation gets schema-valid and schema-breaking requests (bodies, content types). Asserted for
every response: no 5xx; the status is one the schema documents; the content type and body match
what the schema says for that status; a request that breaks the schema is refused (4xx). The
budget (``FUZZ_EXAMPLES`` generated cases per test) keeps the run under a minute on two cores.
"""

import io
import json
import os
from collections import Counter

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.labels import LABELS
from patterncnn.encoders.load import load_encoder
from patterncnn.serve import ServeSettings, create_app

FUZZ_EXAMPLES = int(os.environ.get("PATTERNCNN_FUZZ_EXAMPLES", 200))  # raise it for a deeper run by hand
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]
OPERATIONS = {"GET /health", "GET /v1/labels", "GET /v1/model", "POST /v1/classify", "POST /v1/analyze",
              "POST /setup", "POST /predict", "GET /versions", "POST /webhook", "POST /train"}
pytestmark = pytest.mark.fuzz
# A body over a count limit (more maps than --max-batch) is refused 413 before it is validated (the count is cheap,
# validating every map is not), so a schema-breaking body may get a 413 too.
CONFIG = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": [
    400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"]}}})
cases: Counter = Counter()
statuses: Counter = Counter()


@pytest.fixture(scope="module")
def api_schema(tiny_bert, tiny_classifier):
    app = create_app(ServeSettings(max_t=64, max_batch=8, max_body_bytes=2_000_000, max_json_bytes=1_000_000),
                     OnnxClassifier(tiny_classifier[1]), load_encoder(str(tiny_bert), max_length=32))
    return schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_fuzz_every_route(api_schema, operation):
    method, path = operation.split()
    op = api_schema[path][method]
    strategy = st.one_of(op.as_strategy(GenerationMode.POSITIVE), op.as_strategy(GenerationMode.NEGATIVE))

    @given(case=strategy)
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(case):
        cases[operation] += 1
        # A generous deadline: on a busy shared machine a plain 422 once took schemathesis' default 10 s.
        statuses[operation, case.call_and_validate(checks=CHECKS, timeout=60).status_code] += 1

    fuzz()
    assert cases[operation] > 0, f"hypothesis generated no case for {operation}"
    print(f"\n{operation}: {cases[operation]} cases (status: count) "
          + ", ".join(f"{st_}: {c}" for (o, st_), c in sorted(statuses.items()) if o == operation))


def test_the_fuzzed_operations_are_exactly_the_schema_s(api_schema):
    # Each route is fuzzed by its own parametrized case above; a route added to the service must be added there.
    paths = api_schema.raw_schema["paths"]
    assert {f"{m.upper()} {p}" for p, ops in paths.items() for m in ops if m != "parameters"} == OPERATIONS


# The schema cannot say "square", so the fuzzer above rarely gets past validation. These properties
# send what it cannot: square maps of any size holding any floats, and .npy/.npz bodies of any dtype
# and shape, whole, truncated or with a byte changed. None may give a 5xx; a 200 holds probabilities.

@pytest.fixture(scope="module")
def client(api_schema):
    from fastapi.testclient import TestClient

    return TestClient(api_schema.app, raise_server_exceptions=False)


ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 1.0, 3.4e38, 1e39, 5e-324, -0.0])


@st.composite
def json_batches(draw) -> dict:
    maps, seps = [], []
    for _ in range(draw(st.integers(1, 3))):
        t = draw(st.integers(0, 70))
        maps.append(draw(arrays(np.float64, (t, t), elements=ANY_FLOAT, fill=st.floats(0, 1))).tolist())
        seps.append(draw(st.none() | st.lists(st.integers(0, 100) | st.integers(0, 2**31 - 1), max_size=3)))
    return {"maps": maps, "seps": seps}


def assert_answered(r, operation: str) -> None:
    cases[operation] += 1
    statuses[operation, r.status_code] += 1
    assert r.status_code < 500, r.text
    assert r.headers["content-type"] == "application/json" and "Traceback" not in r.text
    if r.status_code == 200:
        for res in r.json()["results"]:
            assert res["label"] in LABELS and sum(res["probs"].values()) == pytest.approx(1.0, abs=1e-3)


@given(body=json_batches())
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_fuzz_classify_square_maps(client, body):
    r = client.post("/v1/classify", content=json.dumps(body), headers={"content-type": "application/json"})
    assert_answered(r, "POST /v1/classify (JSON maps)")
    assert r.status_code in (200, 422), r.text


DTYPES = st.sampled_from(["<f4", ">f8", "<f2", "|u1", "<i8", "|b1", "<c8", "<U2", "|S3", "<M8[s]"])


@st.composite
def array_bodies(draw) -> bytes:
    arrs = [draw(arrays(draw(DTYPES), draw(array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=9))))
            for _ in range(draw(st.integers(1, 3)))]
    buf = io.BytesIO()
    if draw(st.booleans()):
        np.save(buf, arrs[0])
    else:
        draw(st.sampled_from([np.savez, np.savez_compressed]))(buf, *arrs)
    data = bytearray(buf.getvalue())
    cut = draw(st.none() | st.integers(0, len(data)))
    if cut is not None:
        data = data[:cut]
    if data and draw(st.booleans()):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@given(body=array_bodies())
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_fuzz_classify_array_bodies(client, body):
    r = client.post("/v1/classify", content=body, headers={"content-type": "application/octet-stream"})
    assert_answered(r, "POST /v1/classify (.npy/.npz)")

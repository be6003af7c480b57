"""Regression tests for the hostile probe of `patterncnn serve` (issue 14): every case gets a 4xx naming the fix.

Also: the zip bomb is refused on its declared sizes (/health answering during
it), slow clients are cut off, and an unexpected error is a JSON 500 with one log line.
"""

import asyncio
import contextlib
import io
import json
import logging
import select
import socket
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from hostile import corrupt_deflate_npz, npy_header, truncated, unparsable_header_npy, zip_bomb, zip_of
from live import live_server, wait_healthy
from synthetic import pattern_map

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.encoders.load import load_encoder
from patterncnn.labelling.push import label_config, make_task
from patterncnn.serve import ServeSettings, create_app

JSON = {"content-type": "application/json"}
BINARY = {"content-type": "application/octet-stream"}


@pytest.fixture(scope="module")
def parts(tiny_bert, tiny_classifier):
    return OnnxClassifier(tiny_classifier[1]), load_encoder(str(tiny_bert), max_length=32)


@pytest.fixture()
def client(parts):
    return TestClient(create_app(ServeSettings(max_t=64, max_batch=8), *parts), raise_server_exceptions=False)


def refused(r, status: int, phrase: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json" and "Traceback" not in r.text
    assert phrase in r.json()["detail"], r.json()["detail"]


def a_task(**data) -> dict:
    task = {"id": 7, **make_task({"id": "m1", "seps": [7, 15]}, pattern_map("diagonal", 16))}
    task["data"].update(data)
    return task


@pytest.mark.parametrize("body,status,phrase", [
    (b"[" * 100_000, 400, "nest at most 200 levels"),
    (b'{"maps": ' * 100_000, 400, "nest at most 200 levels"),
    (b'{"map": [[' + b"1" * 400 + b"]]}", 422, "not a rectangular list of numbers"),
    (b'{"map": [[1]], "seps": [[' + b"1" * 400 + b"]]}", 422, "less than or equal to 2147483647 at seps.0.0"),
    (b'{"map": [[1]], "ids": [' + b"1" * 400 + b"]}", 422, "at ids.0"),
    (b'{"map": [[1]], "ids": 5}', 422, "valid list at ids"),
    (b'{"map": [[1]], "seps": ["a"]}', 422, "valid list at seps.0"),
    (b'{"map": [[1]], "seps": [5]}', 422, "valid list at seps.0"),
    (b'{"map": [[1]], "seps": [[1.5]]}', 422, "valid integer at seps.0.0"),
    (b'{"map": [[1]], "seps": [[null]]}', 422, "valid integer at seps.0.0"),
    (b'{"map": [[1]], "seps": [[[1]]]}', 422, "valid integer at seps.0.0"),
    (b'{"maps": []}', 422, "non-empty list"),
    (b'{"map": [[1e39]]}', 422, "NaN or inf"),  # finite as a float64, inf as the float32 the classifier gets
    (b'{"maps": [[[3.4e38, 3.4e38, 3.4e38], [0, 0, 0], [0, 0, 0]]]}', 422, "too large for the classifier"),
])
def test_classify_json_cases(client, body, status, phrase):
    refused(client.post("/v1/classify", content=body, headers=JSON), status, phrase)


@pytest.mark.parametrize("body,status,phrase", [
    (zip_of({"notes.txt": b"hello"}), 422, "'notes.txt', which is not an .npy array"),
    (corrupt_deflate_npz(), 400, "unreadable"),
    (npy_header((2**21, 2**21)), 422, "over the limit T <= 64"),  # 128 bytes that declare 32 TiB
    (zip_of({"a.npy": npy_header((2**21, 2**21))}), 422, "over the limit T <= 64"),
    (npy_header((9, 64, 64)), 413, "the limit is 8"),
    (npy_header((4, 4)), 400, "truncated"),
    (truncated(zip_of({"a.npy": npy_header((4, 4)) + bytes(128)})), 400, "unreadable .npz"),
    (zip_of({}), 422, "holds no maps"),  # an empty .npz, like an empty JSON list
    (zip_of({f"m{i}.npy": b"" for i in range(9)}), 413, "the limit is 8"),
    (npy_header((3, 3), "|O"), 422, "no pickles"),
    (unparsable_header_npy(), 400, "unreadable .npy"),  # found by the fuzzer: numpy raised TokenError
    (zip_of({"a.npy": unparsable_header_npy()}), 400, "unreadable"),
])
def test_classify_array_cases(client, body, status, phrase):
    refused(client.post("/v1/classify", content=body, headers=BINARY), status, phrase)


def test_media_types_are_case_insensitive_and_exact(client):
    body = json.dumps({"map": pattern_map("diagonal", 8).tolist()})
    assert client.post("/v1/classify", content=body, headers={"content-type": "Application/JSON"}).status_code == 200
    assert client.post("/v1/classify", content=body,
                       headers={"content-type": "application/json; charset=UTF-8"}).status_code == 200
    refused(client.post("/v1/classify", content=body, headers={"content-type": "application/jsonfoo"}), 415,
            "send application/json")


@pytest.mark.parametrize("path", ["/v1/analyze", "/setup", "/predict"])
@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""])
def test_json_routes_refuse_what_a_browser_form_can_send(client, path, ctype):
    # A page in a local browser can POST these without a CORS preflight: they must not be accepted.
    r = client.post(path, content=b'{"text": "a cat", "tasks": []}', headers={"content-type": ctype})
    refused(r, 415, "Content-Type: application/json")


@pytest.mark.parametrize("path,body,status,phrase", [
    ("/setup", [], 422, "the body must be a JSON object"),
    ("/setup", {"schema": 5}, 422, "valid string at schema"),
    ("/setup", {"project": "x" * 300}, 422, "at most 256 characters at project"),
    ("/setup", {"schema": label_config().replace('name="pattern"', f'name="{"p" * 300}"')}, 422,
     "longer than 256 characters"),
    ("/predict", {"tasks": [a_task()], "label_config": 5}, 422, "valid string at label_config"),
    ("/predict", {"tasks": 5}, 422, "valid list at tasks"),
    ("/v1/analyze", {"text": "a", "text_pair": 5}, 422, "valid string at text_pair"),
    ("/v1/analyze", {"text": 5}, 422, "valid string at text"),
    ("/v1/analyze", {"text": "   "}, 422, "the sentence is empty or only spaces"),
    ("/v1/analyze", {"text": "a cat", "text_pair": " "}, 422, "the second is empty or only spaces"),
    ("/v1/analyze", {"text": "a cat", "pair": "a dog"}, 422, "pair"),  # a misspelt field is not ignored
])
def test_label_studio_and_analyze_cases(client, path, body, status, phrase):
    refused(client.post(path, json=body), status, phrase)


def empty(r, caplog, phrase: str) -> None:
    """A /predict answered 200 whose only task got no prediction (an empty list in its place), the log naming why."""
    assert r.status_code == 200, r.text
    assert r.json()["results"] == [[]]
    assert phrase in caplog.text, caplog.text


def test_predict_task_map_over_the_limits(client, caplog):
    import base64

    for declared, phrase in (((2**21, 2**21), "over the limit T <= 64"), ((4, 4), "truncated")):
        task = a_task(map_npy=base64.b64encode(npy_header(declared)).decode())
        empty(client.post("/predict", json={"tasks": [task]}), caplog, phrase)
    empty(client.post("/predict", json={"tasks": [a_task(map_npy="!!!")]}), caplog, "not a base64 .npy")


def test_a_task_that_breaks_the_schema_gets_no_prediction_and_the_others_get_theirs(client, caplog):
    # One such task made the whole /predict a 422, and Label Studio stored nothing for any task (helper 90's review).
    bad = [(1, "the task at position 0: the task must be a JSON object"),
           (a_task(seps=["a"]) | {"id": 8}, "task 8: Input should be a valid integer at data.seps.0"),
           (a_task(seps="3,7") | {"id": 9}, "task 9: Input should be a valid list at data.seps"),
           (a_task(seps=[3.0]) | {"id": 10}, "task 10: Input should be a valid integer at data.seps.0"),
           ({"id": 11, "data": "x"}, "task 11: Input should be a valid dictionary at data"),
           ({"id": [1], "data": {}}, "the task at position 5: ")]
    with caplog.at_level(logging.WARNING, logger="patterncnn.serve"):
        r = client.post("/predict", json={"tasks": [task for task, _ in bad] + [a_task()]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[:-1] == [[]] * len(bad) and results[-1]["result"][0]["value"]["choices"] == ["diagonal"], results
    assert f"{len(bad)} of {len(bad) + 1} tasks got no prediction" in caplog.text, caplog.text
    for _, phrase in bad[:5]:
        assert phrase in caplog.text, (phrase, caplog.text)


def test_lone_surrogate(client):
    refused(client.post("/v1/analyze", content=b'{"text": "\\ud800 x"}', headers=JSON), 400, "malformed JSON")
    assert client.post("/v1/analyze", content=b'{"text": "\\ud83d\\ude00 x"}', headers=JSON).status_code == 200


def test_no_docs_pages_and_the_spec_needs_the_token(parts):
    open_ = TestClient(create_app(ServeSettings(), *parts))
    assert open_.get("/docs").status_code == 404 and open_.get("/redoc").status_code == 404
    assert "/v1/classify" in open_.get("/openapi.json").json()["paths"]
    locked = TestClient(create_app(ServeSettings(api_token="s3cret"), *parts))
    r = locked.get("/openapi.json")
    assert r.status_code == 401 and r.headers.get_list("www-authenticate")[0] == "Bearer"
    assert any(h.startswith("Basic") for h in r.headers.get_list("www-authenticate"))  # a browser can log in
    assert locked.get("/openapi.json", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert locked.get("/health").status_code == 200


def test_unexpected_error_is_one_log_line_and_a_json_500(parts, caplog):
    class Broken:
        model_version = "broken"

        def predict(self, maps, seps):
            raise RuntimeError("boom " + "x" * 10_000)

    c = TestClient(create_app(ServeSettings(), Broken(), parts[1]), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="patterncnn.serve"):
        r = c.post("/v1/classify", json={"map": pattern_map("diagonal", 8).tolist()})
    assert r.status_code == 500 and r.json() == {"detail": "internal error; the server log has one line about it"}
    lines = [rec for rec in caplog.records if rec.name == "patterncnn.serve"]
    assert len(lines) == 1 and "RuntimeError" in lines[0].getMessage() and lines[0].exc_info is None
    assert len(lines[0].getMessage()) < 500


def test_setup_remembers_a_bounded_number_of_projects(parts, monkeypatch):
    import patterncnn.serve.state as state

    monkeypatch.setattr(state, "MAX_PROJECTS", 20)  # the same bound logic as the shipped 1000, in 25 requests
    c = TestClient(create_app(ServeSettings(), *parts))
    for project in range(state.MAX_PROJECTS + 5):
        assert c.post("/setup", json={"project": project, "schema": label_config()}).status_code == 200
    remembered = c.app.state.parts.projects
    assert len(remembered) == state.MAX_PROJECTS and "0" not in remembered and str(state.MAX_PROJECTS + 4) in remembered


def test_settings_refuse_nonsense(parts):
    for bad in ({"workers": 0}, {"max_body_bytes": -1}, {"max_t": 0}, {"body_timeout": 0}):
        with pytest.raises(ValueError, match="must be positive"):
            ServeSettings(**bad)


@pytest.fixture()
def live(parts):
    """A real uvicorn server in a thread (1 s header and body deadlines); yields its port."""
    settings = ServeSettings(max_t=512, header_timeout=1.0, body_timeout=1.0)
    with live_server(create_app(settings, parts[0]), settings) as url:
        yield int(url.rsplit(":", 1)[1])


def read_all(sock: socket.socket, within: float) -> bytes:
    sock.settimeout(within)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:  # a server that closed with bytes of ours unread: its answer came first
        if not data:
            raise
    return data


def test_slow_headers_are_cut_off(live):
    with socket.create_connection(("127.0.0.1", live)) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert read_all(sock, within=10) == b""  # closed by the server (a timeout would raise)


def closed_after_an_early_answer(port: int, path: str, method: str = "POST", within: float = 4.0) -> tuple[bytes, bool]:
    """Send a request's headers (Content-Length 1000), read the answer, send one byte of the body, then nothing
    (the review's forever.py): (status line, whether the server closed the connection within ``within`` s)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: 1000\r\n\r\n".encode())
        sock.settimeout(10)
        status = sock.recv(65536).split(b"\r\n")[0]
        try:
            sock.sendall(b"{")  # on a connection no timer covered, this cancelled uvicorn's keep-alive timer
        except OSError:  # already closed by the server
            return status, True
        sock.settimeout(within)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            return status, False
        except ConnectionResetError:
            pass
        return status, True


@pytest.mark.parametrize("path,method,token,status", [
    ("/v1/classify", "POST", True, b"401"),
    ("/nowhere", "POST", True, b"401"),
    ("/nowhere", "POST", False, b"404"),
    ("/health", "POST", False, b"405"),
    ("/webhook", "POST", True, b"200"),
    ("/train", "POST", False, b"422"),
])
def test_a_connection_answered_before_its_body_was_read_is_closed(parts, path, method, token, status):
    settings = ServeSettings(api_token="tok" if token else None, header_timeout=1.0, body_timeout=1.0)
    with live_server(create_app(settings, parts[0]), settings) as url:
        line, closed = closed_after_an_early_answer(int(url.rsplit(":", 1)[1]), path, method)
    assert line.startswith(b"HTTP/1.1 " + status), line
    assert closed, f"{path}: the connection stayed open after {line!r} and a byte of its body"


def test_stalled_body_gets_408(live):
    with socket.create_connection(("127.0.0.1", live)) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"map\": ")
        reply = read_all(sock, within=10)
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 s" in reply


def test_zip_bomb_is_refused_while_health_answers(live):
    # How fast, and with how little memory, is measured by benchmarks/zip_bomb.py (not asserted here: a loaded
    # machine would make such a test flaky); here: every bomb is refused by its declared size, and /health answers
    # meanwhile within 1 s (decoding that blocked the event loop for 3 s per bomb passed the test before).
    bomb = zip_bomb(members=3, side=8192)  # 0.8 MB that inflate to 768 MiB
    url = f"http://127.0.0.1:{live}"
    health, stop, polling = [], threading.Event(), threading.Event()

    def poll():
        with httpx.Client(base_url=url, timeout=30) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                health.append((c.get("/health").status_code, time.perf_counter() - t0))
                polling.set()
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        assert polling.wait(30), "/health did not answer before the bombs"
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(4):
                refused(c.post("/v1/classify", content=bomb, headers=BINARY), 413, "uncompressed, over the limit")
    finally:
        stop.set()
        poller.join(30)
    assert health and {status for status, _ in health} == {200}, health
    # Decoding runs off the event loop: /health answers within Label Studio's health timeout (1 s) throughout.
    assert max(latency for _, latency in health) < 1.0, max(latency for _, latency in health)


def test_bomb_under_the_byte_limit_is_refused_at_its_header(client):
    bomb = zip_bomb(members=1, side=4096)  # declares 64 MiB, under max_decoded_bytes: its .npy header stops it
    refused(client.post("/v1/classify", content=bomb, headers=BINARY), 422, "over the limit T <= 64")


def test_member_longer_than_its_header_is_not_inflated_past_it(client):
    # The header declares a 4 x 4 map and 64 MiB of zeros follow: reading stops one byte past the map.
    bomb = zip_of({"a.npy": npy_header((4, 4), "<f4") + bytes(64 << 20)})
    refused(client.post("/v1/classify", content=bomb, headers=BINARY), 400, "more data than its header declares")


# ---------------------------------------------------------------- issue 31: hostile input, round two


def test_map_and_maps_together_are_refused(client):
    body = {"map": pattern_map("diagonal", 8).tolist(), "maps": [pattern_map("vertical", 8).tolist()]}
    refused(client.post("/v1/classify", json=body), 422, 'send "maps" or "map", not both')


def test_separators_outside_the_map_are_refused(client):
    m = pattern_map("block", 8, 3).tolist()
    refused(client.post("/v1/classify", json={"maps": [m, m], "seps": [[3, 7], [3, 40]]}), 422,
            "map '1': separator position 40 is outside the map")
    r = client.post("/predict", json={"tasks": [a_task(seps=[7, 99])]})
    assert r.status_code == 200 and r.json()["results"] == [[]], r.text
    assert client.post("/v1/classify", json={"maps": [m], "seps": [[3, 7]]}).status_code == 200


def test_a_json_body_over_the_json_limit_is_refused_on_its_content_length(live):
    # The probe's 250 MB JSON body, under the 256 MB body limit but over the 16 MB JSON one: refused on its
    # Content-Length before a byte of it is read (it is never sent here).
    with socket.create_connection(("127.0.0.1", live)) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 262144000\r\n\r\n")
        reply = read_all(sock, within=10)
    assert reply.startswith(b"HTTP/1.1 413") and b"exceeds the limit of 16777216 bytes" in reply


def test_a_chunked_json_body_is_cut_off_at_the_json_limit(parts):
    # No Content-Length: the bytes are counted as they arrive. 20 kB are sent and then nothing: a server that
    # waited for the rest would answer 408 after its 1 s body deadline, not 413.
    settings = ServeSettings(max_json_bytes=10_000, header_timeout=1.0, body_timeout=1.0)
    with live_server(create_app(settings, parts[0]), settings) as url:
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
            sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n" + b"3e8\r\n" + b" " * 1000 + b"\r\n")
            for _ in range(19):  # until the server answers: it may close while the rest is still on its way
                if select.select([sock], [], [], 0)[0]:
                    break
                try:
                    sock.sendall(b"3e8\r\n" + b" " * 1000 + b"\r\n")
                except (ConnectionResetError, BrokenPipeError):
                    break
            reply = read_all(sock, within=10)
    assert reply.startswith(b"HTTP/1.1 413") and b"exceeds the limit of 10000 bytes" in reply


def test_analyze_refuses_a_long_text_before_tokenizing(parts, monkeypatch):
    app = create_app(ServeSettings(), *parts)
    c = TestClient(app, raise_server_exceptions=False)
    enc = app.state.parts.encoder
    limit = app.state.parts.text_chars
    assert limit == 64 * enc.max_length
    calls = []
    monkeypatch.setattr(enc, "tokenize", lambda texts: calls.append(texts))
    refused(c.post("/v1/analyze", json={"text": "a" * (limit + 1)}), 413, f"over the limit of {limit}")
    refused(c.post("/v1/analyze", json={"text": "a", "text_pair": "b" * (limit + 1)}), 413, "characters is over")
    body = json.dumps({"text": "x" * 300_000})  # the probe's 15 MB word, smaller: over this route's body budget
    budget = app.state.parts.budget("/v1/analyze", "application/json").body_bytes
    assert budget < 300_000
    refused(c.post("/v1/analyze", content=body, headers=JSON), 413, f"exceeds the limit of {budget} bytes")
    assert calls == []


def test_analyze_tokenizes_once_and_refuses_a_long_input_before_the_encoder(parts, monkeypatch):
    app = create_app(ServeSettings(), *parts)
    c = TestClient(app, raise_server_exceptions=False)
    enc = app.state.parts.encoder
    seen, ran = [], []
    real_tok, real_attend = enc.tokenizer, enc.attend

    class Counting:  # the tokenizer, counting its calls
        def __call__(self, *a, **k):
            seen.append(a)
            return real_tok(*a, **k)

        def __getattr__(self, name):
            return getattr(real_tok, name)

    monkeypatch.setattr(enc, "tokenizer", Counting())
    monkeypatch.setattr(enc, "attend", lambda *a: (ran.append(1), real_attend(*a))[1])
    refused(c.post("/v1/analyze", json={"text": "word " * 200}), 422, "longer than the encoder's limit")
    assert len(seen) == 1 and ran == []
    assert c.post("/v1/analyze", json={"text": "a cat sat"}).status_code == 200 and len(seen) == 2 and ran == [1]


def test_a_token_that_is_not_ascii_works_as_bearer_and_basic(parts):
    import base64

    token = "s3crét-ключ"
    c = TestClient(create_app(ServeSettings(api_token=token), *parts))
    raw = token.encode()
    assert c.get("/v1/labels", headers={"Authorization": b"Bearer " + raw}).status_code == 200
    assert c.get("/v1/labels", headers={"Authorization": b"Basic " + base64.b64encode(b"x:" + raw)}).status_code == 200
    assert c.get("/v1/labels", headers={"Authorization": b"Bearer " + raw[:-1]}).status_code == 401
    assert c.get("/v1/labels", headers={"Authorization": b"Bearer \xff\xfe"}).status_code == 401


def test_a_token_no_header_can_carry_is_refused_at_start():
    for bad in (b"\xff".decode("utf-8", "surrogateescape"), " x", "a\nb", ""):
        with pytest.raises(ValueError, match="API token"):
            ServeSettings(api_token=bad)


SLOW_SERVER = """
import sys, time
import numpy as np
from patterncnn.serve import ServeSettings, create_app
from patterncnn.serve.server import bind, run

class Slow:  # a classifier that takes a minute: the request is still running when SIGTERM comes
    model_version = "slow"
    def predict(self, maps, seps):
        time.sleep(60)
        return np.full((len(maps), 5), 0.2, dtype=np.float32)

settings = ServeSettings(shutdown_grace=0.5)
run(create_app(settings, Slow()), bind("127.0.0.1", int(sys.argv[1])), settings)
"""


def test_sigterm_during_a_request_answers_503_and_exits(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from labelstudio_server import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SERVER, str(port)], env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        answer = {}
        request = threading.Thread(target=lambda: answer.update(
            r=httpx.post(f"{url}/v1/classify", json={"map": [[1.0]]}, timeout=90)))
        request.start()
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)  # not the minute the request would take: it is cut off after the grace
        request.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    r = answer["r"]
    assert r.status_code == 503 and r.json() == {"detail": "the server is stopping; send the request again"}
    log = proc.stderr.read()
    assert "Traceback" not in log and "CancelledError" not in log
    assert "503 on POST /v1/classify: the server stopped before the request finished" in log


@pytest.mark.parametrize("signum,status,said", [("SIGINT", 130, "patterncnn serve: interrupted\n"),
                                                ("SIGTERM", -15, "")], ids=["sigint", "sigterm"])
def test_the_serve_command_s_exit_status_after_a_signal_is_the_one_serve_md_gives(signum, status, said):
    # serve.md said 0 after SIGINT; it is 130 with one line, and SIGTERM ends the process by the signal (143 in a shell)
    import os
    import signal
    import subprocess
    import sys

    from labelstudio_server import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(  # SIGINT as a terminal's Ctrl-C gives it (a background job's shell would ignore it)
        [sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port", str(port)], env=env,
        stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        proc.send_signal(getattr(signal, signum))
        assert proc.wait(30) == status
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = proc.stderr.read()
    assert "Traceback" not in log, log
    assert log.endswith(said) if said else "interrupted" not in log, log


def test_each_refused_request_is_one_log_line_without_the_token_or_body(parts, caplog):
    # Label Studio tells its user to "check the ML backend server console logs" when serve answers 401
    c = TestClient(create_app(ServeSettings(api_token="s3cret", max_t=64, max_batch=8), *parts),
                   raise_server_exceptions=False)
    good = {"Authorization": "Bearer s3cret"}
    with caplog.at_level(logging.INFO):
        assert c.post("/setup", json={"project": "1"}, auth=("user", "wr0ng-pass")).status_code == 401
        assert c.post("/v1/classify", content=b'{"map": [[1]], "seps": ["a"]}', headers={**good, **JSON}
                      ).status_code == 422
        assert c.get("/v1/nowhere%0AINFO%20forged", headers=good).status_code == 404
        assert c.get("/health").status_code == 200
    lines = [rec for rec in caplog.records if rec.name == "patterncnn.serve"]
    assert [rec.levelno for rec in lines] == [logging.WARNING] * 3
    said = [rec.getMessage() for rec in lines]
    assert said[0] == "401 POST /setup refused: missing or wrong API token: send 'Authorization: Bearer <token>'"
    assert said[1].startswith("422 POST /v1/classify refused: invalid request: ") and "valid list at seps.0" in said[1]
    assert said[2].startswith("404 GET '/v1/nowhere\\nINFO forged' refused: ")  # one line, whatever the path holds
    assert not any("wr0ng" in m or "s3cret" in m or '"map"' in m for m in said)


# ---------------------------------------------------------------- review of `serve`: Label Studio's whole selection


def ls_tasks(n: int, t: int, start: int = 0) -> list[dict]:
    """``n`` tasks as Label Studio sends them to /predict: `annotate push`'s data (PNG data URI and map_npy)."""
    kinds = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
    return [{"id": i, **make_task({"id": f"m{i}", "seps": [t // 2 - 1, t - 1]},
                                  pattern_map(kinds[i % 5], t, t // 2 - 1, seed=i))} for i in range(start, start + n)]


def test_predict_takes_label_studio_s_whole_selection_in_chunks(parts, monkeypatch):
    # Label Studio's Retrieve Predictions sends every selected task in one /predict: 200 tasks of T=128 are ~22 MB
    # of JSON (over the 16 MiB JSON limit) and 12 x max_batch. Each task gets its prediction, max_batch at a time.
    clf = parts[0]
    settings = ServeSettings(max_batch=16)
    client = TestClient(create_app(settings, clf), raise_server_exceptions=False)
    tasks = ls_tasks(200, 128)
    body = json.dumps({"tasks": tasks, "project": 3}).encode()
    assert len(body) > settings.max_json_bytes
    sizes, predict = [], clf.predict
    monkeypatch.setattr(clf, "predict", lambda maps, seps: sizes.append(len(maps)) or predict(maps, seps))
    r = client.post("/predict", content=body, headers=JSON)
    assert r.status_code == 200, r.text[:300]
    results = r.json()["results"]
    assert len(results) == 200 and all(len(p["result"]) == 1 and p["score"] > 0 for p in results)
    assert max(sizes) <= 16 and sum(sizes) == 200, sizes
    one = client.post("/predict", json={"tasks": tasks[57:58]}).json()["results"][0]
    assert one == results[57]


def test_an_unusable_task_gets_no_prediction_and_the_others_theirs(parts, caplog):
    import base64

    client = TestClient(create_app(ServeSettings(max_t=64, max_batch=2), parts[0]), raise_server_exceptions=False)
    good = ls_tasks(3, 16)
    nan = ls_tasks(1, 16, start=10)[0]
    a = pattern_map("block", 16, 7)
    a[3, 3] = np.nan
    nan["data"]["map_npy"] = make_task({"id": "x"}, a)["data"]["map_npy"]
    tasks = [good[0], {"id": 20, "data": {"image": "x"}}, good[1], a_task(map_npy="!!!") | {"id": 21},
             ls_tasks(1, 128, start=22)[0], nan, a_task(map_npy=base64.b64encode(npy_header((4, 4))).decode()) |
             {"id": 23}, good[2]]
    with caplog.at_level(logging.WARNING, logger="patterncnn.serve"):
        r = client.post("/predict", json={"tasks": tasks})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    alone = client.post("/predict", json={"tasks": good}).json()["results"]
    assert [results[0], results[2], results[7]] == alone and all(p["result"] for p in alone)
    version = r.json()["model_version"]
    assert all(p["model_version"] == version for p in alone)
    for k in (1, 3, 4, 5, 6):  # none: Label Studio stores nothing for it, and asks again next time (helper 90)
        assert results[k] == [], (k, results[k])
    lines = [rec.getMessage() for rec in caplog.records if "got no prediction" in rec.getMessage()]
    assert len(lines) == 1 and "5 of 8 tasks" in lines[0], lines
    assert "task 20: task 20" not in lines[0]  # named once (helper 90's review)
    for phrase in ("(no usable map): task 20 carries no map", "; task 21: data.map_npy is not a base64",
                   "task 22: ", "over the limit T <= 64"):
        assert phrase in lines[0], lines[0]


# ---------------------------------------------------------------- review of `serve`: work on the event loop, counts


def on_the_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_label_configs_are_parsed_off_the_event_loop(client, monkeypatch):
    from patterncnn.serve import ml_backend

    where, choice_names = [], ml_backend.choice_names
    monkeypatch.setattr(ml_backend, "choice_names", lambda config: where.append(on_the_event_loop())
                        or choice_names(config))
    assert client.post("/setup", json={"project": "1", "schema": label_config()}).status_code == 200
    r = client.post("/predict", json={"tasks": [a_task()], "label_config": label_config()})
    assert r.status_code == 200, r.text
    assert where == [False, False]


def test_a_label_config_is_capped_before_it_is_parsed(client):
    from patterncnn.serve.schemas import MAX_CONFIG

    padded = label_config().replace("<View>", "<View>" + " " * MAX_CONFIG, 1)
    refused(client.post("/setup", json={"schema": padded}), 422, f"at most {MAX_CONFIG} characters at schema")
    refused(client.post("/predict", json={"tasks": [a_task()], "label_config": padded}), 422,
            f"at most {MAX_CONFIG} characters at label_config")
    assert client.post("/setup", json={"schema": label_config()}).status_code == 200


def test_list_lengths_are_bounded_before_their_items_are_validated(client, monkeypatch):
    from patterncnn.serve.schemas import PredictRequest

    # Nine maps that are not maps, over max_batch (8): refused on their count (413), not after validating each
    refused(client.post("/v1/classify", json={"maps": ["x"] * 9}), 413, "9 maps in one request; the limit is 8")
    refused(client.post("/v1/classify", json={"map": [[1]], "ids": ["a"] * 9}), 413, "the limit is 8")
    monkeypatch.setitem(PredictRequest.max_items, "tasks", 5)
    refused(client.post("/predict", json={"tasks": [1] * 6}), 413, "6 items in 'tasks'; the limit is 5")
    r = client.post("/predict", json={"tasks": [1] * 5})  # each task is judged alone: no prediction for any
    assert r.status_code == 200 and r.json()["results"] == [[]] * 5, r.text


def test_a_predict_body_over_the_json_limit_is_bounded_in_values(parts):
    # /predict may be as large as --max-body-mb (pictures and maps are strings), but not hold more values than a body
    # at the JSON limit: parsed, each takes tens of bytes.
    client = TestClient(create_app(ServeSettings(max_json_bytes=4000, max_body_bytes=1_000_000), parts[0]),
                        raise_server_exceptions=False)
    refused(client.post("/predict", content=b'{"tasks": [' + b",".join([b"{}"] * 3000) + b"]}", headers=JSON), 413,
            "values (objects, arrays, items) is over the limit of 1000")
    tasks = [a_task() | {"id": i} for i in range(3)]
    r = client.post("/predict", json={"tasks": tasks, "pad": "x" * 50_000})
    assert r.status_code == 200 and len(r.json()["results"]) == 3, r.text[:300]


def test_bodies_are_validated_and_predictions_serialized_off_the_event_loop(client, monkeypatch):
    # FastAPI validated /predict's and /setup's body models on the event loop (16 MiB of tasks: 40 s without /health)
    # and serialized the answer there: both now run in a worker thread.
    from patterncnn.serve import decode, ml_backend

    where, validated, answer = [], decode.validated, ml_backend._answer
    monkeypatch.setattr(decode, "validated", lambda model, data: where.append((model.__name__, on_the_event_loop()))
                        or validated(model, data))
    monkeypatch.setattr(ml_backend, "_answer", lambda *a: where.append(("answer", on_the_event_loop())) or answer(*a))
    assert client.post("/setup", json={"project": "1", "schema": label_config()}).status_code == 200
    r = client.post("/predict", json={"tasks": [a_task()] * 3, "project": "1"})
    assert r.status_code == 200 and len(r.json()["results"]) == 3, r.text
    assert client.post("/v1/analyze", json={"text": "a cat"}).status_code == 200
    assert where == [("SetupRequest", False), ("PredictRequest", False), ("answer", False),
                     ("AnalyzeRequest", False)], where


# ---------------------------------------------------------------- review of `serve`: the project's labeling config


def test_a_config_without_name_or_to_name_is_refused_at_setup(client):
    # /setup took it, and /predict then answered 500 (a prediction without from_name)
    for drop in ('name="pattern" ', 'toName="map" choice="single-radio"'):
        config = label_config().replace(drop, "" if drop.startswith("name") else 'choice="single-radio"', 1)
        refused(client.post("/setup", json={"project": "9", "schema": config}), 422,
                "pattern Choices needs a name and a toName")
        refused(client.post("/predict", json={"tasks": [a_task()], "label_config": config}), 422,
                "pattern Choices needs a name and a toName")


def test_a_config_must_have_exactly_the_five_labels(client):
    partial = label_config().replace('    <Choice value="block"/>\n', "")
    refused(client.post("/setup", json={"schema": partial}), 422, "lacks the labels ['block']")
    extra = label_config().replace('<Choice value="block"/>', '<Choice value="block"/><Choice value="cat"/>')
    refused(client.post("/setup", json={"schema": extra}), 422, "has labels ['cat'] that patterncnn does not predict")


def test_predictions_use_the_config_s_aliases(client):
    config = label_config().replace('<Choice value="diagonal"/>', '<Choice value="diagonal" alias="diag"/>')
    assert client.post("/setup", json={"project": "al", "schema": config}).status_code == 200
    for body in ({"tasks": [a_task()], "project": "al"}, {"tasks": [a_task()], "label_config": config}):
        r = client.post("/predict", json=body)  # a_task's map is diagonal
        assert r.status_code == 200 and r.json()["results"][0]["result"][0]["value"]["choices"] == ["diag"], r.text
    r = client.post("/predict", json={"tasks": [a_task()]})  # no config: the labels themselves
    assert r.json()["results"][0]["result"][0]["value"]["choices"] == ["diagonal"], r.text


# ---------------------------------------------------------------- review of `serve`: smaller findings


def test_max_body_bytes_also_bounds_json_bodies(parts):
    client = TestClient(create_app(ServeSettings(max_body_bytes=1 << 20), parts[0]), raise_server_exceptions=False)
    assert client.get("/v1/model").json()["limits"]["max_json_bytes"] == 1 << 20
    maps = [pattern_map("diagonal", 64).tolist()] * 40
    assert len(json.dumps({"maps": maps})) > 3 << 20  # under the 16 MiB JSON limit, over the 1 MiB body limit
    refused(client.post("/v1/classify", json={"maps": maps}), 413, "exceeds the limit of 1048576 bytes")


def test_two_content_types_are_refused_before_the_body_is_read(live):
    # The budget followed the last header and the route the first: a 20 MB body read in full, then refused.
    with socket.create_connection(("127.0.0.1", live)) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Type: application/octet-stream\r\nContent-Length: 20000000\r\n\r\n")
        reply = read_all(sock, within=10)  # nothing of the body is sent: a server waiting for it answers 408
    assert reply.startswith(b"HTTP/1.1 400") and b"more than one Content-Type header" in reply, reply[:300]


# ---------------------------------------------------------------- review of `serve`: memory of one request


def test_the_decoded_budget_counts_maps_as_float32(parts):
    # 4 float16 maps of 64 x 64 store 32 kB and become 64 kB of float32: a 48 kB budget refuses them on their header
    client = TestClient(create_app(ServeSettings(max_decoded_bytes=48_000), parts[0]), raise_server_exceptions=False)
    buf = io.BytesIO()
    np.save(buf, np.stack([pattern_map("diagonal", 64)] * 4).astype(np.float16))
    refused(client.post("/v1/classify", content=buf.getvalue(), headers=BINARY), 413,
            "the maps decode to more than 48000 bytes")
    buf = io.BytesIO()
    np.save(buf, np.stack([pattern_map("diagonal", 64)] * 2).astype(np.float16))
    assert client.post("/v1/classify", content=buf.getvalue(), headers=BINARY).status_code == 200


def test_a_request_s_maps_are_classified_in_chunks(parts, monkeypatch):
    import patterncnn.classifier.classify as classify

    clf = parts[0]
    client = TestClient(create_app(ServeSettings(), clf), raise_server_exceptions=False)
    monkeypatch.setattr(classify, "BATCH_BYTES", 2 * 64 * 64 * 4)  # two 64 x 64 maps per classifier call
    sizes, predict = [], clf.predict
    monkeypatch.setattr(clf, "predict", lambda maps, seps=None: sizes.append(len(maps)) or predict(maps, seps))
    buf = io.BytesIO()
    np.save(buf, np.stack([pattern_map(k, 64, 31) for k in ("diagonal", "vertical", "block", "diagonal", "vertical")]))
    r = client.post("/v1/classify", content=buf.getvalue(), headers=BINARY)
    assert r.status_code == 200 and [m["label"] for m in r.json()["results"]] == [
        m["label"] for m in client.post("/v1/classify", content=buf.getvalue(), headers=BINARY).json()["results"]]
    assert sizes[:3] == [2, 2, 1], sizes
    sizes.clear()
    r = client.post("/predict", json={"tasks": [a_task() | {"id": i} for i in range(3)]})  # 16 x 16: one call
    assert r.status_code == 200 and sizes == [3], sizes


@contextlib.contextmanager
def stalled_upload(url: str, length: int, first: bytes, path: bytes = b"/v1/classify",
                   content_type: bytes = b"application/octet-stream"):
    """A connection that sends a request's headers (Content-Length ``length``) and the body's ``first`` bytes, then
    stalls: it holds what a body in flight holds until its 408."""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as stalled:
        stalled.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                        % (path, content_type, length) + first)
        time.sleep(0.3)
        yield stalled


def test_a_stalled_large_upload_holds_no_work_slot(parts):
    # Every upload in flight kept its whole body in memory (x12 250 MB bodies: 5.5 GB), so a body over the JSON limit
    # waited for one of `workers` slots before it was read, and a stalled upload held its slot until its 408: here
    # one slot, and the second upload waited 2 s. The bytes in memory are now bounded as they arrive (BodySlot), and
    # the slot is taken once a body is in, for the work on it: the second upload is served at once.
    settings = ServeSettings(workers=1, max_json_bytes=1000, header_timeout=5.0, body_timeout=2.0)
    buf = io.BytesIO()
    np.save(buf, pattern_map("diagonal", 32)[None])
    npy = buf.getvalue()
    assert len(npy) > settings.max_json_bytes
    with live_server(create_app(settings, parts[0]), settings) as url:
        with stalled_upload(url, len(npy), npy[:100]) as stalled:
            with httpx.Client(base_url=url, timeout=30) as c:
                t0 = time.perf_counter()
                r = c.post("/v1/classify", content=npy, headers=BINARY)
                waited = time.perf_counter() - t0
            assert read_all(stalled, within=10).startswith(b"HTTP/1.1 408")
    assert r.status_code == 200, r.text
    assert waited < 1.0, waited


def test_a_request_holds_about_its_decoded_budget_not_its_maps_and_their_float32_copies(parts, monkeypatch):
    # Every map was converted to float32 before the first was classified, the decoded maps kept beside: a request
    # of float16 maps peaked at 1.5x its budget (counted as float32), of float64 maps at 1.5x too. The maps are now
    # converted as their batch is filled, each decoded map dropped as it is converted.
    import tracemalloc

    import patterncnn.classifier.classify as classify

    n, t = 64, 128
    budget = n * t * t * 4  # 4 MiB as float32
    monkeypatch.setattr(classify, "BATCH_BYTES", budget // 8)
    client = TestClient(create_app(ServeSettings(max_decoded_bytes=budget), parts[0]), raise_server_exceptions=False)
    for dtype in (np.float16, np.float64):
        buf, k = io.BytesIO(), n * 4 // max(np.dtype(dtype).itemsize, 4)  # the budget counts float64 as itself
        maps = np.full((k, t, t), 1 / t, dtype=dtype)
        np.savez_compressed(buf, **{f"m{i}": m for i, m in enumerate(maps)})
        del maps
        body = buf.getvalue()
        tracemalloc.start()
        try:
            r = client.post("/v1/classify", content=body, headers=BINARY)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert r.status_code == 200 and len(r.json()["results"]) == k, r.text[:300]
        assert peak < 1.25 * budget, (dtype, peak / budget)


def test_an_npy_body_is_held_once(parts, monkeypatch):
    # Starlette's body() kept the chunks and joined them (the body twice for a moment), and the .npy's maps were
    # then copied out of it (twice, until the answer). The body is now read into one buffer of its Content-Length,
    # and the maps are views of it.
    import tracemalloc

    import patterncnn.classifier.classify as classify

    maps = np.full((64, 256, 256), 1 / 256, dtype=np.float32)  # 16 MiB
    buf = io.BytesIO()
    np.save(buf, maps)
    body = buf.getvalue()
    del maps, buf
    monkeypatch.setattr(classify, "BATCH_BYTES", len(body) // 16)  # the classifier's own batches: 1 MiB
    settings = ServeSettings(max_body_bytes=32 << 20)
    with live_server(create_app(settings, parts[0]), settings) as url:
        # sent from a socket: an httpx client in this process copies the body itself, and tracemalloc counts that
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:
            tracemalloc.start()
            try:
                s.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
                s.sendall(body)
                answer = read_all(s, within=60)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b'"label"') == 64, answer[:300]
    assert peak < 1.4 * len(body), peak / len(body)  # the body, and what classifying a batch of its maps takes


def test_a_declared_length_takes_no_memory_before_its_bytes_arrive(parts):
    # A buffer of the Content-Length made up front took that memory at once: stalled uploads of one byte each held
    # their declared sizes (12 of them: +901 MiB). The buffer now grows as the bytes arrive.
    import tracemalloc

    settings = ServeSettings(max_body_bytes=64 << 20, header_timeout=5.0, body_timeout=2.0)
    with live_server(create_app(settings, parts[0]), settings) as url:
        tracemalloc.start()
        try:
            with stalled_upload(url, 32 << 20, b"\x93NUMPY") as stalled:
                time.sleep(0.5)
                held = tracemalloc.get_traced_memory()[0]
                assert read_all(stalled, within=10).startswith(b"HTTP/1.1 408")
        finally:
            tracemalloc.stop()
    assert held < 4 << 20, held


@pytest.mark.parametrize("path, content_type, first", [(b"/v1/classify", b"application/octet-stream", b"\x93NUMPY"),
                                                         (b"/predict", b"application/json", b'{"tasks": [')])
def test_bodies_in_memory_never_pass_the_server_s_budget(parts, path, content_type, first, caplog):
    # Bodies in flight were bounded only in number, and only those over the JSON limit (workers at once): smaller
    # ones were not counted at all. Every body now takes its bytes from max_inflight_bytes as they arrive; one that
    # would pass it is refused, 503 with Retry-After (and a log line: these 503s went unlogged), and one that fits
    # is served. A JSON route's body, which FastAPI reads before the route parses it, is counted the same way.
    settings = ServeSettings(workers=2, max_json_bytes=1000, max_body_bytes=20000, max_inflight_bytes=20000,
                             header_timeout=5.0, body_timeout=2.0)
    buf = io.BytesIO()
    np.save(buf, pattern_map("diagonal", 40)[None])
    npy = buf.getvalue()
    assert 5000 < len(npy) <= settings.max_body_bytes
    with live_server(create_app(settings, parts[0]), settings) as url, \
            caplog.at_level(logging.WARNING, logger="patterncnn.serve"):
        # 15000 of the 20000 bytes arrive (JSON whitespace after the opening bracket), then the upload stalls
        with stalled_upload(url, 20000, first + b" " * (15000 - len(first)), path, content_type) as stalled:
            with httpx.Client(base_url=url, timeout=30) as c:
                t0 = time.perf_counter()
                busy = c.post("/v1/classify", content=npy, headers=BINARY)
                waited = time.perf_counter() - t0
                small = c.post("/v1/classify", json={"map": [[0.9, 0.1], [0.1, 0.9]]})  # fits beside it
            assert read_all(stalled, within=10).startswith(b"HTTP/1.1 408")
            with httpx.Client(base_url=url, timeout=30) as c:  # the stalled body's bytes are given back
                after = c.post("/v1/classify", content=npy, headers=BINARY)
    refused(busy, 503, "limit of 20000")
    assert busy.headers["retry-after"] == "1" and waited < 1.0, (busy.headers, waited)
    assert small.status_code == 200 and after.status_code == 200, (small.text, after.text)
    assert "503 POST /v1/classify refused: the server holds 15000 bytes" in caplog.text, caplog.text


def test_connections_that_send_no_body_take_nothing_from_the_budget(parts):
    # The budget was charged each body's declared Content-Length before a byte arrived: connections that sent only
    # headers declaring the largest body locked every body route out (503) until their 408s (helper 90's review:
    # 64 connections, 60 s). They hold one byte each now: every route still answers, small body or large.
    settings = ServeSettings(workers=1, max_json_bytes=1000, max_body_bytes=20000, max_inflight_bytes=20000,
                             header_timeout=5.0, body_timeout=5.0)  # the stalls (0.3 s each) last past the requests
    buf = io.BytesIO()
    np.save(buf, pattern_map("diagonal", 40)[None])
    npy = buf.getvalue()
    with live_server(create_app(settings, parts[0]), settings) as url, contextlib.ExitStack() as stack:
        stalled = [stack.enter_context(stalled_upload(url, 20000, first, path, content_type))  # a byte, no more
                   for path, content_type, first in [(b"/v1/classify", b"application/octet-stream", b"\x93"),
                                                     (b"/predict", b"application/json", b"{")] * 2]
        with httpx.Client(base_url=url, timeout=30) as c:
            small = c.post("/v1/classify", json={"map": [[0.9, 0.1], [0.1, 0.9]]})
            setup = c.post("/setup", json={"project": "1", "schema": label_config()})
            t0 = time.perf_counter()
            large = c.post("/v1/classify", content=npy, headers=BINARY)  # no stall holds the one work slot
            waited = time.perf_counter() - t0
        assert all(read_all(s, within=10).startswith(b"HTTP/1.1 408") for s in stalled)
    assert [r.status_code for r in (small, setup, large)] == [200] * 3, (small.text, setup.text, large.text)
    assert waited < 1.0, waited


def test_setup_does_not_wait_behind_inference(parts, monkeypatch):
    # /setup parsed its body and the labeling config under the limiter of inference, and Label Studio gives it 3 s:
    # behind two large /predict calls it took up to 4.4 s (helper 90's review). It has its own limiter now.
    settings = ServeSettings(workers=1)
    clf, inside, release = parts[0], threading.Event(), threading.Event()
    predict = clf.predict

    def held(maps, seps=None):
        inside.set()
        release.wait(20)
        return predict(maps, seps)

    monkeypatch.setattr(clf, "predict", held)
    with live_server(create_app(settings, clf), settings) as url, httpx.Client(base_url=url, timeout=30) as c:
        busy = threading.Thread(target=lambda: c.post("/v1/classify", json={"map": [[0.9, 0.1], [0.1, 0.9]]}))
        busy.start()
        try:
            assert inside.wait(10)  # the one worker is taken by inference
            t0 = time.perf_counter()
            setup = c.post("/setup", json={"project": "1", "schema": label_config()})
            waited = time.perf_counter() - t0
        finally:
            release.set()
            busy.join(30)
    assert setup.status_code == 200 and waited < 2.0, (setup.text, waited)


def test_a_client_that_leaves_mid_body_is_one_info_line_on_every_route(parts, caplog):
    # On the JSON routes FastAPI's body parsing turned the disconnect into "400 ... refused: There was an error
    # parsing the body", a warning about a request nobody refused (helper 90's review); /v1/classify said it right.
    settings = ServeSettings()
    with live_server(create_app(settings, parts[0]), settings) as url, \
            caplog.at_level(logging.INFO, logger="patterncnn.serve"):
        for path in (b"/v1/classify", b"/predict", b"/setup"):
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:
                s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000"
                          b"\r\n\r\n{\"tasks\": [" % path)
                time.sleep(0.3)
            time.sleep(0.3)
    for path in ("/v1/classify", "/predict", "/setup"):
        assert f"POST {path}: the client disconnected before its body arrived" in caplog.text, caplog.text
    assert "400" not in caplog.text and "refused" not in caplog.text, caplog.text


def test_a_server_without_a_token_answers_only_requests_addressed_to_loopback(parts, caplog):
    # Any Host was answered, so a web page could reach a token-less local server through DNS rebinding (its own name
    # resolved to 127.0.0.1) and read /v1/model's local paths (helper 90's review).
    c = TestClient(create_app(ServeSettings(loopback_only=True), parts[0]), raise_server_exceptions=False)
    for host in ("localhost:9090", "127.0.0.1:9090", "[::1]:9090", "LOCALHOST", "127.0.0.2"):
        assert c.get("/v1/labels", headers={"host": host}).status_code == 200, host
    with caplog.at_level(logging.WARNING, logger="patterncnn.serve"):
        for host in ("attacker.example:9090", "127.0.0.1.nip.io", "10.0.0.1:9090", "testserver"):
            refused(c.get("/v1/model", headers={"host": host}), 400, "does not name this machine's loopback")
    assert "400 GET /v1/model refused: the Host header 'attacker.example:9090'" in caplog.text, caplog.text
    with_token = TestClient(create_app(ServeSettings(api_token="s3cret"), parts[0]))  # the token guards it
    assert with_token.get("/v1/labels", headers={"host": "any.example", "Authorization": "Bearer s3cret"}
                          ).status_code == 200


def test_the_serve_command_without_a_token_checks_the_host(tmp_path):
    import os
    import subprocess
    import sys

    from labelstudio_server import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}
    env.pop("PATTERNCNN_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "patterncnn.cli", "serve", "--no-encoder", "--port", str(port)],
                            env=env, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        assert httpx.get(f"{url}/v1/labels").status_code == 200
        assert httpx.get(f"{url}/v1/labels", headers={"host": f"localhost:{port}"}).status_code == 200
        r = httpx.get(f"{url}/v1/labels", headers={"host": f"rebound.example:{port}"})
        refused(r, 400, "start the server with a token")
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_long_list_of_bad_separators_is_one_error(client):
    # Each of 2,000,000 bad positions was an error kept in memory (2 GB, helper 96's review): validation now stops at
    # the first one of a list, and names it as before.
    r = client.post("/v1/classify", json={"map": [[1.0]], "seps": [["a"] * 200_000]})
    refused(r, 422, "valid integer at seps.0.0")
    assert "more" not in r.json()["detail"], r.json()["detail"]


def test_ctrl_c_exits_without_waiting_for_an_abandoned_inference():
    # After Ctrl-C the client got its 503, but the process exited only when the inference the grace abandoned ended
    # (8.8 s measured, helper 90's review). Here an inference that would take 60 s.
    import os
    import signal
    import subprocess
    import sys

    from labelstudio_server import free_port

    slow = ("import sys, time\nfrom patterncnn.classifier.onnx import OnnxClassifier\nreal = OnnxClassifier.predict\n"
            "def predict(self, maps, seps=None):\n    time.sleep(60)\n    return real(self, maps, seps)\n"
            "OnnxClassifier.predict = predict\nfrom patterncnn.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}
    env.pop("PATTERNCNN_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-c", slow, "serve", "--no-encoder", "--port", str(port),
                             "--shutdown-grace", "0.5"], env=env, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    answers = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        client = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{url}/v1/classify", json={"map": [[1.0]]}, timeout=90)))
        client.start()
        time.sleep(1.5)  # the inference has started
        proc.send_signal(signal.SIGINT)
        status = proc.wait(20)  # not the 60 s the inference takes
        client.join(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 130 and proc.stderr.read().endswith("patterncnn serve: interrupted\n")
    assert answers and answers[0].status_code == 503, answers

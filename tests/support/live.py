"""The service on a real uvicorn server, in a thread on a free loopback port (what `patterncnn serve` runs)."""

import contextlib
import threading
import time

import httpx
import uvicorn
from labelstudio_server import free_port

from patterncnn.serve.server import server_config


def wait_healthy(url: str, proc=None, seconds: float = 60) -> None:
    """Wait until ``url``/health answers 200; fail at once, with what it printed, if ``proc`` (the server's process,
    when it has one) has ended, and after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc is not None and proc.poll() is not None:
            said = proc.stdout.read() if proc.stdout else proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the server ended ({proc.returncode}) before {url}/health answered: {said}")
        time.sleep(0.1)
    raise AssertionError(f"{url}/health did not answer within {seconds} s")


@contextlib.contextmanager
def live_server(app, settings):
    """Serve ``app`` (made with ``settings``) until the block ends; yields its URL."""
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_healthy(f"http://127.0.0.1:{port}", seconds=30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def ml_backend(classifier, token: str):
    """``patterncnn serve`` on a live server, as a Label Studio ML backend (API token ``token``)."""
    from patterncnn.serve import ServeSettings, create_app

    settings = ServeSettings(api_token=token)
    return live_server(create_app(settings, classifier), settings)

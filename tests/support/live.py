"""The service on a real uvicorn server, in a thread on a free loopback port (what `patterncnn serve` runs)."""

import contextlib
import threading
import time

import httpx
import uvicorn
from labelstudio_server import free_port

from patterncnn.serve.server import server_config


@contextlib.contextmanager
def live_server(app, settings):
    """Serve ``app`` (made with ``settings``) until the block ends; yields its URL."""
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
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

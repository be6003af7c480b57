"""Start and stop a real Label Studio server for the tests (installed by tests/setup-label-studio.sh)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

DEFAULT_VENV = Path.home() / ".cache" / "patterncnn" / "label-studio-venv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabelStudioServer:
    """A Label Studio process with its own data folder, user and legacy API token."""

    def __init__(self, data_dir: Path):
        venv = Path(os.environ.get("PATTERNCNN_LS_VENV", DEFAULT_VENV))
        self.exe = venv / "bin" / "label-studio"
        if not self.exe.exists():
            raise RuntimeError(f"Label Studio is not installed at {venv}: run tests/setup-label-studio.sh "
                               f"(or set PATTERNCNN_LS_VENV to a virtualenv that has label-studio 1.23)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(20)
        self.email = "annotator@patterncnn.test"
        self.data_dir = data_dir
        self.log = data_dir / "label-studio.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 240) -> "LabelStudioServer":
        env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(self.data_dir), "LABEL_STUDIO_USERNAME": self.email,
               "LABEL_STUDIO_PASSWORD": secrets.token_hex(8), "LABEL_STUDIO_USER_TOKEN": self.token,
               "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true", "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
               # Let the server reach an ML backend on loopback (patterncnn serve in the tests); by default
               # Label Studio refuses reserved address blocks such as 127.0.0.0/8.
               "USE_DEFAULT_BANNED_SUBNETS": "false"}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(self.exe), "start", "--no-browser", "--port", str(self.port)],
                                         env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Label Studio exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"Label Studio did not answer /health within {timeout:.0f}s; see {self.log}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

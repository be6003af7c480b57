"""A real Label Studio for the tests, started with the documentation's own start command.

The *Annotating in Label Studio* section of the annotate page (docs/pages/commands/annotate.md) is the
set-up users follow, so the tests start the server from its start block, verbatim but for the port (a
free one instead of 8080), with HOME set to a fresh folder where ``~/.cache/patterncnn/label-studio-venv``
(the one place tests/setup-label-studio.sh installs Label Studio, and the page's install step) links to
the Label Studio it installed. The API token, the data folder, the network switch for ML backends and the
rest come from that page.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
from repo import REPO

VENV = Path(".cache") / "patterncnn" / "label-studio-venv"  # under HOME: tests/setup-label-studio.sh installs it there
DEFAULT_VENV = Path.home() / VENV
SECTION = "## Annotating in Label Studio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_blocks(page: Path = REPO / "docs" / "pages" / "commands" / "annotate.md") -> list[str]:
    """The fenced bash blocks of the annotate page's Label Studio section (``SECTION`` up to the next ``## ``
    heading), in order, dedented: the commands users run, which the tests run as written."""
    text = page.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end > 0 else None]
    blocks = []
    for m in re.finditer(r"^( *)```bash\n(.*?)^\1```", section, flags=re.S | re.M):
        indent = len(m.group(1))
        blocks.append("".join(line[indent:] + "\n" for line in m.group(2).splitlines()))
    return blocks


def on_port(block: str, port: int) -> str:
    """The block with Label Studio's port 8080 replaced (the only change the tests make)."""
    return re.sub(r"\b8080\b", str(port), block)


def start_block(blocks: list[str]) -> str:
    found = [b for b in blocks if "label-studio start" in b]
    if len(found) != 1:
        raise RuntimeError(f"the annotate page's {SECTION!r} section must have one block that runs "
                           "`label-studio start`")
    return found[0]


class LabelStudioServer:
    """A Label Studio process started by the annotate page's start block, in its own HOME."""

    def __init__(self, data_dir: Path):
        venv = Path(os.environ.get("PATTERNCNN_LS_VENV", DEFAULT_VENV))
        if not (venv / "bin" / "label-studio").exists():
            raise RuntimeError(f"Label Studio is not installed at {venv}: run tests/setup-label-studio.sh "
                               f"(or set PATTERNCNN_LS_VENV to a virtualenv that has label-studio 1.23)")
        self.home = data_dir / "home"
        (self.home / VENV).parent.mkdir(parents=True, exist_ok=True)
        (self.home / VENV).symlink_to(venv)
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.block = on_port(start_block(readme_blocks()), self.port)
        self.email = re.search(r"LABEL_STUDIO_USERNAME=(\S+)", self.block).group(1)
        self.password = re.search(r"LABEL_STUDIO_PASSWORD=(\S+)", self.block).group(1)
        self.token = ""
        self.log = data_dir / "label-studio.log"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict:
        """The environment of a terminal in this server's HOME."""
        return {**os.environ, "HOME": str(self.home)}

    def start(self, timeout: float = 240) -> "LabelStudioServer":
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["bash", "-c", self.block], env=self.env(), cwd=self.home, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Label Studio exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    self.token = (self.home / ".label-studio-token").read_text().strip()
                    made = self.home / ".label-studio-password"  # the block makes the password there (since 2026-11-29)
                    if made.exists():
                        self.password = made.read_text().strip()
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

    def sign_up(self, invite_link: str, email: str) -> str:
        """Create an account through the invite link, as an annotator does in a browser; returns its API token."""
        with httpx.Client(follow_redirects=True, timeout=30) as s:
            s.get(invite_link)
            r = s.post(invite_link, data={"email": email, "password": secrets.token_hex(8),
                                          "csrfmiddlewaretoken": s.cookies.get("csrftoken")},
                       headers={"Referer": invite_link})
            r.raise_for_status()
            token = s.get(f"{self.url}/api/current-user/token")
            if token.status_code != 200:
                raise RuntimeError(f"signing up {email} through {invite_link} failed (HTTP {token.status_code})")
            return token.json()["token"]


def label_stream(server_url: str, project_id: int, token: str, label_of) -> list[dict]:
    """Label every task that Label Studio's label stream (*Label All Tasks*) gives this annotator.

    Args:
        label_of: task data -> the label to give (a pattern name).

    Returns:
        The tasks as the stream served them (with the predictions and annotations it showed).
    """
    headers = {"Authorization": f"Token {token}"}
    served = []
    with httpx.Client(base_url=server_url, headers=headers, timeout=60) as c:
        while (r := c.get(f"/api/projects/{project_id}/next")).status_code == 200:
            task = r.json()
            served.append(task)
            result = [{"from_name": "pattern", "to_name": "map", "type": "choices",
                       "value": {"choices": [label_of(task["data"])]}}]
            body = {"result": result, "lead_time": 2.0}
            if task.get("predictions"):  # as the labelling screen does: it starts from the prediction it shows
                body["parent_prediction"] = task["predictions"][0]["id"]
            posted = c.post(f"/api/tasks/{task['id']}/annotations/", json=body)
            posted.raise_for_status()
            if len(served) > 1000:
                raise RuntimeError("the label stream does not end")
        if r.status_code != 404:
            r.raise_for_status()
    return served

"""The connection to a Label Studio server (label-studio-sdk 2.x): checked on connect, one-line errors.

Usage::

    ls = connect("http://localhost:8080", api_key)        # raises AnnotateError, one line, when it cannot
    project = ls.ensure_project("attention patterns", label_config())
    ls.import_tasks(project.id, tasks)
    raw = ls.export(project)                              # the JSON export, as bytes

Every SDK call goes through :meth:`Connection.call`, which turns HTTP failures into an
:class:`AnnotateError` that names the server and the fix.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable

from ..core.errors import PatternCNNError

log = logging.getLogger(__name__)

# Label Studio's task-list columns that show a pre-annotation or another member's label (its data_manager's columns)
LABEL_COLUMNS = ("predictions_results", "predictions_model_versions", "predictions_score", "annotations_results")

MIN_TITLE, MAX_TITLE = 3, 50  # Label Studio's limits on a project title


class AnnotateError(PatternCNNError, RuntimeError):
    """A Label Studio step failed; the message names the cause and the fix, in one line."""


def check_project_title(project: str | int) -> None:
    """Refuse a title that Label Studio would refuse (an id, all digits, passes), naming --project."""
    if isinstance(project, int) or str(project).isdigit():
        return
    if not MIN_TITLE <= len(str(project).strip()) <= MAX_TITLE:
        raise AnnotateError(f"Label Studio project titles have {MIN_TITLE} to {MAX_TITLE} characters; {project!r} has "
                            f"{len(str(project).strip())}: choose another --project")


@dataclasses.dataclass
class Connection:
    """A checked Label Studio client and the URL it talks to (for messages)."""

    url: str
    client: Any  # label_studio_sdk.LabelStudio

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run one SDK call, turning HTTP failures into one-line AnnotateErrors."""
        import httpx
        from label_studio_sdk.core.api_error import ApiError

        try:
            return fn()
        except ApiError as e:
            errors = e.body.get("validation_errors") if isinstance(e.body, dict) else None
            body = f"validation errors {errors}" if errors else (str(e.body)[:200] if e.body else "")
            if e.status_code in (401, 403):
                hint = (" (the server may need LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true)"
                        if "legacy" in body.lower() else "")
                raise AnnotateError(f"Label Studio at {self.url} refused the API key (HTTP {e.status_code}){hint}: "
                                    f"check --api-key / LABEL_STUDIO_API_KEY") from None
            raise AnnotateError(f"Label Studio at {self.url} answered HTTP {e.status_code}: {body}") from None
        except httpx.HTTPError as e:
            raise AnnotateError(f"lost the connection to Label Studio at {self.url} ({type(e).__name__}); "
                                f"is it running?") from None

    def find_project(self, project: str | int, creates: bool = False, pushed_by: str = "patterncnn annotate push"):
        """A project by id (digits) or exact title; None when there is no such title.

        Args:
            creates: the caller creates a project of a title it does not find (``push``), which an unknown
                id's error then offers; else it names an existing project as the fix.
            pushed_by: the command that pushed the maps the caller expects (and printed the project's title and
                id); an unknown id's error names it as the way to push them to a new project.
        """
        if isinstance(project, int) or str(project).isdigit():
            found = self.get_project(int(project))
            if found is None:
                fix = ("pass a title to create one" if creates else "pass an existing project's id or title (or "
                       f"push maps to a new one with `{pushed_by}`)")
                raise AnnotateError(f"no Label Studio project with id {project} at {self.url}; list them in the UI "
                                    f"or {fix}")
            return found
        matches = [p for p in self.call(lambda: list(self.client.projects.list(title=str(project))))
                   if p.title == project]
        if len(matches) > 1:
            raise AnnotateError(f"{len(matches)} projects are titled {project!r}; pass the project id instead")
        return matches[0] if matches else None

    def get_project(self, project_id: int):
        """The project of this id, or None when the server has none (never made, or deleted)."""
        try:
            return self.call(lambda: self.client.projects.get(id=project_id))
        except AnnotateError as e:
            if "HTTP 404" in str(e):
                return None
            raise

    def ensure_project(self, project: str | int, label_config: str, description: str = "",
                       hidden_columns: tuple[str, ...] = ()):
        """Reuse the project (by id or title) or create it with this labeling config.

        Args:
            hidden_columns: task data fields that the new project's task list (Data Manager) does not show.
        """
        check_project_title(project)
        found = self.find_project(project, creates=True)
        if found is not None:
            return found
        created = self.call(lambda: self.client.projects.create(
            title=str(project), label_config=label_config, show_skip_button=True,
            description=description or "Label each attention map by looking at it, following patterncnn's "
                                       "annotations/ANNOTATION_GUIDE.md."))
        if hidden_columns:
            # and Label Studio's own columns of the pre-annotation and of other members' labels (helper 103's review:
            # "Prediction results" and "Prediction model version" showed in every member's task list)
            hidden = [f"tasks:data.{c}" for c in hidden_columns] + [f"tasks:{c}" for c in LABEL_COLUMNS]
            self.call(lambda: self.client.views.create(project=created.id, data={
                "title": "Tasks", "hiddenColumns": {"explore": hidden, "labeling": hidden}}))
        return created

    def update_project(self, project_id: int, **settings) -> None:
        """Change project settings (``maximum_annotations``, ``show_collab_predictions``, ...)."""
        self.call(lambda: self.client.projects.update(id=project_id, **settings))

    def task_data(self, project_id: int) -> list[dict]:
        """The data of the project's tasks (map id, metadata, pre-annotation, ...)."""
        tasks = self.call(lambda: list(self.client.tasks.list(project=project_id, fields="all")))
        return [t.data for t in tasks if t.data]

    def import_tasks(self, project_id: int, tasks: list[dict]) -> None:
        self.call(lambda: self.client.projects.import_tasks(project_id, request=tasks))

    def export(self, project, timeout: float = 600) -> bytes:
        """The project's JSON export (all tasks), exactly as Label Studio sends it.

        A snapshot export that holds every prediction in full (the quick export lists predictions by
        id only) and every annotator's e-mail (not just a user id). The snapshot is deleted from the
        server once downloaded, and also when the export or its download fails or is interrupted: each is a full
        copy of the project that every member could download (until 2026-11-29 a failed pull left it there,
        helper 103's review).
        """
        options = {"predictions": {"only_id": False}, "annotations__completed_by": {"only_id": False},
                   "drafts": {"only_id": True}}
        snap = self.call(lambda: self.client.projects.exports.create(project.id, title="patterncnn pull",
                                                                     serialization_options=options))
        try:
            deadline = time.monotonic() + timeout
            while not str(snap.status).endswith("completed"):
                if str(snap.status).endswith("failed") or time.monotonic() > deadline:
                    raise AnnotateError(f"Label Studio at {self.url} did not finish exporting project {project.id} "
                                        f"(status {snap.status}); see the server's log and pull again")
                time.sleep(1)
                snap = self.call(lambda: self.client.projects.exports.get(project.id, snap.id))
            return self.call(lambda: b"".join(self.client.projects.exports.download(project.id, snap.id,
                                                                                    export_type="JSON")))
        finally:
            try:
                self.call(lambda: self.client.projects.exports.delete(project.id, snap.id))
            except AnnotateError as e:  # the pull's own outcome matters more; say what is left behind
                log.warning("the snapshot export %s of project %s is left on %s (%s): delete it in the project's "
                            "Export dialog", snap.id, project.id, self.url, e)

    def annotators(self) -> dict[int, str]:
        """User id -> e-mail (or user name) of every member, to record who labelled."""
        return {u.id: u.email or u.username for u in self.call(lambda: list(self.client.users.list()))}

    def ml_backends(self, project_id: int) -> dict[str, str]:
        """Model version -> URL of the project's ML backends (what ``patterncnn serve`` reports at /setup)."""
        return {m.model_version: m.url for m in self.call(lambda: list(self.client.ml.list(project=project_id)))
                if m.model_version}

    def invite_link(self, new: bool = False) -> str:
        """The organisation's sign-up link: whoever opens it can create an account in this Label Studio.

        Args:
            new: make a new link first; every earlier one stops working (accounts made with them stay).
        """
        if new:
            self.call(lambda: self.client.organizations.reset_token())
        invite = self.call(lambda: self.client.organizations.invites.get_invite_link())
        return f"{self.url}{invite.invite_url}"


def connect(url: str | None, api_key: str | None) -> Connection:
    """A checked connection: the server answers and the key is accepted.

    Raises:
        AnnotateError: no URL/key, server down, not Label Studio, or key refused (one line each).
    """
    import httpx
    from label_studio_sdk import LabelStudio

    if not url:
        raise AnnotateError("no Label Studio URL: pass --url or set LABEL_STUDIO_URL (e.g. http://localhost:8080)")
    if not api_key:
        raise AnnotateError("no Label Studio API key: pass --api-key or set LABEL_STUDIO_API_KEY (Label Studio UI: "
                            "Account & Settings > Legacy Token)")
    url = url.rstrip("/")
    try:
        health = httpx.get(f"{url}/health", timeout=10)
    except httpx.HTTPError as e:
        raise AnnotateError(f"cannot reach Label Studio at {url} ({type(e).__name__}): is the server running? "
                            f"Start it with `label-studio start` or fix --url") from None
    if health.status_code != 200 or "UP" not in health.text:
        raise AnnotateError(f"{url} answered /health with HTTP {health.status_code}; it does not look like Label "
                            f"Studio: check --url")
    ls = Connection(url, LabelStudio(base_url=url, api_key=api_key, timeout=120))
    ls.call(lambda: ls.client.projects.list(page_size=1))
    return ls

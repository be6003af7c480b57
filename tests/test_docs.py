"""The documentation: the mkdocs site in docs/ builds with --strict (no broken link or anchor between its pages), and
README.md stays a short first screen that keeps the two commands for a fresh machine and links only to pages that
exist."""

import re
import subprocess
import sys

from repo import REPO

README = REPO / "README.md"
MAX_README_LINES = 150
# The two commands of a fresh machine, character for character: CI (.ci/run) runs the second exactly.
INSTALL_AND_CENSUS = ("python3 -m venv .venv && .venv/bin/pip install -e . && HF_HUB_OFFLINE=1 .venv/bin/patterncnn "
                      "census --task sst2 --task rte --task mrpc --task stsb --task qnli --glue-dir ../shared/glue "
                      "--out runs/census")
TESTS = 'bash tests/setup-label-studio.sh && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest -q'


def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "docs" / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "commands" / "annotate" / "index.html").is_file()


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/pages/"


def test_readme_has_both_commands_verbatim_on_its_first_screen():
    first = README.read_text(encoding="utf-8").splitlines()[:40]
    assert INSTALL_AND_CENSUS in first, "the install + census command, verbatim, on a line of its own in lines 1-40"
    assert TESTS in first, "the test command, verbatim, on a line of its own in lines 1-40"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TESTS in ci.splitlines()  # the README shows what CI runs


def anchors(page) -> set[str]:
    """The heading anchors mkdocs gives a page (Python-Markdown's toc slugs of its headings' text)."""
    from markdown.extensions.toc import slugify  # mkdocs' own Markdown

    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)  # not in code blocks
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M)}


def test_readme_links_into_docs_resolve():
    links = re.findall(r"\]\((docs/[^)#\s]+\.md)(?:#([^)\s]*))?\)", README.read_text(encoding="utf-8"))
    assert links, "README.md links into docs/"
    pages = (REPO / "docs" / "pages").resolve()
    missing = [link for link, _ in links if not (REPO / link).is_file()]
    assert missing == [], "README.md links to docs pages that do not exist"
    outside = [link for link, _ in links if not (REPO / link).resolve().is_relative_to(pages)]
    assert outside == [], "README.md links into docs/ outside docs/pages/"
    broken = [f"{link}#{anchor}" for link, anchor in links if anchor and anchor not in anchors(REPO / link)]
    assert broken == [], "README.md links to headings that its docs pages do not have"


def test_help_texts_point_at_sections_that_exist():
    """A help text that names a place to read more, `(README, 'Section')` or `(docs/pages/....md, 'Section')`, names
    a file and a heading it has."""
    import argparse

    from patterncnn.cli import build_parser

    def helps(parser):
        for action in parser._actions:
            yield parser.description or "", action.help or ""
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from helps(sub)

    pointers = {m for pair in helps(build_parser()) for text in pair
                for m in re.findall(r"\((README|docs/pages/[\w/.-]+\.md), '([^']+)'\)", text)}
    assert ("docs/pages/commands/census.md", "Faster census") in pointers
    headings = {f: {re.sub(r"[`*]", "", h).strip() for h in
                    re.findall(r"^#{1,6} +(.+?) *#*$", (REPO / ("README.md" if f == "README" else f)).read_text(
                        encoding="utf-8"), flags=re.M)} for f, _ in pointers}
    missing = [(f, s) for f, s in pointers if not any(h.startswith(s) for h in headings[f])]
    assert missing == [], "help texts point at sections that do not exist"

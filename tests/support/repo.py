"""Where the tests find the repository, its fixtures and the real GLUE files."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

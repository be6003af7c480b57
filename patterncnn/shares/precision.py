"""When more examples cannot narrow a census: the stopping rule of ``census --precision``.

A census interval has two parts (:mod:`patterncnn.shares.estimate`): the examples' part, which
shrinks as examples are added, and the classifier's part (its calibration, or ``count``'s validated
band), which does not. Once the examples' part is small beside a target, more examples buy almost
nothing. The target is either absolute, in share points (``--precision 1``: the examples' part
within ±1 point on every pattern), or relative to the classifier's part (``--precision 0.33x``:
within a third of the classifier's half-width, pattern by pattern).

Usage::

    rule = Precision.parse("0.33x")                 # or "1" (points)
    check = rule.check(part)                        # part: what Plan.estimate returns for the examples so far
    check["reached"], check["examples"], check["target"]   # bool; half-widths per pattern, in points

The half-width of an interval [lo, hi] around the share p is max(p - lo, hi - p): the wider side.
"""

from __future__ import annotations

import dataclasses
import re

from ..core.errors import PatternCNNError
from ..core.labels import LABELS

_SPEC = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(x?)\s*$")  # 1, .5, 1e-3; then x or not


class PrecisionError(PatternCNNError, ValueError):
    """A precision target that cannot be read or cannot be met; the message says what to pass."""


def half_widths(point: dict, interval: dict) -> dict[str, float]:
    """Per pattern, the wider side of its interval around the share, in share points (percent)."""
    return {n: 100 * max(point[n] - interval[n][0], interval[n][1] - point[n], 0.0) for n in LABELS}


@dataclasses.dataclass(frozen=True)
class Precision:
    """A target for the examples' part of the interval: ``points`` (absolute) or ``of_classifier`` (relative)."""

    points: float | None = None
    of_classifier: float | None = None

    @classmethod
    def parse(cls, text: str | float, what: str = "--precision") -> "Precision":
        """``"1"`` or ``1.0``: ±1 share point; ``"0.33x"``: a third of the classifier's part.

        ``what`` names the option in the message: the command line's flag, or the Python keyword."""
        m = _SPEC.match(str(text))
        value = float(m.group(1)) if m else 0.0
        if not m or not 0 < value < float("inf"):  # 1e999 is inf
            raise PrecisionError(f"{what} {text!r}: give share points (e.g. 1 for ±1 point) or a fraction of the "
                                 f"classifier's part ending in x (e.g. 0.33x), greater than 0")
        return cls(of_classifier=value) if m.group(2) else cls(points=value)

    def __str__(self) -> str:
        return f"{self.of_classifier:g}x" if self.of_classifier is not None else f"{self.points:g}"

    def describe(self) -> str:
        if self.of_classifier is not None:
            return f"the examples' part within {self.of_classifier:g} x the classifier's part on every pattern"
        return f"the examples' part within ±{self.points:g} points on every pattern"

    def needs_classifier_part(self) -> bool:
        return self.of_classifier is not None

    def check(self, part: dict) -> dict:
        """Whether the examples' part of ``part`` (shares, ci95_parts) meets the target on every pattern.

        Returns:
            {"reached": bool, "examples": half-widths, "target": half-widths it must not exceed (points),
            "widest": the pattern furthest over (or nearest to) its target}.
        """
        ex = half_widths(part["shares"], part["ci95_parts"]["examples"])
        if self.of_classifier is not None:
            cls = half_widths(part["shares"], part["ci95_parts"]["classifier"])
            target = {n: self.of_classifier * cls[n] for n in LABELS}
        else:
            target = {n: float(self.points) for n in LABELS}
        widest = max(LABELS, key=lambda n: ex[n] - target[n])
        return {"reached": all(ex[n] <= target[n] for n in LABELS),
                "examples": {n: round(v, 4) for n, v in ex.items()},
                "target": {n: round(v, 4) for n, v in target.items()}, "widest": widest}

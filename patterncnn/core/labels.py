"""The five attention-pattern classes, in their one fixed order.

This is the only place the label names are spelled. The order is the order everywhere:
model outputs, files, the Label Studio config and reports (see ANNOTATION_GUIDE.md).
"""

LABELS: tuple[str, ...] = (
    "vertical",
    "diagonal",
    "vertical+diagonal",
    "block",
    "heterogeneous",
)

# One- or two-letter codes for grids in the terminal and in figures, in LABELS order.
SHORT: dict[str, str] = dict(zip(LABELS, ("V", "D", "VD", "B", "H")))

LABEL_TO_INDEX: dict[str, int] = {name: i for i, name in enumerate(LABELS)}


def label_index(name: str) -> int:
    """Index of a label name; raises ValueError naming the valid labels."""
    try:
        return LABEL_TO_INDEX[name]
    except KeyError:
        raise ValueError(f"unknown label {name!r}; valid labels are: {', '.join(LABELS)}") from None

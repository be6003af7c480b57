"""A finished experiment (drift, special tokens, disable, link) as a Python object: a DataFrame, a figure, JSON, HTML.

Usage::

    res = patterncnn.drift("minilm", "models-ft/minilm-rte", tasks=["rte"], glue_dir="glue_data")
    res.frame           # pandas DataFrame: the experiment's CSV table (one row per task, layer and head)
    res.plot()          # matplotlib Figure: the experiment's figure
    res.data, res.out   # its JSON result (a dict) and the folder that holds its files
"""

from __future__ import annotations

import base64
import dataclasses
import json
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..core import args
from ..core.plots import png

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


@dataclasses.dataclass
class ExperimentResult:
    """One experiment's result (``data``: its JSON), its folder (``out``), and how to draw and tabulate it."""

    data: dict
    out: Path | None
    plotter: Callable[[dict], "Figure"] = dataclasses.field(repr=False)
    tabulate: Callable[[dict], tuple[list[str], list[list]]] = dataclasses.field(repr=False)

    @property
    def kind(self) -> str:
        """``drift``, ``special-tokens``, ``disable`` or ``link``."""
        return self.data["experiment"]

    @property
    def frame(self) -> "pd.DataFrame":
        """The experiment's table (what its CSV file holds) as a DataFrame."""
        import pandas as pd

        header, rows = self.tabulate(self.data)
        return pd.DataFrame(rows, columns=header)

    def plot(self) -> "Figure":
        """The experiment's figure (a matplotlib Figure)."""
        return self.plotter(self.data)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.data, indent=args.whole("indent", indent, none=True), ensure_ascii=False)

    def __repr__(self) -> str:
        return f"<ExperimentResult {self.kind}: {self.out or 'not on disk'}>"

    def _repr_html_(self) -> str:
        data = base64.b64encode(png(self.plot())).decode("ascii")
        where = f" <code>{escape(str(self.out))}</code>" if self.out else ""
        return (f"<div><h4>patterncnn {escape(self.kind)}{where}</h4><p>{escape(self.data.get('created_by', ''))}</p>"
                f'<img alt="{escape(self.kind)} figure" src="data:image/png;base64,{data}"></div>')

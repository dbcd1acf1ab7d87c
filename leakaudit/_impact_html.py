"""The HTML report's section on how much the leak inflates accuracy (``ScoreImpact``).

Drawn here and placed by :mod:`leakaudit.htmlreport` after the per-split summary; it uses the
page's own table style (``table.summary``: numbers right-aligned) and needs no script.
"""

from __future__ import annotations

import html
import math
from typing import Any

from leakaudit.impact import ScoreImpact

__all__ = ["MAX_CLASSES_SHOWN", "impact_section"]

#: Classes listed in the section; the rest are counted (``leakaudit impact --csv`` has all).
MAX_CLASSES_SHOWN = 100
# A table wider than a narrow screen scrolls inside its box, not the page.
_SCROLL = '<div style="overflow-x:auto">'


def _pct(value: Any) -> str:
    return "&ndash;" if value is None or math.isnan(float(value)) else f"{100 * float(value):.2f}%"


def _points(value: Any) -> str:
    if value is None or math.isnan(float(value)):
        return "&ndash;"
    return f"{100 * float(value):+.2f}"


def _span(low: Any, high: Any, *, points: bool = False) -> str:
    if low is None or math.isnan(float(low)):
        return "&ndash;"
    if points:
        return f"{_points(low)} to {_points(high)}"
    return f"{_pct(low)} to {_pct(high)}"


def impact_section(impact: ScoreImpact) -> str:
    """The ``<section id="impact">`` of the report: accuracy on all, leaked and clean images."""
    level = f"{100 * impact.confidence:g}%"
    rows = []
    names = {
        "all": "all",
        "leaked": "leaked (a copy in another split)",
        "clean": "clean (the rest)",
    }
    for part, row in impact.overall.iterrows():
        rows.append(
            f"<tr><td>{names[str(part)]}</td><td>{int(row['images'])}</td>"
            f"<td>{int(row['correct'])}</td><td>{_pct(row['accuracy'])}</td>"
            f"<td>{_span(row['low'], row['high'])}</td></tr>"
        )
    for name, row in impact.differences.iterrows():
        rows.append(
            f'<tr class="total"><td>{html.escape(str(name))} (points)</td><td></td><td></td>'
            f"<td>{_points(row['estimate'])}</td>"
            f"<td>{_span(row['low'], row['high'], points=True)}</td></tr>"
        )
    parts = [
        '<section id="impact"><h2>Accuracy: leaked and clean images</h2>',
        f"<p>{html.escape(impact.headline())}</p>",
        f'{_SCROLL}<table class="summary"><thead><tr><th>images</th><th>count</th>'
        "<th>correct</th>"
        f"<th>accuracy</th><th>{level} interval</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>",
    ]
    if impact.by_class is not None:
        shown = impact.by_class.head(MAX_CLASSES_SHOWN)
        body = "".join(
            f"<tr><td>{html.escape(str(row[0]))}</td><td>{row.images}</td><td>{row.leaked}</td>"
            f"<td>{_pct(row.all)}</td><td>{_pct(row.leaked_accuracy)}</td>"
            f"<td>{_pct(row.clean)}</td><td>{_points(row.inflation)}</td>"
            f"<td>{_span(row.inflation_low, row.inflation_high, points=True)}</td></tr>"
            for row in shown.itertuples(index=False)
        )
        parts.append(
            '<h3 style="margin-top:16px">Per class</h3>'
            f'{_SCROLL}<table class="summary"><thead><tr><th>class</th><th>images</th>'
            "<th>leaked</th><th>accuracy, all</th><th>leaked</th><th>clean</th><th>all &minus; "
            f"clean (points)</th><th>{level} interval</th></tr></thead><tbody>{body}</tbody>"
            "</table></div>"
        )
        if len(impact.by_class) > MAX_CLASSES_SHOWN:
            parts.append(
                f'<p class="omitted">{len(impact.by_class) - MAX_CLASSES_SHOWN} more class(es) '
                "not listed (leakaudit impact --csv lists every class).</p>"
            )
    note = (
        f"Intervals: percentile bootstrap of the images, {impact.n_boot} resamples, leaked "
        f"and clean images resampled apart, seed {impact.seed}. A leaked image has a copy in "
        "another split; the clean score is what the model does on images it has not seen."
    )
    if impact.n_without_prediction:
        note += f" {impact.n_without_prediction} image(s) without a prediction are left out."
    parts.append(f'<p class="none">{html.escape(note)}</p></section>')
    return "".join(parts)

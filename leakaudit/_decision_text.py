"""What a report says about the review decisions it applied (``parameters["decisions"]``)."""

from __future__ import annotations

from typing import Any

from leakaudit._text import printable

__all__ = ["decision_lines"]


def decision_lines(record: Any, *, stale_shown: int = 10) -> list[str]:
    """The text report's lines on applied decisions: counts, then each stale one (up to
    ``stale_shown``). Empty when no decisions were applied."""
    if not isinstance(record, dict):
        return []
    stale = [str(s) for s in record.get("stale", [])]
    refused = [str(s) for s in record.get("refused", [])]
    text = (
        f"Decisions ({printable(str(record.get('file', '')))}): "
        f"{int(record.get('links_from_decisions', 0))} link(s) came from decisions, "
        f"{int(record.get('separated', 0))} pair(s) kept apart "
        f"({int(record.get('dropped_pairs', 0))} verified pair(s) dropped), "
        f"{int(record.get('confirmed', 0))} already as decided"
    )
    if refused:
        text += f", {len(refused)} 'copy' decision(s) refused (they would join a 'not a copy' pair)"
    lines = [text + f", {len(stale)} stale (not applied)."]
    if stale:
        lines.append("Decisions that no longer match an audited image (changed or removed):")
        lines.extend(f"  {printable(s)}" for s in stale[:stale_shown])
        if len(stale) > stale_shown:
            lines.append(f"  ... and {len(stale) - stale_shown} more")
    lines.extend(f"  refused: {printable(s)}" for s in refused[:stale_shown])
    return lines

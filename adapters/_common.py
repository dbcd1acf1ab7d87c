"""What the adapters share besides the core: result types and re-split bookkeeping.

The policies themselves (which split a leaked group goes to, move or drop,
group-aware splitting) are the core's, in :mod:`leakaudit.cleaning`; the
torchvision and Hugging Face adapters differ only in how they read images and
how they rebuild their own dataset objects.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._validation import check_bool
from leakaudit.audit import VerifySpec
from leakaudit.cleaning import SplitPlan
from leakaudit.cleantree import UNREADABLE_CHOICES
from leakaudit.policy import ThresholdSpec
from leakaudit.report import LeakageReport
from leakaudit.verify import VerifyOptions, table_candidates

__all__ = [
    "ClassMismatchWarning",
    "GroupSplitResult",
    "ResplitResult",
    "check_dihedral",
    "check_report_matches",
    "destination_rows",
    "leave_out_unreadable",
    "moves_table",
    "rows_verification_reads",
]


class ClassMismatchWarning(UserWarning):
    """A moved image's class does not exist in its new split; the class name was appended."""


@dataclass
class ResplitResult:
    """Leak-free splits rebuilt from an audit.

    Attributes
    ----------
    splits : mapping of str to dataset
        The new dataset objects, one per split, in the order of the input
        (a ``dict`` for torchvision, a ``datasets.DatasetDict`` for Hugging Face).
    moves : pandas.DataFrame
        One row per image that changed split or was dropped, with columns
        ``split`` (where it was), ``index`` (its position in that split's
        dataset), ``new_split`` (where it is now; missing when dropped),
        ``group_id`` and ``path``.
    report : LeakageReport
        The audit the new splits were computed from.
    policy : str
        ``"move"`` or ``"drop"``.
    """

    splits: Any
    moves: pd.DataFrame
    report: LeakageReport
    policy: str = "move"

    def __getitem__(self, split: str) -> Any:
        return self.splits[split]

    @property
    def n_moved(self) -> int:
        """Images that now sit in another split."""
        return int(self.moves["new_split"].notna().sum())

    @property
    def n_dropped(self) -> int:
        """Images removed (``policy="drop"``, and unreadable ones with ``unreadable="drop"``)."""
        return int(self.moves["new_split"].isna().sum())


def moves_table(plan: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of a :func:`~leakaudit.cleaning.clean_splits` result that moved or
    were dropped."""
    changed = plan[plan["reassigned"] | plan["dropped"]]
    columns = {
        "split": changed["original_split"].to_numpy(dtype=object),
        "index": changed["index"].to_numpy(dtype=np.int64),
        "new_split": pd.Series(changed["split"].to_numpy(dtype=object), dtype=object).where(
            changed["split"].notna().to_numpy(), None
        ),
        "group_id": changed["group_id"].to_numpy(),
        "path": changed["path"].to_numpy(dtype=object),
    }
    frame: pd.DataFrame = pd.DataFrame(columns).reset_index(drop=True)
    return frame


def leave_out_unreadable(plan: pd.DataFrame, unreadable: str) -> pd.DataFrame:
    """Apply ``unreadable`` to the images the audit could not decode (an ``error``).

    ``"drop"`` (the default of the adapters' ``clean_*``, as of ``leakaudit clean``): they
    leave the clean splits, so a DataLoader over them never meets one; they are listed in
    ``moves`` (``new_split`` missing) and named in one :class:`UserWarning`. ``"copy"``: they
    stay where they were. ``"fail"``: a ValueError naming them, before anything is built.
    """
    if unreadable not in UNREADABLE_CHOICES:
        raise ValueError(
            f"unreadable must be one of {', '.join(UNREADABLE_CHOICES)}; got {unreadable!r}."
        )
    if unreadable == "copy" or "error" not in plan:
        return plan
    failed = plan["error"].notna().to_numpy() & plan["split"].notna().to_numpy()
    if not failed.any():
        return plan
    named = [
        f"{split}[{index}] {path} ({error})"
        for split, index, path, error in zip(
            plan.loc[failed, "original_split"],
            plan.loc[failed, "index"],
            plan.loc[failed, "path"],
            plan.loc[failed, "error"],
            strict=True,
        )
    ]
    shown = "; ".join(named[:10]) + (f"; and {len(named) - 10} more" if len(named) > 10 else "")
    if unreadable == "fail":
        raise ValueError(
            f"unreadable='fail': {len(named)} image(s) cannot be decoded, so no clean splits "
            f"were made: {shown}. Fix or remove them, or pass unreadable='drop' (leave them "
            "out) or 'copy' (keep them where they are)."
        )
    plan = plan.copy()
    plan.loc[failed, "split"] = None
    plan.loc[failed, "dropped"] = True
    warnings.warn(
        f"{len(named)} image(s) that cannot be decoded were left out of the clean splits "
        f"(unreadable='drop'; your datasets keep them; unreadable='copy' keeps them): {shown}.",
        UserWarning,
        stacklevel=3,
    )
    return plan


def destination_rows(
    plan: pd.DataFrame, split_order: Sequence[str]
) -> dict[str, list[tuple[str, int]]]:
    """For each split, the ``(source split, index)`` rows it receives, in a stable order.

    A split keeps its own surviving rows first, in their original order, then
    receives moved rows ordered by source split (in ``split_order``) and index.
    """
    position = {name: i for i, name in enumerate(split_order)}
    out: dict[str, list[tuple[str, int]]] = {name: [] for name in split_order}
    sources = plan["original_split"].to_numpy(dtype=object)
    targets = plan["split"].to_numpy(dtype=object, copy=True)
    targets[pd.isna(targets)] = None
    indices = plan["index"].to_numpy(dtype=np.int64)
    keys = sorted(
        range(len(plan)),
        key=lambda i: (
            position[str(targets[i])] if targets[i] is not None else -1,
            sources[i] != targets[i],
            position[str(sources[i])],
            int(indices[i]),
        ),
    )
    for i in keys:
        if targets[i] is not None:
            out[str(targets[i])].append((str(sources[i]), int(indices[i])))
    return out


def check_dihedral(dihedral: Any) -> bool:
    """Return ``dihedral`` after checking it is a bool (one wording with the core).

    Examples
    --------
    >>> check_dihedral(True)
    True
    >>> check_dihedral(1)
    Traceback (most recent call last):
    ...
    TypeError: dihedral must be a bool; got 1.
    """
    return check_bool("dihedral", dihedral)


def check_report_matches(report: LeakageReport, sizes: Mapping[str, int], what: str) -> None:
    """Raise ``ValueError`` unless ``report`` audited exactly these splits and sizes."""
    if report.table is None or "index" not in report.table.columns:
        raise ValueError(
            f"report must come from {what} (a table with 'split' and 'index' columns); "
            "got a report without one."
        )
    counts = report.table.groupby("split", sort=False).size().to_dict()
    expected = {k: v for k, v in sizes.items() if v}
    if {str(k): int(v) for k, v in counts.items()} != {str(k): int(v) for k, v in expected.items()}:
        raise ValueError(
            f"report must audit the same splits and sizes as the datasets given ({expected}); "
            f"got {counts}. Re-run the audit on these datasets."
        )


@dataclass
class GroupSplitResult:
    """A dataset split group by group.

    Attributes
    ----------
    splits : mapping of str to dataset
        The new splits (a ``datasets.DatasetDict`` for Hugging Face).
    plan : SplitPlan
        Sizes asked for and obtained, and the row -> split assignment.
    report : LeakageReport
        The duplicate groups found in the dataset before splitting.
    """

    splits: Any
    plan: SplitPlan
    report: LeakageReport

    def __getitem__(self, split: str) -> Any:
        return self.splits[split]


def rows_verification_reads(
    table: Any, *, method: str, threshold: ThresholdSpec, verify: VerifySpec, dihedral: bool
) -> NDArray[np.int64]:
    """The rows whose images the audit of ``table`` will read again, ascending.

    Those in a candidate pair (the net :func:`leakaudit.verify.verified_labels`
    casts: its entries, thresholds and linkable rows), and those whose two
    hashes equal another row's (the report gives them a byte digest). An
    adapter whose images are not files fetches just these, so that its audit
    decides exactly as the audit of the same images as files does. No
    candidates when verification will not run (``verify=False``, another
    method, per-source thresholds).

    ``table`` is a :class:`~leakaudit.hashing.HashTable` or anything with its
    columns (:class:`~leakaudit.shards.HashShards`).
    """
    valid = np.asarray(table.valid, dtype=bool)
    low = np.asarray(table.low_information, dtype=bool)
    rows = np.flatnonzero(valid & ~low)
    hashes = pd.DataFrame({"phash": table.phash[rows], "dhash": table.dhash[rows]})
    shared: NDArray[np.int64] = rows[hashes.duplicated(keep=False).to_numpy()].astype(np.int64)
    if verify is False or method != "phash+dhash" or isinstance(threshold, Mapping):
        return shared
    options = verify if isinstance(verify, VerifyOptions) else VerifyOptions()
    (pairs, _), _ = table_candidates(table, low, options, dihedral=dihedral)
    needed: NDArray[np.int64] = np.union1d(pairs.ravel(), shared).astype(np.int64)
    return needed

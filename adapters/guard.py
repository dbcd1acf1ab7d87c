"""A one-call leakage guard for training scripts.

:func:`assert_no_leakage` audits whatever the script is about to train on -
folders, torchvision datasets or Hugging Face splits - and raises
:class:`~leakaudit.errors.LeakageError` (the report attached, a summary in the
message) when any split leaks more than allowed. No framework is imported here:
the matching adapter is chosen from the objects given, and it imports its own.

Examples
--------
At the top of a training script::

    from leakaudit.adapters.guard import assert_no_leakage

    assert_no_leakage({"train": train_set, "val": val_set}, max_fraction=0.01)
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from leakaudit._split_names import too_few_splits
from leakaudit._validation import describe
from leakaudit.adapters._common import check_dihedral
from leakaudit.audit import audit_splits
from leakaudit.errors import LeakageError
from leakaudit.listing import find_split_folders
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport

__all__ = ["assert_no_leakage", "check_leakage", "leaked_counts"]


def leaked_counts(report: LeakageReport) -> pd.DataFrame:
    """Per split: ``images``, ``leaked`` (images in a group spanning splits) and ``fraction``.

    The report's own count (:attr:`~leakaudit.report.LeakageReport.leak_counts`),
    the same the text report, the CSV/HTML tables and ``--fail-on-leak`` use.

    Examples
    --------
    >>> from leakaudit.report import dhash_audit
    >>> report = dhash_audit(pd.DataFrame({"split": ["train", "test", "test"],
    ...                                    "group_id": [0, 0, 1]}))
    >>> leaked_counts(report)["leaked"].to_dict()
    {'train': 1, 'test': 1}
    """
    return report.leak_counts


def _check_limits(max_leaked: Any, max_fraction: Any) -> tuple[int | None, float | None]:
    if max_leaked is not None and (
        isinstance(max_leaked, bool)
        or not isinstance(max_leaked, numbers.Integral)
        or max_leaked < 0
    ):
        raise ValueError(f"max_leaked must be an int >= 0 or None; got {describe(max_leaked)}.")
    if max_fraction is not None and (
        isinstance(max_fraction, bool)
        or not isinstance(max_fraction, numbers.Real)
        or not 0.0 <= float(max_fraction) <= 1.0
    ):
        raise ValueError(
            f"max_fraction must be a number in [0, 1] or None; got {describe(max_fraction)}."
        )
    return (
        int(max_leaked) if max_leaked is not None else None,
        float(max_fraction) if max_fraction is not None else None,
    )


def check_leakage(
    report: LeakageReport,
    *,
    max_leaked: int | None = None,
    max_fraction: float | None = None,
) -> LeakageReport:
    """Raise :class:`LeakageError` when a split of an audited dataset leaks more than allowed.

    A split fails when more than ``max_leaked`` of its images, or more than
    ``max_fraction`` of them, sit in a duplicate group that spans splits (either
    limit exceeded fails). With neither limit given, any leak fails. Both
    limits are per split, as ``leakaudit scan --fail-on-leak N`` / ``P%`` (one
    implementation: :meth:`~leakaudit.report.LeakageReport.splits_over_limit`).

    Parameters
    ----------
    report : LeakageReport
        An audit.
    max_leaked : int, optional
        Leaked images allowed per split.
    max_fraction : float, optional
        Share of a split allowed to leak, in [0, 1] (0.01 = 1%).

    Returns
    -------
    LeakageReport
        ``report`` itself, when within the limits.

    Raises
    ------
    LeakageError
        With ``error.report`` the full report; the message names every failing
        split with its counts and lists the worst groups.
    ValueError
        Fewer than two splits have images (a misspelt or empty split folder):
        nothing could leak, so a pass would prove nothing.
    """
    if not isinstance(report, LeakageReport):
        raise TypeError(f"report must be a LeakageReport; got {type(report).__name__}.")
    max_leaked, max_fraction = _check_limits(max_leaked, max_fraction)
    _require_two_splits(report)
    limit_count = 0 if max_leaked is None and max_fraction is None else max_leaked
    failing = report.splits_over_limit(max_leaked=limit_count, max_fraction=max_fraction)
    if failing.empty:
        return report
    limits = []
    if limit_count is not None:
        limits.append(f"at most {limit_count} leaked image(s) per split")
    if max_fraction is not None:
        limits.append(f"at most {100 * max_fraction:g}% of a split")
    details = "; ".join(
        f"{split}: {int(leaked)} of {int(images)} images leak ({100 * fraction:.2f}%)"
        for split, images, leaked, fraction in failing.itertuples()
    )
    message = (
        f"leakage guard: {len(failing)} split(s) exceed the limit ({' and '.join(limits)}): "
        f"{details}. {report.n_leaked_groups} duplicate group(s) span splits; the full report "
        "is attached as error.report.\n\n" + report.to_text(max_groups=5)
    )
    raise LeakageError(message, report)


def _require_two_splits(report: LeakageReport, root: Any = None) -> None:
    """Refuse to pass an audit that compared nothing (fewer than two splits with images)."""
    counts = {str(name): int(n) for name, n in report.images_by_split.items()}
    problem = too_few_splits(counts, root=root)
    if problem is not None:
        raise ValueError(f"leakage guard: {problem}")


def _kind(value: Any) -> str:
    if isinstance(value, (str, os.PathLike)):
        return "folder"
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(value, datasets.Dataset):
        return "huggingface"
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and isinstance(value, torch_data.Dataset):
        return "torchvision"
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "folder"  # a list of image paths
    if hasattr(value, "__getitem__") and hasattr(value, "__len__"):
        return "torchvision"  # a duck-typed map-style dataset
    return type(value).__name__


def assert_no_leakage(
    splits: Any,
    *,
    max_leaked: int | None = None,
    max_fraction: float | None = None,
    threshold: ThresholdSpec = None,
    dihedral: bool = True,
    **audit_options: Any,
) -> LeakageReport:
    """Audit the splits and raise :class:`LeakageError` if any leaks more than allowed.

    Parameters
    ----------
    splits : mapping, DatasetDict, folder or LeakageReport
        What to check:

        * a mapping of split name -> folder or list of image paths, or one folder
          whose sub-folders are the splits (``root/train``, ``root/val``, ...):
          audited with :func:`leakaudit.audit.audit_splits`;
        * a mapping of split name -> torchvision / PyTorch dataset:
          :func:`leakaudit.adapters.torchvision.audit_datasets`;
        * a ``DatasetDict`` or mapping of split name -> ``datasets.Dataset``:
          :func:`leakaudit.adapters.huggingface.audit_dataset_dict`;
        * a :class:`~leakaudit.report.LeakageReport` already computed.
    max_leaked, max_fraction
        The limits, as in :func:`check_leakage` (default: no leak at all).
    threshold : int or mapping of str to int, optional
        Largest Hamming distance counted as a near-duplicate (the method's
        default when None), or rules per split name or path pattern such as
        ``{"test": 4, "screenshots/*": 2, "*": 8}`` (see
        :func:`leakaudit.policy.row_thresholds`). Passed to the audit function.
    dihedral : bool, default True
        Also count mirrored, flipped and rotated (90, 180, 270 degrees) copies
        as leaks. Passed to the audit function.
    **audit_options
        Passed to the audit function (``method``, ``workers``, ``verify``,
        ``num_proc``, ``transform_override``, ``on_error``, ...).

    Returns
    -------
    LeakageReport
        The audit, when the splits are within the limits.

    Raises
    ------
    LeakageError
        Leakage above the limits; ``error.report`` holds the audit.
    ValueError
        Fewer than two splits have images: a pass would prove nothing (the
        message names the splits found and, for a folder, its folders that look
        like a misspelt split name).

    Examples
    --------
    >>> import tempfile
    >>> from leakaudit.demo import build_demo_dataset
    >>> demo = build_demo_dataset(tempfile.mkdtemp())
    >>> try:
    ...     assert_no_leakage(demo.root, max_fraction=0.05, workers=1, on_error="ignore")
    ... except LeakageError as error:
    ...     print(error.report.n_leaked_groups)
    4
    """
    _check_limits(max_leaked, max_fraction)
    check_dihedral(dihedral)
    if isinstance(splits, LeakageReport):
        if audit_options or threshold is not None or not dihedral:
            raise TypeError("audit options cannot apply to a report that is already computed.")
        report = splits
    else:
        resolve_threshold(audit_options.get("method", DEFAULT_METHOD), threshold)
        # Passed only when set, so an audit function keeps its own defaults.
        if threshold is not None:
            audit_options["threshold"] = threshold
        if not dihedral:
            audit_options["dihedral"] = False
        report = _audit(splits, audit_options)
        if isinstance(splits, (str, os.PathLike)):
            _require_two_splits(report, root=splits)  # names ROOT's likely misspelt folders
    return check_leakage(report, max_leaked=max_leaked, max_fraction=max_fraction)


def _audit(splits: Any, audit_options: dict[str, Any]) -> LeakageReport:
    """Audit ``splits`` (anything but a report) with the matching audit function."""
    if isinstance(splits, (str, os.PathLike)):
        report = audit_splits(find_split_folders(splits), root=splits, **audit_options)
    elif isinstance(splits, Mapping):
        if not splits:
            raise ValueError("splits must name at least one split; got an empty mapping.")
        kinds = {_kind(value) for value in splits.values()}
        if kinds == {"folder"}:
            report = audit_splits(splits, **audit_options)
        elif kinds == {"torchvision"}:
            from leakaudit.adapters.torchvision import audit_datasets

            report = audit_datasets(splits, **audit_options)
        elif kinds == {"huggingface"}:
            from leakaudit.adapters.huggingface import audit_dataset_dict

            report = audit_dataset_dict(splits, **audit_options)
        else:
            found = ", ".join(f"{name}: {type(v).__name__}" for name, v in splits.items())
            raise TypeError(
                "splits must map every split to the same kind of data (folders or path lists, "
                f"torch datasets, or datasets.Dataset); got {found}."
            )
    else:
        raise TypeError(
            "splits must be a mapping of split name to data, a DatasetDict, a folder of split "
            f"folders, or a LeakageReport; got {describe(splits)}."
        )
    return report

"""leakaudit: find near-duplicate images leaking across dataset splits.

The pipeline, one module per stage::

    loading -> hashing -> search -> verify -> grouping -> report -> cleaning

The seed's five functions (``compute_hashes``, ``hamming_distance``,
``find_duplicate_groups``, ``dhash_audit``, ``clean_splits``) work on pandas
DataFrames; :func:`audit_splits` does everything in one call.

Importing ``leakaudit`` is cheap: each public name imports its module (and
pandas, numpy, Pillow) the first time it is used, so the command line can
install its signal handlers before any heavy import (an interrupt during
start-up is one line, not an import traceback).
"""

from __future__ import annotations

import importlib
import typing

from leakaudit._version import __version__

if typing.TYPE_CHECKING:
    from leakaudit.audit import (
        audit_hash_table,
        audit_sources,
        audit_splits,
    )
    from leakaudit.calibrate import CalibrationResult, calibrate_threshold
    from leakaudit.cleaning import SplitPlan, clean_splits, split_groups
    from leakaudit.decisions import ReviewDecisions, StaleDecisionWarning, load_decisions
    from leakaudit.errors import ImageLoadError, LeakageError, LeakauditError
    from leakaudit.frames import compute_hashes, find_duplicate_groups
    from leakaudit.hashing import (
        HashTable,
        OrientationHashes,
        UnreadableImageWarning,
        hamming_distance,
        hash_sources,
    )
    from leakaudit.listing import (
        EmptySplitWarning,
        FolderScanWarning,
        RepeatedPathWarning,
        list_image_files,
    )
    from leakaudit.loading import DecodeOptions, ImageDecodeWarning
    from leakaudit.policy import DEFAULT_METHOD, DEFAULT_THRESHOLDS, ThresholdRuleWarning
    from leakaudit.report import AuditParameters, LargeGroupWarning, LeakageReport, dhash_audit
    from leakaudit.shards import audit_hash_shards
    from leakaudit.verify import VerifyOptions

__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_THRESHOLDS",
    "AuditParameters",
    "CalibrationResult",
    "DecodeOptions",
    "EmptySplitWarning",
    "FolderScanWarning",
    "HashTable",
    "ImageDecodeWarning",
    "ImageLoadError",
    "LargeGroupWarning",
    "LeakageError",
    "LeakageReport",
    "LeakauditError",
    "OrientationHashes",
    "RepeatedPathWarning",
    "ReviewDecisions",
    "SplitPlan",
    "StaleDecisionWarning",
    "ThresholdRuleWarning",
    "UnreadableImageWarning",
    "VerifyOptions",
    "__version__",
    "audit_hash_shards",
    "audit_hash_table",
    "audit_sources",
    "audit_splits",
    "calibrate_threshold",
    "clean_splits",
    "compute_hashes",
    "dhash_audit",
    "find_duplicate_groups",
    "hamming_distance",
    "hash_sources",
    "list_image_files",
    "load_decisions",
    "split_groups",
]

#: Where each public name lives (the modules are imported on first use).
_HOMES = {
    "audit_hash_table": "leakaudit.audit",
    "audit_sources": "leakaudit.audit",
    "audit_splits": "leakaudit.audit",
    "CalibrationResult": "leakaudit.calibrate",
    "calibrate_threshold": "leakaudit.calibrate",
    "SplitPlan": "leakaudit.cleaning",
    "clean_splits": "leakaudit.cleaning",
    "split_groups": "leakaudit.cleaning",
    "ReviewDecisions": "leakaudit.decisions",
    "StaleDecisionWarning": "leakaudit.decisions",
    "load_decisions": "leakaudit.decisions",
    "ImageLoadError": "leakaudit.errors",
    "LeakageError": "leakaudit.errors",
    "LeakauditError": "leakaudit.errors",
    "compute_hashes": "leakaudit.frames",
    "find_duplicate_groups": "leakaudit.frames",
    "HashTable": "leakaudit.hashing",
    "OrientationHashes": "leakaudit.hashing",
    "UnreadableImageWarning": "leakaudit.hashing",
    "hamming_distance": "leakaudit.hashing",
    "hash_sources": "leakaudit.hashing",
    "EmptySplitWarning": "leakaudit.listing",
    "FolderScanWarning": "leakaudit.listing",
    "RepeatedPathWarning": "leakaudit.listing",
    "list_image_files": "leakaudit.listing",
    "DecodeOptions": "leakaudit.loading",
    "ImageDecodeWarning": "leakaudit.loading",
    "DEFAULT_METHOD": "leakaudit.policy",
    "DEFAULT_THRESHOLDS": "leakaudit.policy",
    "ThresholdRuleWarning": "leakaudit.policy",
    "AuditParameters": "leakaudit.report",
    "LargeGroupWarning": "leakaudit.report",
    "LeakageReport": "leakaudit.report",
    "dhash_audit": "leakaudit.report",
    "audit_hash_shards": "leakaudit.shards",
    "VerifyOptions": "leakaudit.verify",
}


def __getattr__(name: str) -> typing.Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'leakaudit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""leakaudit: find near-duplicate images leaking across dataset splits.

The pipeline, one module per stage::

    loading -> hashing -> search -> verify -> grouping -> report -> cleaning

The seed's five functions (``compute_hashes``, ``hamming_distance``,
``find_duplicate_groups``, ``dhash_audit``, ``clean_splits``) work on pandas
DataFrames; :func:`audit_splits` does everything in one call.
"""

from __future__ import annotations

from leakaudit._version import __version__
from leakaudit.audit import (
    audit_hash_table,
    audit_sources,
    audit_splits,
)
from leakaudit.calibrate import CalibrationResult, calibrate_threshold
from leakaudit.cleaning import SplitPlan, clean_splits, split_groups
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
    "SplitPlan",
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
    "split_groups",
]

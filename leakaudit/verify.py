"""Pairwise verification: hashes propose candidate pairs, this stage decides each one.

The candidate net (:func:`candidate_pairs`) is wider than a bare threshold: whole-image
hashes at a looser threshold (:data:`CANDIDATE_THRESHOLD`), with dihedral orientation
entries, and the crop and rotation entries of :func:`leakaudit.hashing.hash_sources`
(``crop_entries=True``), which reach cropped and slightly rotated copies. A
candidate links only when verification accepts it, cheapest stage first, and each
accepted pair records the stage and its evidence (:data:`leakaudit.report.EDGE_COLUMNS`):

1. ``bytes``: the two files are byte-identical (BLAKE2b of the bytes);
2. ``pixels``: the two images, decoded again in colour with their alpha, trimmed and
   turned as the hashes saw them, are aligned by the best-matching pair of entries
   (whole, crop or rotation) and compared on a 24 x 24 grid: the structure (zero-mean
   correlation of luma), the colour (mean chroma difference: as it is for a drawn
   image, after the best global colour map for a picture, so a grey, toned or
   channel-scaled copy of a photo passes) and, with transparency, the silhouette (IoU
   of the alpha masks). This is what separates a recoloured icon or a different
   sprite in the same pose from a re-encoded copy: their hashes agree (both are luma
   structure), their colours or silhouettes do not;
3. ``geometry``: pairs the pixel check finds plausible but not conclusive (crops,
   pads, rotations, partial overlaps) go to local-feature matching with RANSAC
   (:mod:`leakaudit.geometry`, OpenCV), when it is installed.

Only accepted pairs enter the union-find, so a chain of near-misses cannot glue
unrelated images into one group. Without the images (precomputed hashes) nothing can
be verified and the plain threshold rule applies.

This module is the stage's public face; the work lives in private modules, one job each:

- ``_verify_options``: :class:`VerifyOptions` and the public tuned constants;
- ``_verify_candidates``: the candidate net (:func:`candidate_pairs`, :func:`table_candidates`);
- ``_verify_view``: decoding for verification (:func:`load_view`, :class:`View`);
- ``_verify_judge``: the pixel check of one pair (:func:`compare_views`, :class:`PairVerdict`);
- ``_verify_native``: the native-resolution check (:func:`distinct_pixel_count`);
- ``_verify_stage``: every candidate judged, images decoded by threads (:func:`verify_candidates`);
- ``_verify_graph``: from verified pairs to groups (:func:`supported_pairs`,
  :func:`kept_together`, :func:`verified_labels`).
"""

from __future__ import annotations

from leakaudit._verify_align import compare_views
from leakaudit._verify_candidates import candidate_pairs, table_candidates
from leakaudit._verify_graph import (
    iter_edge_chunks,
    kept_together,
    supported_pairs,
    verified_labels,
)
from leakaudit._verify_judge import PairVerdict, colour_change
from leakaudit._verify_native import distinct_applies, distinct_pixel_count
from leakaudit._verify_options import (
    CANDIDATE_THRESHOLD,
    CROP_CANDIDATE_DHASH_THRESHOLD,
    CROP_CANDIDATE_THRESHOLD,
    DISTINCT_MIN_SIDE,
    DISTINCT_PIXELS,
    GRAPHIC_SIDE,
    MIN_SUPPORT,
    VerifyOptions,
)
from leakaudit._verify_stage import (
    TableEntries,
    UnverifiableImageWarning,
    VerifiedPairs,
    verify_candidates,
)
from leakaudit._verify_view import View, load_view

__all__ = [
    "CANDIDATE_THRESHOLD",
    "CROP_CANDIDATE_DHASH_THRESHOLD",
    "CROP_CANDIDATE_THRESHOLD",
    "DISTINCT_MIN_SIDE",
    "DISTINCT_PIXELS",
    "GRAPHIC_SIDE",
    "MIN_SUPPORT",
    "PairVerdict",
    "TableEntries",
    "UnverifiableImageWarning",
    "VerifiedPairs",
    "VerifyOptions",
    "View",
    "candidate_pairs",
    "colour_change",
    "compare_views",
    "distinct_applies",
    "distinct_pixel_count",
    "iter_edge_chunks",
    "kept_together",
    "load_view",
    "supported_pairs",
    "table_candidates",
    "verified_labels",
    "verify_candidates",
]

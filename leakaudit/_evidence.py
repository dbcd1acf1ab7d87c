"""The pair-evidence vocabulary, defined once: the stage names that say why two images are
linked, and the columns of the verified pairs (``report.edges``) that carry them.

Low in the import order (it imports nothing of ours): verification, the report, the
tables (``export``) and the HTML report all take their names from here.
"""

from __future__ import annotations

__all__ = [
    "COPY_KIND",
    "DECISION",
    "EDGE_COLUMNS",
    "EDGE_STAGES",
    "EVIDENCE_MEANING",
    "PAIR_STAGES",
    "TRANSITIVE",
    "VERIFIED_BEYOND",
]

#: Columns of :attr:`leakaudit.report.LeakageReport.edges`: the verified pairs that built
#: the groups.
EDGE_COLUMNS = ["row_a", "row_b", "stage", "distance", "similarity", "inliers", "strength"]
#: An optional column of :attr:`LeakageReport.edges` (after :data:`EDGE_COLUMNS`): what
#: kind of copy the pair is, in words (:func:`leakaudit.copykind.copy_kind`). Edges
#: without it (made by hand, byte copies, the embedding stage) are described by stage.
COPY_KIND = "copy_kind"
#: Values of an edge's ``stage`` (and of a leaked group's ``evidence``): the stage that
#: accepted the pair. Byte copies, hashes within the verified link distance, the pixel
#: check, the geometric check, the tiny-photo registration net, the texture net of
#: low-information images (:mod:`leakaudit._verify_texture`), the embedding stage, and a
#: reviewer's "copy" decision (:mod:`leakaudit.decisions`).
DECISION = "decision"
EDGE_STAGES = (
    "bytes",
    "hash",
    "pixels",
    "geometry",
    "registered",
    "texture",
    "embedding",
    DECISION,
)
#: What a group's ``evidence`` (and a pair's, in the tables) says when no verified pair
#: joins two of its splits directly: its splits are joined only through members of one split.
TRANSITIVE = "transitive"
#: The pairs table's ``stage`` of a pair verified directly whose whole images' hashes are
#: beyond the threshold: a crop, strip or rotation entry or the tiny-photo net proposed it
#: (a cropped or shifted copy). Never :data:`TRANSITIVE`: the pair links on its own.
VERIFIED_BEYOND = "verified beyond threshold"
#: Values of the pairs table's ``stage`` column (decided from hashes and digests, and for
#: a pair beyond the threshold whether verification linked it directly), cheapest
#: evidence first.
PAIR_STAGES = ("exact bytes", "hash", "dihedral hash", "embedding", VERIFIED_BEYOND, TRANSITIVE)

#: What each evidence word means, in the words a reader meets it with: the text and HTML
#: reports explain the words they show from here.
EVIDENCE_MEANING = {
    "bytes": "identical files",
    "hash": "hashes alone, within the threshold (the images were not compared again)",
    "pixels": "the two images compared aligned, pixel by pixel",
    "geometry": "the same local features in the same layout (a crop, a rotation)",
    "registered": "tiny photos aligned by least squares, then compared pixel by pixel",
    "embedding": "your embedding model's vectors are close",
    "sscd": "Meta's SSCD copy detector scored the pair as a copy",
    DECISION: "a reviewer marked the pair a copy (--decisions)",
    TRANSITIVE: "no verified pair joins two of its splits directly, only chains within a split",
}

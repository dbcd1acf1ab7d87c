"""Perceptual hashes (dHash, pHash) of images, hex encoding, and Hamming distances.

Both hashes are computed from one decode: :func:`leakaudit.loading.load_reduced_grey`
returns a small greyscale image, which is resized with Lanczos to

* 9 wide x 8 high for **dHash**: bit ``(r, c)`` is set when
  ``pixel[r, c + 1] > pixel[r, c]`` (``imagehash.dhash``);
* 32 x 32 for **pHash**: the unnormalised DCT-II of both axes (what
  ``scipy.fftpack.dct`` computes, done here with a precomputed matrix), keep the
  low-frequency 8 x 8 block *including* the DC term, and set bit ``(r, c)`` when
  that coefficient is above the median of the 64 (``imagehash.phash``).

Bit order
---------
A hash is a ``uint64``. The 8 x 8 bit matrix is read row-major, and the first
element (row 0, column 0) is the **most significant** bit. Printed as 16 lowercase
hex digits this is exactly ``str(imagehash.phash(image))`` /
``str(imagehash.dhash(image))`` for images that need no reduction or flattening.

Hashes of near-flat images are noise: their 63 AC coefficients are all close to
zero and the median split flips at random. Such images are flagged with
``low_information=True`` so the search can treat them separately; for them (and
only for them) a ``digest`` of the file bytes is computed, which links a blank
image to its byte-identical copies.

Modules
-------
The package is split by job; every name is imported from ``leakaudit.hashing``.

* ``_maths``: the hash maths (Pillow's Lanczos resize reproduced in numpy, the DCT,
  the dHash and pHash bits);
* ``_entries``: entry geometry (dihedral turns, crop boxes, rotations, content boxes);
* ``_batch``: hashing one image, or a stack of same-size images at once;
* ``_pool``: hashing many sources, in a process pool with its worker signals;
* ``_records``: :class:`ImageHashes`, :class:`OrientationHashes` (each entry with its
  :class:`EntryKind`), :class:`HashTable`;
* ``_errors``: the ``on_error`` policy and :class:`UnreadableImageWarning`;
* ``_bits``: popcount, hex encoding and decoding, Hamming distance of hex strings,
  the byte digest (each defined once, for the whole package).
"""

# ruff: noqa: F401

from __future__ import annotations

# Besides __all__, a few names stay reachable as ``hashing.X`` (tests, benchmarks and
# RESULTS.md use them since before the split): DIHEDRAL_MARGIN and private helpers.
from leakaudit.hashing._batch import (
    _crop_bands,
    _crop_bands_fast,
    _fast_crop_products,
    _hash_items,
    _hash_reduced,
    _hash_reduced_batch,
    _stack_crop_entries,
    _stack_thumbnails,
    hash_image,
    hashes_and_notes,
)
from leakaudit.hashing._bits import (
    _popcount64_table,
    bytes_digest,
    hamming_distance,
    hashes_to_hex,
    hashes_to_hex_arrow,
    hex_to_hashes,
    image_digest,
    popcount64,
)
from leakaudit.hashing._entries import (
    CROP_BOXES,
    CROP_ROTATIONS,
    CROP_SCALES,
    DIHEDRAL_MARGIN,
    EXTRA_KINDS,
    MAX_ORIENTATIONS,
    MAX_STRIP_ENTRIES,
    N_CROP_ENTRIES,
    N_EXTRA_ENTRIES,
    N_ROTATION_ENTRIES,
    STRIP_ASPECT,
    STRIP_GROUP,
    THUMBNAIL_CROP_SCALES,
    THUMBNAIL_ROTATIONS,
    THUMBNAIL_SLOTS,
    EntryKind,
    _crop_entries_of_thumbnail,
    _oriented,
    _uses_pixel_entries,
    content_box,
    dihedral_orientations,
    entry_kinds,
    strip_boxes,
    strip_entries,
    triangle_weights,
    turned_view,
    whole_and_crop_hashes,
    whole_hashes,
)
from leakaudit.hashing._errors import (
    ON_ERROR_CHOICES,
    UnreadableImageWarning,
    apply_on_error,
)
from leakaudit.hashing._maths import (
    HASH_METHODS,
    _hashes_from_thumbnails,
    _lanczos,
    _lanczos_taps,
    _lanczos_weights,
    _lanczos_weights_reference,
    _numpy_sine_is_libm,
    _pillow_pass_order,
    _row_medians,
    _thumbnails,
)
from leakaudit.hashing._planes import _bands
from leakaudit.hashing._pool import (
    hash_sources,
    source_name,
)
from leakaudit.hashing._records import (
    HashTable,
    ImageHashes,
    OrientationHashes,
)

__all__ = [
    "CROP_BOXES",
    "CROP_ROTATIONS",
    "CROP_SCALES",
    "EXTRA_KINDS",
    "HASH_METHODS",
    "MAX_ORIENTATIONS",
    "MAX_STRIP_ENTRIES",
    "N_CROP_ENTRIES",
    "N_EXTRA_ENTRIES",
    "N_ROTATION_ENTRIES",
    "ON_ERROR_CHOICES",
    "STRIP_ASPECT",
    "STRIP_GROUP",
    "THUMBNAIL_CROP_SCALES",
    "THUMBNAIL_ROTATIONS",
    "THUMBNAIL_SLOTS",
    "EntryKind",
    "HashTable",
    "ImageHashes",
    "OrientationHashes",
    "UnreadableImageWarning",
    "apply_on_error",
    "bytes_digest",
    "content_box",
    "dihedral_orientations",
    "entry_kinds",
    "hamming_distance",
    "hash_image",
    "hash_sources",
    "hashes_and_notes",
    "hashes_to_hex",
    "hashes_to_hex_arrow",
    "hex_to_hashes",
    "image_digest",
    "popcount64",
    "source_name",
    "strip_boxes",
    "strip_entries",
    "triangle_weights",
    "turned_view",
    "whole_and_crop_hashes",
    "whole_hashes",
]

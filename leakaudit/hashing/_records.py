"""The records hashing returns: one image's hashes (:class:`ImageHashes`), its canonical
orientation entries (:class:`OrientationHashes`), and a table of many (:class:`HashTable`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from leakaudit.hashing._bits import (
    hashes_to_hex,
)
from leakaudit.hashing._entries import entry_kinds

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "HashTable",
    "ImageHashes",
    "OrientationHashes",
]


@dataclass(frozen=True)
class ImageHashes:
    """The hashes of one image.

    Attributes
    ----------
    phash, dhash : int
        64-bit perceptual hashes (see the module docstring for the bit order).
    low_information : bool
        The image is (nearly) flat; its pHash is not reproducible.
    digest : int
        Only when ``low_information`` is True: the 64-bit BLAKE2b of the encoded
        file bytes (for a PIL image: of its mode, size and pixel bytes); equal
        digests mean identical files. **0 for every other image**: the digest is
        only used to link blank images to their byte-identical copies, and
        hashing the bytes of every file would cost as much as a third of the
        decode.
    orientations : tuple of (int, int)
        With ``hash_image(..., dihedral=True)``: the ``(phash, dhash)`` of the
        image turned to its canonical orientation(s) (see
        :class:`OrientationHashes`), then with ``crop_entries=True`` the crop
        entries; empty otherwise, and for low-information images.
    kinds : tuple of int
        The :class:`~leakaudit.hashing.EntryKind` of each of ``orientations``.
    """

    phash: int
    dhash: int
    low_information: bool
    digest: int
    orientations: tuple[tuple[int, int], ...] = ()
    kinds: tuple[int, ...] = ()


@dataclass(init=False)
class OrientationHashes:
    """Hashes of images turned to their canonical orientation, for dihedral matching.

    Each image that can link by hash (valid, not low-information) has one or
    more entries: the image turned to its canonical orientation (see
    :func:`dihedral_orientations`) first, then, when a decision of that
    orientation is close to a tie, turned to the other choices. Two images
    match under flips and 90-degree rotations when any entry of one lies
    within the threshold of any entry of the other.

    Canonical entries are what a dihedral search compares, not the hashes of
    the images as they are: a pair right at the threshold can fall either side
    of it once both are turned (the dHash of a transposed image compares
    vertical neighbours), so a dihedral audit is not a strict superset of a
    plain one; measured on real photos it finds 99.8-100% of the ordinary
    copies a plain audit finds, with the same false pairs
    (``benchmarks/RESULTS.md``, "Dihedral matching").

    Attributes
    ----------
    owner : numpy.ndarray of int64
        The table row of each entry, ascending.
    phash, dhash : numpy.ndarray of uint64
        The hashes of that row's image in the entry's orientation (or crop,
        rotation, content box: see ``kind``).
    kind : numpy.ndarray of int8
        What each entry hashes, an :class:`~leakaudit.hashing.EntryKind`: the
        orientations (dihedral matching), then with crop entries the image as
        it is, its content, crops and rotations. Given by hashing; when built
        without it, the layout hashing writes is read from ``owner``
        (:func:`~leakaudit.hashing.entry_kinds`). Which crop box or rotation an
        entry is: :meth:`index_in_kind`.
    """

    owner: NDArray[np.int64]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    kind: NDArray[np.int8]

    def __init__(
        self,
        owner: NDArray[np.int64],
        phash: NDArray[np.uint64],
        dhash: NDArray[np.uint64],
        kind: NDArray[np.int8] | None = None,
    ) -> None:
        self.owner = owner
        self.phash = phash
        self.dhash = dhash
        self.kind = entry_kinds(owner) if kind is None else np.asarray(kind, dtype=np.int8)
        if len(self.kind) != len(owner):
            raise ValueError(
                f"kind must have one value per entry ({len(owner)}); got {len(self.kind)}."
            )

    def __len__(self) -> int:
        return len(self.owner)

    def index_in_kind(self) -> NDArray[np.int64]:
        """Each entry's rank among its row's entries of its kind (see :class:`EntryKind`).

        For a ``CROP`` entry its box in :data:`~leakaudit.hashing.CROP_BOXES`, for a
        ``ROTATION`` entry its angle in :data:`~leakaudit.hashing.CROP_ROTATIONS`,
        for an ``ORIENTATION`` entry its orientation choice (0: the canonical one).

        Examples
        --------
        >>> from leakaudit.hashing import EntryKind
        >>> kinds = [EntryKind.ORIENTATION, EntryKind.CROP, EntryKind.CROP, EntryKind.CROP]
        >>> entries = OrientationHashes(np.array([0, 0, 0, 1]), np.zeros(4, np.uint64),
        ...                             np.zeros(4, np.uint64), np.array(kinds))
        >>> entries.index_in_kind().tolist()
        [0, 0, 1, 0]
        """
        order = np.lexsort((self.kind, self.owner))  # stable: a kind's entries keep their order
        owner, kind = self.owner[order], self.kind[order]
        starts = np.r_[True, (owner[1:] != owner[:-1]) | (kind[1:] != kind[:-1])]
        first = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order)) - first
        return rank

    @classmethod
    def merge(cls, parts: Sequence[OrientationHashes]) -> OrientationHashes:
        """One set of entries from parts whose owners are already table rows.

        The one way orientation entries are assembled (hashing, the cache, both
        adapters). The parts cover disjoint rows; a stable sort by owner makes
        owners ascending and keeps each row's entries in their order (the
        canonical orientation first).

        Examples
        --------
        >>> a = OrientationHashes(np.array([2]), np.array([5], np.uint64), np.array([6], np.uint64))
        >>> b = OrientationHashes(np.array([0, 0]), np.array([1, 3], np.uint64),
        ...                       np.array([2, 4], np.uint64))
        >>> OrientationHashes.merge([a, b]).owner.tolist()
        [0, 0, 2]
        """
        owner = np.concatenate([np.zeros(0, dtype=np.int64), *(p.owner for p in parts)])
        phash = np.concatenate([np.zeros(0, dtype=np.uint64), *(p.phash for p in parts)])
        dhash = np.concatenate([np.zeros(0, dtype=np.uint64), *(p.dhash for p in parts)])
        kind = np.concatenate([np.zeros(0, dtype=np.int8), *(p.kind for p in parts)])
        order = np.argsort(owner, kind="stable")
        return cls(
            owner=owner[order].astype(np.int64, copy=False),
            phash=phash[order].astype(np.uint64, copy=False),
            dhash=dhash[order].astype(np.uint64, copy=False),
            kind=kind[order],
        )

    def of_row(self, row: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
        """The ``(phash, dhash)`` entries of one row, in their order."""
        start, stop = np.searchsorted(self.owner, [row, row + 1])
        return self.phash[start:stop], self.dhash[start:stop]

    def take(self, rows: NDArray[np.intp]) -> OrientationHashes:
        """The entries of ``rows`` (in that order), renumbered to positions in ``rows``."""
        rows = np.asarray(rows, dtype=np.intp)
        start = np.searchsorted(self.owner, rows, side="left")
        counts = np.searchsorted(self.owner, rows, side="right") - start
        offset = np.cumsum(counts) - counts
        picked = np.arange(int(counts.sum()), dtype=np.intp) + np.repeat(start - offset, counts)
        return OrientationHashes(
            owner=np.repeat(np.arange(len(rows), dtype=np.int64), counts),
            phash=self.phash[picked],
            dhash=self.dhash[picked],
            kind=self.kind[picked],
        )


@dataclass
class HashTable:
    """Hashes of many images, one row per source, in input order.

    Attributes
    ----------
    sources : list of str
        ``str(path)``, or ``"<bytes #i>"`` / ``"<PIL image #i>"`` for in-memory items.
    phash, dhash : numpy.ndarray of uint64
        The hashes; 0 in invalid rows.
    digest : numpy.ndarray of uint64
        BLAKE2b of the file bytes (see :class:`ImageHashes`), computed **only for
        low_information rows**; 0 in every other row, which means "not
        computed", not "equal".
    low_information : numpy.ndarray of bool
        Near-flat images whose pHash is noise (False in invalid rows).
    valid : numpy.ndarray of bool
        False where the image could not be read.
    errors : dict of int to str
        Row index -> reason, for every invalid row.
    orientations : OrientationHashes or None
        With dihedral matching (``hash_sources(..., dihedral=True)``): the
        hashes of each image in its canonical orientation(s). None otherwise.
    """

    sources: list[str]
    phash: NDArray[np.uint64]
    dhash: NDArray[np.uint64]
    digest: NDArray[np.uint64]
    low_information: NDArray[np.bool_]
    valid: NDArray[np.bool_]
    errors: dict[int, str] = field(default_factory=dict)
    orientations: OrientationHashes | None = None

    def __len__(self) -> int:
        return len(self.sources)

    def to_frame(self) -> pd.DataFrame:
        """Return the table as a DataFrame with hex-string hashes (missing where invalid).

        ``digest`` is missing too wherever it was not computed (rows that are not
        ``low_information``).

        Examples
        --------
        >>> from PIL import Image
        >>> from leakaudit.hashing import hash_sources
        >>> table = hash_sources([Image.new("L", (64, 64), 0)])
        >>> list(table.to_frame().columns)
        ['source', 'phash', 'dhash', 'digest', 'low_information', 'valid', 'error']
        """
        import pandas as pd

        def column(
            values: NDArray[np.uint64], present: NDArray[np.bool_] = self.valid
        ) -> list[str | None]:
            texts = hashes_to_hex(values)
            return [t if ok else None for t, ok in zip(texts, present.tolist(), strict=True)]

        frame: pd.DataFrame = pd.DataFrame(
            {
                "source": self.sources,
                "phash": column(self.phash),
                "dhash": column(self.dhash),
                "digest": column(self.digest, self.valid & self.low_information),
                "low_information": self.low_information,
                "valid": self.valid,
                "error": [self.errors.get(i) for i in range(len(self.sources))],
            }
        )
        return frame

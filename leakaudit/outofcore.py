"""Grouping beyond memory: the search shard by shard, links spilled to disk, then union-find.

:func:`spilled_group_labels` gives exactly the labels of
:func:`leakaudit.grouping.group_labels_within` (one hash, or two that must both agree), with
memory bounded by a budget instead of by the number of rows:

1. **Sharding by pigeonhole.** A pair within ``t`` bits differs in at most ``t`` of them, so of
   ``t + 1`` disjoint sets of ``h`` bits it agrees exactly on at least one. Each set makes one
   *pass*: the rows are split into ``2**h`` shards by their code on that set (a counting sort,
   streamed from the input arrays, which may be ``np.memmap``, into a record file in the spill
   directory), and every near pair of the data lies wholly inside some shard of some pass.
   ``h`` is chosen so that a shard's in-memory search fits the budget; a shard that is still too
   large (skewed data) is split once more the same way on bits not used yet (its rows agree on the
   bits above it, so its near pairs differ only in the others).
2. **Each shard is grouped in memory** by the exact engine (:func:`group_labels_within`:
   identical rows merged, the banded search with both hashes checked in the kernel, links that
   join what is already joined skipped). A shard's groups are written as *links*, each member
   to the next of its group: verified pairs (or chains of identical hashes) whose union is the
   shard's grouping. They go to ``.npy`` chunk files in the spill directory.
3. **Union-find over the spilled links**, chunk by chunk (one ``int64`` parent per row).

Exactness: every link is a verified pair or a chain of them, so no group is merged that the
threshold rule does not merge; and every near pair lies in one shard, whose grouping connects
its two rows, so no group is split.

Memory: the record file and the links live on disk; in memory are the union-find's parent
array (8 bytes per row), the labels returned (8 per row), one input chunk, and one shard's
search (about :data:`ENGINE_BYTES_PER_ROW` bytes per shard row). Disk: 24 bytes per row for one
pass's records (the file is reused pass by pass) plus 16 bytes per link (at most ``t + 1`` links
per row that belongs to a group, usually far fewer).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from leakaudit._validation import check_int
from leakaudit.grouping import connected_component_labels, group_labels_within
from leakaudit.search import as_hash_array, band_keys

__all__ = ["ENGINE_BYTES_PER_ROW", "spilled_group_labels"]

#: Peak bytes per row of the in-memory grouping of one shard, with a margin: its peak RSS over
#: the interpreter and the inputs measured 190-230 bytes per row on 1M-3M photo-like pHash+dHash
#: pairs at the default threshold (``benchmarks/bench_default_method.py``).
ENGINE_BYTES_PER_ROW = 320
_BITS = 64
_RECORD = np.dtype([("row", "<i8"), ("first", "<u8"), ("second", "<u8")])
# Links are written in files of this many pairs (16 MB).
_LINK_CHUNK = 1 << 20
# Shards are sized for 1/_AIM of the budget (see visit in spilled_group_labels).
_AIM = 4
# Shards over the budget are split again at most this many times (t + 1 passes each).
_MAX_SPLITS = 1


class _Spill:
    """The private spill directory: record files, link chunks, and their cleanup."""

    def __init__(self, parent: str | os.PathLike[str] | None) -> None:
        if parent is not None:
            parent_path = Path(parent)
            if not parent_path.is_dir():
                raise ValueError(
                    f"spill_dir must be an existing directory; got {os.fspath(parent)!r}."
                )
        # Our own subdirectory, even inside a directory the caller gave: removing it never
        # touches anything of theirs.
        self.path = Path(tempfile.mkdtemp(prefix="leakaudit-spill-", dir=parent))
        self.links: list[Path] = []
        self.buffer: list[NDArray[np.int64]] = []
        self.buffered = 0
        self.records = 0

    def record_file(self) -> Path:
        self.records += 1
        return self.path / f"records-{self.records}.npy"

    def add_links(self, links: NDArray[np.int64]) -> None:
        if links.size == 0:
            return
        self.buffer.append(links)
        self.buffered += links.shape[0]
        if self.buffered >= _LINK_CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        path = self.path / f"links-{len(self.links)}.npy"
        np.save(path, np.concatenate(self.buffer))
        self.links.append(path)
        self.buffer, self.buffered = [], 0

    def iter_links(self) -> Iterator[NDArray[np.int64]]:
        self.flush()
        for path in self.links:
            links: NDArray[np.int64] = np.load(path)
            yield links

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class _Shards:
    """One pass: the rows in order of their code on a set of bits, as a record file on disk."""

    def __init__(
        self,
        source: tuple[NDArray[np.int64] | None, NDArray[np.uint64], NDArray[np.uint64] | None],
        rows: NDArray[np.int64],
        mask: int,
        path: Path,
        chunk_rows: int,
    ) -> None:
        row_ids, first, second = source
        width = bin(mask).count("1")
        counts = np.zeros(1 << width, dtype=np.int64)
        for start in range(0, rows.size, chunk_rows):
            picked = rows[start : start + chunk_rows]
            counts += np.bincount(
                band_keys(np.asarray(first[picked]), mask).astype(np.intp), minlength=counts.size
            )
        self.ends = np.cumsum(counts)
        self.starts = self.ends - counts
        self.records = np.lib.format.open_memmap(path, mode="w+", dtype=_RECORD, shape=(rows.size,))
        cursor = self.starts.copy()
        for start in range(0, rows.size, chunk_rows):
            picked = rows[start : start + chunk_rows]
            codes = band_keys(np.asarray(first[picked]), mask).astype(np.intp)
            order = np.argsort(codes, kind="stable")
            codes = codes[order]
            picked = picked[order]
            chunk_counts = np.bincount(codes, minlength=counts.size)
            chunk_first = np.cumsum(chunk_counts) - chunk_counts
            # Each record's slot: its shard's cursor plus its rank among the chunk's rows of
            # that shard; the slots of one shard are contiguous, so writes are sequential runs.
            slots = cursor[codes] + np.arange(codes.size) - chunk_first[codes]
            block = np.empty(picked.size, dtype=_RECORD)
            block["row"] = picked if row_ids is None else row_ids[picked]
            block["first"] = first[picked]
            block["second"] = 0 if second is None else second[picked]
            self.records[slots] = block
            cursor += chunk_counts
        self.records.flush()

    def sizes(self) -> NDArray[np.int64]:
        sizes: NDArray[np.int64] = self.ends - self.starts
        return sizes

    def shard(self, code: int) -> NDArray[np.void]:
        part: NDArray[np.void] = self.records[self.starts[code] : self.ends[code]]
        return part


def _bit_sets(free: list[int], count: int, width: int) -> list[int]:
    """``count`` disjoint masks of ``width`` bits from ``free``, each spread over the hash."""
    masks = []
    for k in range(count):
        masks.append(sum(1 << bit for bit in free[k::count][:width]))
    return masks


def _group_links(
    rows: NDArray[np.int64],
    first: NDArray[np.uint64],
    second: NDArray[np.uint64] | None,
    threshold: int,
    second_threshold: int | None,
) -> NDArray[np.int64]:
    """Group one shard in memory; return its groups as links, each member to the next."""
    labels = group_labels_within(first, threshold, second=second, second_threshold=second_threshold)
    order = np.argsort(labels, kind="stable")
    same = labels[order[1:]] == labels[order[:-1]]
    if not same.any():
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack((rows[order[:-1][same]], rows[order[1:][same]]), axis=1)


def spilled_group_labels(
    hashes: NDArray[np.uint64],
    threshold: int,
    *,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    valid: NDArray[np.bool_] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    memory_bytes: int = 1 << 30,
    chunk_rows: int = 1 << 20,
) -> NDArray[np.int64]:
    """Group rows linked by hashes within ``threshold`` bits, with bounded memory.

    The same labels as :func:`leakaudit.grouping.group_labels_within`, computed shard by shard
    with the links spilled to disk (see the module docstring), so that the hashes may be
    memory-mapped files larger than memory.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit hash per row; an ``np.memmap`` is read in chunks, never loaded whole.
    threshold : int
        Largest Hamming distance (inclusive) of a link, in ``[0, 64]``.
    second : ndarray of uint64, shape (n,), optional
        A second hash that linked rows must also agree on (``"phash+dhash"``).
    second_threshold : int, optional
        Largest distance on ``second``; required with it.
    valid : ndarray of bool, shape (n,), optional
        Rows to link; the others are singletons.
    spill_dir : path-like, optional
        An existing directory to spill into; a private subdirectory is made there and removed
        at the end, even on error. Default: one in the system's temporary directory.
    memory_bytes : int, default 1 GiB
        Memory the shards' in-memory searches may use (the union-find's 16 bytes per row come
        on top). Smaller budgets mean more, smaller shards: slower, never less exact.
    chunk_rows : int, default 1_048_576
        Rows read from the inputs at a time.

    Returns
    -------
    ndarray of int64, shape (n,)
        Group labels ``0..g-1`` in order of first appearance.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b1111_0000, 0b0011, 0b0111, 0b0000], dtype=np.uint64)
    >>> spilled_group_labels(hashes, 2, memory_bytes=1).tolist()
    [0, 1, 0, 0, 0]
    """
    first = as_hash_array(hashes)
    t = check_int("threshold", threshold, 0, _BITS)
    n = first.size
    other: NDArray[np.uint64] | None = None
    t2: int | None = None
    if second is not None:
        other = as_hash_array(second, name="second")
        if other.shape != first.shape:
            raise ValueError(
                f"second must have one hash per row (length {n}); got length {other.size}."
            )
        t2 = check_int("second_threshold", second_threshold, 0, _BITS)
    budget = check_int("memory_bytes", memory_bytes, 1)
    chunk = check_int("chunk_rows", chunk_rows, 1)
    if valid is not None:
        mask = np.asarray(valid)
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise TypeError(
                f"valid must be a boolean array of shape ({n},); "
                f"got a {mask.dtype} array of shape {mask.shape}."
            )
        rows = np.flatnonzero(mask).astype(np.int64)
    else:
        rows = np.arange(n, dtype=np.int64)
    target = max(2, budget // ENGINE_BYTES_PER_ROW)

    # Shard on the hash with the smaller threshold: fewer passes (one per threshold + 1).
    by, by_t, then, then_t = first, t, other, t2
    if other is not None and t2 is not None and t2 < t:
        by, by_t, then, then_t = other, t2, first, t

    spill = _Spill(spill_dir)
    try:

        def visit(
            source: tuple[NDArray[np.int64] | None, NDArray[np.uint64], NDArray[np.uint64] | None],
            picked: NDArray[np.int64],
            free: list[int],
            depth: int,
        ) -> None:
            row_ids, values, extra = source
            sets = len(free) // (by_t + 1)
            if picked.size <= target or sets == 0 or depth > _MAX_SPLITS:
                global_rows = picked if row_ids is None else np.asarray(row_ids[picked])
                links = _group_links(
                    global_rows,
                    np.asarray(values[picked]),
                    None if extra is None else np.asarray(extra[picked]),
                    by_t,
                    then_t,
                )
                spill.add_links(links)
                return
            # Aim at a quarter of the budget: shards of skewed data vary in size, and one over
            # the budget is split again in t + 1 more passes.
            width = min(sets, max(1, math.ceil(math.log2(_AIM * picked.size / target))))
            masks = _bit_sets(free, by_t + 1, width)
            for mask in masks:
                path = spill.record_file()
                shards = _Shards(source, picked, mask, path, chunk)
                remaining = [bit for bit in free if not mask >> bit & 1]
                records = shards.records
                for code in np.flatnonzero(shards.sizes() >= 2).tolist():
                    part = shards.shard(code)
                    size = part.shape[0]
                    # A shard is split again only while that can still shrink it: rows that
                    # agree on every bit (copies) would otherwise be re-split without end, each
                    # level costing t + 1 passes.
                    stuck = size * 2 > picked.size
                    if size <= target or stuck or depth >= _MAX_SPLITS:
                        links = _group_links(
                            np.asarray(part["row"]),
                            np.asarray(part["first"]),
                            None if extra is None else np.asarray(part["second"]),
                            by_t,
                            then_t,
                        )
                        spill.add_links(links)
                    else:
                        # Still too large (skewed data): split it again on bits not used yet.
                        inner = (
                            part["row"],
                            part["first"],
                            None if extra is None else part["second"],
                        )
                        visit(inner, np.arange(size, dtype=np.int64), remaining, depth + 1)
                # One pass's records at a time on disk.
                del records, shards
                path.unlink()

        visit((None, by, then), rows, list(range(_BITS)), 0)
        return connected_component_labels(
            n, spill.iter_links(), batch_edges=max(1 << 16, min(_LINK_CHUNK, budget // 32))
        )
    finally:
        spill.remove()

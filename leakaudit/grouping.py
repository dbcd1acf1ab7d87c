"""Group rows linked by chains of near pairs (union-find), and measure each group's spread.

The union-find is vectorised: each chunk of edges is merged into a persistent ``parent`` array by
repeatedly hooking the larger of the two roots onto the smaller (``np.minimum.at``, so when several
edges hook the same root the smallest target wins) and pointer jumping until the hooked roots point
straight at their final root. Every pointer goes from a larger index to a smaller one, so no cycle
can form, and each component's root is its smallest row, which makes the final labels come out in
order of first appearance for free.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._memory import return_freed_memory
from leakaudit._validation import check_int, describe
from leakaudit.hashing import popcount64
from leakaudit.search import as_hash_array, iter_linking_pairs, iter_pairs_within

__all__ = [
    "GroupSpread",
    "UnionFindForest",
    "connected_component_labels",
    "distinct_hash_pairs",
    "exact_key_edges",
    "fuzzy_edges",
    "group_labels_within",
    "group_spread",
    "link_labels",
    "linking_pairs_kept_apart",
    "merge_group_labels",
]

# Edges are merged in batches of at least this many (or at least the number of nodes), so that the
# O(n) final compression work per batch stays small next to the edges themselves.
_MIN_BATCH_EDGES = 1 << 22
# While grouping, merges pay off early: the search skips buckets that are already one component.
_LINKING_BATCH_EDGES = 1 << 20


class UnionFindForest:
    """A union-find forest over ``0..n-1`` stored as one ``parent`` array."""

    def __init__(self, n: int, *, batch: int | None = None) -> None:
        self.parent = np.arange(n, dtype=np.int64)
        self.pending: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
        self.pending_count = 0
        self.batch = batch if batch is not None else max(_MIN_BATCH_EDGES, n)
        self.version = 0  # bumped on every merge; the search watches it

    def roots(self) -> NDArray[np.int64]:
        """Each node's root; the forest is kept flat, so this is the parent array itself."""
        return self.parent

    def sync(self) -> None:
        """Merge the pending edges now (the search prunes with what is merged)."""
        self._merge_pending()

    def add(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> None:
        self.pending.append((a, b))
        self.pending_count += a.size
        if self.pending_count >= self.batch:
            self._merge_pending()

    def _merge_pending(self) -> None:
        if not self.pending:
            return
        a = np.concatenate([p[0] for p in self.pending])
        b = np.concatenate([p[1] for p in self.pending])
        self.pending, self.pending_count = [], 0
        self._union(a, b)
        self.version += 1

    def _find(self, nodes: NDArray[np.int64]) -> NDArray[np.int64]:
        parent = self.parent
        root = parent[nodes]
        while True:
            up = parent[root]
            if np.array_equal(up, root):
                return root
            root = up

    def _union(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> None:
        parent = self.parent
        a = self._find(a)
        b = self._find(b)
        while True:
            differ = a != b
            if not differ.any():
                break
            low = np.minimum(a[differ], b[differ])
            high = np.maximum(a[differ], b[differ])
            # Both ends are roots; hook the larger onto the smaller. When one root is hooked by
            # several edges, the smallest target wins; the other edges are retried next round.
            np.minimum.at(parent, high, low)
            # Hooked roots can form chains (a root hooked onto a root hooked in the same round);
            # pointer jumping on them alone (every chain member is a hooked root) flattens a chain
            # of length L in log2(L) passes.
            hooked = high
            while True:
                up = parent[parent[hooked]]
                if np.array_equal(up, parent[hooked]):
                    break
                parent[hooked] = up
            a = parent[low]
            b = parent[high]
        # Flatten the whole forest so the next batch's roots are one lookup away.
        self._compress()

    def _compress(self) -> None:
        parent = self.parent
        while True:
            up = parent[parent]
            if np.array_equal(up, parent):
                return
            parent[:] = up

    def labels(self) -> NDArray[np.int64]:
        """Compact component labels in order of first appearance (roots are component minima)."""
        self._merge_pending()
        self._compress()
        parent = self.parent
        is_root = parent == np.arange(parent.size)
        label_of_root = np.cumsum(is_root) - 1
        return label_of_root[parent].astype(np.int64)


def connected_component_labels(
    n: int, edge_chunks: Iterable[NDArray[np.int64]], *, batch_edges: int | None = None
) -> NDArray[np.int64]:
    """Label the connected components of a graph on ``n`` nodes given as streamed edge chunks.

    A vectorised union-find: memory is one ``int64`` per node plus one batch of edges, so the edges
    can come from a generator and need never exist all at once.

    Parameters
    ----------
    n : int
        Number of nodes, ``0..n-1``.
    edge_chunks : iterable of ndarray of int64, shape (k, 2)
        Edges, in any order and direction; repeats and self-loops are allowed.
    batch_edges : int, optional
        Edges held before each merge; default ``max(4_194_304, n)``. Smaller bounds memory
        (16 bytes per held edge) at the cost of more merges.

    Returns
    -------
    ndarray of int64, shape (n,)
        Component labels ``0..g-1`` in order of first appearance: node 0 gets 0, the next node not
        in component 0 gets 1, and so on.

    Examples
    --------
    >>> import numpy as np
    >>> edges = [np.array([[3, 1], [4, 5]]), np.array([[5, 2]])]
    >>> connected_component_labels(6, edges).tolist()
    [0, 1, 2, 1, 2, 2]
    """
    size = check_int("n", n, 0)
    batch = None if batch_edges is None else check_int("batch_edges", batch_edges, 1)
    forest = UnionFindForest(size, batch=batch)
    for chunk in edge_chunks:
        edges = np.asarray(chunk)
        if edges.size == 0:
            continue
        if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "ui":
            raise TypeError(
                "edge_chunks must hold integer arrays of shape (k, 2); "
                f"got a {edges.dtype} array of shape {edges.shape}."
            )
        if int(edges.min()) < 0 or int(edges.max()) >= size:
            raise ValueError(
                f"edge_chunks must hold node ids in [0, {size - 1}]; "
                f"got ids from {int(edges.min())} to {int(edges.max())}."
            )
        edges = edges.astype(np.int64, copy=False)
        forest.add(edges[:, 0].copy(), edges[:, 1].copy())
    return forest.labels()


def linking_pairs_kept_apart(
    pairs: NDArray[np.int64], apart: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Which pairs link, taken in order, when the rows of each ``apart`` pair stay in two groups.

    A union-find that takes ``pairs`` one by one (put the strongest first): a pair links
    when its two rows are already in one group, or when joining their groups puts no
    ``apart`` pair into one group; otherwise it is skipped. Verification uses it to keep
    two images that were seen to differ (an icon and the same icon with another badge)
    in separate groups, however many ambiguous copies verify against both.

    Parameters
    ----------
    pairs : numpy.ndarray of int64, shape (k, 2)
        Row pairs in the order they are to be linked.
    apart : numpy.ndarray of int64, shape (m, 2)
        Row pairs that must end in different groups (a row paired with itself is ignored).

    Returns
    -------
    numpy.ndarray of bool, shape (k,)
        True for the pairs that link. The groups are the connected components of the
        pairs marked True.

    Examples
    --------
    A chain 0 - 1 - 2 with 0 and 2 kept apart: the first pair links, the second would
    join 0 and 2, so it does not.

    >>> import numpy as np
    >>> linking_pairs_kept_apart(np.array([[0, 1], [1, 2], [2, 3]]), np.array([[0, 2]])).tolist()
    [True, False, True]
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    apart = np.asarray(apart, dtype=np.int64).reshape(-1, 2)
    apart = apart[apart[:, 0] != apart[:, 1]]
    if not len(apart) or not len(pairs):
        return np.ones(len(pairs), dtype=bool)
    # Only rows that appear somewhere matter: number them 0..m-1.
    nodes, inverse = np.unique(np.concatenate([pairs.ravel(), apart.ravel()]), return_inverse=True)
    local_pairs = inverse[: pairs.size].reshape(-1, 2).tolist()
    partners: dict[int, set[int]] = {}
    for a, b in inverse[pairs.size :].reshape(-1, 2).tolist():
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    parent = list(range(len(nodes)))
    size = [1] * len(nodes)
    # Per root, the rows of its group that have partners to keep away from.
    marked: dict[int, list[int]] = {row: [row] for row in partners}

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    kept = np.zeros(len(pairs), dtype=bool)
    for index, (a, b) in enumerate(local_pairs):
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            first, second = marked.get(root_a, []), marked.get(root_b, [])
            # Look from the group with fewer marked rows into the other one.
            if len(first) > len(second):
                first, other = second, root_a
            else:
                other = root_b
            if any(find(y) == other for x in first for y in partners[x]):
                continue
            if size[root_a] > size[root_b]:
                root_a, root_b = root_b, root_a
            parent[root_a] = root_b
            size[root_b] += size[root_a]
            moved = marked.pop(root_a, None)
            if moved:
                marked.setdefault(root_b, []).extend(moved)
        kept[index] = True
    return kept


def _check_mask(name: str, mask: object, n: int) -> NDArray[np.bool_]:
    array = np.asarray(mask)
    if array.dtype != np.bool_ or array.shape != (n,):
        raise TypeError(
            f"{name} must be a boolean array of shape ({n},); "
            f"got a {array.dtype} array of shape {array.shape}."
        )
    return array


def _first_appearance(ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """Relabel arbitrary ids as ``0..g-1`` in order of first appearance."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    n = ids.size
    low, high = int(ids.min()), int(ids.max())
    if low >= 0 and high < 4 * n:
        # Small ids (grouping's are below 2n): each id's first row, without a sort.
        first_row = np.full(high + 1, n, dtype=np.int64)
        np.minimum.at(first_row, ids, np.arange(n, dtype=np.int64))
        is_first = first_row[ids] == np.arange(n)
        new = np.empty(high + 1, dtype=np.int64)
        new[ids[is_first]] = np.arange(int(np.count_nonzero(is_first)), dtype=np.int64)
        labels: NDArray[np.int64] = new[ids]
        return labels
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def group_labels_within(
    hashes: NDArray[np.uint64],
    threshold: int,
    *,
    valid: NDArray[np.bool_] | None = None,
    linkable: NDArray[np.bool_] | None = None,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
) -> NDArray[np.int64]:
    """Group rows linked, directly or through a chain, by hashes within ``threshold`` bits.

    Grouping is transitive: if A is within the threshold of B and B of C, all three share a group
    even when A and C are further apart. Identical hashes are merged directly; near pairs are
    streamed from the exact index of :mod:`leakaudit.search` into a vectorised union-find, so the
    pairs (which can number tens of millions on real data) are never all held in memory.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit perceptual hash per row.
    threshold : int
        Largest Hamming distance (inclusive) of a direct link, in ``[0, 64]``.
    valid : ndarray of bool, shape (n,), optional
        Rows whose hash is meaningless (unreadable image) are ``False``; each becomes a singleton.
    linkable : ndarray of bool, shape (n,), optional
        Rows that must take part in no hash link, not even with an identical hash (e.g. blank
        images, whose hashes collide by construction); each becomes a singleton here, and the
        caller links them by other means (say, a byte hash).
    second : ndarray of uint64, shape (n,), optional
        A second hash per row (``"phash+dhash"``): a pair links only when it also lies within
        ``second_threshold`` bits on it. Rows are then merged directly when both hashes are
        identical, and the search checks both hashes before a pair leaves it.
    second_threshold : int, optional
        Largest distance on ``second``, in ``[0, 64]``; required with ``second``.

    Returns
    -------
    ndarray of int64, shape (n,)
        Group labels ``0..g-1`` in order of first appearance.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b1111_0000, 0b0011, 0b0111, 0b0000], dtype=np.uint64)
    >>> group_labels_within(hashes, 2).tolist()
    [0, 1, 0, 0, 0]
    >>> group_labels_within(hashes, 2, valid=np.array([True, True, False, True, True])).tolist()
    [0, 1, 2, 3, 0]
    >>> dhashes = np.array([0b0000, 0, 0b1111, 0b0011, 0b0000], dtype=np.uint64)
    >>> group_labels_within(hashes, 2, second=dhashes, second_threshold=2).tolist()
    [0, 1, 2, 2, 0]
    """
    h = as_hash_array(hashes)
    t = check_int("threshold", threshold, 0, 64)
    n = h.size
    other = None
    t2 = None
    if second is not None:
        other = as_hash_array(second, name="second")
        if other.shape != h.shape:
            raise ValueError(
                f"second must have one hash per row (length {n}); got length {other.size}."
            )
        t2 = check_int("second_threshold", second_threshold, 0, 64)
    active = np.ones(n, dtype=np.bool_)
    if valid is not None:
        active &= _check_mask("valid", valid, n)
    if linkable is not None:
        active &= _check_mask("linkable", linkable, n)
    # Every row searched (the usual case): the inputs as they are, not copies of them.
    rows: NDArray[np.int64] | slice = slice(None) if active.all() else np.flatnonzero(active)
    unique_second = None
    if other is None:
        unique, inverse = np.unique(h[rows], return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        unique, unique_second, inverse = distinct_hash_pairs(h[rows], other[rows])
    # Small batches: each merge lets the search skip more buckets that are already one group.
    forest = UnionFindForest(unique.size, batch=_LINKING_BATCH_EDGES)
    for a, b in iter_linking_pairs(unique, t, forest, second=unique_second, second_threshold=t2):
        forest.add(a, b)
    distinct = unique.size
    del unique, unique_second
    component = np.empty(n, dtype=np.int64)
    unique_labels = forest.labels()
    del forest
    return_freed_memory()  # what the search freed, before the caller's next allocations
    component[rows] = unique_labels[inverse]
    del inverse
    outside = np.flatnonzero(~active)
    component[outside] = distinct + np.arange(outside.size)
    return _first_appearance(component)


def distinct_hash_pairs(
    first: NDArray[np.uint64], second: NDArray[np.uint64]
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.int64]]:
    """Return the distinct ``(first, second)`` pairs and each row's index among them.

    Pairs come out sorted by ``first``, then ``second``. Like ``np.unique(...,
    return_inverse=True)`` over 128-bit values, but only the runs of equal ``first`` values
    (copies and re-encodes: a small share of real rows) are sorted a second time.

    Examples
    --------
    >>> a = np.array([5, 3, 5, 5], dtype=np.uint64)
    >>> b = np.array([1, 2, 0, 1], dtype=np.uint64)
    >>> [x.tolist() for x in distinct_hash_pairs(a, b)]
    [[3, 5, 5], [2, 0, 1], [2, 0, 1, 2]]
    """
    n = first.size
    if n == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty.copy(), np.zeros(0, dtype=np.int64)
    order = np.argsort(first, kind="stable")
    sorted_first = first[order]
    repeated = np.empty(n, dtype=np.bool_)
    repeated[0] = False
    np.equal(sorted_first[1:], sorted_first[:-1], out=repeated[1:])
    if repeated.any():
        # Positions inside runs of one first value: sort them by second value, run by run.
        in_run = repeated.copy()
        in_run[:-1] |= repeated[1:]
        runs = np.flatnonzero(in_run)
        run_id = np.cumsum(~repeated[runs])
        by_second = np.lexsort((second[order[runs]], run_id))
        order[runs] = order[runs[by_second]]
        del in_run, runs, run_id, by_second
    sorted_second = second[order]
    new = np.empty(n, dtype=np.bool_)
    new[0] = True
    np.not_equal(sorted_first[1:], sorted_first[:-1], out=new[1:])
    new[1:] |= sorted_second[1:] != sorted_second[:-1]
    del repeated
    index = np.cumsum(new) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = index
    del index, order
    return sorted_first[new], sorted_second[new], inverse


def _shared_code_edges(
    codes: NDArray[np.int64], eligible: NDArray[np.bool_]
) -> Iterator[NDArray[np.int64]]:
    """Yield edges chaining together eligible rows that share a code (codes < 0 never link)."""
    codes = np.where(eligible, codes, -1)
    rows = np.flatnonzero(codes >= 0)
    if rows.size < 2:
        return
    order = rows[np.argsort(codes[rows], kind="stable")]
    same = codes[order[1:]] == codes[order[:-1]]
    if same.any():
        yield np.stack([order[:-1][same], order[1:][same]], axis=1).astype(np.int64)


def _exact_key_edges(
    keys: Sequence[Any] | NDArray[Any], eligible: NDArray[np.bool_]
) -> Iterator[NDArray[np.int64]]:
    """Yield edges chaining together eligible rows that share a (non-missing) key."""
    codes, _ = pd.factorize(pd.Series(list(keys), dtype=object), use_na_sentinel=True)
    yield from _shared_code_edges(codes.astype(np.int64), eligible)


def exact_key_edges(
    keys: Sequence[Any] | NDArray[Any], eligible: NDArray[np.bool_]
) -> Iterator[NDArray[np.int64]]:
    """Edges joining the ``eligible`` rows that share a non-missing key (byte copies)."""
    return _exact_key_edges(keys, eligible)


def fuzzy_edges(
    values: NDArray[np.uint64],
    threshold: int,
    linkable: NDArray[np.bool_],
    *,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    owner: NDArray[np.int64] | None = None,
    limits: NDArray[np.int64] | None = None,
) -> Iterator[NDArray[np.int64]]:
    """Yield row pairs whose hashes lie within ``threshold`` among ``linkable`` rows.

    With ``second`` given, a pair must also lie within ``second_threshold`` on
    that second hash (both hashes agreeing).

    ``owner`` makes ``values`` (and ``second``) *entries*: several hashes per
    row (its orientations, for dihedral matching), entry ``k`` belonging to row
    ``owner[k]``; two rows link when any entry of one is within reach of any
    entry of the other. ``limits`` gives each row its own largest distance: a
    pair links when within the smaller of its two rows' limits, on both hashes
    (``threshold`` must then be at least the largest limit).
    """
    entry_rows = owner if owner is not None else np.arange(len(values), dtype=np.int64)
    entries = np.flatnonzero(linkable[entry_rows])
    if entries.size < 2:
        return
    for chunk in iter_pairs_within(values[entries], threshold):
        pairs = entries[chunk]
        rows = entry_rows[pairs]
        keep = rows[:, 0] != rows[:, 1]
        if limits is not None:
            limit = np.minimum(limits[rows[:, 0]], limits[rows[:, 1]])
            keep &= popcount64(values[pairs[:, 0]] ^ values[pairs[:, 1]]) <= limit
            if second is not None:
                keep &= popcount64(second[pairs[:, 0]] ^ second[pairs[:, 1]]) <= limit
        elif second is not None and second_threshold is not None:
            keep &= popcount64(second[pairs[:, 0]] ^ second[pairs[:, 1]]) <= second_threshold
        if keep.any():
            yield rows[keep]


def link_labels(
    values: NDArray[np.uint64],
    valid: NDArray[np.bool_],
    threshold: int,
    *,
    low_information: NDArray[np.bool_] | None = None,
    exact_keys: Sequence[Any] | NDArray[Any] | None = None,
    second: NDArray[np.uint64] | None = None,
    second_threshold: int | None = None,
    orientations: tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64] | None]
    | None = None,
    limits: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """Group labels under the linking policy, from arrays: the one linking engine.

    Two valid rows link when their hashes are within ``threshold`` bits (and,
    with ``second``, within ``second_threshold`` on that second hash too);
    groups are the transitive closure. Low-information rows link only to
    low-information rows with an equal ``exact_keys`` value (their byte
    digest), never by distance.

    Parameters
    ----------
    values : numpy.ndarray of uint64
        One hash per row.
    valid : numpy.ndarray of bool
        Rows with a hash; the others are singletons.
    threshold : int
        Largest distance that links (at least the largest of ``limits``).
    low_information : numpy.ndarray of bool, optional
        Rows whose hash carries no meaning (blank, near-flat).
    exact_keys : array-like, optional
        The exact-copy key of each row (missing values never link); default
        ``values``.
    second, second_threshold
        A second hash both must agree on (``"phash+dhash"``).
    orientations : tuple, optional
        ``(owner, values, second)`` of the rows' orientation entries
        (dihedral matching, :class:`~leakaudit.hashing.OrientationHashes`),
        searched instead of ``values``/``second``.
    limits : numpy.ndarray of int, optional
        Per-row thresholds: a pair links within the smaller of its two rows'.

    Returns
    -------
    numpy.ndarray of int64
        Compact group ids, numbered in order of first appearance.

    Examples
    --------
    >>> values = np.array([0, 1, 0xFF, 0xFF], dtype=np.uint64)
    >>> link_labels(values, np.ones(4, dtype=bool), 2).tolist()
    [0, 0, 1, 1]
    >>> low = np.array([False, False, True, True])
    >>> link_labels(values, np.ones(4, dtype=bool), 2, low_information=low,
    ...             exact_keys=["d1", "d1", "d2", "d3"]).tolist()
    [0, 0, 1, 2]
    """
    n = len(values)
    valid = np.asarray(valid, dtype=bool)
    low = (
        np.zeros(n, dtype=bool)
        if low_information is None
        else np.asarray(low_information, dtype=bool) & valid
    )
    linkable = valid & ~low

    def fuzzy_labels() -> NDArray[np.int64]:
        both = second is not None and second_threshold is not None
        return group_labels_within(
            values,
            threshold,
            valid=valid,
            linkable=linkable,
            second=second if both else None,
            second_threshold=second_threshold if both else None,
        )

    if orientations is None and limits is None and not low.any():
        # The grouping engine's labels are already the answer (compact, in order of first
        # appearance, rows that cannot link alone): no second union-find over all rows.
        return fuzzy_labels()

    def edges() -> Iterator[NDArray[np.int64]]:
        if orientations is not None or limits is not None:
            owner, entry_values, entry_second = (
                orientations if orientations is not None else (None, values, second)
            )
            yield from fuzzy_edges(
                entry_values,
                threshold,
                linkable,
                second=entry_second,
                second_threshold=second_threshold,
                owner=owner,
                limits=limits,
            )
        else:
            # The grouping engine merges identical hashes directly, checks the second hash
            # (if any) inside the search, and lets the search skip buckets already joined:
            # far cheaper than streaming every pair. (A second hash without its threshold
            # constrains nothing, as in fuzzy_edges.)
            yield from _shared_code_edges(fuzzy_labels(), linkable)
        if low.any():
            # Exact copies of a blank image are still copies; two different
            # blank images are not evidence of anything.
            keys = values if exact_keys is None else exact_keys
            yield from _exact_key_edges(keys, low)

    return connected_component_labels(n, edges())


def merge_group_labels(
    labels: NDArray[np.int64], extra_edges: Iterable[NDArray[np.int64]]
) -> NDArray[np.int64]:
    """Join groups linked by ``extra_edges`` (pairs of rows) to the groups in ``labels``.

    Used by the embedding stage: its pairs are unioned with the hash groups,
    transitively. The result is compact and numbered in order of first
    appearance, like :func:`find_duplicate_groups`'s ``group_id``.

    Examples
    --------
    >>> merge_group_labels(np.array([0, 0, 1, 2]), [np.array([[1, 3]])]).tolist()
    [0, 0, 1, 0]
    """
    codes = np.asarray(labels, dtype=np.int64)

    def edges() -> Iterator[NDArray[np.int64]]:
        yield from _shared_code_edges(codes, np.ones(len(codes), dtype=bool))
        for chunk in extra_edges:
            pairs = np.asarray(chunk, dtype=np.int64).reshape(-1, 2)
            if pairs.size:
                yield pairs

    return connected_component_labels(len(codes), edges())


@dataclass(frozen=True)
class GroupSpread:
    """One row of :func:`group_spread`: how far apart the members of one group are.

    Attributes
    ----------
    group_id : int
        The group label.
    n_members : int
        Rows in the group.
    max_distance : int
        Largest Hamming distance between two members (over a sample when ``sampled``); because
        grouping is transitive this can exceed the linking threshold, which is worth reviewing.
    sampled : bool
        Whether the group had more than ``max_members`` rows, so ``max_distance`` is the largest
        distance within a random sample of them (a lower bound).
    """

    group_id: int
    n_members: int
    max_distance: int
    sampled: bool

    @classmethod
    def columns(cls) -> list[str]:
        """Return the column names of :func:`group_spread`'s frame, in order."""
        return [field.name for field in fields(cls)]


# Pairwise-distance blocks of at most this many elements (uint64 xor, then uint8 counts).
_SPREAD_BLOCK = 1 << 22


def _max_pairwise(members: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Largest pairwise Hamming distance in each row of a ``(g, s)`` matrix of hashes."""
    g, s = members.shape
    result = np.empty(g, dtype=np.int64)
    step = max(1, _SPREAD_BLOCK // (s * s))
    for g0 in range(0, g, step):
        block = members[g0 : g0 + step]
        distance = popcount64(block[:, :, None] ^ block[:, None, :])
        result[g0 : g0 + step] = distance.reshape(block.shape[0], -1).max(axis=1)
    return result


def group_spread(
    hashes: NDArray[np.uint64],
    labels: NDArray[np.int64],
    *,
    max_members: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """Return the largest pairwise distance within each group of two or more rows.

    Exact for groups of up to ``max_members`` rows; larger groups are measured on a random sample
    of ``max_members`` rows (a lower bound, flagged ``sampled``), which keeps the cost linear.

    Parameters
    ----------
    hashes : ndarray of uint64, shape (n,)
        One 64-bit perceptual hash per row.
    labels : ndarray of int, shape (n,)
        Group label of each row, as from :func:`group_labels_within`.
    max_members : int, default 200
        Largest group measured exactly; at least 2.
    seed : int, default 0
        Seed of the sampling of larger groups.

    Returns
    -------
    pandas.DataFrame
        Columns ``group_id``, ``n_members``, ``max_distance`` (int64) and ``sampled`` (bool), one
        row per multi-member group, sorted by ``group_id``.

    Examples
    --------
    >>> import numpy as np
    >>> hashes = np.array([0b0000, 0b1111_0000, 0b0011, 0b0111, 0b0000], dtype=np.uint64)
    >>> labels = group_labels_within(hashes, 2)
    >>> group_spread(hashes, labels)
       group_id  n_members  max_distance  sampled
    0         0          4             3    False
    """
    h = as_hash_array(hashes)
    limit = check_int("max_members", max_members, 2)
    random_seed = check_int("seed", seed, 0)
    group = np.asarray(labels)
    if group.shape != h.shape or (group.size and group.dtype.kind not in "ui"):
        raise TypeError(
            f"labels must be an integer array of shape {h.shape}; got {describe(labels)}."
        )
    ids, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    multi = np.flatnonzero(counts >= 2)
    spread = np.zeros(ids.size, dtype=np.int64)

    exact = multi[counts[multi] <= limit]
    # Groups are padded to the next power of two with copies of their last member (a copy does
    # not change the largest distance), so each size class is one dense block computation.
    size_class = 1 << np.ceil(np.log2(np.maximum(counts[exact], 2))).astype(np.int64)
    size_class = np.minimum(size_class, limit)
    for width in np.unique(size_class).tolist():
        chosen = exact[size_class == width]
        slots = np.minimum(np.arange(width)[None, :], counts[chosen][:, None] - 1)
        spread[chosen] = _max_pairwise(h[order[starts[chosen][:, None] + slots]])

    rng = np.random.default_rng(random_seed)
    large = multi[counts[multi] > limit]
    if large.size:
        picks = np.stack(
            [starts[g] + rng.choice(counts[g], size=limit, replace=False) for g in large.tolist()]
        )
        spread[large] = _max_pairwise(h[order[picks]])

    frame: pd.DataFrame = pd.DataFrame(
        {
            "group_id": ids[multi].astype(np.int64),
            "n_members": counts[multi].astype(np.int64),
            "max_distance": spread[multi],
            "sampled": counts[multi] > limit,
        },
        columns=GroupSpread.columns(),
    )
    return frame

"""Clumps of near-identical images, verified along a spanning set instead of every pair.

One photo saved again and again (re-encoded at other qualities, a little noise) makes
a clump: hundreds or thousands of images whose hashes all differ but all lie within
the candidate threshold of one another, so the candidate net proposes every pair of
them (1,000 copies: 499,500 pairs, each decoded and judged). The pairs are redundant:
once two images are in one group, judging another pair between that group's members
changes nothing. This module verifies such a clump along a spanning set:

1. **Stars.** A clump is found without comparing its members with one another: the
   rows' canonical whole-image pHash is cut into :data:`STAR_BANDS` bands, and a row in
   a band bucket of more than :data:`CLUMP_MIN_MEMBERS` rows is a possible hub. The
   hub's star is every unclaimed row of its buckets whose canonical whole-image entry
   is within the candidate threshold of the hub's on both hashes (a candidate pair of
   :func:`leakaudit._verify_candidates.candidate_pairs`, never a pair the net would
   not propose). With more than :data:`CLUMP_MIN_MEMBERS` members, each member is
   verified once against the hub (the group's representative); those it accepts
   collapse into the hub, which stands for them from then on (in the candidate
   search, the verification, the support rule, weighted by their number, and the
   tiny-photo net), as byte-identical copies do. Each bucket is read once: linear.
2. **The rest.** Members the hub rejected stay ordinary rows: every candidate pair
   among the rows that stand for themselves is verified, as for any other images.
3. **Cross edges.** Then every candidate pair between a star's collapsed members and a
   row in another group so far (:func:`leakaudit._verify_candidates.candidate_pairs_between`,
   never the pairs among the members themselves) is tried, a row against the star's
   members one after another until it joins the group or its candidate pairs to it
   are exhausted (:func:`span_verify`). A pair whose two rows are already in one group
   is never asked.

What is guaranteed: when the verifier's accept relation is what links, the groups are
the connected components of the accepted candidate pairs, exactly those that verifying
every candidate pair gives. Every candidate pair is either asked, or skipped because
its two rows were already linked by accepted pairs (a redundant edge inside a
connected group: a pair inside a star, between two accepted members). Only the rules
judged on the whole verified graph see less inside a star: the support rule counts the
hub for its members (as for identical copies), and a pair of members never asked is
never seen to differ at native resolution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._evidence import COPY_KIND, EDGE_COLUMNS
from leakaudit._verify_candidates import WHOLE
from leakaudit._verify_stage import VerifiedPairs
from leakaudit.grouping import UnionFindForest
from leakaudit.hashing import popcount64

__all__ = [
    "CLUMP_MIN_MEMBERS",
    "STAR_BANDS",
    "Spanned",
    "Star",
    "collapse_stars",
    "cross_verify",
    "find_stars",
    "not_asked",
    "span_verify",
]

#: A hub's star is verified along the star (each member once against the hub) when it
#: has more than this many members; up to this size every candidate pair is verified,
#: as before. A bound on cost, not on what links (the groups are those of every pair).
#: It also keeps the support rule whole for groups this small (a star's members count
#: as its hub there). CIFAR-10's 60,000 images form no star, and their groups are
#: exactly those of the code before stars (``benchmarks/RESULTS.md``, section 35).
CLUMP_MIN_MEMBERS = 32

#: The canonical whole-image pHash is cut into this many 16-bit bands to find hubs: a
#: near-identical copy (a few bits off) shares at least one band with its original.
STAR_BANDS = 4

#: Members verified against their hub per call (the images of a call are decoded at
#: once; a batch bounds the memory, not the work).
STAR_BATCH = 512

Verifier = Callable[[NDArray[np.int64], NDArray[np.int64]], VerifiedPairs]


@dataclass(frozen=True)
class Star:
    """A hub and the rows proposed to it (candidate pairs ``(hub, member)``)."""

    hub: int
    members: NDArray[np.int64]
    distance: NDArray[np.int64]


def _whole_entries(
    n: int, owner: NDArray[np.int64], kinds: NDArray[np.int8]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Each row's first whole-image entry (its canonical orientation), and which rows have one."""
    whole = np.flatnonzero(kinds == WHOLE)
    rows, first = np.unique(owner[whole], return_index=True)
    entry = np.zeros(n, dtype=np.int64)
    entry[rows] = whole[first]
    has = np.zeros(n, dtype=bool)
    has[rows] = True
    return entry, has


def find_stars(
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    kinds: NDArray[np.int8],
    eligible: NDArray[np.bool_],
    threshold: int,
) -> list[Star]:
    """The stars of the clumps among the ``eligible`` rows (see the module's docstring).

    Parameters
    ----------
    owner, phash, dhash, kinds : numpy.ndarray
        The hash entries the candidate net searches (whole-image entries have kind
        :data:`~leakaudit._verify_candidates.WHOLE`).
    eligible : numpy.ndarray of bool, shape (n,)
        Rows that may be hubs or members (linkable rows standing for themselves).
    threshold : int
        The candidate threshold of whole-image pairs (both hashes).

    Returns
    -------
    list of Star
        Disjoint stars, each of more than :data:`CLUMP_MIN_MEMBERS` members; a member's
        ``distance`` is its pair's smallest ``max(pHash, dHash)`` distance over the two
        rows' whole-image entries, as :func:`~leakaudit._verify_candidates.candidate_pairs`
        gives it.
    """
    n = len(eligible)
    entry, has = _whole_entries(n, owner, kinds)
    rows = np.flatnonzero(np.asarray(eligible, dtype=bool) & has)
    if len(rows) <= CLUMP_MIN_MEMBERS:
        return []
    key_p, key_d = phash[entry[rows]], dhash[entry[rows]]
    # Per band: the rows (positions in ``rows``) sorted by their band value, each row's
    # bucket and each bucket's extent.
    buckets: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = []
    density = np.zeros(len(rows), dtype=np.int64)
    for band in range(STAR_BANDS):
        value = (key_p >> np.uint64(16 * band)) & np.uint64(0xFFFF)
        _, inverse, counts = np.unique(value, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        buckets.append((inverse, order, np.cumsum(counts) - counts))
        density = np.maximum(density, counts[inverse])
    claimed = np.zeros(len(rows), dtype=bool)
    done = [np.zeros(len(b[2]), dtype=bool) for b in buckets]
    stars: list[Star] = []
    whole = np.flatnonzero(kinds == WHOLE)
    for hub in np.lexsort((np.arange(len(rows)), -density)).tolist():
        if density[hub] <= CLUMP_MIN_MEMBERS:
            break
        if claimed[hub]:
            continue
        near: list[NDArray[np.int64]] = []
        for (inverse, order, start), seen in zip(buckets, done, strict=True):
            bucket = int(inverse[hub])
            if not seen[bucket]:
                seen[bucket] = True
                stop = start[bucket + 1] if bucket + 1 < len(start) else len(order)
                near.append(order[start[bucket] : stop])
        if not near:
            continue
        members = np.unique(np.concatenate(near))
        members = members[~claimed[members] & (members != hub)]
        close = (popcount64(key_p[members] ^ key_p[hub]) <= threshold) & (
            popcount64(key_d[members] ^ key_d[hub]) <= threshold
        )
        members = members[close]
        if len(members) <= CLUMP_MIN_MEMBERS:
            continue
        claimed[members] = claimed[hub] = True
        stars.append(
            Star(
                int(rows[hub]),
                rows[members],
                _whole_distance(whole, owner, phash, dhash, int(rows[hub]), rows[members], n),
            )
        )
    return stars


def _whole_distance(
    whole: NDArray[np.int64],
    owner: NDArray[np.int64],
    phash: NDArray[np.uint64],
    dhash: NDArray[np.uint64],
    hub: int,
    members: NDArray[np.int64],
    n: int,
) -> NDArray[np.int64]:
    """Each member's smallest ``max(pHash, dHash)`` distance to ``hub`` over whole entries."""
    mine = whole[owner[whole] == hub]
    theirs = whole[np.isin(owner[whole], members)]
    best = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    for entry in mine.tolist():
        far = np.maximum(
            popcount64(phash[theirs] ^ phash[entry]), popcount64(dhash[theirs] ^ dhash[entry])
        ).astype(np.int64)
        np.minimum.at(best, owner[theirs], far)
    return best[members]


@dataclass
class Spanned:
    """What :func:`span_verify` asked and found."""

    edges: list[pd.DataFrame]
    asked: int = 0
    rejected: int = 0
    unverified: int = 0
    stages: set[str] | None = None
    distinct: list[NDArray[np.int64]] | None = None
    distinct_passed: list[NDArray[np.bool_]] | None = None

    def add(self, verified: VerifiedPairs, asked: int) -> None:
        if len(verified.edges):
            self.edges.append(verified.edges)
        self.asked += asked
        self.rejected += verified.n_rejected
        self.unverified += verified.n_unverified
        self.stages = (self.stages or set()) | set(verified.stages)
        if len(verified.distinct):
            self.distinct = [*(self.distinct or []), verified.distinct]
            self.distinct_passed = [*(self.distinct_passed or []), verified.distinct_passed]

    def edge_frame(self) -> pd.DataFrame:
        """The accepted pairs as one frame (:data:`EDGE_COLUMNS` and the copy kind)."""
        if not self.edges:
            empty: pd.DataFrame = pd.DataFrame(columns=[*EDGE_COLUMNS, COPY_KIND])
            return empty
        frame: pd.DataFrame = pd.concat(self.edges, ignore_index=True)
        return frame


def span_verify(
    pairs: NDArray[np.int64],
    distance: NDArray[np.int64],
    forest: UnionFindForest,
    verify: Verifier,
    spanned: Spanned,
    *,
    batch: int = STAR_BATCH,
) -> None:
    """Verify candidate pairs along a spanning set: never a pair already linked.

    The pairs are taken in rounds, grouped by their first row (the asking row): each
    round asks, of every asking row, its next pairs whose two rows are not yet linked
    in ``forest`` (one in the first round, then twice as many each round, at most
    ``batch`` pairs a call), and links the accepted ones. A row thus tries the rows of
    another group one after another until it joins it or its candidate pairs are
    exhausted; a pair is skipped only when its rows are already linked, so the
    components are those of every accepted pair (a redundant pair inside one component
    changes none). Accepted pairs are added to ``forest`` and to ``spanned``.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    distance = np.asarray(distance, dtype=np.int64)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs, distance = pairs[order], distance[order]
    per_row = 1
    while len(pairs):
        forest.sync()
        roots = forest.roots()
        open_ = roots[pairs[:, 0]] != roots[pairs[:, 1]]
        pairs, distance = pairs[open_], distance[open_]
        if not len(pairs):
            break
        starts = np.flatnonzero(np.r_[True, pairs[1:, 0] != pairs[:-1, 0]])
        rank = np.arange(len(pairs)) - np.repeat(starts, np.diff(np.r_[starts, len(pairs)]))
        now = rank < per_row
        asked, asked_distance = pairs[now], distance[now]
        pairs, distance = pairs[~now], distance[~now]
        for begin in range(0, len(asked), batch):
            chunk = slice(begin, begin + batch)
            # Asked as the candidate net orients a pair (lower row first), so the verdict
            # is the one every pair's verification gives.
            verified = verify(np.sort(asked[chunk], axis=1), asked_distance[chunk])
            spanned.add(verified, len(asked[chunk]))
            if len(verified.edges):
                linked = verified.edges[["row_a", "row_b"]].to_numpy(dtype=np.int64)
                forest.add(linked[:, 0], linked[:, 1])
        per_row *= 2
    forest.sync()


def collapse_stars(
    stars: list[Star], n: int, verify: Verifier, spanned: Spanned
) -> NDArray[np.int64]:
    """Verify each star's members against its hub; each row's hub (itself when not collapsed).

    A member the hub accepts collapses into it; one it rejects stands for itself.
    """
    hub_of = np.arange(n, dtype=np.int64)
    if not stars:
        return hub_of
    forest = UnionFindForest(n)
    pairs = np.concatenate(
        [np.stack([np.full(len(s.members), s.hub), s.members], axis=1) for s in stars]
    )
    distance = np.concatenate([s.distance for s in stars])
    span_verify(pairs, distance, forest, verify, spanned)
    roots = forest.roots()
    for star in stars:
        joined = star.members[roots[star.members] == roots[star.hub]]
        hub_of[joined] = star.hub
    return hub_of


def cross_verify(
    stars: list[Star],
    hub_of: NDArray[np.int64],
    linked: NDArray[np.int64],
    participants: NDArray[np.bool_],
    candidates: Callable[
        [NDArray[np.bool_], NDArray[np.bool_]], tuple[NDArray[np.int64], NDArray[np.int64]]
    ],
    verify: Verifier,
    spanned: Spanned,
) -> None:
    """Every candidate pair between a star's collapsed members and a row of another group.

    Parameters
    ----------
    stars, hub_of
        :func:`find_stars`' stars and :func:`collapse_stars`' hubs.
    linked : numpy.ndarray of int64, shape (k, 2)
        The pairs that link so far (the other rows' verified edges, the stars' accepted
        pairs, byte copies).
    participants : numpy.ndarray of bool
        The rows the candidate net searches (linkable rows standing for themselves
        before the stars collapsed).
    candidates : callable
        ``candidates(queries, index)``: the candidate pairs between two disjoint masks
        of rows (:func:`leakaudit._verify_candidates.candidate_pairs_between`).
    """
    n = len(hub_of)
    forest = UnionFindForest(n)
    if len(linked):
        forest.add(linked[:, 0], linked[:, 1])
    # The members of the stars already done: their pairs with a later star's members
    # were asked (or skipped, already linked) then.
    done = np.zeros(n, dtype=bool)
    for star in stars:
        members = np.flatnonzero(hub_of == star.hub)
        members = members[members != star.hub]
        if not len(members):
            continue
        forest.sync()
        roots = forest.roots()
        index = np.zeros(n, dtype=bool)
        index[members] = True
        queries = participants & (roots != roots[star.hub]) & ~index & ~done
        done[members] = True
        if not queries.any():
            continue
        pairs, distance = candidates(queries, index)
        if not len(pairs):
            continue
        # The row outside the star asks: it tries the star's members one after another.
        asker = np.where(queries[pairs[:, 0]], pairs[:, 0], pairs[:, 1])
        other = np.where(queries[pairs[:, 0]], pairs[:, 1], pairs[:, 0])
        span_verify(np.stack([asker, other], axis=1), distance, forest, verify, spanned)


def not_asked(pairs: NDArray[np.int64], stars: list[Star]) -> NDArray[np.bool_]:
    """Which of ``pairs`` (lower row first) no star asked: each pair is asked once."""
    if not stars or not len(pairs):
        return np.ones(len(pairs), dtype=bool)
    hubs = np.concatenate([np.full(len(s.members), s.hub) for s in stars])
    members = np.concatenate([s.members for s in stars])
    asked = pd.MultiIndex.from_arrays([np.minimum(hubs, members), np.maximum(hubs, members)])
    found = pd.MultiIndex.from_arrays([pairs[:, 0], pairs[:, 1]])
    return ~np.asarray(found.isin(asked), dtype=bool)

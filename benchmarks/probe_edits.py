"""One edit per real image of the CI corpus, judged pair by pair (bench_real.verdict): accepted
counts per edit and kind, and the commonest reasons of the rejections. Usage:
``python benchmarks/probe_edits.py [N_IMAGES] [EDIT,EDIT,...]`` (RESULTS section 37)."""

import collections
import random
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
import bench_real
import real_corpus
from PIL import Image

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
edits = (
    sys.argv[2].split(",")
    if len(sys.argv) > 2
    else [
        "mirror",
        "flip",
        "rotate 90",
        "transpose",
        "grey (alpha kept)",
        "sepia",
        "channel swap",
        "channel gain",
        "shift 1-3 px",
        "pad",
        "half size",
        "JPEG q50-95",
    ]
)
loaded = real_corpus.load_corpus(N, seed=36, ci=True)
imgs = []
for im in loaded.images:
    with Image.open(im.file) as o:
        o.load()
        imgs.append((f"{im.kind}:{im.id}", o.copy()))
t = time.time()
fails = collections.Counter()
tot = collections.Counter()
reasons = collections.Counter()
rng = random.Random(1)
for edit in edits:
    for label, image in imgs:
        c = bench_real.EDITS[edit](image, rng, 0)
        if c.data is None:
            continue
        ok, why = bench_real.verdict(image, c.data)
        kind = label.split(":")[0]
        tot[edit, kind] += 1
        if not ok:
            fails[edit, kind] += 1
            reasons[edit, why.split("(")[0][:60]] += 1
for edit in edits:
    f = sum(v for (e, k), v in fails.items() if e == edit)
    n = sum(v for (e, k), v in tot.items() if e == edit)
    print(
        f"{edit:20s} {n - f}/{n} ok  ",
        {k: fails[edit, k] for (e, k) in tot if e == edit and fails[edit, k]},
    )
print("fail reasons:")
for (e, r), v in reasons.most_common(25):
    print(f"  {v:4d} {e:18s} {r}")
print(
    f"{time.time() - t:.0f}s",
    "total ok",
    sum(tot.values()) - sum(fails.values()),
    "/",
    sum(tot.values()),
)

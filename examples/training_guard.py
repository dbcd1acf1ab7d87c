"""A guard at the top of a training script: stop before training on leaked splits.

Run: python examples/training_guard.py   (exits 1 and explains, on the demo data)
"""

from __future__ import annotations

import sys
import tempfile
import warnings

import leakaudit
from leakaudit.demo import build_demo_dataset


def main() -> int:
    demo = build_demo_dataset(tempfile.mkdtemp(prefix="leakaudit-guard-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", leakaudit.UnreadableImageWarning)
        report = leakaudit.audit_splits(demo.splits, progress=False)
    worst = report.pct_leaked_by_split.max()
    if worst > 1.0:  # allow at most 1% of any split to leak
        print(report, file=sys.stderr)
        print(
            f"\nrefusing to train: up to {worst:.2f}% of a split leaks (limit 1%)", file=sys.stderr
        )
        return 1
    print("splits are clean; training ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())

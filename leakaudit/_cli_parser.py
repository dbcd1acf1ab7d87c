"""The ``leakaudit`` command line's arguments and exit codes: :func:`build_parser`, and the
option groups and value checks the subcommands share.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, NoReturn

from leakaudit import __version__
from leakaudit._cli_cache import add_cache_parser
from leakaudit._cli_impact import add_impact_parser, add_scan_predictions
from leakaudit._show import INDEX_NAME
from leakaudit._text import printable
from leakaudit.cleaning import CLEAN_POLICIES
from leakaudit.cleantree import MANIFEST_NAME, UNREADABLE_CHOICES
from leakaudit.htmlreport import MAX_GROUPS_SHOWN, MAX_MEMBERS_SHOWN
from leakaudit.policy import AUDIT_METHODS, DEFAULT_METHOD, DEFAULT_THRESHOLDS
from leakaudit.verify import VerifyOptions

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_INTERNAL_ERROR",
    "EXIT_LEAKAGE",
    "SSCD_MEASURED",
    "build_parser",
    "threshold_spec",
    "verify_spec",
]

#: What ``--sscd`` gains and costs, measured (benchmarks/RESULTS.md, section 31): the one
#: wording of these figures, quoted as it is by ``scan -h``, the README ("Tiny images") and
#: docs/cli.md (tests/test_cache_admin.py checks all three).
SSCD_MEASURED = (
    "on CIFAR-10's five dev classes, 137 of ciFAIR's 142 same-shot pairs found instead of "
    "135, and 374 flagged test images instead of 346, for about 3-5x the audit's time (SSCD "
    "127 s for 60,000 images on 2 cores, the audit 27-43 s)"
)

#: Exit codes: 1 is only ever "leakage over the --fail-on-leak limit".
EXIT_LEAKAGE = 1
EXIT_ERROR = 2
EXIT_INTERNAL_ERROR = 3
#: The shell's status for a program ended by SIGPIPE (128 + 13), which is what we return.
EXIT_BROKEN_PIPE = 141


def _fail_limit(text: str) -> tuple[float, bool]:
    """Parse ``--fail-on-leak`` (a count, or a percentage ending in %)."""
    try:
        if text.endswith("%"):
            value, is_percent = float(text[:-1]), True
        else:
            value, is_percent = float(int(text)), False
    except ValueError:
        value, is_percent = -1.0, False
    if not math.isfinite(value) or value < 0 or (is_percent and value > 100):
        raise argparse.ArgumentTypeError(
            f"must be a number of images >= 0 or a percentage in [0%, 100%]; got {text!r}"
        )
    return value, is_percent


def _show_limit(text: str) -> int | None:
    """``--show-limit``: a number of groups, or None (``0`` or ``all``) for every one."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 or 'all', got {text!r}")
    return value or None


def _threshold_rule(text: str) -> tuple[str | None, int]:
    key, _, number = text.rpartition("=")
    try:
        value = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be N or SPLIT=N / PATTERN=N with N an int in [0, 64]; got {text!r}"
        ) from None
    if not 0 <= value <= 64:
        raise argparse.ArgumentTypeError(f"must be an int in [0, 64]; got {number!r}")
    if "=" in text and not key:
        raise argparse.ArgumentTypeError(f"the split or pattern before '=' is empty in {text!r}")
    return (key if "=" in text else None), value


def _support_value(text: str) -> float:
    """``--min-support``: a share in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def verify_spec(args: argparse.Namespace) -> Any:
    """``--verify`` and ``--min-support`` as the audit functions take them."""
    if not args.verify:
        return False
    distinct = getattr(args, "distinct_pixels", None)
    tiny = getattr(args, "tiny_photos", None)
    if args.min_support is None and distinct is None and tiny is None:
        return "auto"

    defaults = VerifyOptions()
    threshold = threshold_spec(args.threshold)
    link = threshold if isinstance(threshold, int) else defaults.link_threshold
    return VerifyOptions(
        min_support=defaults.min_support if args.min_support is None else args.min_support,
        distinct_pixels=defaults.distinct_pixels if distinct is None else distinct,
        link_threshold=link,
        tiny_photos=defaults.tiny_photos if tiny is None else bool(tiny),
    )


def _add_min_support(group: Any) -> None:
    group.add_argument(
        "--tiny-photos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pair photos of at most 64 px with their nearest look-alike in another split "
        "and link those that, aligned, agree in fine detail: rescaled, shifted and re-cropped "
        "copies of CIFAR-sized images (default: on)",
    )
    group.add_argument(
        "--min-support",
        type=_support_value,
        default=None,
        metavar="SHARE",
        help="a verified pair links only when its two images share this share of the "
        "smaller of their verified neighbourhoods (look-alikes each match their own "
        "copies); 0 links every verified pair (default: 0.6)",
    )
    group.add_argument(
        "--distinct-pixels",
        type=_count_value,
        default=None,
        metavar="N",
        help="two losslessly stored graphics whose own pixels still differ strongly in at "
        "least N places (a badge, a glyph) are told apart and never grouped together; "
        "0 turns this off (default: 4)",
    )


def _count_value(text: str) -> int:
    """``--distinct-pixels``: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def threshold_spec(rules: list[tuple[str | None, int]] | None) -> int | dict[str, int] | None:
    """``--threshold`` values as audit_splits takes them (the last plain N is the default)."""
    if not rules:
        return None
    named = {key: value for key, value in rules if key is not None}
    plain = [value for key, value in rules if key is None]
    if not named:
        return plain[-1]
    if plain:
        named["*"] = plain[-1]
    return named


def _add_matching(group: Any) -> None:
    """``--hash`` and ``--threshold``: how hashes are compared (every auditing command)."""
    group.add_argument(
        "--hash",
        dest="method",
        choices=AUDIT_METHODS,
        default=DEFAULT_METHOD,
        help="hash to compare (default: %(default)s: both hashes must agree)",
    )
    group.add_argument(
        "--threshold",
        type=_threshold_rule,
        action="append",
        default=None,
        metavar="[SPLIT|PATTERN=]N",
        help="largest Hamming distance counted as a duplicate "
        f"(default per hash: {', '.join(f'{k} {v}' for k, v in DEFAULT_THRESHOLDS.items())}); "
        "repeat as SPLIT=N or PATTERN=N for per-source thresholds (e.g. --threshold test=4 "
        "--threshold 'screenshots/*=2'); a pair links within the smaller of its two images' "
        "thresholds",
    )


def _add_common(parser: argparse.ArgumentParser, *, hashes_out: bool = False) -> None:
    group = parser.add_argument_group("audit options")
    _add_matching(group)
    group.add_argument(
        "--dihedral",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also match mirrored, flipped and 90/180/270-degree rotated copies, and index "
        "crops and small rotations for verification (default: on)",
    )
    group.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify every candidate pair before it links: hashes propose, the images "
        "(decoded again in colour) decide; --no-verify links every pair within the "
        "threshold (the bare threshold rule) (default: on)",
    )
    _add_min_support(group)
    group.add_argument(
        "--decisions",
        type=Path,
        default=None,
        metavar="FILE",
        help="a reviewer's decisions (the CSV the HTML report's Save decisions button writes): "
        "a 'not a copy' pair never links, a 'copy' pair always links; images are named by "
        "the digest of their bytes, so renamed or moved files keep their decisions, and "
        "decisions whose image changed are listed, not applied (docs/review.md)",
    )
    group.add_argument(
        "--sscd",
        action="store_true",
        help="also link tiny images (shorter side <= 64 px) to their nearest image of another "
        f"split when Meta's SSCD copy-detection model scores them >= 0.75 ({SSCD_MEASURED}; "
        "--workers threads, default 2); needs Python >= 3.12 and "
        "pip install 'leakaudit-vision[sscd]'",
    )
    group.add_argument(
        "--workers", type=int, default=None, help="processes for hashing (default: all cores)"
    )
    group.add_argument(
        "--raw-orientation",
        action="store_true",
        help="hash the stored pixels, ignoring the EXIF orientation (default: hash images "
        "as they are displayed)",
    )
    group.add_argument(
        "--trim-borders",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="trim uniform borders (letterbox, pillarbox, padding, transparent margins) "
        "before hashing, so padded copies match (default: on)",
    )
    group.add_argument(
        "--no-cache",
        action="store_true",
        help="hash every file afresh; do not read or write the hash cache",
    )
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder of the hash cache (default: $LEAKAUDIT_CACHE_DIR, else the user cache "
        "folder, e.g. ~/.cache/leakaudit)",
    )
    _add_outputs(parser, hashes_out=hashes_out)


def _add_outputs(parser: argparse.ArgumentParser, *, hashes_out: bool = False) -> None:
    outputs = parser.add_argument_group("outputs")
    if hashes_out:
        outputs.add_argument(
            "--hashes-out",
            type=Path,
            default=None,
            metavar="DIR",
            help="also write the run's hashes to DIR as Parquet hash shards, which `leakaudit "
            "group DIR` groups again without decoding (DIR must be new or hold no .parquet "
            "file; needs pyarrow: pip install 'leakaudit-vision[parquet]')",
        )
    outputs.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="write the per-image table to FILE, and FILE's stem + .pairs.csv, .groups.csv, "
        ".splits.csv beside it",
    )
    outputs.add_argument(
        "--json", type=Path, metavar="FILE", help="write the report and its tables as JSON"
    )
    outputs.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write a self-contained HTML report with thumbnails (opens offline)",
    )
    outputs.add_argument(
        "--show",
        type=Path,
        metavar="DIR",
        help="save a side-by-side PNG of leaked images and their closest match in DIR, and "
        f"DIR/{INDEX_NAME} listing every leaked image (with its PNG, if drawn)",
    )
    outputs.add_argument(
        "--show-limit",
        type=_show_limit,
        default=MAX_GROUPS_SHOWN,
        metavar="N|all",
        help=f"with --show, picture the N strongest leaked groups, at most {MAX_MEMBERS_SHOWN} "
        "images of each (as the HTML report); 0 or 'all' pictures every leaked image "
        f"(default: {MAX_GROUPS_SHOWN})",
    )
    outputs.add_argument("--quiet", action="store_true", help="no progress bars or info messages")
    outputs.add_argument(
        "--fail-on-leak",
        nargs="?",
        const="0",
        default=None,
        type=_fail_limit,
        metavar="N|P%",
        help="exit 1 when more than N images of any one split (or more than P%% of any split) "
        "leak, as assert_no_leakage(max_leaked=N / max_fraction=P/100) "
        "(default when given without a value: any leak)",
    )


_SPLIT_HELP = (
    "also treat sub-folder NAME as a split; NAME=FOLDER makes ROOT/FOLDER the split NAME "
    "(--split train=trian for a misspelt trian/) (repeatable)"
)


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and a pointer to ``-h``.

    argparse's default prints the whole usage block before the message; the
    message is what the user needs, and ``-h`` gives the rest. Subcommand
    parsers inherit this class (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {printable(message)} (see '{self.prog} -h')\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``leakaudit`` command."""
    parser = _OneLineParser(
        prog="leakaudit",
        description="Find near-duplicate images leaking across train/val/test splits.",
        epilog="Exit codes: 0 no leakage (or not asked to fail), 1 leakage over the "
        "--fail-on-leak limit, 2 usage or input error, 3 internal error, 130 interrupted, "
        "141 output pipe closed (as in 'leakaudit scan ROOT | head'), 143 terminated.",
    )
    parser.add_argument("--version", action="version", version=f"leakaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    scan = sub.add_parser("scan", help="audit the split folders under ROOT")
    scan.add_argument("root", type=Path, metavar="ROOT")
    scan.add_argument(
        "--split",
        action="append",
        default=[],
        metavar="NAME[=FOLDER]",
        help=_SPLIT_HELP,
    )
    _add_common(scan, hashes_out=True)
    add_scan_predictions(scan)

    compare = sub.add_parser("compare", help="check TEST_DIR (and more) against TRAIN_DIR")
    compare.add_argument(
        "dirs", type=Path, nargs="+", metavar="DIR", help="TRAIN_DIR TEST_DIR [MORE_DIRS]"
    )
    _add_common(compare, hashes_out=True)

    group = sub.add_parser(
        "group",
        help="audit a folder of Parquet hash shards (from --hashes-out, Ray, Spark, Dask, ...)",
        description="Group the hashes in SHARDS_DIR (every *.parquet file below it, in sorted "
        "order; schema in leakaudit.shards: id, split, phash, dhash, error, optionally path) "
        "and audit the groups against their splits, without decoding any image. With "
        "--images-root DIR, candidate pairs are verified by decoding the files of the shards' "
        "'path' column that lie inside DIR (links followed; nothing outside DIR is read), and "
        "the HTML report and --show picture them; otherwise no image is read and the hashes "
        "alone decide (the report says so). Needs pyarrow: "
        "pip install 'leakaudit-vision[parquet]'.",
    )
    group.add_argument("shards", type=Path, metavar="SHARDS_DIR")
    matching = group.add_argument_group("audit options")
    _add_matching(matching)
    matching.add_argument(
        "--dihedral",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="match mirrored, flipped and rotated copies through the shards' orientation "
        "entries (default: when the shards have them)",
    )
    matching.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify candidate pairs by decoding the images again, where the shards' paths "
        "exist inside --images-root (default: on)",
    )
    matching.add_argument(
        "--images-root",
        type=Path,
        default=None,
        metavar="DIR",
        help="read image files (verification, HTML thumbnails, --show) only inside DIR; "
        "shard paths that resolve elsewhere are never opened (default: no image is read, the "
        "hashes decide)",
    )
    _add_min_support(matching)
    matching.add_argument(
        "--workers", type=int, default=None, help="threads for verification (default: all cores)"
    )
    _add_outputs(group)

    clean = sub.add_parser(
        "clean",
        help="write a leak-free copy of ROOT's split folders to --out",
        description="Audit ROOT, then write a copy of its tree to NEW_ROOT in which every "
        "leaked group sits whole in one split. ROOT is never modified. Files are hard-linked "
        "where possible (no extra disk space), else copied; a manifest CSV records every "
        "file's old and new place.",
    )
    clean.add_argument("root", type=Path, metavar="ROOT")
    clean.add_argument("--out", type=Path, required=True, metavar="NEW_ROOT")
    clean.add_argument(
        "--split", action="append", default=[], metavar="NAME[=FOLDER]", help=_SPLIT_HELP,
    )  # fmt: skip
    clean.add_argument(
        "--priority",
        default=None,
        metavar="A,B,...",
        help="split precedence, highest first: a leaked group goes whole to the highest split "
        "it touches (default: train,val,test; val also matches valid/validation/dev)",
    )
    clean.add_argument(
        "--policy",
        choices=CLEAN_POLICIES,
        default="move",
        help="move leaked images into the winning split, or drop them from the lower ones "
        "(default: %(default)s)",
    )
    clean.add_argument(
        "--manifest",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"where to write the manifest (default: NEW_ROOT/{MANIFEST_NAME})",
    )
    clean.add_argument(
        "--unreadable",
        choices=UNREADABLE_CHOICES,
        default="drop",
        help="images that cannot be decoded: drop leaves them out of the copy (ROOT keeps "
        "them; a DataLoader over NEW_ROOT never meets one), copy writes them as they are, fail "
        "exits 2 naming them before anything is written; the manifest records the choice "
        "(default: %(default)s)",
    )
    clean.add_argument(
        "--copy", action="store_true", help="always copy files instead of hard-linking them"
    )
    clean.add_argument(
        "--force",
        action="store_true",
        help="replace an existing NEW_ROOT that is an earlier leakaudit output (it has "
        f"{MANIFEST_NAME}); the old one is removed only once the new one is complete",
    )
    _add_common(clean)

    demo = sub.add_parser("demo", help="build a demo dataset with planted leaks and audit it")
    demo.add_argument(
        "dir",
        type=Path,
        nargs="?",
        default=None,
        metavar="DIR",
        help="where to write it and keep it (default: a temporary folder, removed at the end)",
    )
    _add_common(demo)

    calibrate = sub.add_parser(
        "calibrate",
        help="measure how well the audit finds copies on ROOT's own images",
        description="Sample ROOT's images (a dataset root with split folders, or any folder; "
        "scanned recursively), plant known near-duplicates of each in memory (re-encodes, "
        "resizes, a small crop, colour changes, a mirror image), run the default audit on them "
        "and print what it finds per kind of copy and the pairs of distinct images it links; "
        "then, for --no-verify, precision, recall and false pairs per hash method and bare "
        "threshold, and the threshold to pass.",
    )
    calibrate.add_argument("root", type=Path, metavar="ROOT")
    calibrate.add_argument(
        "--sample", type=int, default=200, metavar="N", help="images to sample (default: 200)"
    )
    calibrate.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    calibrate.add_argument(
        "--workers", type=int, default=None, help="processes for hashing (default: all cores)"
    )
    calibrate.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="write the bare-threshold table to FILE, and FILE's stem + .per_transform.csv, "
        ".unrelated.csv and .audit.csv (the default audit per transformation) beside it",
    )
    calibrate.add_argument("--quiet", action="store_true", help="no progress bars or info messages")

    add_impact_parser(sub)

    add_cache_parser(sub)
    sub.add_parser("env", help="print versions, for bug reports")
    return parser

"""``leakaudit cache info|clear``, and the one line each audit says about the hash cache."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from leakaudit._cache_admin import cache_info, clear_cache, size_text
from leakaudit._text import first_few, printable
from leakaudit.cache import CACHE_DIR_ENV, default_cache_dir

__all__ = ["add_cache_parser", "cache_folder", "cache_summary", "cmd_cache"]


def add_cache_parser(sub: Any) -> None:
    """The ``cache`` subcommand and its actions ``info`` and ``clear``."""
    cache = sub.add_parser(
        "cache",
        help="where the hash cache is, how big, and clearing it",
        description="The hash cache keeps every audited file's hashes (keyed by path, size "
        "and times) so a second audit decodes nothing; it grows with each folder audited. "
        f"Its folder: --cache-dir, else ${CACHE_DIR_ENV}, else the user cache folder "
        "(~/.cache/leakaudit on Linux).",
    )
    actions = cache.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    info = actions.add_parser(
        "info", help="the folder, leakaudit's files in it, their size and schema version"
    )
    clear = actions.add_parser(
        "clear",
        help="remove leakaudit's cache files (only those: nothing else in the folder)",
    )
    clear.add_argument(
        "--stale",
        action="store_true",
        help="remove only stale files: databases of earlier schemas (hashes-v4.sqlite3, ...) "
        "and damaged files set aside; the current cache stays",
    )
    for parser in (info, clear):
        parser.add_argument(
            "--cache-dir",
            type=Path,
            default=None,
            metavar="DIR",
            help=f"the cache folder (default: ${CACHE_DIR_ENV}, else the user cache folder, "
            "e.g. ~/.cache/leakaudit)",
        )


def cache_folder(cache_dir: Path | None) -> Path:
    """The folder an audit's cache lives in: ``--cache-dir``, else the default."""
    return cache_dir if cache_dir is not None else default_cache_dir()


def cache_summary(cache_dir: Path | None) -> str:
    """Where the cache is and how big, in one line (said once per audit, unless --quiet)."""
    return cache_info(cache_folder(cache_dir)).summary()


def cmd_cache(args: argparse.Namespace) -> int:
    """``leakaudit cache info`` / ``leakaudit cache clear [--stale]``."""
    folder = cache_folder(args.cache_dir)
    if args.cache_action == "info":
        print(cache_info(folder).to_text())
        return 0
    removed = clear_cache(folder, stale_only=args.stale)
    what = "stale cache file(s)" if args.stale else "cache file(s)"
    if not removed:
        print(f"No {what} of leakaudit to remove in {printable(str(folder))}.")
        return 0
    names = first_few((printable(file.path.name) for file in removed), len(removed))
    size = size_text(sum(file.size for file in removed))
    print(f"Removed {len(removed)} {what} ({size}) from {printable(str(folder))}: {names}.")
    left = cache_info(folder)
    if left.files:
        print(f"Left: {len(left.files)} file(s), {size_text(left.size)} (the current cache).")
    return 0

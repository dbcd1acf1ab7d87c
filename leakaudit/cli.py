"""The ``leakaudit`` command line.

``main(argv) -> int`` is callable from tests; exit codes: 0 no leakage (or not
asked to fail), 1 leakage over the allowed amount (``--fail-on-leak``), 2 usage
or input error, 3 internal error (a bug), 130 interrupted, 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from leakaudit import __version__
from leakaudit._cli_cache import cache_summary, cmd_cache
from leakaudit._cli_impact import cmd_impact, scan_impact, scan_predictions
from leakaudit._cli_parser import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERNAL_ERROR,
    EXIT_LEAKAGE,
    build_parser,
)
from leakaudit._cli_parser import threshold_spec as _threshold_spec
from leakaudit._cli_parser import verify_spec as _verify_spec
from leakaudit._interrupts import (
    exit_code,
    finish,
    handle_signals,
    interrupted_line,
    restore_signals,
)
from leakaudit._progress import Progress, progress_enabled
from leakaudit._show import INDEX_NAME, write_side_by_side
from leakaudit._split_names import split_folder_hints, too_few_splits
from leakaudit._text import first_few, printable
from leakaudit.audit import audit_splits, hashing_options, wants_crop_entries
from leakaudit.cache import CACHE_DIR_ENV, default_cache_dir, hash_sources_cached
from leakaudit.calibrate import MIN_CALIBRATION_IMAGES, calibrate_threshold
from leakaudit.cleaning import clean_splits
from leakaudit.cleantree import (
    MANIFEST_COLUMNS,
    MANIFEST_NAME,
    check_tree_target,
    manifest_inside,
    plan_tree,
    walk_tree,
    write_tree,
)
from leakaudit.demo import build_demo_dataset
from leakaudit.export import csv_paths, evidence_text, leak_matches, write_csv_tables, write_json
from leakaudit.frames import hash_values_from_frame
from leakaudit.htmlreport import MAX_MEMBERS_SHOWN, write_html
from leakaudit.listing import dataset_boundary, find_split_folders
from leakaudit.loading import DecodeOptions
from leakaudit.policy import DEFAULT_PRIORITY, SPLIT_ALIASES, match_priority
from leakaudit.report import LeakageReport
from leakaudit.safe_io import (
    OutputPathError,
    Protected,
    atomic_open,
    check_output_path,
    is_within,
    protected_conflict,
)
from leakaudit.shards import (
    audit_hash_shards,
    check_new_shard_folder,
    hashing_metadata,
    require_pyarrow,
    write_hash_shards,
)

__all__ = [
    "MANIFEST_COLUMNS",
    "MANIFEST_NAME",
    "SPLIT_ALIASES",
    "build_parser",
    "find_split_folders",
    "main",
    "main_entry",
]

log = logging.getLogger("leakaudit")


class UsageError(Exception):
    """A problem with the command line or its inputs (exit code 2)."""


def _check_dir(path: Path) -> Path:
    if not path.exists():
        raise UsageError(f"folder not found: {path}")
    if not path.is_dir():
        raise UsageError(f"not a folder: {path}")
    return path


def _output_files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Every file the audit outputs will write, with its option's name."""
    files: list[tuple[str, Path]] = []
    csv: Path | None = getattr(args, "csv", None)
    if csv is not None:
        files.extend(("--csv", path) for path in csv_paths(csv).values())
    for option in ("json", "html"):
        target: Path | None = getattr(args, option, None)
        if target is not None:
            files.append((f"--{option}", target))
    return files


def _check_outputs(args: argparse.Namespace, protected: Sequence[Path | Protected] = ()) -> None:
    """Fail before the (long) audit when an output is unsafe or cannot be written.

    No output may resolve inside ``protected`` (the dataset's folders and where its
    followed links lead: :func:`~leakaudit.listing.dataset_boundary`), and each
    output's folder must accept a new file.
    """
    try:
        for option, path in _output_files(args):
            check_output_path(path, option=option, protected=protected)
        for option in ("show", "cache_dir", "hashes_out"):
            folder: Path | None = getattr(args, option, None)
            if folder is not None:
                name = "--" + option.replace("_", "-")
                # A cache folder that cannot be written makes the run go uncached, with
                # one warning naming it (leakaudit.cache): only its place is checked here.
                check_output_path(
                    folder,
                    option=name,
                    protected=protected,
                    is_folder=True,
                    writable=option != "cache_dir",
                )
    except OutputPathError as error:
        raise UsageError(str(error)) from None
    if getattr(args, "cache_dir", None) is None and getattr(args, "no_cache", True) is False:
        _check_default_cache(protected)
    hashes_out: Path | None = getattr(args, "hashes_out", None)
    if hashes_out is not None:
        try:
            require_pyarrow()
            check_new_shard_folder(hashes_out, option="--hashes-out")
        except (ImportError, OSError) as error:
            raise UsageError(str(error)) from None


def _check_default_cache(protected: Sequence[Path | Protected]) -> None:
    """Refuse a default cache folder inside the dataset, as ``--cache-dir`` there is refused.

    The folder ``$LEAKAUDIT_CACHE_DIR`` or ``$XDG_CACHE_HOME`` sets is checked
    like the one ``--cache-dir`` names: the cache would write into ROOT.
    """

    folder = default_cache_dir()
    conflict = protected_conflict(folder, protected)
    if conflict is None:
        return
    source = (
        f"${CACHE_DIR_ENV}"
        if os.environ.get(CACHE_DIR_ENV)
        else "$XDG_CACHE_HOME"
        if os.path.isabs(os.environ.get("XDG_CACHE_HOME", ""))
        else "the default"
    )
    raise UsageError(
        f"the hash cache folder {printable(str(folder))} (set by {source}) must be "
        f"outside the dataset: {printable(conflict)}. Point "
        f"{source if source != 'the default' else CACHE_DIR_ENV} elsewhere, or pass "
        "--cache-dir DIR or --no-cache"
    )


def _progress(args: argparse.Namespace) -> bool | None:
    # None lets each bar decide: on for long batches on a terminal, off otherwise.
    return False if args.quiet else None


def _run_audit(
    splits: dict[str, Path], args: argparse.Namespace, *, root: Path | None = None
) -> LeakageReport:
    if getattr(args, "sscd", False):
        _require_sscd()
    cache: bool | Path = False if args.no_cache else (args.cache_dir or True)
    hashes_out: Path | None = getattr(args, "hashes_out", None)
    decode = DecodeOptions(exif_transpose=not args.raw_orientation, trim_borders=args.trim_borders)
    written: list[Path] = []
    with contextlib.ExitStack() as stack:
        if hashes_out is not None and cache is False:
            # The shards need the run's whole hashes (the crop and rotation entries too), which
            # the report does not keep: a cache private to this run hands them over, so no
            # image is decoded twice. The user's cache is neither read nor written.
            cache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="leakaudit-")))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = audit_splits(
                splits,
                method=args.method,
                threshold=_threshold_spec(args.threshold),
                workers=args.workers,
                progress=_progress(args),
                decode=decode,
                cache=cache,
                dihedral=args.dihedral,
                root=root,
                verify=_verify_spec(args),
                decisions=getattr(args, "decisions", None),
            )
            if getattr(args, "sscd", False):
                report = _with_sscd(report, args, decode)
            if hashes_out is not None:
                written = _write_hash_shards(report, args, hashes_out, cache=cache, decode=decode)
    # Once each: the shards' hashing repeats the audit's (an unusable cache warns in both).
    for message in dict.fromkeys(str(warning.message) for warning in caught):
        log.warning("%s", message)
    if not args.no_cache:  # the cache grows with each folder audited: say where and how big
        log.info("%s", cache_summary(args.cache_dir))
    if hashes_out is not None:
        log.info("wrote %d hash shard file(s) to %s", len(written), hashes_out)
    return report


def _require_sscd() -> None:
    """``--sscd``: refuse before any hashing when the model cannot run here."""
    try:
        from leakaudit.adapters.sscd import (  # type: ignore[import-not-found, unused-ignore]
            require_sscd,
        )

        require_sscd()
    except ImportError as error:
        raise UsageError(f"--sscd: {error}") from None


def _with_sscd(report: LeakageReport, args: argparse.Namespace, decode: Any) -> LeakageReport:
    """``--sscd``: the SSCD links among tiny images joined into the report (imported only
    here: the core never imports the adapter or onnxruntime)."""
    from leakaudit.adapters.sscd import (  # type: ignore[import-not-found, unused-ignore]
        with_sscd,
    )

    log.info("SSCD: embedding the tiny images (leakaudit.adapters.sscd)")
    linked: LeakageReport = with_sscd(report, workers=args.workers or 2, decode=decode)
    return linked


def _write_hash_shards(
    report: LeakageReport,
    args: argparse.Namespace,
    folder: Path,
    *,
    cache: bool | Path,
    decode: Any,
) -> list[Path]:
    """Write the audit's hashes as shards (``--hashes-out``), in the report's row order.

    The hashes come from the hash cache the audit has just filled (no image is
    decoded again); ids are the paths as listed, ``path`` their absolute form,
    so ``leakaudit group`` can verify candidates from anywhere on this machine.
    """

    table = report.table
    assert table is not None  # audit_splits always returns its table
    paths = [str(path) for path in table["path"].tolist()]
    verify = "auto" if args.verify else False
    options = hashing_options(decode, dihedral=args.dihedral, verify=verify)
    crop_entries = wants_crop_entries(dihedral=args.dihedral, verify=verify)
    hashed = hash_sources_cached(
        paths,
        cache=cache,
        decode=options,
        workers=args.workers,
        progress=_progress(args),
        on_error="ignore",
        dihedral=args.dihedral,
        crop_entries=crop_entries,
    )
    audited, _ = hash_values_from_frame(table, "phash")
    changed = int(np.count_nonzero(audited != hashed.phash))
    if changed:
        log.warning(
            "%d image(s) changed while the audit ran: their hash shards hold the new hashes",
            changed,
        )
    # The report's digests: those of blank images and of byte-copy candidates.
    digests = hash_values_from_frame(table, "digest")
    return write_hash_shards(
        hashed,
        folder,
        ids=paths,
        split=table["split"].tolist(),
        paths=[os.path.abspath(path) for path in paths],
        digests=digests,
        hashing=hashing_metadata(options, dihedral=args.dihedral, crop_entries=crop_entries),
    )


def _write_outputs(
    report: LeakageReport,
    args: argparse.Namespace,
    *,
    reference: str | None = None,
    impact: Any = None,
) -> None:
    if args.csv is not None:
        for path in write_csv_tables(report, args.csv):
            log.info("wrote %s", path)
    if args.json is not None:
        log.info("wrote %s", write_json(report, args.json))
    if args.html is not None:
        page = write_html(report, args.html, progress=_progress(args), impact=impact)
        log.info("wrote %s", page)
    if args.show is not None:
        _write_side_by_side(report, args, reference)


def _one_split_folder(root: Path, splits: dict[str, Path], args: argparse.Namespace) -> None:
    """A ROOT with one split folder: an error with ``--fail-on-leak`` (exit 2), else a warning;
    both name ROOT's other folders and the ``--split NAME=FOLDER`` of a misspelt one."""
    if len(splits) != 1:
        return
    ((only, folder),) = splits.items()
    hints = split_folder_hints(root, splits).replace("ROOT", printable(str(root)), 1)
    hints = hints or (
        f"No other folder under {printable(str(root))}: add one, or name a folder elsewhere "
        "under ROOT with --split NAME=FOLDER."
    )
    if args.fail_on_leak is not None:
        raise UsageError(
            f"--fail-on-leak needs two splits to compare; found one split folder under "
            f"{printable(str(root))}: {printable(only)} ({printable(str(folder))}). {hints}"
        )
    log.warning(
        "only one split folder (%s) under %s: nothing can leak across splits; duplicates "
        "inside it are still listed. %s",
        printable(only),
        printable(str(root)),
        hints,
    )


def _require_two_splits(
    report: LeakageReport,
    args: argparse.Namespace,
    *,
    root: Path | None = None,
    splits: dict[str, Path] | None = None,
) -> None:
    """Fewer than two splits with images: with ``--fail-on-leak`` an error (exit 2), since a
    pass would compare nothing; without it a warning (not repeated after a one-split one)."""
    counts = {str(name): int(n) for name, n in report.images_by_split.items()}
    problem = too_few_splits(counts, root=root, splits=splits)
    if problem is None:
        return
    if getattr(args, "fail_on_leak", None) is not None:
        raise UsageError(f"--fail-on-leak: {problem}")
    if splits is None or len(splits) != 1:
        log.warning("%s", problem)


def _exit_code(report: LeakageReport, args: argparse.Namespace) -> int:
    if args.fail_on_leak is None:
        return 0
    _require_two_splits(report, args)
    limit, is_percent = args.fail_on_leak
    if is_percent:
        failing = report.splits_over_limit(max_fraction=limit / 100)
    else:
        failing = report.splits_over_limit(max_leaked=int(limit))
    if not len(failing):
        return 0
    allowed = f"{limit:g}%" if is_percent else f"{int(limit)} image(s)"
    for split, images, leaked, fraction in failing[["images", "leaked", "fraction"]].itertuples():
        print(
            f"leakaudit: {printable(str(split))}: {int(leaked)} of {int(images)} images leak "
            f"({100 * fraction:.2f}%), over --fail-on-leak {allowed}",
            file=sys.stderr,
        )
    return EXIT_LEAKAGE


# ---------------------------------------------------------------------- --show


def _write_side_by_side(
    report: LeakageReport, args: argparse.Namespace, reference: str | None
) -> None:
    if "images_root" in report.parameters and report.parameters["images_root"] is None:
        log.warning("--show: no image read (no --images-root given): no side-by-side images")
        return
    shown = write_side_by_side(
        report,
        args.show,
        reference=reference,
        max_groups=args.show_limit,
        progress=_progress(args),
    )
    log.info(
        "wrote %d side-by-side image(s) to %s, listed in %s",
        shown.pictures,
        printable(str(args.show)),
        INDEX_NAME,
    )
    if shown.images_left_out:
        log.warning(
            "--show drew %d of the %d side-by-side images (a leaked image and its closest "
            "match): the %d strongest of %d leaked group(s), at most %d each; the other %d "
            "(%d whole group(s)) are listed in %s without a file (--show-limit N draws N "
            "groups, --show-limit all every image)",
            shown.pictures,
            shown.images,
            shown.groups_pictured,
            shown.groups,
            MAX_MEMBERS_SHOWN,
            shown.images_left_out,
            shown.groups_left_out,
            printable(str(shown.index_file)),
        )


# -------------------------------------------------------------------- commands


def _distance_words(distance: Any, threshold: Any, direct: bool) -> str:
    """A LEAK line's distance, saying why a verified pair over the threshold is still a leak."""
    over = isinstance(threshold, int) and isinstance(distance, (int, np.integer))
    if over and direct and distance > threshold:
        return (
            f"distance {distance}, over the threshold {threshold}: "
            "linked by verification, not by the hashes"
        )
    return f"distance {distance}"


def _match_evidence(row: Any) -> str:
    """What joins a LEAK line's two images: the verified pair's evidence, or the chain."""
    import pandas as pd

    if bool(row.direct):
        if pd.isna(row.evidence_strength) and row.evidence != "embedding":
            return ""  # no verified pairs: within the threshold, as the distance says
        how = "linked by" if row.evidence in ("hash", "embedding") else "verified by"
        text = evidence_text(row.evidence, similarity=row.evidence_similarity, inliers=row.inliers)
        return f"  [{how} {printable(text)}]"
    if row.via is pd.NA or row.via is None:
        return "  [transitive: not linked directly, only through other images of its group]"
    return (
        f"  [transitive: linked through {int(row.via)} other image(s), "
        "no verified pair joins these two directly]"
    )


def _cmd_compare(args: argparse.Namespace) -> int:
    if len(args.dirs) < 2:
        raise UsageError("compare needs TRAIN_DIR and at least one TEST_DIR")
    splits: dict[str, Path] = {}
    for path in args.dirs:
        _check_dir(path)
        name = path.resolve().name or str(path)
        while name in splits:
            name += "'"
        splits[name] = path
    _check_outputs(args, dataset_boundary(splits.values()))
    reference = next(iter(splits))
    report = _run_audit(splits, args)
    matches = leak_matches(report, reference, evidence=True)
    threshold = report.parameters.get("threshold")
    for row in matches.itertuples(index=False):
        print(
            f"LEAK  {printable(str(row.path))}  ~  {printable(str(row.match_path))}  "
            f"{printable(str(row.copy_kind))} "
            f"({_distance_words(row.distance, threshold, bool(row.direct))}){_match_evidence(row)}"
        )
    for split, count in report.images_by_split.items():
        if split == reference:
            continue
        mine = matches["split"] == split
        n = int(mine.sum())
        pct = 100.0 * n / count if count else 0.0
        chained = int((mine & ~matches["direct"].astype(bool)).sum())
        print(
            f"{n} of {count} {printable(str(split))} images ({pct:.1f}%) also appear in "
            f"{printable(reference)}."
            + (f" {chained} of them only through other images (transitive)." if chained else "")
        )
    _write_outputs(report, args, reference=reference)
    return _exit_code(report, args)


def _cmd_group(args: argparse.Namespace) -> int:
    folder: Path = args.shards
    if not folder.exists():
        raise UsageError(f"folder not found: {folder}")
    if args.images_root is not None and not args.images_root.is_dir():
        raise UsageError(f"--images-root must be a folder; got {args.images_root}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1; got {args.workers}")
    try:
        require_pyarrow()
    except ImportError as error:
        raise UsageError(str(error)) from None
    _check_outputs(args, [folder])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = audit_hash_shards(
            folder,
            method=args.method,
            threshold=_threshold_spec(args.threshold),
            dihedral=args.dihedral,
            verify=_verify_spec(args),
            workers=args.workers,
            images_root=args.images_root,
        )
    for warning in caught:
        log.warning("%s", warning.message)
    print(report.to_text())
    _write_outputs(report, args)
    return _exit_code(report, args)


def _cmd_scan(args: argparse.Namespace) -> int:
    splits = find_split_folders(_check_dir(args.root), args.split)
    _check_outputs(args, dataset_boundary(splits.values(), root=args.root))
    predictions = scan_predictions(args, splits)
    log.info(
        "splits: %s",
        ", ".join(f"{printable(name)} ({printable(str(path))})" for name, path in splits.items()),
    )
    _one_split_folder(args.root, splits, args)
    report = _run_audit(splits, args, root=args.root)
    print(report.to_text())
    impact = scan_impact(report, args, predictions)
    _write_outputs(report, args, impact=impact)
    _require_two_splits(report, args, root=args.root, splits=splits)
    return _exit_code(report, args)


def _cmd_demo(args: argparse.Namespace) -> int:
    _check_outputs(args)
    with contextlib.ExitStack() as stack:
        if args.dir is not None:
            root, kept = args.dir, f"written to {args.dir}"
        else:  # removed at the end: `leakaudit demo DIR` keeps it (for `clean`)
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="leakaudit-demo-")))
            kept = f"built in {root} (removed at the end; `leakaudit demo DIR` keeps it)"
        demo = build_demo_dataset(root)
        print(f"Demo dataset {kept} with {len(demo.planted_leaks)} planted leaks:")
        for original, copy, how in demo.planted_leaks:
            print(f"  {copy}  <-  {original}  ({how})")
        print()
        report = _run_audit(demo.splits, args)
        print(report.to_text())
        _write_outputs(report, args)
        return _exit_code(report, args)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    root = _check_dir(args.root)
    if args.sample < MIN_CALIBRATION_IMAGES:
        raise UsageError(f"--sample must be at least {MIN_CALIBRATION_IMAGES}; got {args.sample}")
    _check_outputs(args, dataset_boundary([root]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = calibrate_threshold(
            root,
            sample_size=args.sample,
            seed=args.seed,
            workers=args.workers,
            progress=_progress(args),
        )
    for warning in caught:
        log.warning("%s", warning.message)
    print(result.to_text())
    if args.csv is not None:
        csv: Path = args.csv
        tables = {
            csv: result.table,
            csv.with_name(csv.stem + ".per_transform.csv"): result.per_transform,
            csv.with_name(csv.stem + ".unrelated.csv"): result.unrelated_distances,
            csv.with_name(csv.stem + ".audit.csv"): result.audit_per_transform,
        }
        for path, frame in tables.items():
            with atomic_open(path, newline="") as handle, np.errstate(invalid="ignore"):
                frame.to_csv(handle, index=False)  # no NaN cast warning (write_csv)
            log.info("wrote %s", path)
    return 0


def _cmd_env() -> int:
    import pandas
    import PIL

    print(f"leakaudit {__version__}")
    print(f"python {platform.python_version()} ({sys.executable})")
    print(f"platform {platform.platform()}")
    print(f"numpy {np.__version__}, pandas {pandas.__version__}, Pillow {PIL.__version__}")
    from importlib.metadata import PackageNotFoundError, version

    for name in ("torch", "torchvision", "datasets", "pyarrow", "ray"):
        try:
            print(f"{name} {version(name)}")
        except PackageNotFoundError:
            print(f"{name} not installed")
    # The geometric stage takes any cv2: say which distribution provides it.
    for distribution in ("opencv-python-headless", "opencv-python", "opencv-contrib-python"):
        try:
            print(f"cv2 {version(distribution)} ({distribution})")
            break
        except PackageNotFoundError:
            continue
    else:
        print("cv2 not installed")
    print(f"cpus {os.cpu_count()}")
    return 0


# ----------------------------------------------------------------------- clean


def _resolve_priority(text: str | None, splits: Sequence[str]) -> list[str]:
    """Map ``--priority`` names to split folder names (``val`` matches ``Validation/``...)."""
    names = DEFAULT_PRIORITY if text is None else [p.strip() for p in text.split(",") if p.strip()]
    if text is not None and not names:
        raise UsageError("--priority must name at least one split, like train,val,test")
    resolved, unmatched = match_priority(names, splits)
    if unmatched and text is not None:
        raise UsageError(
            f"--priority names {unmatched[0]!r}, which is not a split here; splits: "
            + ", ".join(splits)
        )
    return resolved


def _check_clean_outputs(args: argparse.Namespace, root: Path, protected: list[Protected]) -> None:
    """Check --out, --manifest and the audit outputs before the audit starts."""

    try:
        check_tree_target(root, args.out, replace=args.force, protected=protected)
        if args.manifest is not None and manifest_inside(args.out, args.manifest) is None:
            check_output_path(args.manifest, option="--manifest", protected=protected)
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from None
    _check_outputs(args, protected)


def _outputs_in_tree(args: argparse.Namespace, out: Path, planned: set[str]) -> None:
    """Refuse outputs that would land on a file of the new tree."""
    real_out = out.resolve()
    files = [*_output_files(args)]
    if args.manifest is not None:
        files.append(("--manifest", args.manifest))
    for option, path in files:
        resolved = path.resolve()
        if is_within(resolved, real_out) and resolved != real_out:
            inside = resolved.relative_to(real_out).as_posix()
            if inside in planned:
                raise UsageError(
                    f"{option} {path} is where the cleaned copy puts {inside}; choose another path"
                )


def _cmd_clean(args: argparse.Namespace) -> int:
    root: Path = _check_dir(args.root)
    out: Path = args.out
    splits = find_split_folders(root, args.split)
    # ROOT, each split folder and every link the audit follows, resolved before anything
    # is read or written: NEW_ROOT, its manifest, the cache and every output stay clear.
    protected = dataset_boundary(splits.values(), root=root)
    _check_clean_outputs(args, root, protected)
    priority = _resolve_priority(args.priority, list(splits))
    _one_split_folder(root, splits, args)

    report = _run_audit(splits, args, root=root)
    print(report.to_text())
    _require_two_splits(report, args, root=root, splits=splits)
    assert report.table is not None  # audit_splits always returns its table
    cleaned = clean_splits(report.table, priority, policy=args.policy)
    # Inside the split folders links are followed as the audit followed them: a split
    # folder or class folder that is a link is written to NEW_ROOT as a real folder
    # (manifest: "followed"), so NEW_ROOT holds what ImageFolder saw on ROOT.
    plan = plan_tree(
        root,
        walk_tree(root, follow=[folder.name for folder in splits.values()]),
        cleaned,
        {name: folder.name for name, folder in splits.items()},
        # The default manifest's place is ours: a ROOT file there moves aside. One the user
        # chose inside NEW_ROOT must not displace a file: _outputs_in_tree refuses it.
        reserved=[MANIFEST_NAME] if args.manifest is None else [],
        unreadable=args.unreadable,
    )
    _outputs_in_tree(args, out, {entry.new_path for entry in plan if entry.new_path})
    try:  # again: the audit took a while, and --out may have changed meanwhile
        check_tree_target(root, out, replace=args.force, protected=protected)
    except ValueError as error:
        raise UsageError(str(error)) from None

    writes = sum(bool(entry.new_path) for entry in plan)
    bar = Progress(writes, label="writing", enabled=progress_enabled(_progress(args), writes))
    try:
        summary = write_tree(
            plan,
            root,
            out,
            link=not args.copy,
            manifest=args.manifest,
            on_progress=bar.update,
            protected=protected,
        )
    finally:
        bar.close()
    for stale in summary.removed_partials:
        log.info("removed %s, left by an earlier run that was stopped", stale)

    counts = summary.counts()
    written = summary.linked + summary.copied
    how = (
        "all hard-linked"
        if summary.copied == 0
        else "all copied"
        if summary.linked == 0
        else f"{summary.linked} hard-linked, {summary.copied} copied"
    )
    print()
    print(
        f"Wrote a leak-free copy of {printable(str(root))} to {printable(str(out))} "
        f"({written} file(s), {how}): {counts.get('kept', 0)} image(s) kept, "
        f"{counts.get('moved', 0)} moved, {counts.get('dropped', 0)} dropped, "
        f"{counts.get('unaudited', 0)} other file(s) as they are, "
        f"{counts.get('unreadable', 0)} unreadable image(s) left out, "
        f"{counts.get('skipped', 0)} skipped. "
        f"Priority: {' > '.join(priority) or '(order of appearance)'}."
    )
    print(_unreadable_line(summary.entries, args.unreadable))
    skipped = [entry for entry in summary.entries if entry.action == "skipped"]
    if skipped:
        listed = first_few((f"{printable(e.old_path)} ({e.reason})" for e in skipped), len(skipped))
        log.warning(
            "%d entr%s under ROOT left out (see the manifest): %s",
            len(skipped),
            "y" if len(skipped) == 1 else "ies",
            listed,
        )
    print(f"Manifest: {printable(str(summary.manifest))}")
    _write_outputs(report, args)
    return _exit_code(report, args)


def _unreadable_line(entries: Sequence[Any], choice: str) -> str:
    """``clean``'s summary of the images it could not decode, and what ``--unreadable`` did."""
    failed = [e for e in entries if e.reason.startswith("unreadable image")]
    if not failed:
        return f"Unreadable images: none (--unreadable {choice})."
    listed = first_few((f"{printable(e.old_path)}" for e in failed), len(failed))
    if choice == "copy":
        return (
            f"Unreadable images: {len(failed)}, copied as they are (--unreadable copy): a "
            f"DataLoader over the copy fails on them: {listed}."
        )
    return (
        f"Unreadable images: {len(failed)}, left out of the copy (--unreadable drop; ROOT keeps "
        f"them, the manifest lists them): {listed}."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    quiet = getattr(args, "quiet", False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("leakaudit: %(levelname)s: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False
    commands: dict[str, Any] = {
        "scan": _cmd_scan,
        "compare": _cmd_compare,
        "group": _cmd_group,
        "demo": _cmd_demo,
        "clean": _cmd_clean,
        "calibrate": _cmd_calibrate,
        "impact": cmd_impact,
        "cache": cmd_cache,
    }
    previous = handle_signals()
    try:
        if args.command == "env":
            return _cmd_env()
        code: int = commands[args.command](args)
        return code
    except BrokenPipeError:
        # The reader went away (`leakaudit scan ROOT | head`): end quietly, as Unix tools do.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (UsageError, OSError, ValueError, TypeError) as error:
        # Usage and input errors (a missing folder, a bad threshold, an unwritable output) are
        # one line, not a traceback.
        print(f"leakaudit: error: {printable(str(error))}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print("leakaudit: error: out of memory", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as interrupt:  # SIGINT, or SIGTERM (leakaudit._interrupts)
        print(interrupted_line(interrupt), file=sys.stderr)
        return exit_code(interrupt)
    except Exception as error:  # a bug: still one line, never exit 1 ("leakage found")
        if os.environ.get("LEAKAUDIT_DEBUG"):
            raise
        print(
            f"leakaudit: internal error: {type(error).__name__}: {printable(str(error))} "
            "(please report it; LEAKAUDIT_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR
    finally:
        restore_signals(previous)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit raises no second BrokenPipeError."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main_entry() -> None:
    """Run the command line and exit (``leakaudit.__main__.main_entry`` calls this)."""
    handle_signals()  # already in place when started by leakaudit.__main__
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    finish(code)

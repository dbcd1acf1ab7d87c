"""Audit torchvision / PyTorch datasets in place and hand back leak-free re-split objects.

Install with ``pip install 'leakaudit-vision[torch]'``. torch and torchvision are
imported only inside the functions that need them.

What is accepted, per split
---------------------------
* an ``ImageFolder`` or any ``DatasetFolder`` (anything with ``samples``, a list of
  ``(path, class_index)``): hashed from the files in ``samples``, in parallel, with
  no transform applied and nothing decoded twice;
* a ``torch.utils.data.Subset`` of one, including what ``random_split`` returns
  (subsets sharing one parent) and Subsets of Subsets: resolved to the parent's
  ``samples``;
* any other map-style ``Dataset`` (``__len__`` and ``__getitem__``) yielding an
  image or an ``(image, target, ...)`` tuple, where the image is a PIL image, a
  ``torch.Tensor`` (C x H x W, or H x W), a numpy array (H x W [x C]), a path or
  encoded bytes: what it yields is hashed.

Random augmentations
--------------------
A generic dataset is hashed as it yields items, so a random crop or flip in its
``transform`` would make every audit differ. Pass ``transform_override=None`` (no
transform: a VisionDataset then yields PIL images) or a deterministic callable
such as ``transforms.Resize(256)``. The override is applied to a *shallow copy* of
the dataset (``copy.copy``, then ``.transform`` - and ``.transforms`` where a
VisionDataset keeps both - replaced), so your object is never modified, not even
for the duration of the audit, and an exception midway cannot leave it changed.
A dataset that augments inside ``__getitem__`` without a ``transform`` attribute
cannot be overridden this way: audit a deterministic view of it instead.

Rows
----
Every image is identified by its split and its position in that split's dataset:
``report.table`` has, besides the core columns, ``index`` (what ``dataset[index]``
returns) and ``label`` (the target, where one is known).
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from leakaudit._progress import Progress, progress_enabled
from leakaudit._validation import check_choice, check_int, describe
from leakaudit.adapters._common import (
    ClassMismatchWarning,
    ResplitResult,
    check_dihedral,
    check_report_matches,
    destination_rows,
    leave_out_unreadable,
    moves_table,
)
from leakaudit.audit import (
    VerifySpec,
    audit_hash_table,
    decode_parameters,
    hashing_options,
    wants_crop_entries,
)
from leakaudit.cache import CacheSpec, hash_sources_cached
from leakaudit.cleaning import SplitPlan, clean_splits, resolve_lengths, split_groups
from leakaudit.errors import ImageLoadError
from leakaudit.hashing import HashTable, OrientationHashes, apply_on_error, hash_image
from leakaudit.listing import IMAGE_EXTENSIONS
from leakaudit.loading import DecodeOptions
from leakaudit.policy import DEFAULT_METHOD, ThresholdSpec, resolve_threshold
from leakaudit.report import LeakageReport

if TYPE_CHECKING:
    from PIL import Image
    from torch.utils.data import Dataset

__all__ = [
    "KEEP_TRANSFORM",
    "ClassMismatchWarning",
    "LeakFreeSplit",
    "SplitDeviationWarning",
    "audit_datasets",
    "clean_datasets",
    "leak_free_random_split",
]

_INSTALL_HINT = "pip install 'leakaudit-vision[torch]'"


class _KeepTransform:
    """Sentinel: hash what the dataset yields, with its own transform."""

    _instance: _KeepTransform | None = None

    def __new__(cls) -> _KeepTransform:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "KEEP_TRANSFORM"

    def __reduce__(self) -> str:
        return "KEEP_TRANSFORM"


#: Default of ``transform_override``: keep each dataset's own transform.
KEEP_TRANSFORM: Any = _KeepTransform()


class SplitDeviationWarning(UserWarning):
    """A group-aware split could not match the requested sizes closely."""


def _require_torch() -> Any:
    try:
        import torch
        import torch.utils.data
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            f"leakaudit.adapters.torchvision needs torch and torchvision: {_INSTALL_HINT}"
        ) from exc
    return torch


# ------------------------------------------------------------------- resolution


@dataclass
class _Resolved:
    """A split's dataset, unwrapped to its innermost parent."""

    name: str
    dataset: Any
    base: Any
    indices: list[int]
    is_subset: bool

    @property
    def samples(self) -> list[tuple[str, Any]] | None:
        return _samples_of(self.base)


def _samples_of(dataset: Any) -> list[tuple[str, Any]] | None:
    samples = getattr(dataset, "samples", None)
    if not isinstance(samples, Sequence) or isinstance(samples, (str, bytes)):
        return None
    if samples and not (
        isinstance(samples[0], (tuple, list))
        and len(samples[0]) >= 2
        and isinstance(samples[0][0], (str, os.PathLike))
    ):
        return None
    return list(samples)


def _resolve(name: str, dataset: Any) -> _Resolved:
    torch = _require_torch()
    subset_type = torch.utils.data.Subset
    indices: list[int] | None = None
    obj = dataset
    while isinstance(obj, subset_type):
        inner = [int(i) for i in obj.indices]
        indices = inner if indices is None else [inner[i] for i in indices]
        obj = obj.dataset
    if not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
        raise TypeError(
            f"splits[{name!r}] must be a map-style Dataset (ImageFolder, DatasetFolder, Subset, "
            f"or anything with __len__ and __getitem__); got {type(dataset).__name__}."
        )
    if indices is None:
        indices = list(range(len(obj)))
    return _Resolved(
        name=name,
        dataset=dataset,
        base=obj,
        indices=indices,
        is_subset=isinstance(dataset, subset_type),
    )


def _resolve_all(splits: Mapping[str, Any]) -> list[_Resolved]:
    if not isinstance(splits, Mapping):
        raise TypeError(
            f"splits must be a mapping of split name to dataset; got {describe(splits)}."
        )
    if not splits:
        raise ValueError("splits must name at least one split; got an empty mapping.")
    return [_resolve(str(name), ds) for name, ds in splits.items()]


def _use_samples(resolved: _Resolved, use_samples: bool | None) -> bool:
    samples = resolved.samples
    if use_samples is False or samples is None:
        if use_samples:
            raise ValueError(
                f"use_samples=True needs splits[{resolved.name!r}] to have 'samples' "
                f"(a list of (path, target)); {type(resolved.base).__name__} has none."
            )
        return False
    if use_samples:
        return True
    # A DatasetFolder may load non-image files (e.g. .npy): hash those through
    # __getitem__ instead of feeding them to the image decoder.
    return all(
        os.path.splitext(os.fspath(samples[i][0]))[1].lower() in IMAGE_EXTENSIONS
        for i in resolved.indices
    )


# ---------------------------------------------------------------------- hashing


def _tensor_to_pil(value: Any) -> Image.Image:
    from PIL import Image

    array = value.detach().cpu()
    if array.ndim == 3 and array.shape[0] in (1, 3, 4):
        array = array.permute(1, 2, 0)  # torch's C x H x W convention wins when ambiguous
    return _array_to_pil(array.numpy(), Image)


def _array_to_pil(array: np.ndarray[Any, Any], image_module: Any) -> Image.Image:
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim == 3 and array.shape[-1] == 4:
        array = array[..., :3]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] != 3):
        raise ValueError(f"an image array must be H x W or H x W x 1/3/4; got shape {array.shape}")
    if array.dtype != np.uint8:
        values = array.astype(np.float64)
        low, high = float(values.min()), float(values.max())
        if low >= 0.0 and high <= 1.0:
            values = values * 255.0  # ToTensor's [0, 1] range
        elif low < 0.0 or high > 255.0:
            # Normalised tensors: rescale to the full range. Hashes compare
            # relative brightness, so an affine change of intensity barely moves them.
            values = (values - low) * (255.0 / (high - low)) if high > low else values * 0.0
        array = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return image_module.fromarray(np.ascontiguousarray(array))  # type: ignore[no-any-return]


def _image_and_label(item: Any) -> tuple[Any, Any]:
    if isinstance(item, (tuple, list)) and item:
        return item[0], (item[1] if len(item) > 1 else None)
    return item, None


def _label_value(label: Any) -> Any:
    if label is None:
        return None
    if hasattr(label, "numel") and callable(label.numel) and label.numel() == 1:
        return label.item()
    if isinstance(label, np.generic):
        return label.item()
    return label if isinstance(label, (int, str)) else None


#: What hashing one item gives: ``(phash, dhash, low_information, digest, orientation
#: entries, their kinds)``, or the reason it could not be hashed. The entries are
#: ``(phash, dhash)`` pairs, empty unless dihedral matching was asked for.
_ItemHashes = tuple[int, int, bool, int, tuple[tuple[int, int], ...], tuple[int, ...]]


def _hash_item(
    item: Any, options: DecodeOptions, dihedral: bool = False, crop_entries: bool = False
) -> _ItemHashes | str:
    from PIL import Image

    image, _ = _image_and_label(item)
    try:
        if hasattr(image, "detach") and hasattr(image, "permute"):
            image = _tensor_to_pil(image)
        elif isinstance(image, np.ndarray):
            image = _array_to_pil(image, Image)
        elif not isinstance(image, (Image.Image, str, os.PathLike, bytes, bytearray)):
            return f"the dataset yields {type(image).__name__}, not an image"
        result = hash_image(image, decode=options, dihedral=dihedral, crop_entries=crop_entries)
    except ImageLoadError as exc:
        return exc.reason
    except (ValueError, TypeError) as exc:
        return str(exc)
    return (
        result.phash,
        result.dhash,
        result.low_information,
        result.digest,
        result.orientations,
        result.kinds,
    )


class _HashingView:
    """Map-style dataset yielding ``(hashes or failure reason, label)`` per index.

    Used directly, or through a DataLoader so that ``num_workers`` processes load
    and hash in parallel and only a few integers travel back.
    """

    def __init__(
        self,
        base: Any,
        indices: list[int],
        options: DecodeOptions,
        dihedral: bool = False,
        crop_entries: bool = False,
    ) -> None:
        self.base = base
        self.indices = indices
        self.options = options
        self.dihedral = dihedral
        self.crop_entries = crop_entries

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int) -> tuple[_ItemHashes | str, Any]:
        try:
            item = self.base[self.indices[position]]
        except Exception as exc:  # the dataset's own loader/transform failed on this item
            return f"loading failed: {type(exc).__name__}: {exc}", None
        _, label = _image_and_label(item)
        return (
            _hash_item(item, self.options, self.dihedral, self.crop_entries),
            _label_value(label),
        )


def _keep_item(item: Any) -> Any:
    return item


def _with_transform(base: Any, override: Any, name: str) -> Any:
    if override is KEEP_TRANSFORM:
        return base
    if override is not None and not callable(override):
        raise TypeError(
            "transform_override must be None, a callable or KEEP_TRANSFORM; "
            f"got {describe(override)}."
        )
    if not hasattr(base, "transform"):
        raise TypeError(
            f"transform_override needs splits[{name!r}] (a {type(base).__name__}) to have a "
            "'transform' attribute; audit a view of it without random augmentations instead."
        )
    clone = copy.copy(base)
    clone.transform = override
    transforms = getattr(clone, "transforms", None)
    if transforms is not None and type(transforms).__name__ == "StandardTransform":
        from torchvision.datasets.vision import StandardTransform

        clone.transforms = StandardTransform(override, getattr(clone, "target_transform", None))
    return clone


def _hash_generic(
    resolved: _Resolved,
    options: DecodeOptions,
    *,
    progress: bool | None,
    transform_override: Any,
    num_workers: int,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> tuple[list[_ItemHashes | str], list[Any]]:
    base = _with_transform(resolved.base, transform_override, resolved.name)
    view = _HashingView(base, resolved.indices, options, dihedral, crop_entries)
    n = len(view)
    bar = Progress(n, label=f"hashing {resolved.name}", enabled=progress_enabled(progress, n))
    results: list[_ItemHashes | str] = []
    labels: list[Any] = []
    try:
        if num_workers > 0 and n:
            torch = _require_torch()
            loader = torch.utils.data.DataLoader(
                view,
                batch_size=None,
                shuffle=False,
                num_workers=num_workers,
                collate_fn=_keep_item,
            )
            items: Any = iter(loader)
        else:
            items = (view[i] for i in range(n))
        for result, label in items:
            results.append(result)
            labels.append(label)
            bar.update()
    finally:
        bar.close()
    return results, labels


@dataclass
class _Hashed:
    table: HashTable
    split: list[str]
    index: list[int]
    label: list[Any]
    names: list[str]
    #: What verification decodes again: the file of each row, None for generic rows
    #: (their pairs are decided by their hashes alone).
    verifiable: list[str | None]


def _hash_resolved(
    resolved: list[_Resolved],
    *,
    options: DecodeOptions,
    workers: int | None,
    progress: bool | None,
    on_error: str,
    transform_override: Any,
    use_samples: bool | None,
    num_workers: int,
    cache: CacheSpec = True,
    dihedral: bool = False,
    crop_entries: bool = False,
) -> _Hashed:
    check_choice("on_error", on_error, ("warn", "raise", "ignore"))
    num_workers = check_int("num_workers", num_workers, 0)
    split: list[str] = []
    index: list[int] = []
    names: list[str] = []
    labels: list[Any] = []
    path_rows: list[int] = []
    paths: list[str] = []
    generic: list[tuple[_Resolved, int]] = []
    for entry in resolved:
        start = len(split)
        n = len(entry.indices)
        split.extend([entry.name] * n)
        index.extend(range(n))
        if _use_samples(entry, use_samples):
            samples = entry.samples
            assert samples is not None
            chosen = [samples[i] for i in entry.indices]
            files = [os.fspath(s[0]) for s in chosen]
            path_rows.extend(range(start, start + n))
            paths.extend(files)
            names.extend(files)
            labels.extend(_label_value(s[1]) for s in chosen)
        else:
            generic.append((entry, start))
            names.extend(f"{entry.name}[{i}]" for i in range(n))
            labels.extend([None] * n)

    total = len(split)
    phash = np.zeros(total, dtype=np.uint64)
    dhash = np.zeros(total, dtype=np.uint64)
    digest = np.zeros(total, dtype=np.uint64)
    low = np.zeros(total, dtype=np.bool_)
    valid = np.zeros(total, dtype=np.bool_)
    errors: dict[int, str] = {}
    # Orientation entries (dihedral only), each part's owners already in table rows.
    turned: list[OrientationHashes] = []
    if paths:
        part = hash_sources_cached(
            paths,
            cache=cache,
            decode=options,
            workers=workers,
            progress=progress,
            on_error="raise" if on_error == "raise" else "ignore",
            dihedral=dihedral,
            crop_entries=crop_entries,
        )
        rows = np.asarray(path_rows, dtype=np.int64)
        phash[rows], dhash[rows], digest[rows] = part.phash, part.dhash, part.digest
        low[rows], valid[rows] = part.low_information, part.valid
        errors.update({path_rows[i]: reason for i, reason in part.errors.items()})
        if part.orientations is not None:
            entries = part.orientations
            turned.append(
                OrientationHashes(rows[entries.owner], entries.phash, entries.dhash, entries.kind)
            )
    for entry, start in generic:
        results, found = _hash_generic(
            entry,
            options,
            progress=progress,
            transform_override=transform_override,
            num_workers=num_workers,
            dihedral=dihedral,
            crop_entries=crop_entries,
        )
        owner: list[int] = []
        pairs: list[tuple[int, int]] = []
        kinds: list[int] = []
        for offset, (result, label) in enumerate(zip(results, found, strict=True)):
            row = start + offset
            labels[row] = label
            if isinstance(result, str):
                if on_error == "raise":
                    raise ImageLoadError(names[row], result)
                errors[row] = result
            else:
                phash[row], dhash[row], low[row], digest[row], oriented, oriented_kinds = result
                valid[row] = True
                owner.extend([row] * len(oriented))
                pairs.extend(oriented)
                kinds.extend(oriented_kinds)
        if dihedral:
            values = np.asarray(pairs, dtype=np.uint64).reshape(-1, 2)
            turned.append(
                OrientationHashes(
                    np.asarray(owner, dtype=np.int64),
                    values[:, 0].copy(),
                    values[:, 1].copy(),
                    np.asarray(kinds, dtype=np.int8),
                )
            )
    table = HashTable(
        sources=names,
        phash=phash,
        dhash=dhash,
        digest=digest,
        low_information=low,
        valid=valid,
        errors=errors,
        orientations=OrientationHashes.merge(turned) if dihedral else None,
    )
    if on_error == "warn":  # "raise" raised the first failure as it was met
        apply_on_error(
            errors,
            on_error,
            total=total,
            name_of=lambda i: f"{split[i]}[{index[i]}] {names[i]}",
            stacklevel=3,
        )
    verifiable: list[str | None] = [None] * total
    for row, path in zip(path_rows, paths, strict=True):
        verifiable[row] = path
    return _Hashed(
        table=table, split=split, index=index, label=labels, names=names, verifiable=verifiable
    )


def _report_from(
    hashed: _Hashed,
    options: DecodeOptions,
    method: str,
    threshold: ThresholdSpec,
    split: Sequence[str] | None = None,
    dihedral: bool = False,
    verify: VerifySpec = "auto",
) -> LeakageReport:
    report = audit_hash_table(
        hashed.table,
        list(split) if split is not None else hashed.split,
        names=hashed.names,
        method=method,
        threshold=threshold,
        dihedral=dihedral,
        extra_parameters=decode_parameters(options),
        extra_columns={
            "index": np.asarray(hashed.index, dtype=np.int64),
            "label": pd.Series(hashed.label, dtype=object).to_numpy(),
        },
        verify=verify,
        decode=options,
        images=hashed.verifiable,
    )
    return report


# ------------------------------------------------------------------------ audit


def audit_datasets(
    splits: Mapping[str, Dataset[Any]],
    *,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    transform_override: Any = KEEP_TRANSFORM,
    use_samples: bool | None = None,
    num_workers: int = 0,
    cache: CacheSpec = True,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
) -> LeakageReport:
    """Audit torchvision datasets, one per split, for near-duplicates across splits.

    Parameters
    ----------
    splits : mapping of str to Dataset
        Split name -> ``ImageFolder``, ``DatasetFolder``, ``Subset`` (of any depth)
        or any map-style dataset yielding images (see the module docstring).
    method, workers, progress, on_error, decode
        As in :func:`leakaudit.audit.audit_splits`. ``workers`` parallelises the
        hashing of files from ``samples``; ``progress`` also draws a bar while
        generic datasets are iterated.
    threshold : int or mapping of str to int, optional
        As in :func:`leakaudit.audit.audit_splits`: an int, or rules per split
        name or path pattern (``{"test": 4, "screenshots/*": 2, "*": 8}``, see
        :func:`leakaudit.policy.row_thresholds`); patterns match the ``samples``
        paths, or ``"split[index]"`` for images hashed through ``__getitem__``.
        With a mapping, ``report.table`` has a ``threshold`` column.
    transform_override : callable, None or KEEP_TRANSFORM, default KEEP_TRANSFORM
        For datasets hashed through ``__getitem__``: the transform to use instead
        of theirs (``None``: no transform), applied to a shallow copy. Use it to
        leave out random augmentations.
    use_samples : bool or None, default None
        Hash the files listed in ``samples`` (no decode through the dataset, no
        transform). None: when every listed file has an image extension.
    num_workers : int, default 0
        DataLoader worker processes for datasets hashed through ``__getitem__``.
    cache : bool, path or HashCache, default True
        The persistent hash cache for the files in ``samples``, as in
        :func:`leakaudit.audit_splits` (``False`` hashes everything afresh).
    dihedral : bool, default True
        Also match copies that are mirrored, flipped or rotated by 90, 180 or
        270 degrees, as in :func:`leakaudit.audit.audit_splits`; the report's
        ``parameters`` record ``"dihedral": True``.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (as in
        :func:`leakaudit.audit_splits`); False links every pair within the
        threshold.

    Returns
    -------
    LeakageReport
        ``report.table`` has one row per image, split by split in the order
        given, with ``index`` (position in that split's dataset) and ``label``.

    Examples
    --------
    >>> import tempfile
    >>> from torchvision.datasets import ImageFolder
    >>> from leakaudit.demo import build_demo_dataset
    >>> demo = build_demo_dataset(tempfile.mkdtemp())
    >>> splits = {name: ImageFolder(path) for name, path in demo.splits.items()}
    >>> report = audit_datasets(splits, workers=1, on_error="ignore")
    >>> report.n_leaked_groups
    4
    """
    resolve_threshold(method, threshold)
    check_dihedral(dihedral)
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    resolved = _resolve_all(splits)
    hashed = _hash_resolved(
        resolved,
        options=options,
        workers=workers,
        progress=progress,
        on_error=on_error,
        transform_override=transform_override,
        use_samples=use_samples,
        num_workers=num_workers,
        cache=cache,
        dihedral=dihedral,
        crop_entries=wants_crop_entries(dihedral=dihedral, verify=verify),
    )
    return _report_from(hashed, options, method, threshold, dihedral=dihedral, verify=verify)


# ----------------------------------------------------------------------- re-split


def _class_names(dataset: Any) -> list[str] | None:
    classes = getattr(dataset, "classes", None)
    mapping = getattr(dataset, "class_to_idx", None)
    if isinstance(mapping, Mapping) and mapping:
        by_index = sorted(mapping.items(), key=lambda kv: kv[1])
        return [str(name) for name, _ in by_index]
    if isinstance(classes, Sequence) and not isinstance(classes, str):
        return [str(c) for c in classes]
    return None


class _Labels:
    """Remaps targets from one folder dataset to another by class name."""

    def __init__(self, target_base: Any) -> None:
        self.mapping: dict[str, int] | None = None
        mapping = getattr(target_base, "class_to_idx", None)
        if isinstance(mapping, Mapping):
            self.mapping = {str(k): int(v) for k, v in mapping.items()}
        self.classes = list(getattr(target_base, "classes", []) or [])
        self.added: list[str] = []

    def convert(self, target: Any, source_base: Any, target_base: Any) -> Any:
        if source_base is target_base or self.mapping is None:
            return target
        names = _class_names(source_base)
        source_map = getattr(source_base, "class_to_idx", None)
        if names is None or not isinstance(target, int) or not 0 <= target < len(names):
            return target
        if isinstance(source_map, Mapping) and dict(source_map) == dict(self.mapping):
            return target
        name = names[target]
        if name not in self.mapping:
            self.mapping[name] = max(self.mapping.values(), default=-1) + 1
            self.classes.append(name)
            self.added.append(name)
        return self.mapping[name]


def _folder_with_samples(template: Any, samples: list[tuple[Any, Any]], labels: _Labels) -> Any:
    clone = copy.copy(template)
    clone.samples = samples
    clone.targets = [s[1] for s in samples]
    if hasattr(template, "imgs"):
        clone.imgs = clone.samples  # ImageFolder keeps both names for one list
    if labels.added:
        clone.class_to_idx = dict(labels.mapping or {})
        clone.classes = list(labels.classes)
    return clone


def _rebuild(
    target: _Resolved, rows: list[tuple[str, int]], by_name: Mapping[str, _Resolved]
) -> Any:
    torch = _require_torch()
    subset_type = torch.utils.data.Subset
    own = [(target.name, i) for i in range(len(target.indices))]
    if rows == own and not target.is_subset and _samples_of(target.base) is None:
        return target.dataset  # an untouched generic dataset: nothing to rebuild
    located = [(by_name[src], by_name[src].indices[i]) for src, i in rows]
    foreign = [(src, j) for src, j in located if src.base is not target.base]
    target_samples = _samples_of(target.base)
    labels = _Labels(target.base)

    if target_samples is not None and all(_samples_of(src.base) is not None for src, _ in foreign):

        def sample_of(src: _Resolved, j: int) -> tuple[Any, Any]:
            source_samples = _samples_of(src.base)
            assert source_samples is not None
            path, label = source_samples[j][0], source_samples[j][1]
            return path, labels.convert(label, src.base, target.base)

        if not target.is_subset:
            samples = [sample_of(src, j) for src, j in located]
            result = _folder_with_samples(target.base, samples, labels)
        elif not foreign:
            result = subset_type(target.base, [j for _, j in located])
        else:
            extra: list[tuple[Any, Any]] = []
            indices: list[int] = []
            for src, j in located:
                if src.base is target.base:
                    indices.append(j)
                else:
                    indices.append(len(target_samples) + len(extra))
                    extra.append(sample_of(src, j))
            parent = _folder_with_samples(target.base, target_samples + extra, labels)
            result = subset_type(parent, indices)
        if labels.added:
            warnings.warn(
                f"split {target.name!r} receives images of classes it did not have "
                f"({', '.join(labels.added)}); they were appended to its classes.",
                ClassMismatchWarning,
                stacklevel=3,
            )
        return result

    if not foreign:
        return subset_type(target.base, [j for _, j in located])
    # Generic datasets with different parents: concatenate them. Moved items keep
    # their own dataset's transform (there is no sample list to re-home).
    parents: list[Any] = [target.base]
    for src, _ in foreign:
        if all(src.base is not p for p in parents):
            parents.append(src.base)
    offsets = np.cumsum([0] + [len(p) for p in parents])
    concatenated = torch.utils.data.ConcatDataset(parents)
    indices = []
    for src, j in located:
        position = next(k for k, p in enumerate(parents) if p is src.base)
        indices.append(int(offsets[position]) + j)
    return subset_type(concatenated, indices)


def clean_datasets(
    splits: Mapping[str, Dataset[Any]],
    *,
    report: LeakageReport | None = None,
    priority: Sequence[str] | None = None,
    policy: str = "move",
    unreadable: str = "drop",
    **audit_options: Any,
) -> ResplitResult:
    """Return leak-free copies of the splits: every leaked group ends in one split.

    The user's datasets are never modified. Each new split is of the same kind
    as the one it replaces:

    * ``ImageFolder`` / ``DatasetFolder``: a shallow copy with new ``samples``,
      ``imgs`` and ``targets`` (one list, consistent), keeping the split's own
      ``transform``, ``target_transform`` and ``loader``. A moved image's target
      is remapped by class name when the splits' ``class_to_idx`` differ (a class
      the destination lacks is appended, with a warning). ``root`` stays that of
      the destination split; moved samples keep their full paths.
    * ``Subset``: a new ``Subset`` over the same parent (for nested Subsets, over
      the innermost one). When images arrive from a Subset of another folder
      dataset, the parent is a copy of the destination's parent with those samples
      appended.
    * any other dataset: returned unchanged when untouched, else a ``Subset``
      (over a ``ConcatDataset`` when images arrive from another dataset; they then
      keep their own dataset's transform).

    Parameters
    ----------
    splits : mapping of str to Dataset
        As in :func:`audit_datasets`.
    report : LeakageReport, optional
        The result of :func:`audit_datasets` on these very datasets; audited
        now when not given.
    priority : sequence of str, optional
        Default ``("train", "val", "test")``; ``val`` also matches ``valid``,
        ``validation`` and ``dev``.
        Split precedence, highest first.
    policy : {"move", "drop"}, default "move"
        ``"move"``: a leaked group goes whole to its highest-priority split.
        ``"drop"``: its images in lower-priority splits are removed instead
        (no split grows).
    unreadable : {"drop", "copy", "fail"}, default "drop"
        Images the audit could not decode (an ``error`` in ``report.table``):
        ``"drop"`` leaves them out of the clean splits (named in a warning and in
        ``moves``, so a DataLoader over the result never meets one), ``"copy"``
        keeps them where they were, ``"fail"`` raises a ValueError naming them.
    **audit_options
        Passed to :func:`audit_datasets` when ``report`` is None, e.g.
        ``threshold`` (an int or per-split / path-pattern rules such as
        ``{"test": 4, "*": 8}``) and ``dihedral`` (bool, default False: also
        treat mirrored, flipped and rotated copies as leaks, so they are moved
        too). Validated before anything is hashed.

    Returns
    -------
    ResplitResult
        ``result.splits`` (a dict of the new datasets), ``result.moves`` (what
        moved or was dropped, from where) and ``result.report``.

    Examples
    --------
    >>> import tempfile
    >>> from torchvision.datasets import ImageFolder
    >>> from leakaudit.demo import build_demo_dataset
    >>> demo = build_demo_dataset(tempfile.mkdtemp())
    >>> splits = {name: ImageFolder(path) for name, path in demo.splits.items()}
    >>> result = clean_datasets(splits, workers=1, on_error="ignore")
    >>> result.n_moved, len(result.splits["train"]) - len(splits["train"])
    (4, 4)
    """
    check_choice("policy", policy, ("move", "drop"))
    check_choice("unreadable", unreadable, ("drop", "copy", "fail"))
    resolved = _resolve_all(splits)
    if report is None:
        report = audit_datasets(splits, **audit_options)
    elif audit_options:
        raise TypeError(
            "audit options (" + ", ".join(sorted(audit_options)) + ") apply only when "
            "report is not given."
        )
    check_report_matches(
        report, {r.name: len(r.indices) for r in resolved}, "leakaudit.adapters.torchvision"
    )
    assert report.table is not None
    plan = clean_splits(report.table, priority, policy=policy)
    plan = leave_out_unreadable(plan, unreadable)
    by_name = {r.name: r for r in resolved}
    rows = destination_rows(plan, [r.name for r in resolved])
    new_splits = {r.name: _rebuild(r, rows[r.name], by_name) for r in resolved}
    return ResplitResult(splits=new_splits, moves=moves_table(plan), report=report, policy=policy)


# -------------------------------------------------------------- random split


class LeakFreeSplit(list):  # type: ignore[type-arg]
    """The list of ``Subset`` s :func:`leak_free_random_split` returns.

    A plain list (so ``train, val = leak_free_random_split(...)`` works), with
    the split's :class:`~leakaudit.adapters._common.SplitPlan` as ``plan`` (sizes
    asked for and obtained, the deviation) and the duplicate audit as ``report``.
    """

    plan: SplitPlan
    report: LeakageReport


def _seed_from(generator: Any) -> int:
    torch = _require_torch()
    if generator is None:
        generator = torch.default_generator
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


def leak_free_random_split(
    dataset: Dataset[Any],
    lengths: Sequence[int | float],
    generator: Any = None,
    *,
    stratify: bool = False,
    method: str = DEFAULT_METHOD,
    threshold: ThresholdSpec = None,
    workers: int | None = None,
    progress: bool | None = None,
    on_error: str = "warn",
    decode: DecodeOptions | None = None,
    transform_override: Any = KEEP_TRANSFORM,
    use_samples: bool | None = None,
    num_workers: int = 0,
    dihedral: bool = True,
    verify: VerifySpec = "auto",
    cache: CacheSpec = True,
) -> LeakFreeSplit:
    """A drop-in for ``torch.utils.data.random_split`` that never splits a duplicate group.

    Near-duplicate images (the same photo re-encoded, resized, renamed) are
    grouped first; each group lands wholly in one split. Sizes follow
    ``lengths`` as closely as the groups allow: single images are placed last
    and fill every split exactly unless large groups make that impossible. The
    deviation is in ``result.plan``; a :class:`SplitDeviationWarning` is emitted
    when a split misses its size by more than 1% of the dataset (and more than
    one image).

    Parameters
    ----------
    dataset : Dataset
        Anything :func:`audit_datasets` accepts for one split.
    lengths : sequence of int or float
        Sizes summing to ``len(dataset)``, or fractions summing to 1 (resolved
        exactly as ``random_split`` does).
    generator : torch.Generator, optional
        Source of randomness (default: torch's global generator).
    stratify : bool, default False
        Keep each label's share equal across splits (labels from ``samples`` or
        the second element of each item; a group counts under its most common
        label).
    method, workers, progress, on_error, decode, cache
        As in :func:`audit_datasets`.
    threshold : int or mapping of str to int, optional
        As in :func:`audit_datasets`. The one split is named ``"dataset"``, so
        a mapping's rules are path patterns (or ``"*"``, or ``"dataset"``).
    transform_override, use_samples, num_workers
        As in :func:`audit_datasets`.
    dihedral : bool, default True
        Also keep mirrored, flipped and rotated copies together, as in
        :func:`audit_datasets`.
    verify : "auto", bool or VerifyOptions, default "auto"
        Hashes propose, verification decides (as in
        :func:`leakaudit.audit_splits`); False links every pair within the
        threshold.

    Returns
    -------
    LeakFreeSplit
        A list of ``Subset`` s of ``dataset`` (indices in random order, like
        ``random_split``), with ``.plan`` and ``.report``.

    Examples
    --------
    >>> import tempfile, torch
    >>> from torchvision.datasets import ImageFolder
    >>> from leakaudit.demo import build_demo_dataset
    >>> demo = build_demo_dataset(tempfile.mkdtemp())
    >>> data = ImageFolder(demo.splits["train"])
    >>> train, val = leak_free_random_split(data, [0.8, 0.2], torch.Generator().manual_seed(0),
    ...                                     workers=1)
    >>> len(train) + len(val) == len(data)
    True
    """
    torch = _require_torch()
    options = hashing_options(decode, dihedral=dihedral, verify=verify)
    resolve_threshold(method, threshold)
    check_dihedral(dihedral)
    entry = _resolve("dataset", dataset)
    n = len(entry.indices)
    targets = resolve_lengths(lengths, n)
    hashed = _hash_resolved(
        [entry],
        options=options,
        workers=workers,
        progress=progress,
        on_error=on_error,
        transform_override=transform_override,
        use_samples=use_samples,
        num_workers=num_workers,
        dihedral=dihedral,
        crop_entries=wants_crop_entries(dihedral=dihedral, verify=verify),
        cache=cache,
    )
    report = _report_from(hashed, options, method, threshold, dihedral=dihedral, verify=verify)
    assert report.table is not None
    group_ids = report.table["group_id"].to_numpy()
    labels = None
    if stratify:
        labels = report.table["label"].tolist()
        if any(label is None for label in labels):
            raise ValueError(
                "stratify=True needs a label for every image (from 'samples' or the second "
                "element of each item); this dataset does not provide them."
            )
    rng = np.random.default_rng(_seed_from(generator))
    names = [str(i) for i in range(len(targets))]
    plan = split_groups(group_ids, list(targets), names=names, seed=rng, labels=labels)
    assignment = plan.assignment
    result = LeakFreeSplit(
        torch.utils.data.Subset(dataset, rng.permutation(np.flatnonzero(assignment == k)).tolist())
        for k in range(len(targets))
    )
    result.plan = plan
    result.report = report
    if plan.max_abs_deviation > max(1, round(0.01 * n)):
        warnings.warn(
            f"duplicate groups kept whole make the split deviate from the lengths asked for: "
            f"{plan}",
            SplitDeviationWarning,
            stacklevel=2,
        )
    return result

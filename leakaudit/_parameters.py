"""How an audit was made, as a typed frozen record: ``LeakageReport.parameters``.

The values are checked once, when the record is built (from the audit, from a
mapping or from a report's JSON), so readers use typed attributes instead of
``isinstance`` checks; the record is also a read-only mapping, in recorded order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AuditParameters"]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _is_threshold(value: Any) -> bool:
    # What the readers accepted before: an int (bool included, as isinstance(v, int) did),
    # or per-source rules.
    return isinstance(value, (int, np.integer, Mapping))


def _is_stages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(stage, str) for stage in value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_root(value: Any) -> bool:
    return value is None or isinstance(value, str)


#: Each typed field and the check a recorded value must pass to fill it; a value that
#: fails (a hand-edited or older JSON file) is kept, under its key, in ``extra``.
_CHECKS: dict[str, Callable[[Any], bool]] = {
    "method": _is_str,
    "threshold": _is_threshold,
    "dihedral": _is_bool,
    "stages": _is_stages,
    "verification": lambda value: isinstance(value, Mapping),
    "min_side": _is_int,
    "exif_transpose": _is_bool,
    "trim_borders": _is_bool,
    "hash_shards": _is_int,
    "images_root": _is_root,
    "images": _is_str,
    "embedding_similarity": _is_number,
    "embedding_k": _is_int,
    "embedding_only_ungrouped": _is_bool,
    "embedded_images": _is_int,
}


@dataclass(frozen=True, eq=False)
class AuditParameters(Mapping[str, Any]):
    """How an audit was made: the settings a report records, typed.

    Every field is None when the audit did not record it (``"images_root" in
    parameters`` tells a recorded None from an absent one). The record is also
    a read-only :class:`~collections.abc.Mapping` of the recorded keys, in the
    order they were recorded, so ``report.parameters["stages"]``,
    ``.get("threshold")`` and ``dict(report.parameters)`` read as they always
    did, and the JSON, text and HTML reports are unchanged. Mapping equality:
    a record equals a dict of the same items.

    Attributes
    ----------
    method : str or None
        The hash compared (``"phash+dhash"``, ``"phash"``, ``"dhash"``).
    threshold : int, mapping or None
        The link threshold, or the per-source rules as given.
    dihedral : bool or None
        True when flipped and rotated copies were matched (recorded only then).
    stages : tuple of str or None
        The stages that ran (``"hash candidates"``, ``"pixels"``, ...); the
        mapping view gives a list, as the JSON holds.
    verification : mapping or None
        Verification's counts and limits, or ``{"ran": False, "why": ...}``.
    min_side, exif_transpose, trim_borders : int, bool, bool or None
        The decoding (:class:`~leakaudit.loading.DecodeOptions`).
    hash_shards : int or None
        Hash shard files read (:func:`~leakaudit.shards.audit_hash_shards`).
    images_root : str or None
        The folder images of a shard audit were read inside (recorded None: none).
    images : str or None
        What was not read, in words (shard audits).
    embedding_similarity, embedding_k, embedding_only_ungrouped, embedded_images
        The embedding stage's settings and how many images it embedded.
    extra : mapping
        Any other recorded key (an adapter's, a caller's), and a recorded value
        of the wrong type for its field.
    """

    method: str | None = None
    threshold: int | Mapping[str, Any] | None = None
    dihedral: bool | None = None
    stages: tuple[str, ...] | None = None
    verification: Mapping[str, Any] | None = None
    min_side: int | None = None
    exif_transpose: bool | None = None
    trim_borders: bool | None = None
    hash_shards: int | None = None
    images_root: str | None = None
    images: str | None = None
    embedding_similarity: float | None = None
    embedding_k: int | None = None
    embedding_only_ungrouped: bool | None = None
    embedded_images: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: The recorded keys, in order (default: the fields that are not None, then ``extra``).
    recorded: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not self.recorded:
            keys = [name for name in _CHECKS if getattr(self, name) is not None]
            object.__setattr__(self, "recorded", tuple(dict.fromkeys([*keys, *self.extra])))
        stages: Any = self.stages  # a list given by hand: kept as a tuple (the record is frozen)
        if isinstance(stages, list):
            object.__setattr__(self, "stages", tuple(stages))
        unknown = [key for key in self.recorded if key not in _CHECKS and key not in self.extra]
        if unknown:
            raise ValueError(f"recorded names keys with no value: {unknown}.")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> AuditParameters:
        """The record of ``values`` (a dict, a report's JSON ``parameters``, or a record)."""
        if isinstance(values, AuditParameters):
            return values
        typed: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in (values or {}).items():
            name = str(key)
            check = _CHECKS.get(name)
            if check is not None and check(value):
                typed[name] = tuple(value) if name == "stages" else value
            else:
                extra[name] = value
        return cls(**typed, extra=extra, recorded=tuple(str(key) for key in (values or {})))

    def replace(self, **changes: Any) -> AuditParameters:
        """A copy with ``changes`` recorded (new keys last), checked as in :meth:`from_mapping`."""
        values = dict(self)
        values.update(changes)
        return AuditParameters.from_mapping(values)

    def __getitem__(self, key: str) -> Any:
        if key not in self.recorded:
            raise KeyError(key)
        if key in self.extra:
            return self.extra[key]
        value = getattr(self, key)
        return list(value) if key == "stages" else value

    def __iter__(self) -> Iterator[str]:
        return iter(self.recorded)

    def __len__(self) -> int:
        return len(self.recorded)

    def __contains__(self, key: object) -> bool:
        return key in self.recorded

    def __repr__(self) -> str:
        return f"AuditParameters({dict(self)!r})"

"""Primitives on 64-bit hashes, defined once: popcount, hex encoding and decoding, Hamming
distance of hex strings, and the byte digest."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from leakaudit._validation import (
    check_int,
    describe,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "bytes_digest",
    "hamming_distance",
    "hashes_to_hex",
    "hashes_to_hex_arrow",
    "hex_to_hashes",
    "image_digest",
    "popcount64",
]


def bytes_digest(data: bytes | bytearray | memoryview | Iterable[bytes]) -> int:
    """The byte digest: BLAKE2b-64 of an encoded image's bytes, as an int.

    The one digest of bytes everywhere (``HashTable.digest``, the hash cache's file
    digests, verification's ``bytes`` evidence, the report's ``digest`` column):
    ``data`` is the bytes, or an iterable of their pieces in order (a file read in
    pieces has the digest of its whole content).

    Examples
    --------
    >>> bytes_digest(b"abc") == bytes_digest(b"abc") != bytes_digest(b"abd")
    True
    >>> bytes_digest([b"ab", b"c"]) == bytes_digest(b"abc")
    True
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
    h = hashlib.blake2b(digest_size=8)
    for piece in data:
        h.update(piece)
    return int.from_bytes(h.digest(), "big")


def image_digest(image: Image.Image) -> int:
    """The digest of an in-memory image: its mode, size and pixels.

    The byte digest of ``"{mode}:{width}x{height}:"`` followed by the pixels, so two
    images have one digest exactly when they have the same pixels in the same mode
    (what "byte copy" means for an image that has no file).

    Examples
    --------
    >>> image_digest(Image.new("L", (2, 2))) != image_digest(Image.new("L", (2, 1)))
    True
    """
    header = f"{image.mode}:{image.width}x{image.height}:".encode()
    return bytes_digest((header, image.tobytes()))


# ----------------------------------------------------------------------------- hex


def hashes_to_hex(values: NDArray[np.uint64], *, n_bits: int = 64) -> list[str]:
    """Format hashes as zero-padded lowercase hex strings (16 characters for 64 bits).

    Parameters
    ----------
    values : array of uint64
        The hashes.
    n_bits : int, default 64
        Bits per hash; the strings have ``ceil(n_bits / 4)`` characters and only
        the low ``n_bits`` bits are kept.

    Examples
    --------
    >>> import numpy as np
    >>> hashes_to_hex(np.array([0, 2**64 - 1, 0xABC], dtype=np.uint64))
    ['0000000000000000', 'ffffffffffffffff', '0000000000000abc']
    >>> hashes_to_hex(np.array([0xFF01], dtype=np.uint64), n_bits=16)
    ['ff01']
    """
    n_bits = check_int("n_bits", n_bits, 1, 64)
    array = np.asarray(values)
    if array.dtype != np.uint64:
        if array.size and (array.dtype.kind not in "iu" or (array < 0).any()):
            raise ValueError(f"values must be non-negative integers; got dtype {array.dtype}.")
        array = array.astype(np.uint64)
    array = array.ravel()
    if n_bits == 64:
        # One C-level hex conversion of the big-endian bytes, then slicing.
        text = array.astype(">u8").tobytes().hex()
        return [text[i : i + 16] for i in range(0, len(text), 16)]
    width = math.ceil(n_bits / 4)
    mask = (1 << n_bits) - 1
    return [format(v & mask, f"0{width}x") for v in array.tolist()]


_HEX_RE = re.compile(r"[0-9a-fA-F]+\Z")


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN
    if isinstance(value, str):
        return value == ""
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas missing scalars
        return True
    return isinstance(value, np.floating) and bool(np.isnan(value))


def _check_hex(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a hex string or missing; got {describe(value)}.")
    if not _HEX_RE.match(value):
        raise ValueError(f"{what} must be a hex string; got {describe(value)}.")
    return value


def hashes_to_hex_arrow(values: NDArray[np.uint64], present: NDArray[np.bool_]) -> Any:
    """:func:`hashes_to_hex`'s strings as a pyarrow string array, null where not ``present``.

    Built from one buffer of hex text, with no Python string per row (the Parquet shards'
    ``*_hex`` columns, and pandas columns when pandas stores strings in Arrow). Past the
    rows a 32-bit offset can address it is a ``large_string`` array. Needs pyarrow.
    """
    import pyarrow as pa

    n = len(values)
    text = np.ascontiguousarray(values, dtype=">u8").tobytes().hex().encode("ascii")
    large = n > _ARROW_HEX_ROWS
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int64 if large else np.int32)
    present = np.asarray(present, dtype=bool)
    missing = int(n - np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if missing else None
    kind = pa.LargeStringArray if large else pa.StringArray
    return kind.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(text), validity, null_count=missing
    )


# Rows up to which a hex column fits an Arrow string array (int32 offsets, 16 bytes a row).
_ARROW_HEX_ROWS = (2**31 - 1) // 16


def hex_to_hashes(
    strings: Sequence[str | None] | Iterable[str | None], *, name: str = "strings"
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Parse hex strings (up to 16 characters, all the same length) into uint64 hashes.

    The one rule for hex hashes read anywhere (the DataFrame API's columns, Parquet shards'
    ``*_hex`` columns): each present value is a str of 1 to 16 hex digits (either case),
    nothing else (no ``0x``, no whitespace), and all present values have the same number of
    digits, as :func:`hashes_to_hex` writes them (a shorter string is a shorter hash, not
    the same one with its zeros left off). Vectorised: no Python work per row beyond a
    type check.

    Parameters
    ----------
    strings : sequence of str or None
        Hex strings, e.g. from :func:`hashes_to_hex` or a CSV column. None, NaN,
        ``pd.NA`` and ``""`` are missing.
    name : str, default "strings"
        What the values are, for error messages (``name[row]``).

    Returns
    -------
    values : numpy.ndarray of uint64
        The hashes, 0 where missing.
    valid : numpy.ndarray of bool
        False where missing.

    Raises
    ------
    TypeError
        A value is neither a str nor missing; the message names its row.
    ValueError
        A string is not hex, is longer than 16 characters, or differs in length from
        the first; the message names its row and value.

    Examples
    --------
    >>> values, valid = hex_to_hashes(["ffffffffffffffff", None, "000000000000000a"])
    >>> values.tolist(), valid.tolist()
    ([18446744073709551615, 0, 10], [True, False, True])
    >>> hex_to_hashes(["ff00", "0f"])
    Traceback (most recent call last):
    ...
    ValueError: hashes must be the same length; got 4 and 2 hex characters (strings[1]).
    """
    import pandas as pd

    if isinstance(strings, pd.Series):
        items = strings.to_numpy(dtype=object)
    else:
        listed = _as_list(strings)
        items = np.empty(len(listed), dtype=object)
        items[:] = listed
    n = len(items)
    parsed = np.zeros(n, dtype=np.uint64)
    present: NDArray[np.bool_] = ~np.asarray(pd.isna(items), dtype=bool)
    rows = np.flatnonzero(present)
    if rows.size == 0:
        return parsed, present
    chosen = items[rows] if rows.size < n else items
    listed = chosen.tolist()
    try:
        fast = _parse_uniform_hex(listed)
    except TypeError:  # something other than a string
        for row, item in zip(rows.tolist(), listed, strict=True):
            if not isinstance(item, str):
                raise TypeError(
                    f"{name}[{row}] must be a hex string or missing; got {describe(item)}."
                ) from None
        raise
    if fast is not None:  # the usual case: clean hex strings of one width
        parsed[rows] = fast
        return parsed, present
    lengths = np.fromiter(map(len, listed), dtype=np.int64, count=len(listed))
    blank = lengths == 0
    if blank.any():
        present[rows[blank]] = False
        rows, chosen, lengths = rows[~blank], chosen[~blank], lengths[~blank]
        if rows.size == 0:
            return parsed, present
    long = np.flatnonzero(lengths > 16)
    if long.size:
        row = int(rows[long[0]])
        raise ValueError(
            f"{name}[{row}] must be at most 16 hex characters (64 bits); "
            f"got {describe(items[row])}."
        )
    widest = int(lengths.max())
    codes = chosen.astype(f"U{widest}").view(np.uint32).reshape(rows.size, widest)
    nibbles = _HEX_NIBBLES[np.minimum(codes, 255)]
    inside = np.arange(widest) < lengths[:, None]
    bad = np.flatnonzero(((nibbles == 255) & inside).any(axis=1))
    if bad.size:
        row = int(rows[bad[0]])
        raise ValueError(f"{name}[{row}] must be a hex string; got {describe(items[row])}.")
    width = int(lengths[0])
    odd = np.flatnonzero(lengths != width)
    if odd.size:
        raise ValueError(
            f"hashes must be the same length; got {width} and {int(lengths[odd[0]])} hex "
            f"characters ({name}[{int(rows[odd[0]])}])."
        )
    parsed[rows] = _combine_nibbles(nibbles)
    return parsed, present


_HEX_NIBBLES = np.full(256, 255, dtype=np.uint8)
for _digit in range(16):
    _HEX_NIBBLES[ord(f"{_digit:x}")] = _digit
    _HEX_NIBBLES[ord(f"{_digit:X}")] = _digit


def _parse_uniform_hex(listed: list[str]) -> NDArray[np.uint64] | None:
    """Parse strings that are all hex digits of one width <= 16; None if they are not.

    The strings are joined with a newline after each, so that when (and only
    when) they all have the same width the text is a matrix whose last column
    is all newlines; any other newline, or any non-hex character, sends the
    column to the general path.
    """
    n, width = len(listed), len(listed[0])
    text = "\n".join(listed) + "\n"
    if not 0 < width <= 16 or len(text) != n * (width + 1) or not text.isascii():
        return None
    flat = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    if not (flat[width :: width + 1] == ord("\n")).all():
        return None
    # Hex digits by arithmetic over the whole contiguous buffer (cheaper than a table
    # lookup): '0'-'9' are 48-57; 'a'-'f' and 'A'-'F' are 97-102 and 65-70 (equal once
    # bit 5 is set). The n newlines are the only other characters allowed.
    digit = (flat - np.uint8(48)) < 10
    letter = ((flat | np.uint8(32)) - np.uint8(97)) < 6
    if int(np.count_nonzero(digit | letter)) != n * width:
        return None
    nibbles = (flat & np.uint8(15)) + np.uint8(9) * (flat >> np.uint8(6))
    return _combine_nibbles(nibbles.reshape(n, width + 1)[:, :width])


def _combine_nibbles(nibbles: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """Rows of up to 16 nibbles (most significant first) as uint64 values."""
    n, width = nibbles.shape
    padded = np.zeros((n, 16), dtype=np.uint8)
    padded[:, 16 - width :] = nibbles
    octets = np.ascontiguousarray((padded[:, 0::2] << 4) | padded[:, 1::2])
    return octets.view(">u8").ravel().astype(np.uint64)


def _as_list(values: object) -> list[object]:
    if isinstance(values, (str, bytes)):
        return [values]
    tolist = getattr(values, "tolist", None)
    if callable(tolist) and not isinstance(values, (list, tuple)):
        result = tolist()
        return list(result) if isinstance(result, list) else [result]
    return list(cast("Iterable[object]", values))


# ------------------------------------------------------------------------- hamming

_POPCOUNT_LUT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount64(values: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """Count the set bits of each uint64.

    Uses ``np.bitwise_count`` (numpy >= 2.0), else a byte lookup table.

    Examples
    --------
    >>> import numpy as np
    >>> popcount64(np.array([0, 1, 0xFF, 2**64 - 1], dtype=np.uint64)).tolist()
    [0, 1, 8, 64]
    """
    array = np.asarray(values, dtype=np.uint64)
    if hasattr(np, "bitwise_count"):
        counts: NDArray[np.uint8] = np.bitwise_count(array).astype(np.uint8, copy=False)
        return counts
    return _popcount64_table(array)


def _popcount64_table(array: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """:func:`popcount64` by a byte lookup table: numpy 1.x, which has no ``bitwise_count``."""
    as_bytes = np.ascontiguousarray(array, dtype=np.uint64).view(np.uint8).reshape(*array.shape, 8)
    summed: NDArray[np.uint8] = _POPCOUNT_LUT[as_bytes].sum(axis=-1, dtype=np.uint8)
    return summed


def _is_scalar(value: object) -> bool:
    if isinstance(value, (str, bytes)) or value is None:
        return True
    if isinstance(value, np.ndarray):
        return value.ndim == 0
    return not isinstance(value, Iterable)


def hamming_distance(hash1: Any, hash2: Any) -> Any:
    """Count the bits that differ between hex-encoded hashes.

    Parameters
    ----------
    hash1, hash2 : str, None, or a list / numpy array / pandas Series of them
        Hex strings of equal length (any length: ``"ff00"`` is a 16-bit hash).
        Vectors are compared element-wise; a length-1 side is recycled. None and
        NaN are missing.

    Returns
    -------
    int, pandas.NA or pandas.arrays.IntegerArray
        For two scalars an int (``pd.NA`` when either is missing); otherwise a
        nullable ``Int64`` array, missing wherever either input is missing.

    Raises
    ------
    ValueError
        Vector lengths differ (and neither is 1), two hashes have different
        lengths, or a value is not hex.

    Examples
    --------
    >>> hamming_distance("ff00", "ff01")
    1
    >>> hamming_distance(["ffff", "0000", None], "0000")
    <IntegerArray>
    [16, 0, <NA>]
    Length: 3, dtype: Int64
    >>> hamming_distance("ffffffffffffffff", None)
    <NA>
    """
    import pandas as pd

    scalar = _is_scalar(hash1) and _is_scalar(hash2)
    left = [hash1] if _is_scalar(hash1) else _as_list(hash1)
    right = [hash2] if _is_scalar(hash2) else _as_list(hash2)
    if len(left) != len(right):
        if len(left) == 1:
            left = left * len(right)
        elif len(right) == 1:
            right = right * len(left)
        else:
            raise ValueError(
                "hash1 and hash2 must have the same length, or one of them length 1; "
                f"got {len(left)} and {len(right)}."
            )
    n = len(left)
    mask = np.zeros(n, dtype=np.bool_)
    xors: list[int] = [0] * n
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        missing_a, missing_b = _is_missing(a), _is_missing(b)
        if not missing_a:
            _check_hex(a, "hash1" if scalar else f"hash1[{i}]")
        if not missing_b:
            _check_hex(b, "hash2" if scalar else f"hash2[{i}]")
        if missing_a or missing_b:
            mask[i] = True
            continue
        assert isinstance(a, str) and isinstance(b, str)
        if len(a) != len(b):
            raise ValueError(
                f"hashes must be the same length; got {len(a)} and {len(b)} hex characters."
            )
        xors[i] = int(a, 16) ^ int(b, 16)
    counts = [x.bit_count() for x in xors]
    if scalar:
        return pd.NA if mask[0] else counts[0]
    return pd.arrays.IntegerArray(np.array(counts, dtype=np.int64), mask)

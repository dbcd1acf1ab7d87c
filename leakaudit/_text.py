"""Showing file names safely: in a terminal, a text report, JSON and CSV.

File names are data from outside. Printed raw, an escape sequence in a name
reaches the terminal and a newline forges a report line; written raw into JSON,
a name that is not valid UTF-8 becomes a lone surrogate that strict parsers
reject; written raw into CSV, a cell starting with ``=`` is a spreadsheet formula.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

__all__ = ["bits", "first_few", "printable"]

# Categories escaped: control characters (C0, DEL, C1), lone surrogates (the
# undecodable bytes of a non-UTF-8 name under surrogateescape), line and
# paragraph separators, and format characters such as bidi overrides, which
# can make a name display as another.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp", "Cf"})


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the original byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str) -> str:
    """Return ``text`` with control, separator, format and surrogate characters escaped.

    Undecodable bytes of a non-UTF-8 file name (``os.fsdecode``'s surrogate
    escapes) come out as ``\\xNN`` with the original byte; other escaped
    characters as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``. Everything else,
    including non-ASCII letters, is kept.

    Examples
    --------
    >>> printable("train/cat.jpg")
    'train/cat.jpg'
    >>> printable("evil\\n  LEAK forged.jpg")
    'evil\\\\x0a  LEAK forged.jpg'
    >>> printable("caf\\udce9.jpg")
    'caf\\\\xe9.jpg'
    >>> printable("日本.png")
    '日本.png'
    """
    if text.isprintable():
        return text
    return "".join(
        _escape(char) if unicodedata.category(char) in _ESCAPED_CATEGORIES else char
        for char in text
    )


def first_few(items: Iterable[str], total: int, shown: int = 10) -> str:
    """``"a; b; c"``, or the first ``shown`` of ``total`` items and ``"; and N more"``.

    How every warning and message names the files it is about.

    Examples
    --------
    >>> first_few(["a", "b"], 2)
    'a; b'
    >>> first_few(["a", "b"], 12, shown=2)
    'a; b; and 10 more'
    """
    listed: list[str] = []
    for item in items:
        if len(listed) == shown:
            break
        listed.append(item)
    more = f"; and {total - len(listed)} more" if total > len(listed) else ""
    return "; ".join(listed) + more


def bits(count: object) -> str:
    """A hash distance in words, singular or plural.

    Examples
    --------
    >>> bits(1), bits(0), bits(12)
    ('1 bit', '0 bits', '12 bits')
    """
    return f"{count} bit" if str(count) == "1" else f"{count} bits"

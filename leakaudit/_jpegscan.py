"""The JPEG scan check: whether a JPEG's scans hold fewer bytes than its declared frame needs.

Pure Python over the file's bytes (no Pillow): :func:`jpeg_scans_short` finds
truncated JPEGs that libjpeg would fill with grey without failing.
"""

from __future__ import annotations

import re
from typing import TypeAlias

__all__ = ["jpeg_scans_short", "last_jpeg_header"]

# JPEG scan check (jpeg_scans_short). Start-of-frame markers of Huffman-coded frames
# (baseline, extended, progressive) -> the fewest bits a scan holds per 8 x 8 block:
# a sequential scan codes a DC difference and at least an end-of-block code (each at
# least 1 bit); a progressive DC scan at least 1 bit; a progressive AC scan can code
# long runs of empty blocks in a few bits, so it gives no bound.
_HUFFMAN_FRAMES = {0xC0: 2, 0xC1: 2, 0xC2: 1}
_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Inside entropy-coded data a 0xFF byte is followed by 0x00 (stuffing) or a restart
# marker; anything else ends the scan.
_SCAN_END = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_RESTART_MARKER = re.compile(rb"\xff[\xd0-\xd7]")
# Markers whose segments the walk reads (frames, restart interval, scans); it skips the others.
_WALKED_MARKERS = _FRAME_MARKERS | {0xDA, 0xDD}
# A frame: (SOF marker, width, height, {component id: (h, v) sampling}, max h, max v).
_Frame: TypeAlias = "tuple[int, int, int, dict[int, tuple[int, int]], int, int]"


def jpeg_scans_short(data: bytes) -> bool:
    """Whether a JPEG's scans certainly hold less than its declared frame needs.

    libjpeg does not fail on a scan that ends early (at an end-of-image marker
    appended to a cut-off file, or a frame header that claims more than the file
    holds): it fills the missing blocks with grey and only warns, and Pillow
    drops the warning. Walking the markers finds such files without decoding:
    a scan is short when its bytes (stuffing and restart markers included) are
    fewer than its blocks need at the least (see ``_HUFFMAN_FRAMES``), or when it
    has fewer restart markers than its restart interval requires; the image is
    incomplete when it ends before every component had its DC coefficients
    coded. Anything unusual (arithmetic coding, lossless or hierarchical
    frames, a height given later by a DNL marker, bytes between segments,
    malformed headers) gives False: libjpeg judges those.

    The walk up to the first scan depends only on the bytes before that scan's
    data, which the JPEGs of one dataset (one encoder, size and quality) often
    share byte for byte: that part of the walk is remembered for the last header
    seen, and a file starting with the same bytes continues from there.
    """
    remembered = _last_jpeg_header
    if remembered is not None and data.startswith(remembered[0]):
        first = remembered[1]
    else:
        walked = _jpeg_walk(data, 2, None, 0, set(), first=True)  # 2: after SOI
        if isinstance(walked, bool):
            return walked
        first = walked
        _remember_jpeg_header(data[: first[2]], first)
    frame, restart, end, scan = first
    dc_coded: set[int] = set()
    verdict, pos = _jpeg_scan_check(data, frame, restart, end, scan, dc_coded)
    if verdict is not None:
        return verdict
    result = _jpeg_walk(data, pos, frame, restart, dc_coded, first=False)
    assert isinstance(result, bool)
    return result


# (frame, restart interval, end of the scan header, the scan) at a JPEG's first scan.
_FirstScan: TypeAlias = "tuple[_Frame, int, int, tuple[list[int], int, int, int]]"
# The bytes up to the end of the first scan header of the last JPEG walked, and what
# the walk found there (see jpeg_scans_short). Shared by the threads of a process and
# thread-safe by immutable replacement, without a lock: a new tuple is built whole and
# bound in one assignment (atomic), readers take one reference to a local first and
# check that their file starts with its bytes, and nothing in it is mutated after.
# Two threads racing only replace each other's entry: a lost entry costs a walk.
_last_jpeg_header: tuple[bytes, _FirstScan] | None = None


def _remember_jpeg_header(header: bytes, first: _FirstScan) -> None:
    global _last_jpeg_header
    _last_jpeg_header = (header, first)


def last_jpeg_header() -> bytes | None:
    """The header bytes (up to the end of the first scan header) of the last JPEG walked."""
    remembered = _last_jpeg_header
    return None if remembered is None else remembered[0]


def _jpeg_walk(
    data: bytes,
    pos: int,
    frame: _Frame | None,
    restart: int,
    dc_coded: set[int],
    *,
    first: bool,
) -> bool | _FirstScan:
    """Walk the markers from ``pos``: the verdict, or (``first``) the state at the first scan."""
    size = len(data)
    while pos + 1 < size:
        if data[pos] != 0xFF:
            return False
        marker = data[pos + 1]
        if marker == 0xFF:  # a fill byte before the marker
            pos += 1
            continue
        if marker == 0xD9:  # EOI
            return frame is not None and not dc_coded.issuperset(frame[3])
        if 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a segment
            pos += 2
            continue
        if pos + 4 > size:
            return False
        body = pos + 4
        end = pos + 2 + (data[pos + 2] << 8 | data[pos + 3])
        if end < body or end > size:
            return False
        if marker not in _WALKED_MARKERS:
            pos = end
        elif marker == 0xDA:  # SOS: the scan header, then entropy-coded data
            if frame is None:
                return False
            scan = _jpeg_scan(data[body:end], frame)
            if scan is None:
                return False
            if first:
                return frame, restart, end, scan
            verdict, pos = _jpeg_scan_check(data, frame, restart, end, scan, dc_coded)
            if verdict is not None:
                return verdict
        elif marker == 0xDD:  # DRI
            if end - body >= 2:
                restart = data[body] << 8 | data[body + 1]
            pos = end
        else:  # a start-of-frame marker
            if frame is not None or marker not in _HUFFMAN_FRAMES:
                return False
            frame = _jpeg_frame(data[body:end], marker)
            if frame is None:
                return False
            pos = end
    return False  # no EOI: Pillow reports a file that ends inside a scan as truncated


def _jpeg_scan_check(
    data: bytes,
    frame: _Frame,
    restart: int,
    end: int,
    scan: tuple[list[int], int, int, int],
    dc_coded: set[int],
) -> tuple[bool | None, int]:
    """Check one scan whose data starts at ``end``: ``(verdict, None to go on; where)``."""
    ids, units, blocks, spectral_start = scan
    size = len(data)
    if spectral_start == 0:
        # The scan's data must not end (at a marker, or the end of the file)
        # within its first `need` bytes; only that window is searched.
        need = _ceil_div(blocks * _HUFFMAN_FRAMES[frame[0]], 8)
        if end + need > size:
            return True, end
        if _scan_ends_within(data, end, end + need):
            return True, end
        dc_coded.update(ids)
    if not restart and dc_coded.issuperset(frame[3]):
        # Nothing further can be short: AC scans give no bound (the usual
        # baseline file is one scan and ends here, without reading it all).
        return False, end
    found = _SCAN_END.search(data, end)
    stop = found.start() if found is not None else size
    if restart and len(_RESTART_MARKER.findall(data, end, stop)) < _ceil_div(units, restart) - 1:
        return True, end
    return None, stop


def _scan_ends_within(data: bytes, start: int, stop: int) -> bool:
    """Whether entropy-coded data starting at ``start`` ends (at a marker) before ``stop``.

    That is, whether ``_SCAN_END`` matches at a position in ``[start, stop)``.
    Usually every 0xFF byte there is stuffing (0xFF 0x00): two C-level counts
    say so without the regular expression walking the window byte by byte.
    """
    if data.count(b"\xff", start, stop) == data.count(b"\xff\x00", start, stop + 1):
        return False  # each 0xFF in the window is followed by 0x00: no marker
    early = _SCAN_END.search(data, start, stop + 1)
    return early is not None and early.start() < stop


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _jpeg_frame(segment: bytes, marker: int) -> _Frame | None:
    """The frame an SOF segment declares (see ``_Frame``), None when malformed."""
    if len(segment) < 6:
        return None
    height = segment[1] << 8 | segment[2]
    width = segment[3] << 8 | segment[4]
    count = segment[5]
    if not width or not height or not count or len(segment) < 6 + 3 * count:
        return None
    components: dict[int, tuple[int, int]] = {}
    h_max = v_max = 0
    for k in range(7, 7 + 3 * count, 3):
        sampling = segment[k]
        h, v = sampling >> 4, sampling & 15
        if not h or not v:
            return None
        components[segment[k - 1]] = (h, v)
        h_max, v_max = max(h_max, h), max(v_max, v)
    return marker, width, height, components, h_max, v_max


def _jpeg_scan(segment: bytes, frame: _Frame) -> tuple[list[int], int, int, int] | None:
    """``(component ids, MCUs, 8 x 8 blocks, spectral start)`` of an SOS segment."""
    _, width, height, components, h_max, v_max = frame
    count = segment[0] if segment else 0
    if not count or len(segment) < 4 + 2 * count:
        return None
    ids = list(segment[1 : 1 + 2 * count : 2])
    for component in ids:
        if component not in components:
            return None
    if count == 1:  # non-interleaved: one block per MCU, the component's own size
        h, v = components[ids[0]]
        columns = _ceil_div(_ceil_div(width * h, h_max), 8)
        rows = _ceil_div(_ceil_div(height * v, v_max), 8)
        return ids, columns * rows, columns * rows, segment[1 + 2 * count]
    units = _ceil_div(width, 8 * h_max) * _ceil_div(height, 8 * v_max)
    per_unit = 0
    for component in ids:
        h, v = components[component]
        per_unit += h * v
    return ids, units, units * per_unit, segment[1 + 2 * count]

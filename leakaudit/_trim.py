"""Border trimming (``DecodeOptions.trim_borders``): the region of a reduced grey image
inside uniform borders (letterbox and pillarbox bars, padding), found on its pixels alone.
"""

from __future__ import annotations

import math
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "TRIM_CORNER_FRACTION",
    "TRIM_CORNER_PIXELS",
    "TRIM_CORNER_TOLERANCE",
    "TRIM_GROUND_CORNERS",
    "TRIM_MIN_FRACTION",
    "TRIM_MIN_IMAGE_SIDE",
    "TRIM_MIN_PIXELS",
    "TRIM_RINGING_LINES",
    "TRIM_RINGING_MEAN",
    "TRIM_RINGING_TOLERANCE",
    "TRIM_STEP",
    "TRIM_TOLERANCE",
    "Box",
    "apply_trim",
    "flat_edges",
    "trim_allowed",
    "trim_box",
]

Box: TypeAlias = "tuple[float, float, float, float]"
"""A ``(left, top, right, bottom)`` region in pixel coordinates, possibly fractional."""

# Border trimming (DecodeOptions.trim_borders), on the reduced upright grey pixels.
# Measured in benchmarks/bench_borders.py (benchmarks/RESULTS.md, "Borders and crops").
#: A bar line's pixels all lie within this many grey levels of the bar colour (the
#: median of the outermost line): a digital bar is flat, JPEG-compressed too away
#: from its edge; the flattest real-photo edges (a moon's surface) are not.
TRIM_TOLERANCE = 2
#: Up to this many lines between the flat bar and the content may be JPEG ringing of
#: the edge: within TRIM_RINGING_TOLERANCE of the bar colour and on average within
#: TRIM_RINGING_MEAN (content moves the whole line, ringing single pixels).
TRIM_RINGING_LINES = 3
TRIM_RINGING_TOLERANCE = 8
TRIM_RINGING_MEAN = 2.0
#: The line after a bar, or the one after it, holds a pixel at least this far from
#: the bar colour: a bar ends in a step, a graded sky in a drift.
TRIM_STEP = 12
#: A trim must keep at least this fraction of each side (and TRIM_MIN_PIXELS
#: reduced pixels); otherwise that axis is left untrimmed, so a blank image, or
#: a small object on a wide background, is hashed whole.
TRIM_MIN_FRACTION = 0.25
TRIM_MIN_PIXELS = 8
#: Graphics on a plain ground are not padded pictures. A sprite or icon drawn on a
#: transparent canvas becomes, once flattened onto ``background``, an exactly flat
#: margin around a silhouette; its JPEG copy (flattened by another tool onto white)
#: has the same margin with ringing near the silhouette. Trimmed, the two boxes end
#: wherever the first line off the margin touches the silhouette's tips, which the
#: ringing moves, so they differed (or one copy stayed whole) and the copy was lost
#: (benchmarks/bench_trim_alpha.py: sprite JPEG copies 100% found untrimmed, 25-75%
#: trimmed). A padded picture fills the trimmed box up to its corners; a silhouette
#: leaves them ground. So a trim is refused when at least TRIM_GROUND_CORNERS corners
#: of the trimmed box are still border colour (a square just inside the corner,
#: TRIM_CORNER_FRACTION of the box's shorter side and at least TRIM_CORNER_PIXELS
#: lines, every pixel within TRIM_CORNER_TOLERANCE of the bar colour of a trimmed
#: side next to it): the graphic and all its copies are hashed whole,
#: as without trimming. One ground corner is allowed: a photo's dark corner next to
#: a black bar, a document icon's folded corner. Transparent and opaque copies are
#: judged alike: the test sees only the flattened grey pixels.
#: Swept on bench_borders' 3,300 padded photo copies / bench_trim_alpha's sprites of
#: 128 px and more (copies found, trim on): a 2-line square within 8 levels refused
#: 36 photo trims (1.1%) / 89%; within 4, 22 / 89%; 12% of the side within 4, 4 / 83%
#: (a larger square is less often all bar colour in a photo, and still all ground in
#: the corner of a round or pointed silhouette).
TRIM_GROUND_CORNERS = 2
TRIM_CORNER_FRACTION = 0.12
TRIM_CORNER_PIXELS = 2
TRIM_CORNER_TOLERANCE = 4
#: Images whose shorter side is under this many pixels are never trimmed. They are
#: decoded unreduced (the reduced decode starts at 2 x the default min_side), so a
#: JPEG copy's 8 x 8 blocks ring over up to 7 pixels next to the content: a margin
#: of a few pixels (a 16-64 px icon's) is flat in a PNG and noise in its JPEG copy,
#: and no tolerance tells that noise from content. Padded photos are larger.
TRIM_MIN_IMAGE_SIDE = 128


def trim_allowed(size: tuple[int, int]) -> bool:
    """Whether an image of ``size`` (width, height, before any reduction) may be trimmed.

    False under :data:`TRIM_MIN_IMAGE_SIDE` pixels on the shorter side.

    Examples
    --------
    >>> trim_allowed((500, 375)), trim_allowed((64, 64))
    (True, False)
    """
    return min(size) >= TRIM_MIN_IMAGE_SIDE


def trim_box(
    pixels: NDArray[np.uint8],
    box: Box | None = None,
    *,
    tolerance: int = TRIM_TOLERANCE,
    ringing_lines: int = TRIM_RINGING_LINES,
    step: int = TRIM_STEP,
) -> Box | None:
    """Return the region of ``pixels`` (within ``box``) inside uniform borders.

    A side's border is the run of lines (rows for top and bottom, columns for
    left and right) whose pixels all lie within ``tolerance`` grey levels of
    the median of the outermost line, followed by at most ``ringing_lines``
    lines of JPEG ringing (see :data:`TRIM_RINGING_TOLERANCE`). It counts only
    when the line after it (or the one after that) has a pixel at least
    ``step`` levels away from the bar colour, so a gently graded sky is never
    taken for a bar. The bar's edge is placed inside the first content line
    by the share of bar colour mixed into it (the reduced decode averages the
    pixels on both sides of the edge), so the region is fractional. Rows are
    trimmed first, then columns within the rows kept. An axis is left
    untrimmed when the trim would keep less than :data:`TRIM_MIN_FRACTION` of
    it or fewer than :data:`TRIM_MIN_PIXELS` pixels (a blank image is all
    border). No side is trimmed when two or more corners of the trimmed region
    are still border colour (:data:`TRIM_GROUND_CORNERS`): that is a shape on a
    plain or transparent ground (a sprite, an icon), not a padded picture, and
    its copies could not be trimmed alike. The image size rule
    (:func:`trim_allowed`) is applied by the decoder, not here.

    Parameters
    ----------
    pixels : numpy.ndarray of uint8, shape (height, width)
        The reduced, upright greyscale image.
    box : Box or None
        The region the hashes cover without trimming; None is the whole array.

    Returns
    -------
    Box or None
        ``(left, top, right, bottom)`` in pixel coordinates of ``pixels``;
        None when no side is trimmed.

    Examples
    --------
    >>> import numpy as np
    >>> picture = np.zeros((40, 60), dtype=np.uint8)
    >>> picture[10:30] = 40 + np.arange(60, dtype=np.uint8) * 3
    >>> trim_box(picture)
    (0.0, 10.0, 60.0, 30.0)
    >>> trim_box(np.full((40, 60), 255, dtype=np.uint8)) is None
    True
    """
    height, width = pixels.shape
    left, top, right, bottom = box if box is not None else (0.0, 0.0, float(width), float(height))
    box_top, box_bottom = top, bottom
    limits = (tolerance, ringing_lines, step)
    box_left, box_right = left, right
    new_top, new_bottom, top_colour, bottom_colour = _trim_axis(pixels, top, bottom, limits)
    if (new_top, new_bottom) == (top, bottom):
        top_colour = bottom_colour = None
    top, bottom = new_top, new_bottom
    # Columns are judged on the rows kept, less the mixed lines at trimmed edges.
    row_start = _inward(top, top == box_top, lower=True)
    row_stop = _inward(bottom, bottom == box_bottom, lower=False)
    rows = pixels[math.floor(row_start) : math.ceil(row_stop)]
    new_left, new_right, left_colour, right_colour = _trim_axis(rows.T, left, right, limits)
    if (new_left, new_right) == (left, right):
        left_colour = right_colour = None
    left, right = new_left, new_right
    colours = (left_colour, top_colour, right_colour, bottom_colour)
    if all(colour is None for colour in colours):
        return None
    column_start = _inward(left, left == box_left, lower=True)
    column_stop = _inward(right, right == box_right, lower=False)
    inner = (column_start, row_start, column_stop, row_stop)
    if _ground_corners(pixels, inner, colours) >= TRIM_GROUND_CORNERS:
        return None
    return left, top, right, bottom


def _ground_corners(pixels: NDArray[np.uint8], inner: Box, colours: tuple[int | None, ...]) -> int:
    """How many corners of ``inner`` are border colour (:data:`TRIM_GROUND_CORNERS`).

    ``colours`` are the bar colours of the left, top, right and bottom sides
    (None: that side is not trimmed). A corner counts only when a side next to it
    is trimmed, and is border colour when every pixel of the square inside it
    (:data:`TRIM_CORNER_FRACTION` of the shorter side, at least
    :data:`TRIM_CORNER_PIXELS` lines) lies within
    :data:`TRIM_CORNER_TOLERANCE` of that side's bar colour.
    """
    left, top, right, bottom = (round(edge) for edge in inner)
    shorter = min(right - left, bottom - top)
    size = min(max(TRIM_CORNER_PIXELS, round(TRIM_CORNER_FRACTION * shorter)), shorter)
    if size <= 0:
        return 0
    left_colour, top_colour, right_colour, bottom_colour = colours
    corners = (
        (slice(top, top + size), slice(left, left + size), (top_colour, left_colour)),
        (slice(top, top + size), slice(right - size, right), (top_colour, right_colour)),
        (slice(bottom - size, bottom), slice(left, left + size), (bottom_colour, left_colour)),
        (slice(bottom - size, bottom), slice(right - size, right), (bottom_colour, right_colour)),
    )
    count = 0
    for rows, columns, near in corners:
        patch = pixels[rows, columns]
        low, high = int(patch.min()), int(patch.max())
        if any(
            colour is not None
            and low >= colour - TRIM_CORNER_TOLERANCE
            and high <= colour + TRIM_CORNER_TOLERANCE
            for colour in near
        ):
            count += 1
    return count


def _trim_axis(
    lines: NDArray[np.uint8], start: float, stop: float, limits: tuple[int, int, int]
) -> tuple[float, float, int | None, int | None]:
    """The ``(start, stop)`` span of axis 0 of ``lines`` left after trimming bars at both ends.

    Also the colours of the bars at the start and at the stop (None where there is none).
    """
    count = lines.shape[0]
    if count < 2 or lines.shape[1] == 0:
        return start, stop, None, None
    # Most images have no flat outermost line: two reductions of it settle that.
    spread = 2 * limits[0]
    head_flat = int(lines[0].max()) - int(lines[0].min()) <= spread
    tail_flat = int(lines[-1].max()) - int(lines[-1].min()) <= spread
    if not head_flat and not tail_flat:
        return start, stop, None, None
    low = lines.min(axis=1).astype(np.int16)
    high = lines.max(axis=1).astype(np.int16)
    head, head_colour = _bar_depth(lines, low, high, limits) if head_flat else (0.0, 0)
    tail, tail_colour = (
        _bar_depth(lines[::-1], low[::-1], high[::-1], limits) if tail_flat else (0.0, 0)
    )
    if not head and not tail:
        return start, stop, None, None
    new_start, new_stop = max(start, head), min(stop, count - tail)
    if new_stop - new_start < max(TRIM_MIN_FRACTION * (stop - start), TRIM_MIN_PIXELS):
        return start, stop, None, None
    return (
        new_start,
        new_stop,
        head_colour if new_start != start else None,
        tail_colour if new_stop != stop else None,
    )


def _bar_depth(
    lines: NDArray[np.uint8],
    low: NDArray[np.int16],
    high: NDArray[np.int16],
    limits: tuple[int, int, int],
) -> tuple[float, int]:
    """How deep the bar at the start of ``lines`` reaches (0.0 when none), and its colour."""
    tolerance, ringing_lines, step = limits
    count = len(low)
    middle = len(lines[0]) // 2  # the median without np.median's overhead
    colour = int(np.partition(lines[0], middle)[middle])
    flat = (high <= colour + tolerance) & (low >= colour - tolerance)
    if not flat[0]:
        return 0.0, colour
    depth = int(np.argmin(flat)) if not flat.all() else count
    for _ in range(ringing_lines):
        if depth >= count:
            break
        if (
            high[depth] > colour + TRIM_RINGING_TOLERANCE
            or low[depth] < colour - TRIM_RINGING_TOLERANCE
            or np.abs(lines[depth].astype(np.float64) - colour).mean() > TRIM_RINGING_MEAN
        ):
            break
        depth += 1
    if depth >= count - 1:
        return float(count), colour  # all border: the caller keeps the axis whole
    after = slice(depth, depth + 2)
    if max(int(high[after].max()) - colour, colour - int(low[after].min())) < step:
        return 0.0, colour
    # The first content line may hold a share of bar colour: its signed deviation is
    # (1 - share) times the next line's, which stands in for the content behind it.
    first = lines[depth].astype(np.float64) - colour
    behind = lines[depth + 1].astype(np.float64) - colour
    energy = float(behind @ behind)
    if energy <= 0.0:
        return float(depth), colour
    share = 1.0 - float(first @ behind) / energy
    return depth + min(max(share, 0.0), 1.0), colour


def apply_trim(pixels: NDArray[np.uint8], box: Box | None) -> tuple[NDArray[np.uint8], Box | None]:
    """Cut ``pixels`` to :func:`trim_box`'s region, trimmed edges on whole lines (a view).

    The first content line after a bar holds a share of bar colour, and Lanczos
    would resample it as content: it is dropped (unless under a tenth of it is
    bar), which measured better than keeping it whole or cutting inside it.
    Untrimmed sides keep their box edge (the partial last block of the decode).
    """
    trimmed = trim_box(pixels, box)
    if trimmed is None:
        return pixels, box
    height, width = pixels.shape
    original = box if box is not None else (0.0, 0.0, float(width), float(height))
    left, top, right, bottom = (
        float(_inward(edge, edge == old, lower=lower))
        for edge, old, lower in zip(trimmed, original, (True, True, False, False), strict=True)
    )
    column, row = math.floor(left), math.floor(top)
    view = pixels[row : math.ceil(bottom), column : math.ceil(right)]
    local: Box | None = (left - column, top - row, right - column, bottom - row)
    if local == (0.0, 0.0, float(view.shape[1]), float(view.shape[0])):
        local = None
    return view, local


def _inward(edge: float, untouched: bool, *, lower: bool) -> float:
    """A trimmed edge moved inward to a whole line (dropping a line under a tenth content)."""
    if untouched:
        return edge
    return float(math.ceil(edge - 0.1) if lower else math.floor(edge + 0.1))


def flat_edges(stack: NDArray[np.uint8]) -> NDArray[np.bool_]:
    """Per image of a ``(k, height, width)`` stack: is one of its four edge lines flat?

    :func:`trim_box` trims nothing unless the first or last row or column of the
    image is flat (:func:`_trim_axis`'s first test; the columns it tests are
    whole when no row is trimmed, and a transpose maps edge lines to edge
    lines), so images without one skip it.
    """
    spread = 2 * TRIM_TOLERANCE
    flat = np.zeros(len(stack), dtype=np.bool_)
    for line in (stack[:, 0, :], stack[:, -1, :], stack[:, :, 0], stack[:, :, -1]):
        flat |= line.max(axis=1).astype(np.int16) - line.min(axis=1) <= spread
    return flat

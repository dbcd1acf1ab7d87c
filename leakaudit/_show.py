"""``--show DIR``: a side-by-side PNG of leaked images and their closest match, capped.

Each picture is about 115 KB and takes 25-130 ms; 20,000 identical images in
one group made 13,333 of them (1.7 GB, 5.5 minutes) before the cap. So by
default only the groups the HTML report pictures are drawn: the strongest
:data:`~leakaudit.htmlreport.MAX_GROUPS_SHOWN` leaked groups in the report's
order, at most :data:`~leakaudit.htmlreport.MAX_MEMBERS_SHOWN` images of each
(taken from its splits in turn); at most 800 pictures, about 90 MB. The
folder's ``index.csv`` lists every leaked image and its match, with the
picture's file name, or none where it was left out, so nothing is dropped
unsaid.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._export_encoding import write_csv
from leakaudit._progress import Progress, progress_enabled
from leakaudit._text import printable
from leakaudit.export import leak_matches
from leakaudit.htmlreport import MAX_GROUPS_SHOWN, MAX_MEMBERS_SHOWN
from leakaudit.report import LeakageReport
from leakaudit.safe_io import atomic_open

__all__ = ["INDEX_NAME", "ShowSummary", "pictured_rows", "write_side_by_side"]

#: The file in the ``--show`` folder listing every leaked image (and which were pictured).
INDEX_NAME = "index.csv"


class ShowSummary(NamedTuple):
    """What :func:`write_side_by_side` wrote, and what it left out."""

    pictures: int
    groups_pictured: int
    groups: int
    images: int
    index_file: Path

    @property
    def groups_left_out(self) -> int:
        return self.groups - self.groups_pictured

    @property
    def images_left_out(self) -> int:
        return self.images - self.pictures


def pictured_rows(
    group_ids: pd.Series, splits: pd.Series, max_groups: int | None
) -> NDArray[np.int64]:
    """The rows of ``leak_matches`` to picture, in the order they are drawn.

    The first ``max_groups`` groups (all when None) in order of appearance and,
    with a cap, at most :data:`MAX_MEMBERS_SHOWN` rows of each, taken from the
    group's splits in turn (so a test split is not crowded out by val).

    Examples
    --------
    >>> groups = pd.Series([7, 7, 7, 7, 3, 5])
    >>> splits = pd.Series(["val", "val", "test", "test", "test", "val"])
    >>> pictured_rows(groups, splits, 2).tolist()
    [0, 2, 1, 3, 4]
    >>> pictured_rows(groups, splits, None).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    if max_groups is None:
        return np.arange(len(group_ids), dtype=np.int64)
    codes = pd.factorize(group_ids.to_numpy(dtype=object), use_na_sentinel=False)[0]
    keys = pd.DataFrame({"group": codes, "split": splits.to_numpy(dtype=object)})
    turn = keys.groupby(["group", "split"], sort=False, dropna=False).cumcount().to_numpy()
    position = np.arange(len(codes))
    order = np.lexsort((position, turn, codes))
    ranked = codes[order]
    within = position - np.searchsorted(ranked, ranked)  # rank inside its group
    keep = (ranked < max_groups) & (within < MAX_MEMBERS_SHOWN)
    return order[keep].astype(np.int64)


def _load_font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def _caption(split: Any, path: str) -> str:
    """A panel's caption: the split and the file name, shown as the text report shows them."""
    return f"{printable(str(split))}: {printable(Path(path).name)}"


def _panel(path: str | None, caption: str, height: int, font: Any) -> Any:
    """One half of a side-by-side image: the picture fitted to ``height``, captioned above.

    ``path`` None (a file the report may not read) gets the grey panel.
    """
    from PIL import Image, ImageDraw, ImageOps

    strip = 26
    try:
        if path is None:
            raise FileNotFoundError("not read")
        with Image.open(path) as opened:
            opened.draft("RGB", (height * 2, height * 2))
            picture = ImageOps.exif_transpose(opened).convert("RGB")
        # Both halves at the same height (small images enlarged) so they compare at a glance.
        scale = min(height / picture.height, 2 * height / picture.width)
        size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    except Exception:  # an unreadable file still gets a labelled (grey) panel
        picture = Image.new("RGB", (height, height), (200, 200, 200))
    width = max(picture.width, 240)
    panel = Image.new("RGB", (width, picture.height + strip), (255, 255, 255))
    panel.paste(picture, ((width - picture.width) // 2, strip))
    draw = ImageDraw.Draw(panel)
    text = caption
    while len(text) > 8 and draw.textlength(text, font=font) > width - 8:
        text = "..." + text[4:]  # keep the end of the path: the file name matters most
    draw.text((4, 5), text, fill=(0, 0, 0), font=font)
    return panel


def _picture(report: LeakageReport, row: Any, font: Any) -> Any:
    from PIL import Image, ImageDraw

    path, match = str(row.path), str(row.match_path)
    left = _panel(report.image_file(path), _caption(row.split, path), 256, font)
    right = _panel(report.image_file(match), _caption(row.match_split, match), 256, font)
    footer = 24
    canvas = Image.new(
        "RGB",
        (left.width + right.width + 12, max(left.height, right.height) + footer),
        (255, 255, 255),
    )
    canvas.paste(left, (0, 0))
    canvas.paste(right, (left.width + 12, 0))
    ImageDraw.Draw(canvas).text(
        (4, canvas.height - footer + 4),
        f"group {row.group_id}, distance {row.distance}",
        fill=(160, 0, 0),
        font=font,
    )
    return canvas


def write_side_by_side(
    report: LeakageReport,
    folder: str | os.PathLike[str],
    *,
    reference: str | None = None,
    max_groups: int | None = MAX_GROUPS_SHOWN,
    progress: bool | None = False,
) -> ShowSummary:
    """Draw leaked images beside their closest match into ``folder``, and its index.

    Parameters
    ----------
    report : LeakageReport
        An audit with its table.
    folder : path-like
        Created if missing; each picture is ``leak_NNNN_groupG.png``, written
        through :func:`~leakaudit.safe_io.atomic_open`.
    reference : str, optional
        As in :func:`~leakaudit.export.leak_matches`.
    max_groups : int or None, default MAX_GROUPS_SHOWN
        Picture the first ``max_groups`` leaked groups in the report's order
        (strongest evidence first), at most :data:`MAX_MEMBERS_SHOWN` images
        of each; None pictures every leaked image.
    progress : bool or None, default False
        A progress bar; None means on for long runs in a terminal.

    Returns
    -------
    ShowSummary
        The pictures written, and the groups and leaked images in all.
    """
    target = Path(folder)
    matches = leak_matches(report, reference)
    chosen = pictured_rows(matches["group_id"], matches["split"], max_groups)
    target.mkdir(parents=True, exist_ok=True)
    font = _load_font(14)
    files = np.full(len(matches), "", dtype=object)
    bar = Progress(len(chosen), label="--show", enabled=progress_enabled(progress, len(chosen)))
    rows = list(matches.itertuples(index=False))
    for number, position in enumerate(chosen.tolist(), 1):
        row = rows[position]
        name = f"leak_{number:04d}_group{row.group_id}.png"
        with atomic_open(target / name, "wb") as handle:
            _picture(report, row, font).save(handle, format="PNG")
        files[position] = name
        bar.update()
    bar.close()
    index = matches.assign(file=files)
    with atomic_open(
        target / INDEX_NAME, "w", encoding="utf-8", errors="surrogateescape", newline=""
    ) as handle:
        write_csv(handle, index)
    group_ids = matches["group_id"].to_numpy(dtype=object)
    return ShowSummary(
        pictures=len(chosen),
        groups_pictured=len(pd.unique(group_ids[chosen])),
        groups=len(pd.unique(group_ids)),
        images=len(matches),
        index_file=target / INDEX_NAME,
    )

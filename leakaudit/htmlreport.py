"""A self-contained HTML rendering of a :class:`~leakaudit.report.LeakageReport`.

One file, no external resources (thumbnails are embedded as base64 JPEG data
URIs, the histogram is inline SVG, the style sheet is inline; the one script is
the review section's, :mod:`leakaudit._review`, allowed by its hash), so it
opens offline and can be attached to a bug report or a CI artifact.

Every string that comes from the data (file names, split names, error
messages, parameters) is untrusted: it is shown as the text report shows it
(:func:`~leakaudit._text.printable`: control, bidi and other invisible format
characters, and the undecodable bytes of a name that is not UTF-8, written as
visible escapes such as ``\\u202e``), then goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
import io
import os
import warnings
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from leakaudit._evidence import EDGE_COLUMNS, EDGE_STAGES, EVIDENCE_MEANING, TRANSITIVE
from leakaudit._impact_html import impact_section
from leakaudit._nearest_neighbours import NearestNeighbourDistances, nearest_neighbour_distances
from leakaudit._nearest_neighbours import histogram_section as _histogram_section
from leakaudit._progress import Progress, progress_enabled
from leakaudit._review import REVIEW_SCRIPT, REVIEW_STYLE, report_key, review_html, script_hash
from leakaudit._review import path_html as _path_html
from leakaudit._text import bits, printable
from leakaudit._validation import check_bool, check_int
from leakaudit._version import __version__
from leakaudit.copykind import kind_meaning
from leakaudit.distances import PairDistances
from leakaudit.export import PairKinds, evidence_text, spanning_group_ids, split_table
from leakaudit.hashing import popcount64
from leakaudit.impact import ScoreImpact
from leakaudit.policy import DEFAULT_THRESHOLDS
from leakaudit.report import LeakageReport
from leakaudit.safe_io import atomic_open

__all__ = [
    "MAX_GROUPS_SHOWN",
    "MAX_MEMBERS_SHOWN",
    "NearestNeighbourDistances",
    "nearest_neighbour_distances",
    "render_html",
    "write_html",
]

#: Groups pictured per section by default (the rest are counted in a note), here and in
#: ``--show``: enough to judge a dataset's leaks by eye, while a page or folder stays small.
MAX_GROUPS_SHOWN = 100
#: Members of a group pictured by default (the rest listed by name), here and in ``--show``.
MAX_MEMBERS_SHOWN = 8

# Badge colours, one per split in order (colour-blind-friendly Okabe-Ito, darkened for white text).
_PALETTE = ("#0066aa", "#c05a00", "#007a5a", "#a0307a", "#5a5a00", "#4a4a9a", "#8a3a1a", "#336")


def _e(value: object) -> str:
    """Escape any value for HTML text and attribute values, invisible characters made visible.

    A bidi override (U+202E) in a file name would otherwise reorder what the
    page shows (``evil\u202egnp.exe`` displayed as ``evilexe.png``).
    """
    return html.escape(printable(str(value)), quote=True)


def _kind_html(kind: object) -> str:
    """A kind of copy in bold, its words explained in a tooltip."""
    meaning = kind_meaning(str(kind))
    bold = f'<b class="kind">{_e(kind)}</b>'
    return f'<span title="{_e(meaning)}">{bold}</span>' if meaning else bold


def _q(value: object) -> str:
    """An escaped, double-quoted attribute value."""
    return f'"{_e(value)}"'


def _thumbnail(path: str, size: int) -> str | None:
    """Return a JPEG data URI of ``path`` fitted in ``size`` px, or None if unreadable."""
    from PIL import Image, ImageOps

    if not os.path.isfile(path):
        return None
    try:
        with warnings.catch_warnings():
            # Decompression-bomb warnings are the loader's business, not the report's.
            warnings.simplefilter("ignore")
            with Image.open(path) as opened:
                opened.draft("RGB", (size * 2, size * 2))  # JPEG: decode at reduced size
                image = ImageOps.exif_transpose(opened)
                image.thumbnail((size, size))
                factor = size // max(image.size)
                if factor >= 2:
                    # A small image (CIFAR's 32 px) is enlarged by whole pixels, nearest
                    # neighbour, so a person can judge it: each pixel a sharp square.
                    image = image.resize(
                        (image.width * factor, image.height * factor), Image.Resampling.NEAREST
                    )
                if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
                    rgba = image.convert("RGBA")
                    image = Image.new("RGB", rgba.size, (255, 255, 255))
                    image.paste(rgba, mask=rgba.getchannel("A"))
                image = image.convert("RGB")
                buffer = io.BytesIO()
                # An enlarged image keeps its sharp pixels: fine quality, no chroma halving.
                fine = {"quality": 92, "subsampling": 0} if factor >= 2 else {"quality": 75}
                image.save(buffer, "JPEG", **fine)
    except Exception:  # any decode failure just means "no preview"
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _common_root(paths: Iterable[str]) -> str | None:
    values = [p for p in paths if isinstance(p, str) and p]
    if len(values) < 2:
        return None
    try:
        root = os.path.commonpath(values)
    except ValueError:  # mixed absolute and relative paths, or different drives
        return None
    return root if root and root not in values else None


#: What the "match" figure of a verified pair (its strength) means, as a tooltip.
_MATCH_TITLE = (
    "how closely the verified pair matched, 0 to 1: 1 = identical files, "
    "up to 0.99 = the pixels compared"
)
_TRANSITIVE_BADGE = "transitive: linked only through same-split chains"


def _stage_class(stage: object) -> str:
    # Stages with a colour of their own (any other stage name is shown, escaped, in grey).
    return f"ev-{stage}" if stage in EDGE_STAGES else "ev-other"


def _evidence_attribute(evidence: object) -> str:
    return f' data-evidence="{_e(evidence)}"' if isinstance(evidence, str) and evidence else ""


def evidence_badges(evidence: object, strength: object) -> str:
    """The badges of a leaked group's evidence (empty when the report has none)."""
    if not isinstance(evidence, str) or not evidence:
        return ""
    if evidence == TRANSITIVE:
        return f'<span class="ev transitive">{_e(_TRANSITIVE_BADGE)}</span>'
    value = _strength(strength)
    meaning = EVIDENCE_MEANING.get(evidence, "")
    badge = (
        f'<span class="ev {_stage_class(evidence)}" title="{_e(meaning)}">'
        f"evidence: {_e(evidence)}</span>"
    )
    if value is not None:
        badge += f'<span class="strength" title="{_MATCH_TITLE}">match {value:.2f}</span>'
    return badge


def _transitive_note(evidence: object) -> str:
    if evidence != TRANSITIVE:
        return ""
    return (
        '<p class="evidence transitive">No verified pair joins two of its splits directly: '
        "its splits meet only through chains of links between images of one split (or "
        "without a split). Look at it before acting on it.</p>"
    )


def _numbers(column: pd.Series) -> NDArray[np.float64]:
    numbers = pd.Series(pd.to_numeric(column, errors="coerce"), dtype="Float64")
    values: NDArray[np.float64] = np.array(
        numbers.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64
    )
    return values


class _Edges:
    """The report's verified pairs (:attr:`LeakageReport.edges`), by row pair."""

    def __init__(self, edges: pd.DataFrame | None) -> None:
        self.present = edges is not None
        frame = edges if edges is not None else pd.DataFrame(columns=EDGE_COLUMNS)
        a = frame["row_a"].to_numpy(dtype=np.int64)
        b = frame["row_b"].to_numpy(dtype=np.int64)
        self.row_a, self.row_b = np.minimum(a, b), np.maximum(a, b)
        self.stage: list[object] = frame["stage"].astype(object).tolist()
        self.distance = _numbers(frame["distance"])
        self.similarity = _numbers(frame["similarity"])
        self.inliers = _numbers(frame["inliers"])
        self.strength = np.nan_to_num(_numbers(frame["strength"]), nan=0.0)
        self.pairs: dict[tuple[int, int], int] = {}
        for e in np.argsort(-self.strength, kind="stable").tolist():  # the strongest counts
            self.pairs.setdefault((int(self.row_a[e]), int(self.row_b[e])), e)

    def lookup(self, a: int, b: int) -> int:
        """The position in the edges of the pair ``(a, b)``; -1 when it is not an edge."""
        return self.pairs.get((min(a, b), max(a, b)), -1)


def _split_key(split: object) -> str | None:
    """The split a member counts for (None: it has none)."""
    if split is None or split is pd.NA or (isinstance(split, float) and np.isnan(split)):
        return None
    return str(split)


def _strength(value: object) -> float | None:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        number = float(value)
        return None if np.isnan(number) else number
    return None


class _Page:
    """What every page shows: verdict, per-split summary, verification, parameters."""

    def __init__(
        self,
        report: LeakageReport,
        *,
        title: str,
        max_groups: int,
        max_members: int,
        thumbnail_size: int,
        nn_sample: int,
        progress: bool | None,
        impact: ScoreImpact | None = None,
        review: bool = False,
    ) -> None:
        self.review = review
        self.report = report
        # Accuracy on leaked and clean images, when predictions were given: after the summary.
        self.impact = "" if impact is None else impact_section(impact)
        self.title = title
        self.max_groups = max_groups
        self.max_members = max_members
        self.thumbnail_size = thumbnail_size
        self.nn_sample = nn_sample
        self.progress = progress
        self.split_index = {str(s): i for i, s in enumerate(report.images_by_split.index)}
        self.root: str | None = None
        parameters = report.parameters
        # Shown in their own section (when present), not again among the parameters.
        self.verification_keys = [k for k in ("stages", "verification") if k in parameters]

    def display_path(self, path: str) -> str:
        if self.root is not None and path.startswith(self.root):
            return os.path.relpath(path, self.root)
        return path

    def badge(self, split: object) -> str:
        if _split_key(split) is None:
            return '<span class="badge nosplit">no split</span>'
        index = self.split_index.get(str(split), len(self.split_index))
        colour = _PALETTE[index % len(_PALETTE)]
        return f'<span class="badge" style="background:{colour}">{_e(split)}</span>'

    def render(self) -> str:
        """The page of a report without its table (rebuilt from JSON): no images."""
        body = [
            self.header(),
            self.summary(),
            self.impact,
            self.verification(),
            self.rebuilt_groups(),
            self.details(),
        ]
        return _PAGE.format(title=_e(self.title), csp=_CSP, style=_STYLE, body="\n".join(body))

    def header(self) -> str:
        report = self.report
        total = report.total_images
        if report.has_leakage:
            pct = 100.0 * report.n_leaked_images / total if total else 0.0
            verdict = (
                f'<p class="verdict bad">Leakage: {report.n_leaked_images} of {total} images '
                f"({pct:.2f}%) sit in {report.n_leaked_groups} duplicate group(s) that span "
                "splits.</p>"
            )
        else:
            verdict = (
                f'<p class="verdict good">No leakage: none of {total} images has a '
                "near-duplicate in another split.</p>"
            )
        root = f'<p class="root">Paths are relative to <code>{_e(self.root)}</code>.</p>'
        return (
            f"<header><h1>{_e(self.title)}</h1>{verdict}{self.checked()}"
            f"{root if self.root else ''}</header>"
        )

    def checked(self) -> str:
        """One line under the verdict: what verification did (its section follows the groups)."""
        counts = self.report.parameters.get("verification")
        if not isinstance(counts, Mapping):
            return ""
        if counts.get("ran") is False:
            return (
                f'<p class="checked">Verification did not run ({_e(counts.get("why", ""))}): '
                "pairs were linked by the hash threshold alone.</p>"
            )
        found = [counts.get(k) for k in ("candidates", "verified", "rejected")]
        if not all(isinstance(v, (int, np.integer)) for v in found):
            return ""
        return (
            f'<p class="checked">The hashes proposed {found[0]} candidate pair(s); verification '
            f"accepted {found[1]} and rejected {found[2]} (stages and counts below the "
            "groups).</p>"
        )

    def summary(self) -> str:
        frame = split_table(self.report)
        rows = []
        for row in frame.itertuples(index=False):
            rows.append(
                f"<tr><td>{self.badge(row.split)}</td><td>{row.n_images}</td>"
                f'<td class="{"bad" if row.n_leaked else ""}">{row.n_leaked}</td>'
                f"<td>{row.pct_leaked:.2f}%</td><td>{row.n_within_split_duplicates}</td>"
                f"<td>{row.n_unreadable}</td></tr>"
            )
        total = self.report.total_images
        pct = 100.0 * self.report.n_leaked_images / total if total else 0.0
        rows.append(
            f'<tr class="total"><td>all</td><td>{total}</td><td>{self.report.n_leaked_images}</td>'
            f"<td>{pct:.2f}%</td><td>{int(frame['n_within_split_duplicates'].sum())}</td>"
            f"<td>{self.report.n_unreadable}</td></tr>"
        )
        return (
            '<section id="summary"><h2>Summary per split</h2><table class="summary">'
            "<thead><tr><th>split</th><th>images</th><th>leaked</th><th>% leaked</th>"
            "<th>within-split duplicates</th><th>unreadable</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table></section>"
        )

    def parameters(self) -> str:
        values: dict[str, object] = {
            k: v for k, v in self.report.parameters.items() if k not in self.verification_keys
        }
        values.update(
            {
                "leakaudit version": __version__,
                "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "groups shown per section (max)": self.max_groups,
                "members shown per group (max)": self.max_members,
                "thumbnail size (px)": self.thumbnail_size,
            }
        )
        if self.root:
            values["paths relative to"] = self.root
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in values.items())
        return (
            '<details id="parameters"><summary>Parameters</summary>'
            f'<table class="params"><tbody>{rows}</tbody></table></details>'
        )

    def rebuilt_groups(self) -> str:
        groups = self.report.leaked_groups
        out = [
            f'<section id="leaked"><h2>Leaked groups ({len(groups)})</h2>'
            '<p class="note">This report was rebuilt from its JSON summary: it holds no image '
            "table, so there are no thumbnails, member lists, distances or histogram (re-run "
            "the audit for them). Groups in the report's order.</p>"
        ]
        if not len(groups):
            out.append('<p class="none">None.</p>')
        for row in groups.head(self.max_groups).itertuples(index=False):
            evidence = getattr(row, "evidence", None)
            out.append(
                f'<article class="group leaked" id="g{_e(row.group_id)}" '
                f'data-group-id="{_e(row.group_id)}"{_evidence_attribute(evidence)}>'
                f'<h3>Group {_e(row.group_id)} <span class="meta">{_e(row.n_members)} images '
                f"({_e(row.members_by_split)})</span>"
                f"{evidence_badges(evidence, getattr(row, 'evidence_strength', None))}</h3>"
                f"{_transitive_note(evidence)}</article>"
            )
        if len(groups) > self.max_groups:
            out.append(
                f'<p class="omitted">{len(groups) - self.max_groups} more group(s) not shown.</p>'
            )
        out.append("</section>")
        return "".join(out)

    def verification(self) -> str:
        """The stages that ran and the verification counts, when the report records them."""
        parameters = self.report.parameters
        stages, counts = parameters.get("stages"), parameters.get("verification")
        if stages is None and counts is None:
            return ""
        out = ['<section id="verification"><h2>Verification</h2>']
        if isinstance(stages, (list, tuple)) and stages:
            listed = " &rarr; ".join(f'<span class="stage">{_e(s)}</span>' for s in stages)
            out.append(f'<p class="stages">Stages that ran, in order: {listed}</p>')
        elif stages is not None:
            out.append(f'<p class="stages">Stages: {_e(stages)}</p>')
        if isinstance(counts, Mapping):
            if counts.get("ran") is False:
                why = counts.get("why", "not requested")
                out.append(
                    f'<p class="unverified">Verification did not run ({_e(why)}): pairs were '
                    "linked by the hash threshold alone.</p>"
                )
            found = {k: counts.get(k) for k in ("candidates", "verified", "rejected")}
            if all(isinstance(v, (int, np.integer)) for v in found.values()):
                out.append(
                    f'<p class="counts">The hashes proposed {found["candidates"]} candidate '
                    f"pair(s); verification accepted {found['verified']} (only these link "
                    f"images) and rejected {found['rejected']}.</p>"
                )
            if counts.get("unsupported"):
                out.append(
                    f'<p class="counts">{_e(counts["unsupported"])} more pair(s) passed the '
                    "checks but were not linked: the other images each of them matches "
                    "disagree (look-alikes, not copies).</p>"
                )
            if counts.get("distinct"):
                out.append(
                    f'<p class="counts">{_e(counts["distinct"])} pair(s) were told apart at '
                    "native resolution (look-alike graphics that differ by a badge or a "
                    "glyph): they are never in one group, and "
                    f"{_e(counts.get('kept_apart', 0))} verified pair(s) that would have "
                    "joined them were not linked.</p>"
                )
            out.append(
                '<p class="counts">Every count and limit of this stage is listed under Details, '
                "at the end.</p>"
            )
        elif counts is not None:
            out.append(f"<p>{_e(counts)}</p>")
        out.append("</section>")
        return "".join(out)

    def details(self) -> str:
        """The verification counts and the parameters, at the end of the page, collapsed.

        They are for a second look (how the run was set up, what each stage
        counted), not for reading a verdict, so they come after the groups.
        """
        counts = self.report.parameters.verification
        out = ['<section id="details"><h2>Details</h2>']
        if counts is not None:
            rows = "".join(
                f"<tr><th>{_e(str(k).replace('_', ' '))}</th><td>{_e(v)}</td></tr>"
                for k, v in counts.items()
                if k not in ("ran", "why")
            )
            if rows:
                out.append(
                    "<details><summary>Verification counts and limits</summary>"
                    f'<table class="params verification"><tbody>{rows}</tbody></table></details>'
                )
        out.append(self.parameters())
        out.append("</section>")
        return "".join(out)


class _Renderer(_Page):
    def __init__(
        self,
        report: LeakageReport,
        *,
        title: str,
        max_groups: int,
        max_members: int,
        thumbnail_size: int,
        nn_sample: int,
        progress: bool | None,
        impact: ScoreImpact | None = None,
        review: bool = False,
    ) -> None:
        super().__init__(
            report,
            title=title,
            max_groups=max_groups,
            max_members=max_members,
            thumbnail_size=thumbnail_size,
            nn_sample=nn_sample,
            progress=progress,
            impact=impact,
            review=review,
        )
        if report.table is None:
            raise ValueError("report has no table (it was rebuilt from JSON); re-run the audit.")
        self.table: pd.DataFrame = report.table
        self.method = report.parameters.method
        threshold = report.parameters.threshold
        self.threshold: int | None = None
        if isinstance(threshold, Mapping):  # per-source rules: mark the default
            default = threshold.get("*", DEFAULT_THRESHOLDS.get(self.method or "", None))
            self.threshold = int(default) if isinstance(default, (int, np.integer)) else None
        elif threshold is not None:
            self.threshold = int(threshold)
        self.pair_distances = PairDistances.of_report(report, self.table)
        # The same columns as table_distances gives (parsed once: seconds on 100k rows).
        self.columns, self.valid = self.pair_distances.columns, self.pair_distances.valid
        self.splits: list[Any] = self.table["split"].to_numpy(dtype=object).tolist()
        self.group_ids = self.table["group_id"].to_numpy()
        self.paths = (
            [str(p) for p in self.table["path"]]
            if "path" in self.table
            else [str(i) for i in range(len(self.table))]
        )
        self.root = _common_root(self.paths)

    def render(self) -> str:
        cards = _GroupCards(self)
        leaked, within = cards.group_order()
        # The groups first, right under the verdict and the split table: the first pair is on
        # the first screen; the histogram, verification and parameters follow them.
        body = [
            self.header(),
            self.summary(),
            self.impact,
            *cards.sections(leaked, within),
            _histogram_section(
                self.table,
                self.columns,
                self.valid,
                method=self.method,
                threshold=self.threshold,
                sample=self.nn_sample,
                leaked=self.leaked_rows(),
            ),
            self.verification(),
            self.review_html(cards),
            self.unreadable(),
            self.details(),
        ]
        if not self.review:
            return _PAGE.format(title=_e(self.title), csp=_CSP, style=_STYLE, body="\n".join(body))
        body.append(f"<script>{REVIEW_SCRIPT}</script>")
        return _PAGE.format(
            title=_e(self.title),
            csp=f"{_CSP}; script-src {script_hash()}",
            style=_STYLE + REVIEW_STYLE,
            body="\n".join(body),
        ).replace('<html lang="en">', '<html lang="en" class="no-js">', 1)

    def review_html(self, cards: _GroupCards) -> str:
        """The review section (:func:`leakaudit._review.review_html`), when asked for."""
        if not self.review:
            return ""
        key = report_key(self.root, self.title)
        return review_html(self.report, cards.thumbnail_of, self.display_path, self.badge, key)

    def leaked_rows(self) -> NDArray[np.int64]:
        """The rows of the images in leaked groups (marked on the histogram)."""
        ids = self.report.leaked_groups["group_id"].to_numpy()
        return np.flatnonzero(np.isin(self.group_ids, ids)).astype(np.int64)

    def unreadable(self) -> str:
        head = '<section id="unreadable"><h2>Unreadable files'
        if "error" not in self.table:
            return head + "</h2><p>Not recorded.</p></section>"
        bad = self.table[self.table["error"].notna()]
        out = [f"{head} ({len(bad)})</h2>"]
        if bad.empty:
            out.append('<p class="none">None.</p>')
        else:
            out.append(
                "<p>These files could not be decoded; they take no part in the audit.</p>"
                '<table class="unreadable"><thead><tr><th>split</th><th>file</th><th>reason</th>'
                "</tr></thead><tbody>"
            )
            for row in bad.head(1000).itertuples(index=False):
                out.append(
                    f"<tr><td>{self.badge(row.split)}</td>"
                    f'<td class="path">{_path_html(self.display_path(str(row.path)))}</td>'
                    f"<td>{_e(row.error)}</td></tr>"
                )
            out.append("</tbody></table>")
            if len(bad) > 1000:
                out.append(f'<p class="omitted">{len(bad) - 1000} more not shown.</p>')
        out.append("</section>")
        return "".join(out)


class _GroupCards:
    """The leaked and within-split group sections: thumbnails, badges, distances."""

    def __init__(self, page: _Renderer) -> None:
        self.page = page
        self.table = page.table
        self.report = page.report
        self.max_groups = page.max_groups
        self.max_members = page.max_members
        self.paths = page.paths
        self.splits = page.splits
        self.split_index = page.split_index
        self.group_ids = page.group_ids
        self.columns, self.valid = page.columns, page.valid
        self.pair_distances = page.pair_distances
        self.method = page.method
        self.badge = page.badge
        self.spanning = set(spanning_group_ids(self.report))
        self.display_path = page.display_path
        self.thumbs: dict[str, str | None] = {}
        self.edges = _Edges(self.report.edges)
        self.kinds = PairKinds(self.report, self.pair_distances)
        self.cross = self.cross_edges()
        groups = self.report.leaked_groups
        self.evidence: dict[Any, tuple[object, object]] = {}
        if "evidence" in groups and "evidence_strength" in groups:
            self.evidence = {
                g: (e, v)
                for g, e, v in zip(
                    groups["group_id"], groups["evidence"], groups["evidence_strength"], strict=True
                )
            }

    def cross_edges(self) -> dict[Any, list[int]]:
        """Per group, its verified pairs across splits (positions in the edges), strongest first."""
        edges = self.edges
        if not len(edges.row_a):
            return {}
        split_a = [_split_key(self.splits[r]) for r in edges.row_a.tolist()]
        split_b = [_split_key(self.splits[r]) for r in edges.row_b.tolist()]
        found: dict[Any, list[int]] = {}
        for e in np.argsort(-edges.strength, kind="stable").tolist():
            a, b = split_a[e], split_b[e]
            if a is not None and b is not None and a != b:
                found.setdefault(self.group_ids[edges.row_a[e]], []).append(e)
        return found

    def shown_rows(self, group_id: Any, rows: list[int] | None = None) -> list[int]:
        """The members shown with a thumbnail: at least one of every split.

        The strongest verified pair across splits first, then one member of
        each split not yet shown (one with a verified pair across splits when
        there is one), then the others up to ``max_members``; in member order.
        """
        rows = self.member_rows(group_id) if rows is None else rows
        picked: dict[int, None] = {}
        cross = self.cross.get(group_id, [])
        if cross:
            picked[int(self.edges.row_a[cross[0]])] = None
            picked[int(self.edges.row_b[cross[0]])] = None
        ends = {int(self.edges.row_a[e]) for e in cross} | {int(self.edges.row_b[e]) for e in cross}
        by_split: dict[str, list[int]] = {}
        for row in rows:
            key = _split_key(self.splits[row])
            if key is not None:
                by_split.setdefault(key, []).append(row)
        covered = {_split_key(self.splits[r]) for r in picked}
        for key, members in by_split.items():
            if key not in covered:
                picked[next((r for r in members if r in ends), members[0])] = None
        for row in rows:
            if len(picked) >= self.max_members:
                break
            picked.setdefault(row, None)
        place = {row: i for i, row in enumerate(rows)}
        return sorted(picked, key=place.__getitem__)

    def sections(self, leaked: list[Any], within: list[Any]) -> list[str]:
        """The two group sections, thumbnails loaded first (only for the members shown)."""
        needed = {
            self.paths[r]
            for g in (*leaked[: self.max_groups], *within[: self.max_groups])
            for r in self.shown_rows(g)
        }
        self.load_thumbnails(sorted(needed))
        order = (
            "Strongest evidence first: byte copies, then pairs verified by their pixels or "
            "geometry (closest match first); groups whose splits are linked only through chains of "
            "same-split images (transitive) last. Each group shows a member of every split it "
            "touches, and the verified pair that joins two splits."
            if self.ordered_by_evidence()
            else "Largest first; among equal sizes the closest (most certain) first; "
            "blank or near-flat (low-information) groups last."
        )
        return [
            self.groups_section(
                "leaked",
                "Leaked groups",
                "Duplicate groups whose members sit in more than one split: the leakage.",
                leaked,
                order,
            ),
            self.groups_section(
                "within",
                "Duplicates within one split",
                "Not leakage, but they weigh the same image more than once in training or "
                "evaluation.",
                within,
            ),
        ]

    def member_rows(self, group_id: Any) -> list[int]:
        rows = np.flatnonzero(self.group_ids == group_id)
        order = sorted(
            rows.tolist(),
            key=lambda r: (
                self.split_index.get(str(self.splits[r]), len(self.split_index)),
                self.paths[r] if self.paths else "",
            ),
        )
        return order

    def ordered_by_evidence(self) -> bool:
        """Whether the report ranks its leaked groups by evidence (it had verified pairs)."""
        groups = self.report.leaked_groups
        return self.report.edges is not None or (
            "evidence" in groups and bool(groups["evidence"].notna().any())
        )

    def group_order(self) -> tuple[list[Any], list[Any]]:
        groups = self.report.leaked_groups
        leaked: list[Any] = []
        if self.ordered_by_evidence():
            leaked = groups["group_id"].tolist()  # the report's order: strongest evidence first
        elif len(groups):
            spread = pd.to_numeric(groups["max_distance"], errors="coerce").fillna(65)
            keys = pd.DataFrame(
                {
                    "low": groups["low_information"].astype(bool),
                    "size": -groups["n_members"].astype(int),
                    "spread": spread,
                    "group_id": groups["group_id"],
                }
            )
            leaked = keys.sort_values(["low", "size", "spread", "group_id"], kind="stable")[
                "group_id"
            ].tolist()
        sizes = self.table.groupby("group_id").size().sort_values(ascending=False, kind="stable")
        shared = (sizes.to_numpy() > 1) & ~sizes.index.isin(leaked)
        within: list[Any] = sizes.index[shared].tolist()
        return leaked, within

    def thumbnail_of(self, path: str) -> str | None:
        """The thumbnail of ``path`` (made once, shared by the group cards and the review)."""
        if path not in self.thumbs:
            readable = self.report.image_file(path)
            self.thumbs[path] = _thumbnail(readable, self.page.thumbnail_size) if readable else None
        return self.thumbs[path]

    def load_thumbnails(self, paths: list[str]) -> None:
        enabled = progress_enabled(self.page.progress, len(paths))
        bar = Progress(len(paths), label="thumbnails", enabled=enabled)
        for path in paths:
            # Only files the report may read (a shard report: under its images root).
            readable = self.report.image_file(path)
            thumbnail = _thumbnail(readable, self.page.thumbnail_size) if readable else None
            self.thumbs[path] = thumbnail
            bar.update()
        bar.close()

    def distances(self, rows: list[int]) -> dict[tuple[int, int], tuple[int, str, str]]:
        """``(a, b) -> (distance, how it was measured, kind of copy)`` for the readable rows,
        both orders (the kind: :func:`leakaudit.copykind.copy_kind`, as the pairs table).

        One vectorised call per group card, not one per pair.
        """
        readable = [r for r in rows if self.valid[r]]
        pairs = [(a, b) for a in readable for b in readable if a != b]
        if not pairs:
            return {}
        first = np.array([a for a, _ in pairs], dtype=np.int64)
        second = np.array([b for _, b in pairs], dtype=np.int64)
        each = [popcount64(values[first] ^ values[second]).tolist() for values in self.columns]
        linked = self.pair_distances(first, second).tolist()
        kinds = self.kinds(first, second).tolist()
        found = {}
        for k, pair in enumerate(pairs):
            parts = [int(column[k]) for column in each]
            if self.method == "phash+dhash" and len(parts) == 2:
                detail = f"pHash {parts[0]}, dHash {parts[1]}"
            else:
                detail = f"{self.method or 'hash'} {parts[0]}"
            if linked[k] != max(parts):  # dihedral matching: the search compared turned hashes
                found[pair] = (
                    int(linked[k]),
                    f"{linked[k]} turned to canonical orientation; as stored {detail}",
                    str(kinds[k]),
                )
            else:
                found[pair] = (max(parts), detail, str(kinds[k]))
        return found

    # --------------------------------------------------------------- sections

    def groups_section(
        self, anchor: str, heading: str, intro: str, groups: list[Any], order: str = ""
    ) -> str:
        out = [f'<section id="{anchor}"><h2>{heading} ({len(groups)})</h2><p>{intro}</p>']
        if order:  # collapsed: the first group stays on the first screen
            out.append(f'<details class="order"><summary>Their order</summary>{order}</details>')
        if not groups:
            out.append('<p class="none">None.</p>')
        for group_id in groups[: self.max_groups]:
            out.append(self.group_card(group_id, leaked=anchor == "leaked"))
        if len(groups) > self.max_groups:
            out.append(
                f'<p class="omitted">{len(groups) - self.max_groups} more group(s) not shown '
                "(the report shows at most "
                f"{self.max_groups}; the CSV and JSON outputs list them all).</p>"
            )
        out.append("</section>")
        return "".join(out)

    def group_card(self, group_id: Any, *, leaked: bool) -> str:
        rows = self.member_rows(group_id)
        shown = self.shown_rows(group_id, rows)
        splits = [self.splits[r] for r in rows]
        counts: dict[str, int] = {}
        for split in splits:
            counts[str(split)] = counts.get(str(split), 0) + 1
        distances = self.distances(shown)
        spread = max(
            (distances[a, b][0] for a in shown for b in shown if a < b and (a, b) in distances),
            default=0,
        )
        summary = ", ".join(f"{_e(k)}: {v}" for k, v in counts.items())
        cls = "group leaked" if leaked else "group within"
        evidence, strength = self.evidence.get(group_id, (None, None)) if leaked else (None, None)
        out = [
            f'<article class="{cls}" id="{"g" if leaked else "w"}{_e(group_id)}" '
            f'data-group-id="{_e(group_id)}"{_evidence_attribute(evidence)}>'
            f"<h3>Group {_e(group_id)} "
            f'<span class="meta">{len(rows)} images ({summary}); '
            f'<span title="the largest hash distance between two members shown, of 64 bits">'
            f"{'identical hashes' if spread == 0 else f'hashes up to {bits(spread)} apart'}"
            "</span></span>"
            f"{evidence_badges(evidence, strength)}</h3>"
        ]
        out.append('<div class="members">')
        for number, row in enumerate(shown, 1):
            path = self.paths[row]
            uri = self.thumbs.get(path)
            image = (
                f'<img src="{uri}" alt="{_e(self.display_path(path))}">'
                if uri
                else '<div class="nothumb">no preview</div>'
            )
            split = _split_key(self.splits[row])
            out.append(
                f'<figure class="member"{"" if split is None else " data-split=" + _q(split)}>'
                f'<div class="thumb">{image}</div><figcaption>'
                f'<span class="num">#{number}</span> {self.badge(self.splits[row])}'
                f'<span class="path">{_path_html(self.display_path(path))}</span>'
                "</figcaption></figure>"
            )
        out.append("</div>")
        if leaked:
            out.append(self.evidence_block(group_id, shown, evidence))
        if leaked and group_id in self.spanning:
            out.append(
                '<p class="note">Mostly identical images: the pairs table (CSV, JSON) lists a '
                "spanning set of this group's pairs (each image with an identical image in "
                'another split), not every pair (column <code>listed</code> = "spanning").</p>'
            )
        out.append(self.distance_matrix(shown, distances))
        if len(rows) > len(shown):
            showing = set(shown)
            rest = [r for r in rows if r not in showing]
            listed = "".join(
                f"<li>{self.badge(self.splits[r])} "
                f'<span class="path">{_path_html(self.display_path(self.paths[r]))}</span></li>'
                for r in rest[:200]
            )
            more = " (first 200 listed)" if len(rest) > 200 else ""
            out.append(
                f'<details class="rest"><summary>{len(rest)} more member(s) without preview'
                f"{more}</summary><ul>{listed}</ul></details>"
            )
        out.append("</article>")
        return "".join(out)

    def evidence_block(self, group_id: Any, shown: list[int], evidence: object) -> str:
        """The verified pairs that join the group's splits (the strongest first), or why none."""
        if evidence == TRANSITIVE:
            return _transitive_note(evidence)
        cross = self.cross.get(group_id, [])
        if not cross:
            return ""
        number = {row: i for i, row in enumerate(shown, 1)}
        items = []
        for e in cross[:5]:
            a, b = int(self.edges.row_a[e]), int(self.edges.row_b[e])
            if self.split_index.get(str(self.splits[b]), 0) < self.split_index.get(
                str(self.splits[a]), 0
            ):
                a, b = b, a
            ends = [
                f"{self.badge(self.splits[r])}"
                + (f"#{number[r]}" if r in number else "")
                + f' <span class="path">{_path_html(self.display_path(self.paths[r]))}</span>'
                for r in (a, b)
            ]
            detail = evidence_text(
                self.edges.stage[e],
                distance=self.edges.distance[e],
                similarity=self.edges.similarity[e],
                inliers=self.edges.inliers[e],
            )
            kind = self.kinds(np.array([a], np.int64), np.array([b], np.int64))[0]
            items.append(
                f"<li>{ends[0]} &harr; {ends[1]}: {_kind_html(kind)} "
                f'<span class="ev {_stage_class(self.edges.stage[e])}">{_e(detail)}</span> '
                f'<span class="strength" title="{_MATCH_TITLE}">'
                f"match {float(self.edges.strength[e]):.2f}</span></li>"
            )
        more = (
            f'<li class="omitted">{len(cross) - 5} more verified pair(s) across splits</li>'
            if len(cross) > 5
            else ""
        )
        return (
            '<div class="evidence"><p>Verified pair(s) joining two splits directly, strongest '
            f'first:</p><ul class="edges">{"".join(items)}{more}</ul></div>'
        )

    def distance_matrix(
        self, rows: list[int], distances: dict[tuple[int, int], tuple[int, str, str]]
    ) -> str:
        if len(rows) < 2:
            return ""
        if len(rows) == 2:
            a, b = rows
            if not (self.valid[a] and self.valid[b]):
                return ""
            value, detail, kind = distances[a, b]
            edge = self.edges.lookup(a, b)
            mark = (
                ' <span class="verified">&#10003; a verified pair: '
                f"{_e(evidence_text(self.edges.stage[edge]))}</span>"
                if edge >= 0
                else ""
            )
            return (
                f'<p class="pair">{_kind_html(kind)} '
                f'<span class="distance" title="{_e(detail)}">(hash distance {value})</span>'
                f"{mark}</p>"
            )
        head = "".join(f"<th>#{i}</th>" for i in range(1, len(rows) + 1))
        body = []
        for i, a in enumerate(rows, 1):
            cells = []
            for b in rows:
                if a == b:
                    cells.append('<td class="self"></td>')
                elif not (self.valid[a] and self.valid[b]):
                    cells.append("<td>?</td>")
                else:
                    value, detail, kind = distances[a, b]
                    detail = f"{kind}; hash distance {value}: {detail}"
                    classes = ["cross"] if str(self.splits[a]) != str(self.splits[b]) else []
                    mark = ""
                    edge = self.edges.lookup(a, b)
                    if edge >= 0:
                        classes.append("edge")
                        mark = "&#10003;"
                        detail += "; verified: " + evidence_text(self.edges.stage[edge])
                    cls = f' class="{" ".join(classes)}"' if classes else ""
                    cells.append(f'<td{cls} title="{_e(detail)}">{value}{mark}</td>')
            body.append(f"<tr><th>#{i}</th>{''.join(cells)}</tr>")
        return (
            '<div class="scroll"><table class="matrix"><caption>Pairwise distances '
            "(highlighted: across splits; "
            + ("&#10003;: a verified pair; " if self.edges.present else "")
            + "hover for each hash)</caption>"
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )


def render_html(
    report: LeakageReport,
    *,
    title: str = "leakaudit report",
    max_groups: int = MAX_GROUPS_SHOWN,
    max_members: int = MAX_MEMBERS_SHOWN,
    thumbnail_size: int = 96,
    nn_sample: int = 2000,
    progress: bool | None = False,
    impact: ScoreImpact | None = None,
    review: bool = True,
) -> str:
    """Return a self-contained HTML page describing ``report``.

    The page holds the per-split summary, a histogram of nearest-neighbour
    distances with the threshold marked, every leaked group (thumbnails side
    by side, split badges, paths, pairwise distances), within-split duplicate
    groups, unreadable files and the parameters used.

    With the report's verified pairs (:attr:`LeakageReport.edges`), leaked
    groups come in the report's order (strongest evidence first), each with
    its evidence badge and strength, or a badge saying its splits are linked
    only through same-split chains (transitive), and the verified pairs that
    join two splits (stage, similarity, inliers, distance). Every group card
    shows at least one member of each split it touches. A "Verification"
    section lists the stages that ran and the counts of
    ``parameters["verification"]`` when the report records them.

    Parameters
    ----------
    report : LeakageReport
        An audit with its table (thumbnails are read from its ``path`` column).
        A report without one (rebuilt from JSON) gives a page of its summary,
        leaked groups and their evidence, verification and parameters, without
        images, distances or histogram.
    title : str, default "leakaudit report"
        The page title.
    max_groups : int, default 100
        Groups shown per section; a note says how many were left out.
    max_members : int, default 8
        Members shown with a thumbnail per group; the rest are listed by name.
    thumbnail_size : int, default 96
        Longest side of the embedded JPEG thumbnails, in pixels.
    nn_sample : int, default 2000
        Query images of the nearest-neighbour histogram (all when fewer).
    progress : bool or None, default False
        Progress bar while making thumbnails; None means on for long runs in
        a terminal.
    impact : ScoreImpact, optional
        A model's accuracy on the leaked and the clean images
        (:meth:`LeakageReport.score_impact`), shown after the summary.
    review : bool, default True
        The review section (:mod:`leakaudit._review`, ``docs/review.md``): "copy" /
        "not a copy" controls on every leaked pair and on the closest near-misses
        (with the judge's reason), kept in the browser and saved as the decisions
        file ``audit_splits(..., decisions=)`` reads. Its one inline script is
        allowed by its hash; without script (or printed) the page reads as before.
        False: no script at all. Needs the report's table.

    Returns
    -------
    str

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from leakaudit import audit_splits
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for split in ("train", "test"):
    ...     (root / split).mkdir()
    >>> img = Image.effect_mandelbrot((128, 128), (-2, -1.5, 1, 1.5), 100)
    >>> img.save(root / "train" / "a.png"); img.save(root / "test" / "a_copy.jpg", quality=80)
    >>> report = audit_splits({"train": root / "train", "test": root / "test"}, workers=1)
    >>> page = render_html(report)
    >>> page.startswith("<!DOCTYPE html>"), page.count('class="group leaked"')
    (True, 1)
    """
    kind = _Page if report.table is None else _Renderer
    renderer = kind(
        report,
        title=title,
        max_groups=check_int("max_groups", max_groups, 0),
        max_members=check_int("max_members", max_members, 1),
        thumbnail_size=check_int("thumbnail_size", thumbnail_size, 16, 1024),
        nn_sample=check_int("nn_sample", nn_sample, 1),
        progress=progress,
        impact=impact,
        review=check_bool("review", review) and report.table is not None,
    )
    return renderer.render()


def write_html(report: LeakageReport, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8) and return the path.

    ``options`` are passed to :func:`render_html`. The page is rendered
    first, then written to a temporary file beside ``path`` and renamed over
    it (:func:`~leakaudit.safe_io.atomic_open`): a link at ``path`` is
    replaced, never written through, and a failure leaves the old file.
    """
    target = Path(path)
    page = render_html(report, **options)
    with atomic_open(target, "w", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(page)
    return target


_STYLE = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1d1d1f; background: #f5f5f7; }
header, section { max-width: 1200px; margin: 0 auto; padding: 8px 24px; }
h1 { font-size: 22px; margin: 12px 0 4px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin: 16px 0 8px; }
.checked, .root { font-size: 13px; margin: 4px 0; color: #333; }
details.order { font-size: 13px; color: #333; margin: 4px 0 8px; }
h3 { font-size: 15px; margin: 0 0 8px; }
.meta { font-weight: normal; color: #555; margin-left: 8px; }
.verdict { font-size: 16px; font-weight: 600; padding: 8px 12px; border-radius: 6px; }
.verdict.bad { background: #fde8e8; color: #8a1111; }
.verdict.good { background: #e5f6ea; color: #135a2a; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
table.summary td:not(:first-child), table.matrix td { text-align: right;
       font-variant-numeric: tabular-nums; }
td.bad { color: #a11; font-weight: 600; }
tr.total td { font-weight: 600; }
.badge { display: inline-block; color: #fff; border-radius: 10px; padding: 0 8px; font-size: 12px;
         font-weight: 600; margin-right: 6px; }
.badge.nosplit { background: #777; }
.group { background: #fff; border: 1px solid #ddd; border-left: 4px solid #c33;
         border-radius: 6px; padding: 10px 14px; margin: 12px 0; }
.group.within { border-left-color: #888; }
.members { display: flex; flex-wrap: wrap; gap: 10px; }
figure.member { margin: 0; width: 150px; }
.thumb { width: 150px; height: 100px; display: flex; align-items: center; justify-content: center;
         background: #eee; border-radius: 4px; overflow: hidden; }
.thumb img { max-width: 100%; max-height: 100%; image-rendering: pixelated; }
.scroll { max-width: 100%; overflow-x: auto; }
@media (max-width: 640px) {
  header, section { padding: 6px 10px; }
  th, td { padding: 3px 5px; }
  table.summary { font-size: 13px; }
  .group { padding: 8px; }
}
.nothumb { color: #888; font-size: 12px; }
figcaption { font-size: 12px; margin-top: 4px; overflow-wrap: break-word; }
.num { color: #666; margin-right: 4px; }
.path { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px;
        overflow-wrap: break-word; }
table.matrix { margin-top: 8px; font-size: 12px; }
table.matrix caption { text-align: left; white-space: nowrap; color: #555; font-size: 12px;
                       padding: 2px 0; }
table.matrix td.cross { background: #fde8e8; font-weight: 600; }
table.matrix td.self { background: #f0f0f0; }
details.rest { margin-top: 6px; font-size: 12px; }
.omitted { font-style: italic; color: #555; }
.none { color: #555; }
svg.hist { background: #fff; border: 1px solid #ddd; max-width: 100%; height: auto; }
svg.hist .grid { stroke: #eee; }
svg.hist .tick { font-size: 11px; fill: #555; }
svg.hist rect.linked { fill: #c33; }
svg.hist rect.apart { fill: #5b7ea6; }
svg.hist rect.leak { fill: #6a0000; }
.leakmark { color: #fff; background: #6a0000; padding: 0 4px; border-radius: 3px; }
svg.hist .cut { stroke: #111; stroke-dasharray: 4 3; stroke-width: 1.5; }
svg.hist .cutlabel { font-size: 12px; fill: #111; }
table.params th { font-weight: 600; background: #fafafa; }
table.matrix td.edge { outline: 2px solid #135a2a; outline-offset: -2px; }
.ev { display: inline-block; border-radius: 4px; padding: 0 6px; font-size: 12px;
      font-weight: 600; margin-left: 8px; color: #fff; background: #666; }
.ev.ev-bytes { background: #135a2a; }
.ev.ev-hash { background: #5a5a00; }
.ev.ev-pixels { background: #0066aa; }
.ev.ev-geometry { background: #4a4a9a; }
.ev.ev-registered { background: #2a7a6a; }
.ev.ev-embedding { background: #a0307a; }
.ev.ev-decision { background: #5a3aa0; }
.ev.transitive { background: #fff3cd; color: #7a4a00; border: 1px solid #c08a00; }
.strength { display: inline-block; font-size: 12px; color: #333; margin-left: 6px;
            border: 1px solid #bbb; border-radius: 4px; padding: 0 5px; }
.evidence { font-size: 13px; margin: 6px 0; }
.evidence ul.edges { margin: 4px 0; padding-left: 18px; }
.evidence.transitive { background: #fff8e5; border-radius: 4px; padding: 4px 8px; }
.stage { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; background: #eef;
         padding: 0 4px; border-radius: 3px; }
"""

# Defence in depth on top of escaping: the page may load nothing but its own inline style and
# data: images, and may run no script at all.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}
</body>
</html>
"""

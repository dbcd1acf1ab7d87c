"""The HTML report's review section: "copy" / "not a copy" controls on pairs, saved as a file.

Every leaked pair (a verified pair across splits; a group linked only through
same-split chains gets one pair of members from two splits) and the closest
near-misses (pairs of images in different splits whose hashes come within the
candidate net's distance but that the audit did not link, each with the
judge's reason) get two buttons. Decisions persist in the browser
(``localStorage``, keyed by the report's dataset folder and title) and the
"Save decisions" button downloads them as the CSV that
:func:`leakaudit.decisions.load_decisions` reads (a ``data:`` URL: no server).

The page stays printable and readable without script: the controls are hidden
until the script runs, and in print. The one inline script is allowed by its
SHA-256 in the page's Content-Security-Policy (no other script can run).
"""

from __future__ import annotations

import base64
import hashlib
import html
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from leakaudit._text import printable
from leakaudit.audit import source_digest
from leakaudit.decisions import COPY, NOT_A_COPY
from leakaudit.distances import PairDistances
from leakaudit.loading import DecodeOptions
from leakaudit.search import iter_pairs_within
from leakaudit.verify import CANDIDATE_THRESHOLD, VerifyOptions, compare_views, load_view

__all__ = [
    "MAX_LEAKED_PAIRS",
    "MAX_NEAR_MISSES",
    "REVIEW_SCRIPT",
    "REVIEW_STYLE",
    "ReviewPair",
    "content_digests",
    "near_misses",
    "path_html",
    "report_key",
    "review_html",
    "review_pairs",
    "review_section",
    "script_hash",
]

#: Leaked pairs given controls (strongest first); the rest are in the pairs table.
MAX_LEAKED_PAIRS = 500
#: Near-misses shown (closest first): what a person can look through in one sitting.
MAX_NEAR_MISSES = 300
#: Pairs the near-miss search collects before it stops (a clumpy data set has millions).
_NEAR_MISS_SEARCH_CAP = 200_000


@dataclass(frozen=True)
class ReviewPair:
    """One pair offered for review.

    Attributes
    ----------
    row_a, row_b : int
        Rows of the report's table.
    linked : bool
        True for a leaked pair, False for a near-miss.
    why : str
        How it was linked (stage, kind of copy), or why the judge did not link it.
    distance : int or None
        The hash distance the search compared.
    """

    row_a: int
    row_b: int
    linked: bool
    why: str
    distance: int | None = None


def _splits(table: pd.DataFrame) -> list[Any]:
    """Each row's split, None where it has none."""
    return [None if pd.isna(s) else s for s in table["split"].tolist()]


def review_pairs(report: Any, *, limit: int = MAX_LEAKED_PAIRS) -> list[ReviewPair]:
    """The leaked pairs of ``report`` (at most ``limit``), strongest evidence first."""
    table: pd.DataFrame = report.table
    groups = table["group_id"].to_numpy()
    splits = _splits(table)
    leaked = set(report.leaked_groups["group_id"].tolist())
    pairs: list[ReviewPair] = []
    covered: set[Any] = set()
    edges = report.edges
    if edges is not None and len(edges):
        a = edges["row_a"].to_numpy(dtype=np.int64)
        b = edges["row_b"].to_numpy(dtype=np.int64)
        across = np.array(
            [
                splits[i] is not None and splits[j] is not None and splits[i] != splits[j]
                for i, j in zip(a.tolist(), b.tolist(), strict=True)
            ],
            dtype=bool,
        )
        order = np.argsort(-edges["strength"].to_numpy(dtype=float), kind="stable")
        kinds = edges["copy_kind"].tolist() if "copy_kind" in edges else [None] * len(edges)
        stages = edges["stage"].tolist()
        distances = edges["distance"].tolist()
        for k in order.tolist():
            if not across[k] or groups[a[k]] not in leaked:
                continue
            kind = kinds[k] if isinstance(kinds[k], str) and kinds[k] else None
            why = f"linked by {stages[k]}" + (f": {kind}" if kind else "")
            distance = None if pd.isna(distances[k]) else int(distances[k])
            pairs.append(ReviewPair(int(a[k]), int(b[k]), True, why, distance))
            covered.add(groups[a[k]])
    # A group linked only through same-split chains: one member of each of two splits.
    for group_id in report.leaked_groups["group_id"].tolist():
        if group_id in covered:
            continue
        rows = np.flatnonzero(groups == group_id)
        first: dict[Any, int] = {}
        for row in rows.tolist():
            if splits[row] is not None:
                first.setdefault(splits[row], row)
        members = list(first.values())
        if len(members) >= 2:
            pairs.append(
                ReviewPair(
                    members[0],
                    members[1],
                    True,
                    "linked through same-split copies (no direct pair across splits)",
                )
            )
    return pairs[:limit]


def near_misses(
    report: Any,
    *,
    limit: int = MAX_NEAR_MISSES,
    threshold: int = CANDIDATE_THRESHOLD,
    judge: bool = True,
) -> list[ReviewPair]:
    """Pairs across splits within ``threshold`` that the audit did not link, closest first.

    The candidate net proposes pairs within :data:`~leakaudit.verify.CANDIDATE_THRESHOLD`
    (pHash and dHash, orientations compared); these are the ones it proposed between
    images the audit left in different groups. With ``judge``, each of the ``limit``
    closest is judged again (:func:`leakaudit.verify.compare_views`) for the reason.
    """
    table: pd.DataFrame = report.table
    if "phash" not in table or "dhash" not in table or len(table) < 2:
        return []
    distances = PairDistances.of_report(report, table)
    valid = distances.valid
    orientations = report.orientations
    if orientations is not None and len(orientations):
        owner = np.asarray(orientations.owner, dtype=np.int64)
        values = np.asarray(orientations.phash, dtype=np.uint64)
    else:
        owner = np.flatnonzero(valid)
        values = distances.columns[0][owner]
    groups = table["group_id"].to_numpy()
    splits = _splits(table)
    found: list[np.ndarray] = []
    collected = 0
    for chunk in iter_pairs_within(values, threshold, chunk_pairs=65_536):
        rows = owner[chunk]
        keep = (rows[:, 0] != rows[:, 1]) & valid[rows[:, 0]] & valid[rows[:, 1]]
        rows = rows[keep]
        keep = groups[rows[:, 0]] != groups[rows[:, 1]]
        rows = np.sort(rows[keep], axis=1)
        found.append(rows)
        collected += len(rows)
        if collected >= _NEAR_MISS_SEARCH_CAP:
            break
    if not found:
        return []
    rows = np.unique(np.concatenate(found), axis=0) if collected else np.zeros((0, 2), np.int64)
    if not len(rows):
        return []
    across = np.array(
        [
            splits[i] is not None and splits[j] is not None and splits[i] != splits[j]
            for i, j in rows.tolist()
        ],
        dtype=bool,
    )
    rows = rows[across]
    if not len(rows):
        return []
    measured = distances(rows[:, 0], rows[:, 1])
    close = measured <= threshold
    rows, measured = rows[close], measured[close]
    order = np.lexsort((rows[:, 1], rows[:, 0], measured))[:limit]
    paths = [str(p) for p in table["path"]] if "path" in table else None
    applied = report.parameters.get("decisions")
    apart = set(applied.get("apart", [])) if isinstance(applied, dict) else set()
    digests = table["digest"].tolist() if "digest" in table else [None] * len(table)
    found_pairs = []
    for k in order.tolist():
        a, b = int(rows[k, 0]), int(rows[k, 1])
        key = " ".join(sorted((str(digests[a]), str(digests[b]))))
        if key in apart:
            why = "kept apart by a reviewer's decision (not a copy)"
        else:
            why = _rejection(report, paths, a, b) if judge else ""
        found_pairs.append(ReviewPair(a, b, False, why, int(measured[k])))
    return found_pairs


def _rejection(report: Any, paths: list[str] | None, a: int, b: int) -> str:
    """Why the audit did not link ``a`` and ``b``: the judge's reason, seen again."""
    unlinked = "not linked by the audit"
    if paths is None:
        return unlinked
    files = [report.image_file(paths[a]), report.image_file(paths[b])]
    if not all(files):
        return f"{unlinked} (the images cannot be read again to say why)"
    parameters = report.parameters
    decode = DecodeOptions(
        min_side=parameters.get("min_side") or DecodeOptions().min_side,
        exif_transpose=bool(parameters.get("exif_transpose", True)),
        trim_borders=bool(parameters.get("trim_borders", False)),
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            verdict = compare_views(
                load_view(files[0], paths[a], decode),
                load_view(files[1], paths[b], decode),
                VerifyOptions(),
            )
    except Exception as exc:  # a reason is a courtesy: never the end of the report
        return f"{unlinked} (the judge could not compare them again: {type(exc).__name__})"
    if verdict.accepted:
        return (
            "the pixel check accepts it, but the audit did not link it: its neighbours "
            "did not support it, or it would join two images seen to differ"
        )
    return f"the judge rejected it: {verdict.reason}"


def content_digests(report: Any, rows: Sequence[int] | None = None) -> list[str | None]:
    """Each row's byte digest: the report's ``digest`` column, else read from its file.

    Only ``rows`` are read (default: every row the review shows); the others keep the
    column's value. A file the report may not read has none.
    """
    table: pd.DataFrame = report.table
    digests: list[str | None] = [
        d if isinstance(d, str) else None
        for d in (table["digest"] if "digest" in table else [None] * len(table))
    ]
    if rows is None:
        wanted: set[int] = set()
        for pair in [*review_pairs(report), *near_misses(report, judge=False)]:
            wanted.update((pair.row_a, pair.row_b))
        rows = sorted(wanted)
    paths = [str(p) for p in table["path"]] if "path" in table else None
    for row in rows:
        if digests[row] is None and paths is not None:
            readable = report.image_file(paths[row])
            digests[row] = source_digest(readable) if readable else None
    return digests


def _e(value: object) -> str:
    return html.escape(printable(str(value)), quote=True)


def path_html(path: str) -> str:
    """``path`` escaped, with a line-break opportunity after each ``/`` and ``_``: a long
    path wraps between its parts, not in the middle of a name. (Not after a backslash:
    the escapes of invisible characters, ``\\u202e``, are written with one.)"""
    escaped = _e(path)
    for separator in ("/", "_"):
        escaped = escaped.replace(separator, separator + "<wbr>")
    return escaped


def review_section(
    report: Any,
    digests: Sequence[str | None],
    *,
    thumbnail: Callable[[str], str | None],
    display_path: Callable[[str], str],
    badge: Callable[[object], str],
    report_key: str,
    leaked: Sequence[ReviewPair] | None = None,
    missed: Sequence[ReviewPair] | None = None,
) -> str:
    """The review section's HTML (its script is :data:`REVIEW_SCRIPT`).

    ``digests`` holds each row's byte digest (None: unknown, then the pair has no
    controls). ``report_key`` names the browser storage the decisions persist in.
    """
    table: pd.DataFrame = report.table
    paths = [str(p) for p in table["path"]]
    splits = table["split"].tolist()
    leaked = review_pairs(report) if leaked is None else leaked
    missed = near_misses(report) if missed is None else missed
    applied = report.parameters.get("decisions")
    note = ""
    if isinstance(applied, dict):
        note = (
            f"<p>Decisions applied from <code>{_e(applied.get('file', ''))}</code>: "
            f"{int(applied.get('links_from_decisions', 0))} link(s) came from decisions, "
            f"{int(applied.get('separated', 0))} pair(s) kept apart, "
            f"{len(applied.get('stale', []))} stale decision(s) not applied.</p>"
        )
    out = [
        f'<section id="review" data-report={_q(report_key)}>',
        "<h2>Review</h2>",
        note,
        "<p>Each pair below can be marked <b>copy</b> (it always links) or <b>not a copy</b> "
        "(it never links). Decisions are kept in this browser; <b>Save decisions</b> downloads "
        "them as a CSV file for <code>leakaudit scan --decisions FILE</code> (or "
        "<code>audit_splits(..., decisions=FILE)</code>). Images are named by the digest of "
        "their bytes, so decisions survive renames and moves.</p>",
        '<p class="review-controls"><button type="button" id="review-save">Save decisions'
        '</button> <span id="review-count">0 decision(s)</span></p>',
        '<p class="review-nojs">Run the page with JavaScript enabled to record decisions.</p>',
    ]
    for title, pairs, kind in (
        (f"Leaked pairs ({len(leaked)})", leaked, "leaked"),
        (f"Near-misses worth a look ({len(missed)})", missed, "near"),
    ):
        out.append(f"<h3>{title}</h3>")
        if kind == "near":
            out.append(
                "<p>Pairs across splits whose hashes are close (within the candidate "
                "distance) that the audit did not link, closest first, with the reason.</p>"
            )
        if not pairs:
            out.append('<p class="none">None.</p>')
            continue
        out.append(f'<table class="review {kind}"><tbody>')
        for pair in pairs:
            out.append(
                _pair_row(pair, paths, splits, digests, thumbnail, display_path, badge, kind)
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)


def _q(value: object) -> str:
    return f'"{_e(value)}"'


def _pair_row(
    pair: ReviewPair,
    paths: list[str],
    splits: list[Any],
    digests: Sequence[str | None],
    thumbnail: Callable[[str], str | None],
    display_path: Callable[[str], str],
    badge: Callable[[object], str],
    kind: str,
) -> str:
    cells = []
    for row in (pair.row_a, pair.row_b):
        uri = thumbnail(paths[row])
        image = f'<img src="{uri}" alt="">' if uri else '<span class="noimg">no preview</span>'
        cells.append(
            f'<td class="member">{image}<br>{badge(splits[row])} '
            f'<span class="path">{path_html(display_path(paths[row]))}</span></td>'
        )
    digest_a, digest_b = digests[pair.row_a], digests[pair.row_b]
    distance = "" if pair.distance is None else f" (hash distance {pair.distance})"
    why = f'<td class="why">{_e(pair.why)}{_e(distance)}'
    if digest_a and digest_a == digest_b:
        why += '<div class="note">byte-identical files: always a copy</div>'
        attributes = ""
    elif digest_a and digest_b:
        name = f"d{digest_a}{digest_b}"
        controls = "".join(
            f'<label><input type="radio" name="{name}" value={_q(value)}> {label}</label> '
            for value, label in ((COPY, "copy"), (NOT_A_COPY, "not a copy"), ("", "undecided"))
        )
        why += f'<div class="review-controls">{controls}</div>'
        attributes = (
            f' data-a="{digest_a}" data-b="{digest_b}" '
            f"data-pa={_q(display_path(paths[pair.row_a]))} "
            f"data-pb={_q(display_path(paths[pair.row_b]))}"
        )
    else:
        why += '<div class="note">(no digest: this pair cannot be decided)</div>'
        attributes = ""
    return f'<tr class="pair {kind}"{attributes}>{"".join(cells)}{why}</td></tr>'


def report_key(root: str | None, title: str) -> str:
    """The browser-storage name of a report's decisions: its dataset folder and title."""
    text = f"{root or ''}\n{title}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


#: The review section's script: restores, records and saves decisions. No external
#: resource, no eval; the download is a ``data:`` URL.
REVIEW_SCRIPT = """
(function () {
  var root = document.documentElement;
  root.className = root.className.replace('no-js', 'js');
  var section = document.getElementById('review');
  if (!section) { return; }
  var key = 'leakaudit-review:' + section.getAttribute('data-report');
  var store = {};
  try { store = JSON.parse(window.localStorage.getItem(key) || '{}') || {}; } catch (e) {}
  function persist() {
    try { window.localStorage.setItem(key, JSON.stringify(store)); } catch (e) {}
    document.getElementById('review-count').textContent =
      Object.keys(store).length + ' decision(s)';
  }
  var rows = section.querySelectorAll('tr.pair[data-a]');
  Array.prototype.forEach.call(rows, function (tr) {
    var a = tr.getAttribute('data-a'), b = tr.getAttribute('data-b');
    var pair = a < b ? a + ' ' + b : b + ' ' + a;
    var inputs = tr.querySelectorAll('input[type=radio]');
    Array.prototype.forEach.call(inputs, function (input) {
      input.checked = store[pair] ? store[pair].decision === input.value : input.value === '';
      input.addEventListener('change', function () {
        if (!input.checked) { return; }
        if (input.value === '') { delete store[pair]; } else {
          store[pair] = {decision: input.value, digest_a: a, digest_b: b,
                         path_a: tr.getAttribute('data-pa'), path_b: tr.getAttribute('data-pb')};
        }
        tr.setAttribute('data-decision', input.value);
        persist();
      });
    });
  });
  function cell(value) {
    value = String(value);
    return /[",\\r\\n]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
  }
  document.getElementById('review-save').addEventListener('click', function () {
    var lines = ['decision,digest_a,digest_b,path_a,path_b'];
    Object.keys(store).sort().forEach(function (pair) {
      var d = store[pair];
      lines.push([d.decision, d.digest_a, d.digest_b, d.path_a, d.path_b].map(cell).join(','));
    });
    var link = document.createElement('a');
    link.setAttribute('download', 'leakaudit-decisions.csv');
    link.setAttribute('hr' + 'ef', 'data:text/csv;charset=utf-8,' +
                      encodeURIComponent(lines.join('\\n') + '\\n'));
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
  persist();
})();
"""


def script_hash(script: str = REVIEW_SCRIPT) -> str:
    """The Content-Security-Policy source that allows exactly ``script`` inline."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


#: Styles of the review section (the controls hidden without script and in print).
REVIEW_STYLE = """
#review table.review { border-collapse: collapse; width: 100%; }
#review table.review td { border-top: 1px solid #ddd; padding: 6px; vertical-align: top; }
#review td.member { width: 35%; overflow-wrap: break-word; }
#review td.member img { width: 96px; height: 96px; object-fit: contain;
                        image-rendering: pixelated; background: #eee; }
#review td.why { font-size: 13px; }
#review .review-controls label { margin-right: 10px; white-space: nowrap; }
#review tr[data-decision="copy"] { background: #fff0f0; }
#review tr[data-decision="not a copy"] { background: #f0fff0; }
.no-js .review-controls { display: none; }
.js .review-nojs { display: none; }
@media print { .review-controls, .review-nojs { display: none; } }
"""


def review_html(
    report: Any,
    thumbnail: Callable[[str], str | None],
    display_path: Callable[[str], str],
    badge: Callable[[object], str],
    key: str,
) -> str:
    """The review section of ``report``: its leaked pairs and near-misses, their images'
    content digests, rendered by :func:`review_section`."""
    leaked, missed = review_pairs(report), near_misses(report)
    rows = sorted({row for pair in [*leaked, *missed] for row in (pair.row_a, pair.row_b)})
    return review_section(
        report,
        content_digests(report, rows),
        thumbnail=thumbnail,
        display_path=display_path,
        badge=badge,
        report_key=key,
        leaked=leaked,
        missed=missed,
    )

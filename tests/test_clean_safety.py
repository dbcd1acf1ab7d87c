"""``clean`` and every output never touch the user's data (issue 11).

Each test builds a temporary ROOT, snapshots it (bytes, inodes, link counts,
modes, mtimes of every entry, links' targets), runs the reproduction, and checks
ROOT is exactly as it was. Link counts may only grow by the hard links NEW_ROOT
itself holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import imagegen
import pandas as pd
import pytest

import leakaudit
from leakaudit.cleantree import MANIFEST_NAME, walk_tree
from leakaudit.cli import main
from leakaudit.listing import FolderScanWarning, RepeatedPathWarning

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
CLI = [sys.executable, "-m", "leakaudit"]


# ---------------------------------------------------------------- fixtures


def _snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under (and including) ``root``: what must not change."""
    result: dict[str, tuple[object, ...]] = {}
    for directory, folders, files in os.walk(root):
        for name in [".", *folders, *files]:
            path = Path(directory) / name if name != "." else Path(directory)
            info = os.lstat(path)
            content: object = None
            if stat.S_ISREG(info.st_mode):
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(path)
            key = os.path.relpath(path, root)
            result[key] = (
                info.st_mode,
                info.st_ino,
                info.st_nlink,
                info.st_size,
                info.st_mtime_ns,
                content,
            )
    return result


def _links_into(out: Path, root_inodes: set[int]) -> Counter[int]:
    counts: Counter[int] = Counter()
    if not out.exists():
        return counts
    for directory, _, files in os.walk(out):
        for name in files:
            info = os.lstat(Path(directory) / name)
            if stat.S_ISREG(info.st_mode) and info.st_ino in root_inodes:
                counts[info.st_ino] += 1
    return counts


def assert_unchanged(before: dict[str, tuple[object, ...]], root: Path, *outs: Path) -> None:
    """ROOT is as it was; link counts grew only by the hard links in ``outs``."""
    after = _snapshot(root)
    assert sorted(after) == sorted(before), "entries were added to or removed from ROOT"
    inodes = {int(v[1]) for v in before.values()}  # type: ignore[call-overload]
    links: Counter[int] = Counter()
    for out in outs:
        links.update(_links_into(out, inodes))
    for key, old in before.items():
        new = after[key]
        mode, ino, nlink, size, mtime, content = old
        assert new[0] == mode and new[1] == ino, key
        assert new[3] == size and new[5] == content, f"{key} changed"
        if stat.S_ISREG(int(mode)):  # type: ignore[call-overload]
            assert new[2] == int(nlink) + links[int(ino)], key  # type: ignore[call-overload]
        assert new[4] == mtime, f"{key}: mtime changed"


def _write_image(path: Path, seed: int, fmt: str = "JPEG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(imagegen.encode(imagegen.photo_like(seed), fmt, quality=90))


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A small ImageFolder tree with two planted leaks and a labels file."""
    top = tmp_path / "r0"
    for i in range(6):
        _write_image(top / "train" / "cat" / f"a{i}.jpg", i)
    for i in range(3):
        _write_image(top / "test" / "cat" / f"b{i}.jpg", 100 + i)
    # Leaks: test/cat/a0.jpg is a re-encode of train/cat/a0.jpg (same name: a .from- rename).
    (top / "test" / "cat" / "a0.jpg").write_bytes(
        imagegen.encode(imagegen.photo_like(0), "JPEG", quality=60)
    )
    (top / "test" / "cat" / "copy.png").write_bytes(imagegen.encode(imagegen.photo_like(1), "PNG"))
    (top / "labels.txt").write_text("cat\n")
    return top


def _clean(root: Path, out: Path, *options: str) -> int:
    return main(["clean", str(root), "--out", str(out), "--quiet", "--no-cache", "--workers", "1",
                 *options])  # fmt: skip


def _manifest(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


# ---------------------------------------------------------------- 1. hard links


def test_second_clean_keeps_the_first_runs_manifest(root: Path, tmp_path: Path) -> None:
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    before_root = _snapshot(root)
    assert _clean(root, r1) == 0
    first = (r1 / MANIFEST_NAME).read_bytes()
    before_r1 = _snapshot(r1)
    assert _clean(r1, r2) == 0
    assert (r1 / MANIFEST_NAME).read_bytes() == first
    assert_unchanged(before_r1, r1, r2)
    assert_unchanged(before_root, root, r1, r2)
    # r1's own manifest is kept in r2, under a name that does not collide.
    manifest = _manifest(r2 / MANIFEST_NAME)
    row = manifest[manifest["old_path"] == MANIFEST_NAME].iloc[0]
    assert row["new_path"] == "leakaudit-manifest.from-root.csv"
    assert (r2 / row["new_path"]).read_bytes() == first


def test_manifest_path_on_a_linked_image_is_refused(root: Path, tmp_path: Path) -> None:
    before = _snapshot(root)
    out = tmp_path / "r3"
    assert _clean(root, out, "--manifest", str(out / "train" / "cat" / "a1.jpg")) == 2
    assert not out.exists()
    assert_unchanged(before, root)


@pytest.mark.parametrize("option", ["--manifest", "--csv", "--json", "--html"])
def test_outputs_on_a_hard_link_replace_the_name_not_the_file(
    root: Path, tmp_path: Path, option: str
) -> None:
    before = _snapshot(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = elsewhere / "out.file"
    os.link(root / "train" / "cat" / "a2.jpg", link)
    out = tmp_path / "new"
    assert _clean(root, out, option, str(link)) == 0
    assert_unchanged(before, root, out)
    assert os.stat(link).st_ino != os.stat(root / "train" / "cat" / "a2.jpg").st_ino
    text = link.read_bytes()
    assert not text.startswith(b"\xff\xd8")  # now our output, not the JPEG


def test_outputs_on_a_symlink_replace_the_link(root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.csv"
    victim.write_text("precious\n")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    assert main(["scan", str(root), "--quiet", "--no-cache", "--workers", "1",
                 "--json", str(link)]) == 0  # fmt: skip
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink()
    assert json.loads(link.read_text())["format"] == "leakaudit-report"


@pytest.mark.parametrize(
    "option", ["--csv", "--json", "--html", "--show", "--manifest", "--cache-dir"]
)
@pytest.mark.parametrize("command", ["scan", "clean", "compare"])
def test_outputs_inside_the_dataset_are_refused(
    root: Path, tmp_path: Path, command: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if option == "--manifest" and command != "clean":
        pytest.skip("--manifest is clean's option")
    before = _snapshot(root)
    target = root / "test" / ("pairs" if option in ("--show", "--cache-dir") else "out.file")
    if command == "compare":
        argv = ["compare", str(root / "train"), str(root / "test")]
    else:
        argv = [command, str(root)]
    if command == "clean":
        argv += ["--out", str(tmp_path / "o")]
    cache = [] if option == "--cache-dir" else ["--no-cache"]
    code = main([*argv, "--quiet", *cache, "--workers", "1", option, str(target)])
    assert code == 2
    assert "inside" in capsys.readouterr().err
    assert_unchanged(before, root)
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- 2. --force and links in OUT


def test_force_refuses_an_out_with_a_link_into_root(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "o3"
    out.mkdir()
    (out / "train").symlink_to(root / "test")
    before = _snapshot(root)
    assert _clean(root, out, "--force") == 2
    assert_unchanged(before, root)
    assert (out / "train").is_symlink()


def test_force_replaces_only_an_earlier_output(root: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert _clean(root, mine, "--force") == 2
    assert (mine / "notes.txt").read_text() == "mine"

    out = tmp_path / "out"
    before = _snapshot(root)
    assert _clean(root, out) == 0
    (out / "stale.txt").write_text("from before")
    assert _clean(root, out, "--force", "--policy", "drop") == 0
    assert not (out / "stale.txt").exists()  # replaced as a whole, not merged
    assert "dropped" in set(_manifest(out / MANIFEST_NAME)["action"])
    assert_unchanged(before, root, out)
    assert not [p for p in tmp_path.iterdir() if ".leakaudit-" in p.name]


# ---------------------------------------------------------------- 3, 4, 7. devices, pipes, links


def _hostile_tree(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")
    (root / "notes.txt").symlink_to(secret)  # a file link leaving ROOT
    (root / "test" / "zero.jpg").symlink_to("/dev/zero")  # a device
    (root / "test" / "outside.jpg").symlink_to(tmp_path / "outside.jpg")
    _write_image(tmp_path / "outside.jpg", 7)
    os.mkfifo(root / "test" / "pipe.jpg")
    (root / "train" / "dangling.jpg").symlink_to("nowhere.jpg")
    (root / "train" / "loop.jpg").symlink_to("loop.jpg")
    (root / "etc").symlink_to("/etc")  # a folder link leaving ROOT
    (root / "cats").symlink_to("train/cat")  # a folder link inside ROOT
    # An image link inside ROOT, from test to a train image: a real leak.
    (root / "test" / "alias.jpg").symlink_to("../train/cat/a3.jpg")
    (root / "train" / "cat" / "label-link.txt").symlink_to("../../labels.txt")


@pytest.mark.parametrize("mode", ["--copy", "--link"])
def test_hostile_entries_are_recorded_not_followed(
    root: Path, tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _hostile_tree(root, tmp_path)
    before = _snapshot(root)
    out = tmp_path / "out"
    options = ["--copy"] if mode == "--copy" else []
    outside_before = _snapshot(tmp_path / "outside.jpg")
    assert _clean(root, out, *options) == 0
    assert "could not be read" in capsys.readouterr().err  # the device, the loop, ...
    assert_unchanged(before, root, out)
    assert_unchanged(outside_before, tmp_path / "outside.jpg", out)
    manifest = _manifest(out / MANIFEST_NAME).set_index("old_path")
    # Every entry under ROOT has a row.
    assert sorted(manifest.index) == sorted(e.relative for e in walk_tree(root))
    skipped = manifest[manifest["action"] == "skipped"]["reason"].to_dict()
    assert skipped["notes.txt"].startswith("symbolic link leaving ROOT")
    assert skipped["etc"].startswith("symbolic link leaving ROOT")
    assert skipped["test/zero.jpg"].startswith("symbolic link leaving ROOT")
    # An image link leaving ROOT is read, as ImageFolder reads it (issue 35.4), and written
    # as a regular file; the device behind zero.jpg and the secret never are.
    outside = manifest.loc["test/outside.jpg"]
    assert outside["action"] == "kept" and "written as a regular file" in outside["reason"]
    assert not (out / outside["new_path"]).is_symlink()
    assert (out / outside["new_path"]).read_bytes() == (tmp_path / "outside.jpg").read_bytes()
    assert skipped["test/pipe.jpg"].startswith("named pipe")
    assert skipped["train/dangling.jpg"] == "dangling symbolic link"
    assert skipped["train/loop.jpg"] == "symbolic link loop"
    # Nothing of the secret, the device or the outside image reached NEW_ROOT.
    sizes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    assert sizes < 2_000_000
    assert not any(b"the secret" in p.read_bytes() for p in out.rglob("*") if p.is_file())
    # Links inside ROOT stay links, relative, pointing at their target's new place.
    alias = manifest.loc["test/alias.jpg"]
    assert alias["action"] == "moved" and alias["new_split"] == "train"
    new_alias = out / alias["new_path"]
    assert new_alias.is_symlink() and not os.path.isabs(os.readlink(new_alias))
    assert new_alias.resolve() == (out / manifest.loc["train/cat/a3.jpg"]["new_path"]).resolve()
    label_link = out / manifest.loc["train/cat/label-link.txt"]["new_path"]
    assert label_link.read_text() == "cat\n" and label_link.is_symlink()
    assert (out / "cats").is_symlink() and (out / "cats").resolve() == (out / "train/cat").resolve()


def test_scan_hashes_links_leaving_the_dataset_as_imagefolder_reads_them(
    root: Path, tmp_path: Path
) -> None:
    """Issue 35.4: ImageFolder reads an image link wherever it leads; so does the audit."""
    _write_image(tmp_path / "outside.jpg", 1)  # the same picture as train/cat/a1.jpg
    (root / "test" / "outside.jpg").symlink_to(tmp_path / "outside.jpg")
    report = leakaudit.audit_splits(
        {"train": root / "train", "test": root / "test"}, workers=1, cache=False
    )
    assert report.table is not None
    table = report.table.set_index("path")
    outside = str(root / "test" / "outside.jpg")
    assert table.loc[outside, "group_id"] == table.loc[str(root / "train/cat/a1.jpg"), "group_id"]


def test_unlistable_folder_has_a_manifest_row(root: Path, tmp_path: Path) -> None:
    if IS_ROOT:
        pytest.skip("root can list any folder")
    locked = root / "train" / "locked"
    locked.mkdir()
    _write_image(locked / "x.jpg", 50)
    locked.chmod(0)
    try:
        out = tmp_path / "out"
        with pytest.warns(FolderScanWarning):
            assert _clean(root, out) == 0
        manifest = _manifest(out / MANIFEST_NAME).set_index("old_path")
        assert manifest.loc["train/locked/"]["action"] == "skipped"
    finally:
        locked.chmod(0o755)


def test_unreadable_images_are_copied_as_they_are(root: Path, tmp_path: Path) -> None:
    """With --unreadable copy (the default leaves them out: tests/test_clean_unreadable.py)."""
    (root / "train" / "cat" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really")
    out = tmp_path / "out"
    assert _clean(root, out, "--copy", "--unreadable", "copy") == 0
    manifest = _manifest(out / MANIFEST_NAME).set_index("old_path")
    row = manifest.loc["train/cat/broken.jpg"]
    assert row["action"] == "kept" and row["reason"].startswith("unreadable image")
    assert (out / row["new_path"]).read_bytes() == b"\xff\xd8\xff\xe0 not really"


# ---------------------------------------------------------------- 5. long names


def test_from_suffix_fits_name_max(tmp_path: Path) -> None:
    top = tmp_path / "r0"
    name = "x" * 251 + ".jpg"  # 255 bytes: the longest a name can be
    _write_image(top / "train" / name, 3)
    _write_image(top / "test" / name, 3)
    out = tmp_path / "out"
    assert _clean(top, out) == 0
    manifest = _manifest(out / MANIFEST_NAME).set_index("old_path")
    moved = manifest.loc[f"test/{name}"]
    assert moved["action"] == "moved"
    new_name = Path(moved["new_path"]).name
    assert len(os.fsencode(new_name)) <= 255 and new_name.endswith(".from-test.jpg")
    assert (out / moved["new_path"]).is_file()


# ---------------------------------------------------------------- 6. all or nothing


def _run_cli(argv: list[str], **limits: int) -> subprocess.CompletedProcess[str]:
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    return subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, timeout=300, preexec_fn=preexec
    )


def _assert_nothing_left(out: Path) -> None:
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if ".leakaudit-" in p.name]


def test_failed_write_leaves_nothing(root: Path, tmp_path: Path) -> None:
    """A write failure (here: the file-size limit, EFBIG) removes the partial copy."""
    (root / "big.bin").write_bytes(os.urandom(300_000))
    before = _snapshot(root)
    out = tmp_path / "out"
    argv = ["clean", str(root), "--out", str(out), "--copy", "--quiet", "--no-cache"]
    result = _run_cli(argv, RLIMIT_FSIZE=200_000)
    assert result.returncode == 2, result.stderr
    assert "nothing was written there" in result.stderr
    assert result.stderr.count("\n") <= 3  # one line, no traceback
    _assert_nothing_left(out)
    assert_unchanged(before, root)


@contextlib.contextmanager
def _small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (the EFBIG test covers the write failure)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.skipif(not IS_ROOT or not sys.platform.startswith("linux"), reason="needs mount")
def test_full_disk_leaves_nothing(root: Path, tmp_path: Path) -> None:
    (root / "big.bin").write_bytes(os.urandom(400_000))
    before = _snapshot(root)
    with _small_tmpfs(tmp_path / "small", "256k") as disk:
        out = disk / "out"
        # A tmpfs is another file system: hard links fail, files are copied, the disk fills.
        result = _run_cli(["clean", str(root), "--out", str(out), "--quiet", "--no-cache"])
        assert result.returncode == 2, result.stderr
        assert "No space left" in result.stderr
        _assert_nothing_left(out)
    assert_unchanged(before, root)


def test_kill_9_leaves_the_old_state_and_the_next_run_recovers(root: Path, tmp_path: Path) -> None:
    bulk = root / "train" / "bulk"
    bulk.mkdir()
    payload = os.urandom(64_000)
    for i in range(1500):  # ~100 MB to copy: the write phase lasts long enough to be hit
        (bulk / f"{i:04d}.bin").write_bytes(payload)
    before = _snapshot(root)
    out = tmp_path / "out"
    argv = ["clean", str(root), "--out", str(out), "--copy", "--quiet", "--no-cache"]
    process = subprocess.Popen([*CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    killed = False
    while time.monotonic() < deadline and process.poll() is None:
        partial = [p for p in tmp_path.iterdir() if ".leakaudit-partial-" in p.name]
        if partial and sum(1 for _ in partial[0].rglob("*.bin")) > 20:
            process.kill()
            killed = True
            break
        time.sleep(0.005)
    process.wait(timeout=60)
    assert killed, "the clean finished before it could be killed"
    assert not out.exists()  # the old state: nothing at OUT
    assert [p for p in tmp_path.iterdir() if ".leakaudit-partial-" in p.name]
    assert_unchanged(before, root)
    result = _run_cli(argv)
    assert result.returncode == 0, result.stderr
    assert not [p for p in tmp_path.iterdir() if ".leakaudit-" in p.name]  # removed
    manifest = _manifest(out / MANIFEST_NAME)
    written = manifest[manifest["new_path"] != ""]
    assert all((out / p).exists() for p in written["new_path"])
    assert len(written) == len(manifest) == len(walk_tree(root))


def test_sigterm_during_clean_removes_the_partial_copy(root: Path, tmp_path: Path) -> None:
    bulk = root / "train" / "bulk"
    bulk.mkdir()
    payload = os.urandom(64_000)
    for i in range(1500):
        (bulk / f"{i:04d}.bin").write_bytes(payload)
    out = tmp_path / "out"
    argv = ["clean", str(root), "--out", str(out), "--copy", "--quiet", "--no-cache"]
    process = subprocess.Popen([*CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        partial = [p for p in tmp_path.iterdir() if ".leakaudit-partial-" in p.name]
        if partial and sum(1 for _ in partial[0].rglob("*.bin")) > 20:
            process.send_signal(signal.SIGTERM)
            break
        time.sleep(0.005)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert b"terminated" in stderr
    _assert_nothing_left(out)


# ---------------------------------------------------------------- smaller points


@pytest.mark.parametrize("limit", ["nan%", "inf%", "NaN", "-inf%", "1e400%"])
def test_fail_on_leak_rejects_non_finite_limits(root: Path, limit: str) -> None:
    assert main(["scan", str(root), "--quiet", "--no-cache", "--fail-on-leak", limit]) == 2


def test_names_with_control_characters_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, test = tmp_path / "train", tmp_path / "test"
    _write_image(train / "a.jpg", 4)
    evil = "x\x1b[2J\nLEAK  forged.jpg  ~  nothing  (distance 0)\r.jpg"
    _write_image(test / evil, 4)
    assert main(["compare", str(train), str(test), "--quiet", "--no-cache"]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\r" not in printed
    assert sum(line.startswith("LEAK") for line in printed.splitlines()) == 1
    assert "\\x1b[2J\\x0aLEAK  forged.jpg" in printed


def test_the_same_folder_twice_is_counted_once(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = root / "train"
    with pytest.warns(RepeatedPathWarning, match="listed more than once"):
        report = leakaudit.audit_splits({"a": train, "b": Path(str(train) + "/.")}, workers=1)
    assert report.n_leaked_images == 0
    assert report.images_by_split.get("b", 0) == 0
    assert main(["compare", str(train), str(train / "."), "--quiet", "--no-cache"]) == 0
    captured = capsys.readouterr()
    assert "LEAK" not in captured.out
    assert "listed more than once" in captured.err


def test_unwritable_output_location_fails_before_the_audit(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readonly = tmp_path / "ro"
    readonly.mkdir()
    mounted = False
    if IS_ROOT and sys.platform.startswith("linux"):
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)],
                capture_output=True,
            ).returncode
            == 0
        )
        if not mounted:
            pytest.skip("root ignores permissions and no read-only mount can be made")
    else:
        readonly.chmod(0o555)
    try:
        for argv in (
            ["scan", str(root), "--csv", str(readonly / "t.csv")],
            ["clean", str(root), "--out", str(readonly / "out")],
        ):
            assert main([*argv, "--quiet", "--no-cache"]) == 2
            err = capsys.readouterr()
            assert "cannot write into" in err.err
            assert "LEAKAGE" not in err.out  # refused before the audit ran
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(readonly)], check=False)
        else:
            readonly.chmod(0o755)


def test_avif_files_are_scanned(tmp_path: Path) -> None:
    from PIL import features

    image = imagegen.photo_like(9)
    path = tmp_path / "train" / "a.avif"
    path.parent.mkdir()
    if features.check("avif"):
        image.save(path, "AVIF")
    else:
        path.write_bytes(b"\x00\x00\x00\x1cftypavif")
    listed = leakaudit.list_image_files(tmp_path / "train")
    assert listed == [path]


def test_internal_errors_are_not_exit_1(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import leakaudit.cli as cli

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something unexpected")

    monkeypatch.setattr(cli, "audit_splits", broken)
    assert main(["scan", str(root), "--quiet"]) == 3
    assert "internal error: RuntimeError: something unexpected" in capsys.readouterr().err

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "audit_splits", out_of_memory)
    assert main(["scan", str(root), "--quiet"]) == 2
    assert "out of memory" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 23


def _manifest_rows(path: Path) -> list[dict[str, str]]:
    """The manifest through Python's csv module (names kept as their bytes)."""
    import csv

    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as handle:
        return list(csv.DictReader(handle))


def test_clean_never_removes_root_named_like_a_partial(root: Path, tmp_path: Path) -> None:
    """`cp -r ds .new.leakaudit-partial-999999-x; clean it --out new` deleted ROOT."""
    import shutil

    from leakaudit.cleantree import _MARKER, _MARKER_TEXT

    disguised = tmp_path / ".new.leakaudit-partial-999999-x"
    shutil.copytree(root, disguised, symlinks=True)
    # A look-alike with a dead PID but no marker: not ours, kept.
    decoy = tmp_path / ".new.leakaudit-partial-999998-y"
    decoy.mkdir()
    (decoy / "mine.txt").write_text("mine")
    # A leftover with the marker that holds the ROOT being cleaned: kept.
    holder = tmp_path / ".new.leakaudit-partial-999997-z"
    shutil.copytree(root, holder / "tree")
    (holder / _MARKER).write_bytes(_MARKER_TEXT)
    # A link named like a leftover, to a folder with the marker: never followed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / _MARKER).write_bytes(_MARKER_TEXT)
    (tmp_path / ".new.leakaudit-partial-999996-v").symlink_to(elsewhere)
    # A real leftover of a killed run: removed.
    stale = tmp_path / ".new.leakaudit-partial-999995-w"
    (stale / "tree").mkdir(parents=True)
    (stale / _MARKER).write_bytes(_MARKER_TEXT)
    before = {path: _snapshot(path) for path in (disguised, decoy, holder, elsewhere)}
    out = tmp_path / "new"
    assert _clean(holder / "tree", out) == 0
    assert not stale.exists()
    for path, snapshot in before.items():
        assert_unchanged(snapshot, path, out)
    assert _clean(disguised, out, "--force") == 0
    for path in (disguised, decoy, elsewhere):
        assert_unchanged(before[path], path, out)
    assert (tmp_path / ".new.leakaudit-partial-999996-v").is_symlink()
    assert (out / "train" / "cat" / "a1.jpg").is_file()
    assert len(_manifest_rows(out / MANIFEST_NAME)) == len(walk_tree(disguised))


def _class_tree(top: Path) -> None:
    """train and test with classes ant, bee, cat, dog; test/ant holds only a leak; dog is empty."""
    for i, name in enumerate(["ant", "bee", "cat"]):
        _write_image(top / "train" / name / f"t{i}.jpg", i)
        _write_image(top / "train" / name / f"u{i}.jpg", 10 + i)
    (top / "test" / "ant").mkdir(parents=True)
    (top / "test" / "ant" / "t0.jpg").write_bytes(
        imagegen.encode(imagegen.photo_like(0), "JPEG", quality=60)
    )  # a re-encode of train/ant/t0.jpg: moves to train, test/ant is left empty
    _write_image(top / "test" / "bee" / "s1.jpg", 201)
    _write_image(top / "test" / "cat" / "s2.jpg", 202)
    (top / "train" / "dog").mkdir()  # empty already
    (top / "test" / "dog").mkdir()
    (top / "train" / "bee" / "nested" / "empty").mkdir(parents=True)


def test_every_folder_is_kept_so_class_indices_do_not_change(tmp_path: Path) -> None:
    # allow_empty (an empty class folder) came with torchvision 0.17.
    pytest.importorskip("torchvision", minversion="0.17")
    from torchvision.datasets import ImageFolder

    top = tmp_path / "ds"
    _class_tree(top)
    before = _snapshot(top)
    indices = {
        split: ImageFolder(str(top / split), allow_empty=True).class_to_idx
        for split in ("train", "test")
    }
    out = tmp_path / "new"
    assert _clean(top, out) == 0
    assert_unchanged(before, top, out)
    for split in ("train", "test"):
        assert ImageFolder(str(out / split), allow_empty=True).class_to_idx == indices[split]
    assert list((out / "test" / "ant").iterdir()) == []  # its image moved to train
    assert (out / "train" / "bee" / "nested" / "empty").is_dir()
    rows = {row["old_path"]: row for row in _manifest_rows(out / MANIFEST_NAME)}
    assert len(rows) == len(walk_tree(top))
    for folder in ("train/", "test/", "test/ant/", "test/dog/", "train/bee/nested/empty/"):
        assert rows[folder]["action"] == "folder" and rows[folder]["new_path"] == folder
    assert rows["test/ant/t0.jpg"]["action"] == "moved"


def test_split_folder_linked_elsewhere_is_followed_and_said_so(root: Path, tmp_path: Path) -> None:
    import shutil

    elsewhere = tmp_path / "other-disk"
    elsewhere.mkdir()
    shutil.move(root / "test", elsewhere / "test")
    (root / "test").symlink_to(elsewhere / "test")
    (elsewhere / "test" / "cat" / "notes.txt").write_text("notes")
    (elsewhere / "test" / "empty").mkdir()
    before, before_elsewhere = _snapshot(root), _snapshot(elsewhere)
    out = tmp_path / "out"
    assert _clean(root, out) == 0
    assert_unchanged(before, root, out)
    assert_unchanged(before_elsewhere, elsewhere, out)
    rows = {row["old_path"]: row for row in _manifest_rows(out / MANIFEST_NAME)}
    assert rows["test"]["action"] == "followed"
    assert rows["test"]["new_path"] == "test/"
    assert "symbolic link" in rows["test"]["reason"] and "followed" in rows["test"]["reason"]
    assert "not followed" not in rows["test"]["reason"]
    # A real folder with regular files; every entry behind the link has its row.
    assert (out / "test").is_dir() and not (out / "test").is_symlink()
    assert rows["test/cat/b1.jpg"]["action"] == "kept"
    assert (out / "test" / "cat" / "b1.jpg").is_file()
    assert not (out / "test" / "cat" / "b1.jpg").is_symlink()
    assert rows["test/cat/a0.jpg"]["action"] == "moved"
    assert rows["test/cat/notes.txt"]["action"] == "unaudited"
    assert rows["test/empty/"]["action"] == "folder" and (out / "test" / "empty").is_dir()
    assert sorted(rows) == sorted(e.relative for e in walk_tree(root, follow=["test"]))


@pytest.mark.parametrize("link", [True, False])
def test_a_folder_swapped_for_a_link_after_planning_is_not_followed(
    root: Path, tmp_path: Path, link: bool
) -> None:
    """Swapping root/train/zz for a link to a private folder once planned reads nothing there."""
    from leakaudit.cleantree import plan_tree, write_tree

    zz = root / "train" / "zz"
    zz.mkdir()
    (zz / "key.txt").write_text("public notes")
    _write_image(zz / "z.jpg", 40)
    private = tmp_path / "private"
    private.mkdir()
    (private / "key.txt").write_text("-----BEGIN PRIVATE KEY-----")
    _write_image(private / "z.jpg", 41)
    splits = {"train": root / "train", "test": root / "test"}
    report = leakaudit.audit_splits(splits, workers=1, cache=False, root=root)
    assert report.table is not None
    cleaned = leakaudit.clean_splits(report.table, ["train", "test"])
    plan = plan_tree(root, walk_tree(root), cleaned, {"train": "train", "test": "test"})
    # The swap, after the plan and before the writing.
    (root / "train" / "zz").rename(tmp_path / "zz-aside")
    (root / "train" / "zz").symlink_to(private)
    before = _snapshot(root)
    out = tmp_path / "out"
    summary = write_tree(plan, root, out, link=link)
    assert_unchanged(before, root, out)
    for path in out.rglob("*"):
        if path.is_file():
            assert b"PRIVATE KEY" not in path.read_bytes(), path
    private_inode = os.stat(private / "z.jpg").st_ino
    assert all(os.lstat(p).st_ino != private_inode for p in out.rglob("*"))
    rows = {entry.old_path: entry for entry in summary.entries}
    for name in ("train/zz/key.txt", "train/zz/z.jpg"):
        assert rows[name].action == "skipped"
        assert "no longer a folder" in rows[name].reason


def test_a_link_that_resolves_to_itself_is_not_written(root: Path, tmp_path: Path) -> None:
    """Listed as a link, found a file when resolved (a swap): never `f.txt -> f.txt`."""
    from leakaudit.cleantree import TreeEntry, plan_tree, write_tree

    (root / "train" / "f.txt").write_text("f")
    report = leakaudit.audit_splits(
        {"train": root / "train", "test": root / "test"}, workers=1, cache=False, root=root
    )
    assert report.table is not None
    cleaned = leakaudit.clean_splits(report.table, ["train", "test"])
    entries = [
        TreeEntry(e.relative, "link", "f.txt") if e.relative == "train/f.txt" else e
        for e in walk_tree(root)
    ]
    plan = plan_tree(root, entries, cleaned, {"train": "train", "test": "test"})
    row = next(entry for entry in plan if entry.old_path == "train/f.txt")
    assert row.action == "skipped" and row.link_to is None
    before = _snapshot(root)
    out = tmp_path / "out"
    write_tree(plan, root, out)
    assert_unchanged(before, root, out)
    assert not (out / "train" / "f.txt").is_symlink()


@pytest.mark.parametrize("variable", ["LEAKAUDIT_CACHE_DIR", "XDG_CACHE_HOME"])
@pytest.mark.parametrize("command", ["scan", "clean", "compare"])
def test_a_cache_folder_set_inside_the_dataset_is_refused(
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    variable: str,
) -> None:
    if variable == "XDG_CACHE_HOME":
        monkeypatch.delenv("LEAKAUDIT_CACHE_DIR", raising=False)
    monkeypatch.setenv(variable, str(root / "test" / "cache"))
    before = _snapshot(root)
    if command == "compare":
        argv = ["compare", str(root / "train"), str(root / "test")]
    else:
        argv = [command, str(root)]
    if command == "clean":
        argv += ["--out", str(tmp_path / "o")]
    assert main([*argv, "--quiet", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "inside" in err and f"${variable}" in err and err.count("\n") == 1
    assert_unchanged(before, root)
    assert not (tmp_path / "o").exists()
    # --no-cache, or --cache-dir elsewhere, runs.
    assert main([*argv, "--quiet", "--workers", "1", "--no-cache"]) in (0, 1)
    assert_unchanged(before, root, tmp_path / "o")


def test_manifest_rows_survive_cr_and_lf_in_names(root: Path, tmp_path: Path) -> None:
    import csv

    (root / "test" / "cat" / "x\rforged,kept.txt").write_text("cr")
    (root / "test" / "cat" / "y\nforged.txt").write_text("lf")
    (root / "train" / "cat" / 'q"uote\r\n.txt').write_text("both")
    _write_image(root / "test" / "cat" / "img\r.jpg", 300)
    before = _snapshot(root)
    out = tmp_path / "out"
    assert _clean(root, out) == 0
    assert_unchanged(before, root, out)
    expected = sorted(e.relative for e in walk_tree(root))
    with open(out / MANIFEST_NAME, encoding="utf-8", newline="") as handle:
        with_csv = list(csv.DictReader(handle))
    with_pandas = pd.read_csv(out / MANIFEST_NAME, keep_default_na=False, dtype=str)
    assert sorted(row["old_path"] for row in with_csv) == expected
    assert sorted(with_pandas["old_path"]) == expected
    assert list(with_pandas.columns) == list(with_csv[0])
    rows = {row["old_path"]: row for row in with_csv}
    assert rows["test/cat/img\r.jpg"]["action"] == "kept"
    assert (out / rows["test/cat/x\rforged,kept.txt"]["new_path"]).read_text() == "cr"


def test_non_utf8_names_reach_the_manifest_with_pyarrow(root: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    if sys.platform in ("darwin", "win32"):
        pytest.skip("the file system keeps only valid Unicode names")
    raw = os.fsdecode(b"\xff-photo.jpg")
    _write_image(root / "test" / "cat" / raw, 400)
    _write_image(root / "train" / "cat" / os.fsdecode(b"\xfe.jpg"), 2)  # a copy of a2.jpg
    before = _snapshot(root)
    out = tmp_path / "out"
    assert _clean(root, out) == 0
    assert_unchanged(before, root, out)
    rows = {row["old_path"]: row for row in _manifest_rows(out / MANIFEST_NAME)}
    assert sorted(rows) == sorted(e.relative for e in walk_tree(root))
    assert rows[f"test/cat/{raw}"]["action"] == "kept"
    assert os.fsencode(rows[f"test/cat/{raw}"]["new_path"]) == b"test/cat/\xff-photo.jpg"
    assert (out / "test" / "cat" / raw).is_file()

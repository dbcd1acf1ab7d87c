"""Test-wide settings."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_hash_cache() -> Iterator[None]:
    """Keep the persistent hash cache out of the user's cache folder during tests.

    Subprocesses (the CLI, the examples) inherit the variable too.
    """
    previous = os.environ.get("LEAKAUDIT_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="leakaudit-test-cache-") as folder:
        os.environ["LEAKAUDIT_CACHE_DIR"] = folder
        yield
    if previous is None:
        os.environ.pop("LEAKAUDIT_CACHE_DIR", None)
    else:
        os.environ["LEAKAUDIT_CACHE_DIR"] = previous

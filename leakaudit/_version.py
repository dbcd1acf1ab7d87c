"""The package's version, in a module of its own so that modules the package's
``__init__`` imports can read it at module level."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

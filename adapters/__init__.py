"""Framework adapters, installed as ``leakaudit.adapters``.

Each adapter module imports its framework lazily; importing this package never
imports torch, torchvision or datasets.
"""

from __future__ import annotations

__all__: list[str] = []

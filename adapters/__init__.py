"""Framework adapters, installed as ``leakaudit.adapters``.

* :mod:`leakaudit.adapters.torchvision` - ImageFolder / DatasetFolder / Subset /
  any map-style Dataset (``pip install 'leakaudit-vision[torch]'``);
* :mod:`leakaudit.adapters.huggingface` - ``datasets.DatasetDict``
  (``pip install 'leakaudit-vision[hf]'``);
* :mod:`leakaudit.adapters.ray` - Ray Data datasets of images, bytes or paths,
  hashed on the cluster (``pip install 'leakaudit-vision[ray]'``);
* :mod:`leakaudit.adapters.guard` - :func:`assert_no_leakage`, one call for
  training scripts, for either framework or plain folders.

Each adapter module imports its framework lazily; importing this package never
imports torch, torchvision, datasets or ray.
"""

from __future__ import annotations

from leakaudit.adapters._common import GroupSplitResult, ResplitResult
from leakaudit.adapters.guard import assert_no_leakage, check_leakage
from leakaudit.cleaning import SplitPlan

__all__ = [
    "GroupSplitResult",
    "ResplitResult",
    "SplitPlan",
    "assert_no_leakage",
    "check_leakage",
]

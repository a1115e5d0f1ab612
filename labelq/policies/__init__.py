"""Assignment policies: one pure-numpy implementation serving simulator and live pipeline.

Importing this package imports every policy module so that the registry is complete.
No Redis, SQL or Celery import is allowed anywhere below this package (a test checks).
"""

from .base import Observation, Policy, Problem, argmax_tiebreak
from .registry import build, get_class, names, register
from .spec import PolicySpec

# Every module of this package that is not private registers its policies on import.
import importlib as _importlib  # noqa: E402
import pkgutil as _pkgutil  # noqa: E402

_CORE = {"base", "registry", "spec"}
for _mod in _pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_") and _mod.name not in _CORE:
        _importlib.import_module(f"{__name__}.{_mod.name}")

__all__ = ["Observation", "Policy", "PolicySpec", "Problem", "argmax_tiebreak",
           "build", "get_class", "names", "register"]

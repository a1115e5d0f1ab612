"""Assignment policies: one pure-numpy implementation serving simulator and live pipeline.

Importing this package imports none of its modules: each name below is imported when it is
first used (``from labelq.policies import build`` imports the registry then), and the policy
modules (some import scipy) when the registry is first asked for a policy (:func:`build`,
:func:`get_class`, :func:`names` import every policy module so the registry is complete) or
when one is named (``labelq.policies.optkg``). So a command that only reads a project's spec
(``labelq status``: :mod:`labelq.policies.spec`) starts without numpy or scipy.
No Redis, SQL or Celery import is allowed anywhere below this package (a test checks).
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING
from typing import Any as _Any

if TYPE_CHECKING:
    from .base import Observation, Policy, Problem, argmax_tiebreak
    from .registry import build, get_class, load_policies, names, register
    from .spec import PolicySpec

__all__ = ["Observation", "Policy", "PolicySpec", "Problem", "argmax_tiebreak",
           "build", "get_class", "load_policies", "names", "register"]

_WHERE = {"Observation": "base", "Policy": "base", "Problem": "base",
          "argmax_tiebreak": "base", "build": "registry", "get_class": "registry",
          "load_policies": "registry", "names": "registry", "register": "registry",
          "PolicySpec": "spec"}


def __getattr__(name: str) -> _Any:
    """The names above from their module, and a policy module named as an attribute
    (``labelq.policies.optkg``), imported when first asked for."""
    if name in _WHERE:
        value = getattr(_importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return _importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

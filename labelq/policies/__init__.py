"""Assignment policies: one pure-numpy implementation serving simulator and live pipeline.

Importing this package imports every policy module so that the registry is complete.
No Redis, SQL or Celery import is allowed anywhere below this package (a test checks).
"""

from .base import Observation, Policy, Problem, argmax_tiebreak
from .registry import build, get_class, names, register
from .spec import PolicySpec

# Policy modules register themselves on import; keep one line per module.
from . import uniform  # noqa: E402,F401

__all__ = ["Observation", "Policy", "PolicySpec", "Problem", "argmax_tiebreak",
           "build", "get_class", "names", "register"]

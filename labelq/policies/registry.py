"""Registry: build a policy from its spec (``PolicySpec`` or the command-line text).

A policy module registers its class with ``@register``; the registry imports every policy
module of the package the first time it is asked for one (:func:`load_policies`), so it is
complete whoever asks, and a process that never builds a policy never imports them. ``build("cvar:alpha=0.2")`` validates the
parameters through the class's frozen ``Params`` dataclass.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import threading
from typing import Any, TypeVar

from ..errors import PolicyError
from .base import Policy
from .spec import PolicySpec

__all__ = ["register", "build", "names", "get_class", "load_policies"]

_REGISTRY: dict[str, type[Policy]] = {}
_ALIASES: dict[str, str] = {}
_CORE = {"base", "registry", "spec"}
_LOADED = False
_LOADING = threading.RLock()


def load_policies() -> None:
    """Import every policy module of ``labelq.policies`` (each registers its policies on
    import; private modules, ``_*``, and the core are not policies). Once per process."""
    global _LOADED
    if _LOADED:
        return
    with _LOADING:
        if _LOADED:
            return
        package = importlib.import_module(__package__ or "labelq.policies")
        for mod in pkgutil.iter_modules(package.__path__):
            if not mod.name.startswith("_") and mod.name not in _CORE:
                importlib.import_module(f"{package.__name__}.{mod.name}")
        _LOADED = True

P = TypeVar("P", bound=type[Policy])


def register(cls: P, *, aliases: tuple[str, ...] = ()) -> P:
    """Class decorator (also callable with aliases: ``register(cls, aliases=(...))``)."""
    if not cls.name:
        raise PolicyError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise PolicyError(f"policy name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    for alias in aliases:
        _ALIASES[alias] = cls.name
    return cls


def names() -> list[str]:
    load_policies()
    return sorted(_REGISTRY)


def get_class(name: str) -> type[Policy]:
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY and not _LOADED:
        # the module named after the policy first, if there is one: a process's first
        # state load then need not import every policy (scipy's among them: seconds of a
        # cold start's first request, issue 36); any other name loads them all
        try:
            importlib.import_module(f"{__package__ or 'labelq.policies'}.{key}")
        except ImportError:
            pass
    if key in _REGISTRY:
        return _REGISTRY[key]
    load_policies()
    key = _ALIASES.get(name, name)
    try:
        return _REGISTRY[key]
    except KeyError:
        raise PolicyError(
            f"unknown policy {name!r}; known: {', '.join(names())}", policy=name
        ) from None


def build(spec: PolicySpec | str | dict[str, Any]) -> Policy:
    if isinstance(spec, str):
        spec = PolicySpec.parse(spec)
    elif isinstance(spec, dict):
        spec = PolicySpec.from_json(spec)
    cls = get_class(spec.name)
    fields = {f.name for f in dataclasses.fields(cls.Params)}
    unknown = sorted(set(spec.params) - fields)
    if unknown:
        raise PolicyError(
            f"policy {spec.name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"it takes: {', '.join(sorted(fields)) or 'none'}",
            policy=spec.name,
        )
    try:
        params = cls.Params(**spec.params)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"policy {spec.name!r}: {exc}", policy=spec.name) from exc
    return cls(params)

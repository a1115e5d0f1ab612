"""Policy specs: a name plus validated parameters.

Written on the command line as ``name`` or ``name:key=value,key=value`` and stored on a
project as JSON ``{"name": "...", "params": {...}}``. Parsing only splits the text; each
policy's ``Params`` dataclass validates values with precise messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import PolicyError

__all__ = ["PolicySpec", "coerce_value"]


def coerce_value(text: str) -> Any:
    """A spec value as bool, int, float or stripped text (``"0.5"`` -> 0.5)."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


@dataclass(frozen=True)
class PolicySpec:
    name: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> PolicySpec:
        """Parse ``name`` or ``name:key=value,key=value`` (also accepts the JSON form)."""
        text = text.strip()
        if text.startswith("{"):
            return cls.from_json(text)
        name, _, rest = text.partition(":")
        name = name.strip()
        if not name:
            raise PolicyError(f"policy spec {text!r} has no name", spec=text)
        params: dict[str, Any] = {}
        if rest.strip():
            for part in rest.split(","):
                key, eq, value = part.partition("=")
                if not eq or not key.strip():
                    raise PolicyError(
                        f"policy spec {text!r}: expected key=value, got {part!r}", spec=text
                    )
                params[key.strip()] = coerce_value(value)
        return cls(name, params)

    @classmethod
    def from_json(cls, data: str | dict[str, Any]) -> PolicySpec:
        obj = json.loads(data) if isinstance(data, str) else data
        if not isinstance(obj, dict) or "name" not in obj:
            raise PolicyError(f"policy JSON must be an object with a 'name', got {obj!r}")
        return cls(str(obj["name"]), dict(obj.get("params") or {}))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v}" for k, v in self.params.items())

"""The ``labelq.toml`` side of finding the database: the nearest config file's
``database_url``, else the per-user default (:mod:`.location` has the whole order).

Below both :mod:`.settings` (whose default database URL this is) and :mod:`.location`
(which adds ``--database-url`` and ``LABELQ_DATABASE_URL`` and opens the database), so
neither imports the other (issue 43). Imports nothing of labelq but :mod:`labelq.errors` and
:mod:`.dburl`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .dburl import sqlite_path

__all__ = ["CONFIG_NAME", "per_user_url", "find_config", "config_url", "default_database_url",
           "write_config"]

CONFIG_NAME = "labelq.toml"


def per_user_url(env: Mapping[str, str] | None = None) -> str:
    """The per-user default database: ``$XDG_DATA_HOME/labelq/labelq.db``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home())
                                           / ".local" / "share")
    return f"sqlite:///{Path(base) / 'labelq' / 'labelq.db'}"


def find_config(cwd: str | Path | None = None) -> Path | None:
    """The nearest ``labelq.toml`` in ``cwd`` (default: the current folder) or above."""
    here = Path(cwd or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            return _read_simple(path)
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = tomllib.load(f)
            return data
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a valid TOML file: {exc}", file=str(path)) from exc


def _read_simple(path: Path) -> dict[str, Any]:
    """``key = "value"`` lines (Python 3.10 without tomli)."""
    out: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*(#.*)?', line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def config_url(path: Path) -> str:
    """The database URL a ``labelq.toml`` names (a relative SQLite path taken from the
    file's folder)."""
    data = _read_toml(path)
    url = data.get("database_url")
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{path}: no database_url = \"...\" (the database this folder "
                          "uses; labelq init --here writes one)", file=str(path))
    file = sqlite_path(url)
    if file is not None and not Path(file).is_absolute():
        # relative to the file's folder, not to wherever a command runs
        url = url[: len(url) - len(file)] + str((path.parent / file).resolve())
    return url


def default_database_url(env: Mapping[str, str] | None = None,
                         cwd: str | Path | None = None) -> str:
    """The URL used when ``LABELQ_DATABASE_URL`` is unset: the nearest ``labelq.toml``'s,
    else the per-user default."""
    config = find_config(cwd)
    return config_url(config) if config is not None else per_user_url(env)


def write_config(folder: str | Path, url: str) -> Path:
    """``labelq.toml`` in ``folder`` naming ``url`` (``labelq init --here``)."""
    path = Path(folder) / CONFIG_NAME
    escaped = url.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text("# labelq's database for this folder and the folders below it\n"
                    "# (read by every labelq command, the API and the Celery worker started\n"
                    "# here; LABELQ_DATABASE_URL or --database-url override it)\n"
                    f'database_url = "{escaped}"\n', encoding="utf-8")
    return path

"""docker-compose.yml and the Dockerfile keep their hardening (docker is not run here:
`docker compose config` checks the file where docker is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")  # (schemathesis, in the dev extra, brings it)

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_redis_and_postgres_are_not_published_and_need_passwords():
    services = compose()["services"]
    assert "ports" not in services["redis"] and "ports" not in services["postgres"]
    assert "--requirepass" in services["redis"]["command"]
    assert "${REDIS_PASSWORD:?" in " ".join(services["redis"]["command"])
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?")
    env = compose()["x-labelq-env"]
    assert env["LABELQ_REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?")
    assert "${POSTGRES_PASSWORD:?" in env["LABELQ_DATABASE_URL"]
    # only the API is published, on the loopback interface unless told otherwise
    assert services["api"]["ports"] == ["${LABELQ_PUBLISH:-127.0.0.1:8000}:8000"]


def test_labelq_containers_run_unprivileged_and_mount_data():
    services = compose()["services"]
    for name in ("worker", "beat", "api"):
        assert services[name]["user"] == "labelq", name
    for name in ("worker", "api"):
        assert "./data:/data:ro" in services[name]["volumes"], name
    assert services["worker"]["command"][:2] == ["labelq", "run-worker"]
    docker = (ROOT / "Dockerfile").read_text()
    assert "useradd" in docker and "\nUSER labelq\n" in docker
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".env", "tests", "*.db"} <= set(ignored)
    # (what the Dockerfile copies is not ignored)
    for copied in ("labelq", "workers", "cli", "pyproject.toml", "README.md"):
        assert copied not in ignored

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
    # (the plain Redis unless the sentinel profile's URL is set: test_sentinel_profile)
    assert env["LABELQ_REDIS_URL"].startswith(
        "${LABELQ_STACK_REDIS_URL:-redis://:${REDIS_PASSWORD:?")
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


def test_sentinel_profile():
    """``--profile sentinel``: a replica and three sentinels watching ``redis``, none
    published, none started without the profile; the URL the file documents is one labelq
    accepts and names them."""
    import re

    from labelq.live.redis.connect import parse_sentinel_url

    text = (ROOT / "docker-compose.yml").read_text()
    services = compose()["services"]
    added = ["redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"]
    for name in added:
        assert services[name]["profiles"] == ["sentinel"], name
        assert "ports" not in services[name], name
    for name in ("redis", "postgres", "init", "worker", "beat", "api"):
        assert "profiles" not in services[name], name  # (started with or without it)
    replica = services["redis-replica"]["command"]
    assert replica[replica.index("--replicaof") + 1:][:2] == ["redis", "6379"]
    for name in ("redis", "redis-replica"):  # either may be the master, or a replica of it
        command = services[name]["command"]
        assert command[command.index("--masterauth") + 1].startswith("${REDIS_PASSWORD:?")
        assert command[command.index("--requirepass") + 1].startswith("${REDIS_PASSWORD:?")
    sentinel = services["sentinel-1"]["command"][-1]
    assert all(services[f"sentinel-{i}"]["command"][-1] == sentinel for i in (2, 3))
    assert "sentinel monitor labelq redis 6379 2" in sentinel
    assert "sentinel auth-pass labelq %s" in sentinel and '"$$REDIS_PASSWORD"' in sentinel
    assert sentinel.rstrip().endswith("--sentinel")
    down = int(re.search(r"down-after-milliseconds labelq (\d+)", sentinel).group(1))
    assert 1000 <= down <= 30_000
    # the documented URL: every sentinel, the monitored master's name
    documented = re.search(r"LABELQ_STACK_REDIS_URL=(\S+)", text).group(1)
    where = parse_sentinel_url(documented.replace("${REDIS_PASSWORD}", "pw"))
    assert where.master == "labelq" and where.password == "pw"
    assert where.sentinels == (("sentinel-1", 26379), ("sentinel-2", 26379),
                               ("sentinel-3", 26379))
    assert "redis-replica-data" in compose()["volumes"]

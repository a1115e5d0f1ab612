"""Fixtures of the live engine's tests (``labelq/live``): the pipeline tests' project
factory and real, flushed Redis."""

from pipeline.conftest import make_project, r, sqlite_url  # noqa: F401

__all__ = ["make_project"]

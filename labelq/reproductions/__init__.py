"""Reproductions of the papers' experiments, runnable as ``python -m labelq.reproductions.<name>``."""

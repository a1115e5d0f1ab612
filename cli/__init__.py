"""The ``labelq`` command line (Click)."""

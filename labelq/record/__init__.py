"""The durable record: what SQL holds and the modules that read and write it.

``models`` (the tables), ``db`` (engines and sessions), ``settings`` and ``location`` (which
database and Redis, read from ``LABELQ_*``, ``--database-url`` and ``labelq.toml``),
``projects`` (projects, workers, gold marks), ``loading`` and ``reading`` (files in, strictly
checked), ``problem`` (a project's labels as a policy's observations), ``goldstats`` (gold
answers scored per worker) and ``tally`` (the counters ``status`` reads).

The live engine (:mod:`labelq.live`) depends on this package; nothing here imports ``live``,
the API, the service facade or the exports (a test walks the imports:
``tests/foundation/test_import_graph.py``).
"""

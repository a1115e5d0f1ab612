"""The live engine: assignments issued from Redis hot state, labels recorded in SQL and
folded into the policy's posterior by the applier.

SQL is the durable record and the log; everything under ``lq:{database:project_id}:`` can
be thrown away and rebuilt from it (:func:`labelq.live.rebuild.rebuild_project`). Redis storage is
:mod:`labelq.live.redis`. See ``docs/architecture.md`` for the concurrency design. Nothing
here imports Celery.
"""

"""The live pipeline's hot state on Redis: key schema, Lua scripts, state cache, applier.

SQL is the durable record and the log; everything under ``lq:{project_id}:`` can be thrown
away and rebuilt from it (:func:`labelq.queue.rebuild.rebuild_project`). See
``docs/architecture.md`` for the concurrency design. Nothing here imports Celery.
"""

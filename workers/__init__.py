"""Celery side of labelq: the app factory (``workers.main``) and thin tasks
(``workers.tasks``). ``celery -A workers.main worker`` runs a worker."""

"""Gold questions: injection schedules, worker scoring, quality rules, pool helpers and
Kang & Tay's gold-based recommendation core. Pure numpy; no I/O."""

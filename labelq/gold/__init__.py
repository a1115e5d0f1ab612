"""Gold questions: injection schedules, worker scoring, quality rules, pool helpers,
Kang & Tay's gold-based recommendation core, and which labelled tasks to make gold next
(``suggest``). Pure numpy; no I/O."""

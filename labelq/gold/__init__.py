"""Gold questions: injection schedules, worker scoring, quality rules, pool helpers and which
labelled tasks to make gold next (``suggest``). Pure numpy; no I/O. (Kang & Tay's
gold-based recommendation core, which the GR schedule's epochs use, is
:mod:`labelq.policies._recommend`: gold depends on policies, never the other way.)"""

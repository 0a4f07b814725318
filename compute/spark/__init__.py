"""Spark's side: the session, the one streaming query and its per-batch job, back-fill reads, and
the supervisor that restarts a failed query."""

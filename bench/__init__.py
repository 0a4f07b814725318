"""Sparkwire's benchmark harness: a real server driven over 127.0.0.1 from separate processes, with
Spark's floor and the naive one-query-per-subscription design measured in the same run."""

"""Sparkwire's computing side, in three wings whose imports run one way:
`storage` (where points live) <- `evaluation` (Nominal nodes evaluated live, no Spark) <- `spark`
(the streaming query that feeds evaluation from storage)."""

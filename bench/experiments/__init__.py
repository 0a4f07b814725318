"""Experiments behind decision records, each named by its decision (docs/decisions/NNNN-<name>.md)
and kept runnable with `python -m bench.experiments.<name>`; `make bench` runs none of them."""

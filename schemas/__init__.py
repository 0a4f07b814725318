"""Pydantic models of Sparkwire's wire protocol (Nominal persistent-compute, Conjure JSON). No I/O."""

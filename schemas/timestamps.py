"""Time as Sparkwire holds it, int64 nanoseconds since the epoch, and as Conjure sends it, whole
`seconds` and `nanos` in 0..999,999,999: the one copy of these conversions for app/, compute/ and
schemas/ (sparkwire_client keeps its own; tests/unit/test_vocabulary.py checks that the two agree).

A split rounds toward minus infinity, so an instant before the epoch has negative `seconds` and
still a `nanos` in range: -1 ns is (-1, 999,999,999). Joining is exact for any ints; numpy
arrays are joined and split with the same arithmetic, in int64.
"""

from __future__ import annotations

from typing import SupportsInt

import numpy as np

NANOS_PER_SECOND = 1_000_000_000
# The largest `seconds` at which every `nanos` still fits int64 nanoseconds, the stored form (the
# one above it fits only up to 854,775,807 nanos): what the write endpoints accept.
MAX_SECONDS = (2**63 - 1) // NANOS_PER_SECOND - 1


def to_nanos(seconds: int, nanos: int) -> int:
    """A Conjure Timestamp's or Duration's `seconds` and `nanos` as one count of nanoseconds."""
    return seconds * NANOS_PER_SECOND + nanos


def to_nanos_array(seconds: np.ndarray, nanos: np.ndarray) -> np.ndarray:
    """`to_nanos` over int64 columns, for seconds in 0..MAX_SECONDS (the result cannot overflow)."""
    result: np.ndarray = seconds * NANOS_PER_SECOND + nanos
    return result


def split_nanos(ns: SupportsInt) -> tuple[int, int]:
    """Nanoseconds (an int or a numpy integer) as Python ints (seconds, nanos), nanos in 0..999,999,999."""
    return divmod(int(ns), NANOS_PER_SECOND)


def split_nanos_array(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`split_nanos` over an int64 column: (seconds, nanos) columns, rounded the same way."""
    seconds, nanos = np.divmod(ns, NANOS_PER_SECOND)
    return seconds, nanos

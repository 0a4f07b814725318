"""The polled variants a live subscription may stream when it asks (`sparkwire.streamPolled`,
docs/extensions.md, docs/decisions/0082-streamed-polled-nodes.md). Their builders are those the
poll uses (registered with `polls` in their family's module); this module only marks them, so a
subscription that asks gets the very node ComputeService evaluates, re-evaluated whole over the
window at each micro-batch (a POLLED_ONLY node has no incremental form: nodes/base.py's default
`evaluate_since` is the whole evaluation cut; the array and struct nodes, point by point, evaluate
their new points only), so every frame is exactly the polled answer over the same points. A
subscription that does not ask (every Nominal client) keeps Nominal's `PollingOnlyComputation`
refusal (builders/refusals.py).

Not marked, so refused under the option too: the `summarizeSeries` strategies page and truncate
(a read of a past period by position, not a view of a live window), the `InvalidComputationType`s
computed on request, log series, array and struct series themselves, the enum forms of
select1dArrayIndex and extractFromStruct (below), and UDFs."""

from __future__ import annotations

from compute.evaluation.compiler.registry import streams

# a zero-phase (forwards and backwards) Butterworth filter: every output depends on every point
streams("NumericSeries", "signalFilter")
# at most maxPointsToReturn of the window's points, selected by LTTB: the series variant, and the
# `series` root's summarization strategy (maxPointsPerGroup per group; numeric.py asks the registry)
streams("NumericSeries", "largestTriangleThreeBuckets")
streams("SummarizationStrategy", "largestTriangleThreeBuckets")
# the spectrum of the window's points (FFT, periodogram, PSD; bucketed when asked), and the
# two-series transforms of `frequencyV2` (cpsd, nyquist, bode): built `live`, while the two series
# hold different counts (between two writes) the transform of the pairs both hold a timestamp of,
# where a poll refuses the period; once the counts agree, the poll's answer
streams("ComputableNode", "frequency", "frequencyV2")
# the spectrogram of the window's points: its windows recomputed each batch (they are counted from
# the window's first point, which moves), a fresh FullResult each time (no append form)
streams("ComputableNode", "spectrogram")
# the fit over the window's points in the fit range, refreshed each batch (every curve, custom too;
# built `live`: no fit, NaN, while the points cannot be fit, where a poll refuses the period)
streams("ComputableNode", "curve", "curveV2")
# a number out of each array, out of each struct (builders/composite.py): point by point, so live
# they are incremental (a batch costs its new points) and exact, as any point-by-point node is. Not
# their enum forms: their labels are numbered as points are read, so a live computation's label
# numbering would depend on what it read before the window, and its FullResult differ from a fresh one
streams("NumericSeries", "select1dArrayIndex", "extractFromStruct")

"""The nodes across groups without a server: a tree without one is evaluated exactly as before (the
root gets the computation's groups back untouched), and a cross-group node reached by a root that
evaluates each group apart is an InvalidComputation, never a silent z-score of a family of one."""

from __future__ import annotations

import numpy as np
import pytest

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv
from compute.evaluation.nodes.cross_group import ZScore, changes_by_group, regroup
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.results import NumericPoints

NANOS = 1_000_000_000


def _env(values: list[float]) -> EvalEnv:
    ts = np.arange(len(values), dtype=np.int64) * NANOS
    return EvalEnv({0: NumericPoints(ts, np.array(values))}, window_start=0, now=10 * NANOS)


def test_a_tree_without_a_cross_group_node_keeps_the_computations_groups() -> None:
    envs = {(("vehicle", "v1"),): _env([1.0]), (("vehicle", "v2"),): _env([2.0])}
    channel = ChannelInput(0, "numeric")
    assert regroup(channel, envs) is envs
    assert changes_by_group(channel, {k: 5 for k in envs}, envs) == {k: 5 for k in envs}
    assert all(env.family is None for env in envs.values())


def test_a_z_score_scores_each_group_against_its_family() -> None:
    envs = {(("vehicle", "v1"),): _env([1.0, 2.0]), (("vehicle", "v2"),): _env([3.0, 2.0])}
    node = ZScore(ChannelInput(0, "numeric"), frozenset(), NANOS, ("vehicle",))
    groups = regroup(node, envs)
    v1 = node.evaluate(groups[(("vehicle", "v1"),)])
    assert v1.ts.tolist() == [0] and v1.values.tolist() == [-1.0]  # at 1 s both are 2.0: no deviation


def test_a_cross_group_node_under_a_root_that_does_not_regroup_is_refused() -> None:
    node = ZScore(ChannelInput(0, "numeric"), frozenset(), NANOS, ("vehicle",))
    with pytest.raises(ComputeError) as refused:
        node.evaluate(_env([1.0, 2.0]))
    assert refused.value.name == "InvalidComputation"
    assert refused.value.params == {"invalidTypes": "", "variant": "zScore"}

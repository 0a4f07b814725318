"""Evaluators, one class per node kind, grouped by family: inputs (channels, constants), arithmetic,
time operations, rolling aggregation, ranges, and the outputs a client receives."""

from compute.nodes.arithmetic import (
    BinaryNode,
    BothHold,
    Comparison,
    Condition,
    EitherHolds,
    FilterWhere,
    ThresholdFilter,
    UnaryNode,
)
from compute.nodes.base import EvalEnv, GroupKey, Node, OutputNode, RangeNode, SeriesNode
from compute.nodes.inputs import ChannelInput, Constant
from compute.nodes.outputs import SelectValue, SummarizeRanges, SummarizeSeries
from compute.nodes.ranges import (
    ConditionRanges,
    EnumFilter,
    IntersectRanges,
    MinMaxThreshold,
    NotRanges,
    Threshold,
    UnionRanges,
)
from compute.nodes.rolling import RollingAggregation
from compute.nodes.time_ops import Derivative, TimeShift, ValueDifference

__all__ = [
    "BinaryNode",
    "BothHold",
    "ChannelInput",
    "Comparison",
    "Condition",
    "ConditionRanges",
    "Constant",
    "Derivative",
    "EitherHolds",
    "EnumFilter",
    "EvalEnv",
    "FilterWhere",
    "GroupKey",
    "IntersectRanges",
    "MinMaxThreshold",
    "Node",
    "NotRanges",
    "OutputNode",
    "RangeNode",
    "RollingAggregation",
    "SelectValue",
    "SeriesNode",
    "SummarizeRanges",
    "SummarizeSeries",
    "Threshold",
    "ThresholdFilter",
    "TimeShift",
    "UnaryNode",
    "UnionRanges",
    "ValueDifference",
]

"""Evaluators, one class per node kind, grouped by family: inputs (channels, constants), arithmetic,
time operations, rolling aggregation, ranges, and the outputs a client receives."""

from compute.evaluation.nodes.arithmetic import (
    BinaryNode,
    BothHold,
    Comparison,
    Condition,
    EitherHolds,
    FilterWhere,
    ThresholdFilter,
    UnaryNode,
)
from compute.evaluation.nodes.base import EvalEnv, GroupKey, Node, OutputNode, RangeNode, SeriesNode
from compute.evaluation.nodes.inputs import ChannelInput, Constant, EnumConstant
from compute.evaluation.nodes.outputs import SelectValue, SummarizeRanges, SummarizeSeries
from compute.evaluation.nodes.ranges import (
    ConditionRanges,
    EnumFilter,
    IntersectRanges,
    MinMaxThreshold,
    NotRanges,
    Threshold,
    UnionRanges,
)
from compute.evaluation.nodes.rolling import RollingAggregation
from compute.evaluation.nodes.time_ops import Derivative, TimeShift, ValueDifference

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
    "EnumConstant",
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

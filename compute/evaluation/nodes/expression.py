"""Nominal's expression strings (`arithmetic`, `filterByExpression`): parsed with Python's `ast`
module, every node type checked against a whitelist, and compiled into numpy operations over the
aligned input columns. Nothing is ever evaluated as Python.

The language: numbers, the node's input names, `pi` and `e` (unless an input has that name),
`+ - * / % //`, power as `**` or `^` (as formula languages write it), unary `-` and `+`,
comparisons (`< <= > >= == !=`, chained too), `and` / `or` / `not` (also `&&`, `||`, `!`, `&`,
`|`), parentheses, and the functions in FUNCTIONS. IEEE results: 1/0 is inf, sqrt(-1) NaN."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, SeriesNode, numeric
from compute.evaluation.results import NumericPoints

Columns = dict[str, np.ndarray]
Compiled = Callable[[Columns], np.ndarray]
MAX_EXPRESSION_LENGTH = 10_000

FUNCTIONS: dict[str, tuple[int, Callable[..., np.ndarray]]] = {  # name -> (arguments, numpy)
    "abs": (1, np.abs),
    "sqrt": (1, np.sqrt),
    "exp": (1, np.exp),
    "ln": (1, np.log),
    "log": (1, np.log),  # natural, as in most formula languages; log10 for base 10
    "log10": (1, np.log10),
    "sin": (1, np.sin),
    "cos": (1, np.cos),
    "tan": (1, np.tan),
    "asin": (1, np.arcsin),
    "acos": (1, np.arccos),
    "atan": (1, np.arctan),
    "floor": (1, np.floor),
    "ceil": (1, np.ceil),
    "round": (1, np.round),
    "atan2": (2, np.arctan2),
    "pow": (2, np.power),
    "min": (2, np.minimum),
    "max": (2, np.maximum),
}
CONSTANTS = {"pi": np.pi, "e": np.e}
_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Mod: np.fmod,  # the remainder takes the dividend's sign, as the modulo node
    ast.FloorDiv: lambda a, b: np.floor(np.divide(a, b)),
    ast.Pow: np.power,
}
_COMPARE: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}


class InvalidExpression(ValueError):
    """An expression outside the language, or of the wrong kind (a number where a condition is due)."""


@dataclass(frozen=True)
class _Typed:
    f: Compiled
    boolean: bool


def _spelling(source: str) -> str:
    """`&&`, `||`, a lone `!` and `^` (power, as formula languages write it: spelt `**` so that it
    binds as tightly as power does) in Python's words."""
    source = source.replace("&&", " and ").replace("||", " or ").replace("^", "**")
    return re.sub(r"!(?!=)", " not ", source)


def compile_expression(
    source: str, names: Sequence[str], boolean: bool, charge: Callable[[int, int], None] | None = None
) -> Compiled:
    """The expression as a function of the named columns; `boolean`: it must be a condition.
    `charge(nodes, depth)`, given the size of the parsed expression before it is compiled, raises
    if it is too big (the compile budget): compiling and evaluating recurse once per level, and
    evaluating holds up to one temporary array per level."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise InvalidExpression(f"longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(_spelling(source).strip(), mode="eval")
    except SyntaxError as e:
        raise InvalidExpression(f"not an expression: {e.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own nesting limits (ast construction, its stack)
        raise InvalidExpression("nested too deeply to parse") from None
    nodes, depth = _size(tree.body)
    if charge is not None:
        charge(nodes, depth)
    typed = _compile(tree.body, frozenset(names))
    if typed.boolean != boolean:
        wanted = "a condition is required" if boolean else "a number is required, not a condition"
        raise InvalidExpression(wanted)
    return typed.f


def _size(root: ast.AST) -> tuple[int, int]:
    """(nodes, depth) of an expression's tree, walked without recursion (it may be thousands deep).
    Only the nodes `_compile` recurses through count: operators, operands and calls."""
    nodes = depth = 0
    stack = [(root, 1)]
    while stack:
        node, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        stack.extend((child, level + 1) for child in _operands(node))
    return nodes, depth


def _operands(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.BinOp):
        yield from (node.left, node.right)
    elif isinstance(node, ast.UnaryOp):
        yield node.operand
    elif isinstance(node, ast.BoolOp):
        yield from node.values
    elif isinstance(node, ast.Compare):
        yield from (node.left, *node.comparators)
    elif isinstance(node, ast.Call):
        yield from node.args


def _numbers(t: _Typed, what: str) -> Compiled:
    if t.boolean:
        raise InvalidExpression(f"{what} needs numbers, not a condition")
    return t.f


def _conditions(t: _Typed, what: str) -> Compiled:
    if not t.boolean:
        raise InvalidExpression(f"{what} needs conditions, not numbers")
    return t.f


def _compile(node: ast.AST, names: frozenset[str]) -> _Typed:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise InvalidExpression(f"unsupported literal {node.value!r}")
        value = float(node.value)
        return _Typed(lambda c: np.asarray(value), False)
    if isinstance(node, ast.Name):
        name = node.id
        if name in names:
            return _Typed(lambda c: c[name], False)
        if name in CONSTANTS:
            constant = CONSTANTS[name]
            return _Typed(lambda c: np.asarray(constant), False)
        raise InvalidExpression(f"unknown name '{name}' (the inputs are {sorted(names)})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op = _BINARY[type(node.op)]
        a = _numbers(_compile(node.left, names), "arithmetic")
        b = _numbers(_compile(node.right, names), "arithmetic")
        return _Typed(lambda c: op(a(c), b(c)), False)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr):
        a = _conditions(_compile(node.left, names), "'&' and '|'")
        b = _conditions(_compile(node.right, names), "'&' and '|'")
        if isinstance(node.op, ast.BitAnd):
            return _Typed(lambda c: a(c) & b(c), True)
        return _Typed(lambda c: a(c) | b(c), True)
    if isinstance(node, ast.UnaryOp):
        inner = _compile(node.operand, names)
        if isinstance(node.op, ast.Not):
            f = _conditions(inner, "not")
            return _Typed(lambda c: ~f(c), True)
        if isinstance(node.op, ast.USub | ast.UAdd):
            g = _numbers(inner, "a sign")
            if isinstance(node.op, ast.USub):
                return _Typed(lambda c: -g(c), False)
            return _Typed(g, False)
    if isinstance(node, ast.BoolOp):
        parts = [_conditions(_compile(v, names), "and/or") for v in node.values]
        if isinstance(node.op, ast.And):
            return _Typed(lambda c: np.logical_and.reduce([p(c) for p in parts]), True)
        return _Typed(lambda c: np.logical_or.reduce([p(c) for p in parts]), True)
    if isinstance(node, ast.Compare):
        sides = [_numbers(_compile(x, names), "a comparison") for x in (node.left, *node.comparators)]
        ops = [_COMPARE[type(op)] for op in node.ops if type(op) in _COMPARE]
        if len(ops) != len(node.ops):
            raise InvalidExpression("unsupported comparison")

        def compare(c: Columns) -> np.ndarray:
            values = [s(c) for s in sides]
            out = ops[0](values[0], values[1])
            for i in range(1, len(ops)):
                out = out & ops[i](values[i], values[i + 1])
            return np.asarray(out, bool)

        return _Typed(compare, True)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in FUNCTIONS:
            raise InvalidExpression(f"unknown function '{node.func.id}' (known: {sorted(FUNCTIONS)})")
        arity, fn = FUNCTIONS[node.func.id]
        if len(node.args) != arity:
            raise InvalidExpression(f"{node.func.id} takes {arity} argument(s)")
        args = [_numbers(_compile(a, names), node.func.id) for a in node.args]
        return _Typed(lambda c: fn(*(a(c) for a in args)), False)
    raise InvalidExpression(f"'{ast.unparse(node)}' is not part of the expression language")


def _at(ts: np.ndarray, s: NumericPoints, radius_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(which of `ts` have a value of `s` at or before them no older than the radius, those values)."""
    if not len(s.ts):
        return np.zeros(len(ts), bool), np.zeros(len(ts), np.float64)
    idx = np.searchsorted(s.ts, ts, side="right") - 1
    ok = idx >= 0
    idx = np.where(ok, idx, 0)
    ok &= ts - s.ts[idx] <= radius_ns
    return ok, s.values[idx]


@dataclass
class FilterByExpression(SeriesNode):
    """`filterByExpression`: the base series' own points at which the condition holds, every other
    input forward filled to them (within the radius); a point where an input has no value is
    dropped, as Nominal's docs say."""

    base: str
    inputs: dict[str, SeriesNode]
    condition: Compiled
    radius_ns: int

    def children(self) -> Sequence[Node]:
        return tuple(self.inputs.values())

    def own_lookback_ns(self) -> int:
        return self.radius_ns if len(self.inputs) > 1 else 0

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        series = {k: numeric(x.evaluate(env), "filterByExpression") for k, x in self.inputs.items()}
        base = series[self.base]
        ok = np.ones(len(base.ts), bool)
        columns: Columns = {}
        for name, s in series.items():
            if name == self.base:
                continue
            has, values = _at(base.ts, s, self.radius_ns)
            ok &= has
            columns[name] = values
        ts = base.ts[ok]
        columns = {k: v[ok] for k, v in columns.items()} | {self.base: base.values[ok]}
        with np.errstate(all="ignore"):
            keep = np.asarray(self.condition(columns), bool) & np.ones(len(ts), bool)
        return NumericPoints(ts[keep], columns[self.base][keep])

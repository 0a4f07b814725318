"""The compiler's structure, checked: compute/ has no import circle, no builder module imports another
(or the plan), every variant of each union the registry dispatches is built or refused (never both,
never neither), every evaluator is reachable from a builder, and docs/protocol.md's NumericSeries
table says of each variant what the registry does with it."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import compute.evaluation.compiler.plan  # noqa: F401  (loads every builder)
from compute.evaluation import nodes
from compute.evaluation.compiler import registry
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import Node
from compute.evaluation.nominal_variants import INVALID_TYPES, POLLING_ONLY_TYPES, VARIANTS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPILER = ROOT / "compute" / "evaluation" / "compiler"
# The unions the registry dispatches (the others are read inside one builder, e.g. SelectValue).
DISPATCHED = ("ComputableNode", "Series", "NumericSeries", "EnumSeries", "RangeSeries")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """The compute modules `path` imports when it runs (imports only for type checking excluded)."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("compute."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base])
            if base.startswith("compute"):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)  # `from package import module`
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in (ROOT / "compute").rglob("*.py")}
    return {
        name: {i for i in _runtime_imports(path) if i in files and i != name} for name, path in files.items()
    }


def test_compute_has_no_import_circle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for child in sorted(graph[name]):
            if state.get(child) == 1:
                cycle = [*stack[stack.index(child) :], child]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if child not in state:
                visit(child)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_no_builder_module_imports_another_builder_or_the_plan() -> None:
    graph = _graph()
    builders = {n for n in graph if n.startswith("compute.evaluation.compiler.builders.")}
    assert len(builders) >= 9
    for name in sorted(builders):
        wrong = {i for i in graph[name] if i in builders or i == "compute.evaluation.compiler.plan"}
        assert not wrong, f"{name} imports {sorted(wrong)}"
    for shared in ("builder", "helpers", "datasets", "registry", "limits", "catalogs"):
        name = f"compute.evaluation.compiler.{shared}"
        assert not {i for i in graph[name] if i.startswith("compute.evaluation.compiler.builders")}, name


@pytest.mark.parametrize("union", DISPATCHED)
def test_every_variant_is_built_or_refused_exactly_as_nominal_api_lists_them(union: str) -> None:
    built, refused = registry.built(union), set(registry.refused(union))
    assert not built & refused, f"{union}: both built and refused: {sorted(built & refused)}"
    assert built | refused == VARIANTS[union], (
        f"{union}: unhandled {sorted(VARIANTS[union] - built - refused)}, "
        f"not nominal-api's {sorted((built | refused) - VARIANTS[union])}"
    )


@pytest.mark.parametrize("union", DISPATCHED)
def test_a_variant_built_only_when_polled_is_refused_live(union: str) -> None:
    assert registry.polled(union) <= set(registry.refused(union)), union


def test_a_refused_variant_carries_nominals_own_type_where_it_has_one() -> None:
    for union in DISPATCHED:
        for kind, refusal in registry.refused(union).items():
            error = refusal.error(union, kind)
            if refusal.polling_only is not None:
                assert error.name == "PollingOnlyComputation", kind
                assert error.params["pollingOnlyTypes"] == POLLING_ONLY_TYPES.get(kind, refusal.polling_only)
            elif refusal.invalid is not None:
                assert error.params["invalidTypes"] == INVALID_TYPES.get(kind, refusal.invalid), kind
            else:
                assert error.params.get("variant") == kind and error.params["invalidTypes"] == "", kind


def test_a_second_registration_is_refused() -> None:
    with pytest.raises(RuntimeError, match="registered twice"):
        registry.builds("NumericSeries", "derivative")(lambda b, v: None)
    with pytest.raises(RuntimeError, match="registered twice"):
        registry.refuses("NumericSeries", "integral", invalid="INTEGRAL")


def test_an_unregistered_variant_is_refused_by_name() -> None:
    with pytest.raises(ComputeError) as refused:
        registry.builder("NumericSeries", "noSuchVariant")
    assert refused.value.params["variant"] == "noSuchVariant"


def _evaluator_classes() -> list[type[Node]]:
    found: dict[str, type[Node]] = {}
    for path in (ROOT / "compute" / "evaluation" / "nodes").glob("*.py"):
        module = __import__(_module_name(path), fromlist=["_"])
        for name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and issubclass(cls, Node)
                and cls.__module__ == module.__name__
                and not inspect.isabstract(cls)
                and not name.startswith("_")
            ):
                found[name] = cls
    return sorted(found.values(), key=lambda c: c.__name__)


# Evaluators no builder names, each with why: bases and wrappers other evaluators build themselves.
BUILT_BY_OTHER_EVALUATORS = {
    "Node",
    "SeriesNode",
    "RangeNode",
    "OutputNode",
}


def test_every_evaluator_is_reachable_from_a_registered_builder() -> None:
    names: set[str] = set()
    for path in COMPILER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name)
    # an evaluator an evaluator module builds itself (e.g. the parts of a chart) is reached through it
    evaluator_sources = "\n".join(
        p.read_text() for p in (ROOT / "compute" / "evaluation" / "nodes").glob("*.py")
    )
    unreachable = []
    for cls in _evaluator_classes():
        if cls.__name__ in names or cls.__name__ in BUILT_BY_OTHER_EVALUATORS:
            continue
        if re.search(rf"\b{cls.__name__}\(", evaluator_sources):
            continue
        unreachable.append(f"{cls.__module__}.{cls.__name__}")
    assert not unreachable, f"evaluators no builder reaches: {unreachable}"
    assert nodes.SummarizeSeries.__name__ in names


def _numeric_table() -> dict[str, str]:
    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text[text.index("### Every `NumericSeries` variant") :]
    rows = {}
    for line in section.splitlines()[1:]:
        if line.startswith("### ") or line.startswith("## "):
            break
        match = re.match(r"\| `(\w+)`(?: \(deprecated\))? \| [^|]* \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_protocol_docs_numeric_series_table_matches_the_registry() -> None:
    rows = _numeric_table()
    assert set(rows) == VARIANTS["NumericSeries"]
    built, refused = registry.built("NumericSeries"), registry.refused("NumericSeries")
    for kind, status in rows.items():
        if kind in built:
            assert status.startswith("computes"), f"{kind}: the docs say {status!r}, the registry builds it"
            continue
        refusal = refused[kind]
        if refusal.polling_only is not None:
            assert status.startswith(f"PollingOnlyComputation `{refusal.polling_only}`"), kind
        elif refusal.invalid is not None:
            assert status.startswith(f"InvalidComputation `{refusal.invalid}`"), kind
        else:
            assert status.startswith("InvalidComputation"), kind

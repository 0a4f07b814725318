"""`SummarizeSeries.outputFormat`: LEGACY (Conjure JSON plots) or Arrow (Nominal's `ArrowPlot`, an
Arrow IPC stream), and for Arrow the bucket columns the request names (`numericOutputFields` or
`numericOutputFieldsV2`), in the order the columns are written (docs/protocol.md, "Arrow output";
docs/decisions/0061-arrow-output.md).

Only the request is read here; the stream itself is written where frames are encoded
(app/protocol/arrow_plot.py)."""

from __future__ import annotations

from dataclasses import dataclass

from compute.evaluation.errors import ComputeError

Json = object

ARROW_FORMATS = ("ARROW_V3", "ARROW_V4")
# A bucket's statistics by NumericOutputField(V2)Name, as (Arrow column, statistic) pairs. The
# names are those Nominal's own Arrow client reads (its Grafana plugin: `mean`, `min`, `max`,
# `count`, `variance`, `first_value` / `first_timestamp`, `last_value` / `last_timestamp`); the three
# V2-only statistics follow the same snake_case rule.
FIELD_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "MIN": (("min", "min"),),
    "MAX": (("max", "max"),),
    "MEAN": (("mean", "mean"),),
    "COUNT": (("count", "count"),),
    "VARIANCE": (("variance", "variance"),),
    "FIRST_POINT": (("first_value", "first_value"), ("first_timestamp", "first_ts")),
    "LAST_POINT": (("last_value", "last_value"), ("last_timestamp", "last_ts")),
    "SUM": (("sum", "sum"),),
    "STANDARD_DEVIATION": (("standard_deviation", "standard_deviation"),),
    "ROOT_MEAN_SQUARE": (("root_mean_square", "root_mean_square"),),
}
V1_FIELDS = ("MIN", "MAX", "MEAN", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT")
DEFAULT_FIELDS = ("MEAN",)  # nominal-api: "Defaults to MEAN when no numeric output selector is specified"


@dataclass(frozen=True)
class ArrowFormat:
    """An Arrow answer: which version was asked for and the bucket fields, deduplicated, in request
    order. Raw points (a window holding at most B points) are always `timestamp` and `value`."""

    version: str
    fields: tuple[str, ...] = DEFAULT_FIELDS
    # V2 `percentile` fields: (column name, p); a field "PERCENTILE <name>" places its column
    percentiles: tuple[tuple[str, float], ...] = ()

    def bucket_columns(self) -> list[tuple[str, str]]:
        """(Arrow column, statistic) after `end_bucket_timestamp`; a percentile's statistic is
        `aggregation <name>`, a column of the buckets' `aggregations` (nodes/outputs.py computes it)."""
        out: list[tuple[str, str]] = []
        for name in self.fields:
            if name.startswith(PERCENTILE):
                column = name.removeprefix(PERCENTILE)
                out.append((column, f"aggregation {column}"))
            else:
                out.extend(FIELD_COLUMNS[name])
        return out


PERCENTILE = "PERCENTILE "


def percentile_column(p: float) -> str:
    """nominal-api's default name of a percentile column: "pXX, e.g. p95 for 0.95" (p99.9 for 0.999)."""
    return f"p{round(p * 100, 9):g}"


def _refuse(field_name: str, message: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation", message, {"invalidTypes": "SummarizeSeries", "field": field_name}
    )


def arrow_format(summarize: dict[str, Json]) -> ArrowFormat | None:
    """The Arrow answer a SummarizeSeries asks for, None for LEGACY; every combination Sparkwire
    cannot honour is refused by the field's name, never ignored."""
    output_format = summarize.get("outputFormat")
    v1, v2 = summarize.get("numericOutputFields"), summarize.get("numericOutputFieldsV2")
    if output_format is None or output_format == "LEGACY":
        for name, value in (("numericOutputFields", v1), ("numericOutputFieldsV2", v2)):
            if value is not None:
                raise _refuse(
                    name, f"SummarizeSeries.{name} applies to Arrow output only (ARROW_V3, ARROW_V4)"
                )
        return None
    if output_format not in ARROW_FORMATS:
        raise _refuse(
            "outputFormat", f"SummarizeSeries.outputFormat {output_format!r} is not one Sparkwire knows"
        )
    aggregations = summarize.get("numericAggregations") or {}
    if (
        aggregations and v2 is not None
    ):  # nominal-api: V2 is "mutually exclusive with ... numericAggregations"
        raise _refuse(
            "numericAggregations",
            "SummarizeSeries.numericAggregations and numericOutputFieldsV2 are mutually exclusive",
        )
    if v1 is not None and v2 is not None:
        raise _refuse(
            "numericOutputFieldsV2",
            "SummarizeSeries.numericOutputFields and numericOutputFieldsV2 are mutually exclusive",
        )
    fmt = ArrowFormat(output_format)
    if v1 is not None:
        fmt = ArrowFormat(output_format, _v1_fields(v1))
    if v2 is not None:
        fields, percentiles = _v2_fields(v2)
        fmt = ArrowFormat(output_format, fields, percentiles)
    columns = [column for column, _ in fmt.bucket_columns()]
    repeated = {c for c in columns if columns.count(c) > 1 or c == "end_bucket_timestamp"}
    if repeated:
        raise _refuse(
            "numericOutputFieldsV2",
            f"SummarizeSeries.numericOutputFieldsV2: column {sorted(repeated)[0]!r} named twice",
        )
    taken = {"end_bucket_timestamp", *columns}
    for name in aggregations if isinstance(aggregations, dict) else ():
        if name in taken:  # the extra columns follow the fields' columns, by their own names
            raise _refuse(
                "numericAggregations",
                f"SummarizeSeries.numericAggregations '{name}' is also a column of the requested fields",
            )
    return fmt


def _checked_list(value: Json, name: str) -> list[Json]:
    if not isinstance(value, list):
        raise _refuse(name, f"SummarizeSeries.{name} must be a list")
    if not value:  # Nominal's InvalidNumericOutputFields: "At least one field must be specified"
        raise _refuse(name, f"SummarizeSeries.{name} is empty: name at least one field, or leave it out")
    return value


def _v1_fields(value: Json) -> tuple[str, ...]:
    names: list[str] = []
    for item in _checked_list(value, "numericOutputFields"):
        if item not in V1_FIELDS:
            raise _refuse(
                "numericOutputFields", f"SummarizeSeries.numericOutputFields: unknown field {item!r}"
            )
        names.append(str(item))
    return tuple(dict.fromkeys(names))  # a field named twice is one column


def _percentile(item: Json) -> tuple[str, float]:
    """A V2 `percentile` field: (its column name, p)."""
    body = item.get("percentile") if isinstance(item, dict) else None
    constant = body.get("percentile") if isinstance(body, dict) else None
    if not isinstance(constant, dict) or constant.get("type") != "literal":
        raise _refuse(
            "numericOutputFieldsV2",
            "SummarizeSeries.numericOutputFieldsV2 percentile: give the percentile as a literal",
        )
    p = constant.get("literal")
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= float(p) <= 1.0:
        raise _refuse(
            "numericOutputFieldsV2",
            f"SummarizeSeries.numericOutputFieldsV2 percentile must be in [0, 1], got {p!r}",
        )
    name = body.get("outputName") if isinstance(body, dict) else None
    if name is not None and (not isinstance(name, str) or not name):
        raise _refuse(
            "numericOutputFieldsV2", "SummarizeSeries.numericOutputFieldsV2 percentile: an empty outputName"
        )
    return (name or percentile_column(float(p))), float(p)


def _v2_fields(value: Json) -> tuple[tuple[str, ...], tuple[tuple[str, float], ...]]:
    names: list[str] = []
    percentiles: list[tuple[str, float]] = []
    for item in _checked_list(value, "numericOutputFieldsV2"):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise _refuse(
                "numericOutputFieldsV2", "SummarizeSeries.numericOutputFieldsV2: a NumericOutputFieldV2 union"
            )
        kind = item["type"]
        if kind == "percentile":
            name, p = _percentile(item)
            if any(seen == name and q != p for seen, q in percentiles):
                raise _refuse(
                    "numericOutputFieldsV2",
                    f"SummarizeSeries.numericOutputFieldsV2: column {name!r} named twice",
                )
            if (name, p) not in percentiles:
                percentiles.append((name, p))
            names.append(PERCENTILE + name)
            continue
        if kind != "field" or item.get("field") not in FIELD_COLUMNS:
            raise _refuse(
                "numericOutputFieldsV2",
                f"SummarizeSeries.numericOutputFieldsV2: unknown field {item.get(kind, kind)!r}",
            )
        names.append(str(item["field"]))
    return tuple(dict.fromkeys(names)), tuple(percentiles)

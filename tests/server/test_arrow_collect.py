"""The micro-batch's lean Arrow collect (compute/spark/arrow_collect.py) returns what `toArrow()` returns:
the same rows in the same order across partitions, an empty table of the given schema for no rows,
and the job's own error when the job fails."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from compute.spark.arrow_collect import collect_arrow
from compute.storage import records


def _blocks(spark: Any, partitions: int) -> Any:
    """Rows of the stream's block shape, spread over several partitions."""
    ids = spark.range(0, 600, numPartitions=partitions)
    return ids.select(
        F.col("id").alias("seq"),
        (F.col("id") % 7).alias("series_id"),
        F.array(F.col("id") * 10, F.col("id") * 10 + 1).alias("ts"),
        F.when(F.col("id") % 5 == 0, F.lit(None))
        .otherwise(F.array(F.col("id") / 3, F.lit(float("nan"))))
        .alias("value"),
        F.when(F.col("id") % 5 == 0, F.array(F.lit("on"), F.lit("off"))).alias("str"),
    )


@pytest.mark.parametrize("partitions", [1, 4])
def test_same_rows_in_the_same_order_as_to_arrow(spark: Any, partitions: int) -> None:
    df = _blocks(spark, partitions)
    got = collect_arrow(df, records.BLOCK_SCHEMA)
    assert got.num_rows == 600
    assert got.column("seq").to_pylist() == list(range(600))
    expected = df.toArrow()
    assert got.schema == expected.schema
    for name in ("seq", "series_id", "ts", "str"):
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    # value holds NaN, which no equality of Arrow or Python lists takes as equal to itself
    got_values, expected_values = (
        got.column("value").combine_chunks(),
        expected.column("value").combine_chunks(),
    )
    assert got_values.is_null().to_pylist() == expected_values.is_null().to_pylist()
    np.testing.assert_array_equal(got_values.flatten().to_numpy(), expected_values.flatten().to_numpy())
    unpacked = records.points_of_blocks(got)
    assert unpacked.num_rows == 1200
    assert unpacked.column("ts").to_pylist()[:4] == [0, 1, 10, 11]


def test_no_rows_give_an_empty_table_of_the_given_schema(spark: Any) -> None:
    got = collect_arrow(_blocks(spark, 2).where("seq < 0"), records.BLOCK_SCHEMA)
    assert got.num_rows == 0 and got.schema == records.BLOCK_SCHEMA
    assert records.points_of_blocks(got).num_rows == 0


def test_a_failing_job_raises_its_own_error(spark: Any) -> None:
    failing = spark.range(3).select(F.raise_error(F.lit("boom from the job")).alias("x"))
    with pytest.raises(Exception, match="boom from the job"):
        collect_arrow(failing, pa.schema([("x", pa.null())]))

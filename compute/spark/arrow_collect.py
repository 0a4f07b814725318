"""A micro-batch's rows to the driver as Arrow, with as few driver <-> JVM round trips as Spark allows.

`DataFrame.toArrow()` makes the same JVM call (`collectAsArrowToPython`: the job runs while its
Arrow batches stream over a local socket), but first asks the JVM, one py4j round trip each, for two
settings, the DataFrame's schema and the call site of the Spark UI (off here), and then casts the
table to that schema. Each round trip is a context switch to the JVM and back, the dearer the busier
the two cores: skipping them saved 2-4.5 ms of a ~30 ms micro-batch callback
(docs/decisions/0018-lean-arrow-collect.md). The caller knows the schema its plan produces, so none
of them is needed.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors.exceptions.captured import unwrap_spark_exception
from pyspark.sql import DataFrame
from pyspark.sql.pandas.serializers import ArrowCollectSerializer
from pyspark.util import _load_from_socket


def collect_arrow(df: DataFrame, empty: pa.Schema) -> pa.Table:
    """All rows of `df` as one Arrow table, in the DataFrame's order; `empty`: the schema of the
    table returned when there are no rows (Spark then sends no batch to take one from)."""
    served = df._jdf.collectAsArrowToPython()
    port, secret, server = served[0], served[1], served[2]
    try:
        received = list(_load_from_socket((port, secret), ArrowCollectSerializer()))
    finally:
        with unwrap_spark_exception():  # joins the serving thread; raises what the job raised
            server.getResult()
    batches, order = received[:-1], received[-1]  # batches come as partitions finish; then their order
    if not batches:
        return empty.empty_table()
    return pa.Table.from_batches([batches[i] for i in order])

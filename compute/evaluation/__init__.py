"""Nominal's compute nodes evaluated live on the driver with numpy: node JSON to plan, windows,
evaluators, results and their changes. Imports no PySpark (an edge server runs it without Spark)."""

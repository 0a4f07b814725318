"""Everything Spark: session, durable log and its stream source, compiler, evaluators, live computations."""

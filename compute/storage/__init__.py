"""Where points live: the point-log contract and its records, series identity, the embedded SQLite
log and the shared Redis log, each with the Spark data source that reads it."""

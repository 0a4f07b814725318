"""Where points live: the point-log contract and its records, series identity, the embedded SQLite
log with the Spark data source that reads it, the shared Kafka log, and the catalog's rows in Redis."""

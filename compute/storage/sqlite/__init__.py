"""The embedded point log: SQLite in WAL mode in the data directory (`SPARKWIRE_SOURCE=embedded`)."""

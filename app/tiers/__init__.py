"""The server's roles: `all` (Spark and WebSockets in one process, the default), `compute` (Spark and
every live computation, results published to Redis) and `edge` (WebSockets and ingest, no JVM,
results mirrored from Redis). docs/architecture.md draws them."""

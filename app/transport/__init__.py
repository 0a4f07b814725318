"""The I/O under a WebSocket: the connection (a `Sink`), liveness checks, the shared deflate and
uvicorn's protocols as Sparkwire serves them."""

"""The WebSocket protocol without I/O: a connection's session, the frames it sends, close codes,
limits, who is admitted (bearer tokens, Origin). Imports no I/O library (tests/unit/test_wings.py)."""

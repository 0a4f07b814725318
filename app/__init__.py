"""FastAPI server: WebSocket protocol, subscriptions and fan-out, ingest, health, configuration, CLI."""

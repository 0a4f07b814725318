"""The routes: the WebSocket endpoint, catalog, directory, health, metrics, dashboard, OpenAPI and
AsyncAPI documents, and the state they share (`ServerState`)."""

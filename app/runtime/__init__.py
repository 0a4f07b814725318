"""Running the server: `sparkwire serve` (cli), assembly (server), the point log's opening,
shutdown, logging, the allocator, the demo feed."""

"""The shared point log: Redis Streams that several servers write and read (`SPARKWIRE_SOURCE=redis`)."""

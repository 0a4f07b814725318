"""Writes: the JSON and Nominal protobuf ingest routes, their decoders and decode worker processes."""

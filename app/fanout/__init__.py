"""Fan-out: the hub that paces each computation's changes to its subscribers, replays, resume
tokens and late reports. It writes to a `Sink` (app/fanout/sink.py), never to a socket type."""

"""FastAPI server: WebSocket protocol, subscriptions and fan-out, ingest, health, configuration, CLI."""

import os

# gRPC's fork handlers (on by default in grpcio's core) break a child forked while gRPC's threads
# run. Spark's Java gateway and the decode workers are forked by this process beside the gRPC
# server on the HTTP port (app/runtime/grpc_front.py), and a quarter of such children died before
# they could exec: a server whose Spark never started (tests/unit/test_grpc_fork.py). No child of
# this process uses gRPC, so the handlers go, before anything imports grpc (grpc_metadata first).
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

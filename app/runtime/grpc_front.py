"""The gRPC server behind the HTTP port (app/transport/preface.py relays HTTP/2 connections to it):
started once the app's state exists, on a unix socket in a directory only this user can enter, and
stopped before uvicorn closes its own connections."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

import grpc

from app.api.grpc_metadata import start_grpc_server
from app.api.state import ServerState
from app.transport.preface import GrpcTarget

logger = logging.getLogger(__name__)
STOP_GRACE_S = 1.0  # calls under way get this long to finish at shutdown


class GrpcFront:
    def __init__(self) -> None:
        self.target = GrpcTarget()
        self._server: grpc.aio.Server | None = None
        self._dir: str | None = None

    async def start(self, state: ServerState) -> None:
        self._dir = tempfile.mkdtemp(prefix="sparkwire-grpc-")  # mode 0700
        path = os.path.join(self._dir, "grpc.sock")
        self._server = await start_grpc_server(state, f"unix:{path}")
        self.target.listening(path)
        logger.info("gRPC (Nominal's ChannelMetadataService, WorkspaceService) served on the same port")

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

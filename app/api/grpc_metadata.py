"""Nominal's gRPC reads of the `nominal` SDK, served with the generated servicers of
`nominal-api-protos` (grpc.aio): `ChannelMetadataService.BatchGetChannelMetadata` and
`GetChannelMetadata` (`dataset.get_channels()`, `dataset.get_channel(name)`, `channel.refresh()`),
and `WorkspaceService.GetDefaultWorkspace` / `GetWorkspace`, which the SDK asks before every
search (`client.search_datasets()` and its siblings). HTTP/2 reaches this server through the same
port as HTTP (app/runtime/preface.py, docs/decisions/0077-grpc-on-the-same-port.md).

The answers come from the series catalog the HTTP reads use (app/api/data_sources.py): a channel is a
data source's channel name whatever its tags, with the type of its first series. Sparkwire has no
channel descriptions or units (none is stored: both are left unset), and one workspace, holding
every data source. The same bearer tokens as HTTP, in the call's `authorization` metadata: none or
an invalid one is refused UNAUTHENTICATED, and a token sees only the data sources it reaches."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
from nominal.protos.channelmetadata.v1 import channel_metadata_pb2 as cm
from nominal.protos.channelmetadata.v1 import channel_metadata_pb2_grpc as cm_grpc
from nominal.protos.types.series import series_pb2
from nominal.protos.workspaces.v1 import workspaces_pb2 as ws
from nominal.protos.workspaces.v1 import workspaces_pb2_grpc as ws_grpc

from app.api.catalog import WORKSPACE_RID
from app.api.data_sources import channels_of
from app.api.state import ServerState
from app.protocol.admission import Principal, Refused

logger = logging.getLogger(__name__)

WORKSPACE = ws.Workspace(id="default", rid=WORKSPACE_RID, org="sparkwire", display_name="Sparkwire")
IDLE_MS = 300_000  # the SDK's channel reconnects on its next call
MAX_CHANNELS = 1000  # identifiers in one BatchGetChannelMetadata (the SDK sends batches of 500)
DATA_TYPE = {
    name: series_pb2.SeriesDataType.Value(name)
    for name in ("DOUBLE", "STRING", "LOG", "DOUBLE_ARRAY", "STRING_ARRAY", "STRUCT")
}
NO_METADATA = "Sparkwire keeps no channel descriptions or units: channel metadata is read only"
STATUS = {401: grpc.StatusCode.UNAUTHENTICATED, 403: grpc.StatusCode.PERMISSION_DENIED}


async def _admit(state: ServerState, context: grpc.aio.ServicerContext, doing: str) -> Principal:
    """The principal behind the call's `authorization` metadata, or the call ends refused."""
    headers = {k.lower(): v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
    try:
        return state.admission.admit(headers, doing)
    except Refused as refused:
        await context.abort(STATUS.get(refused.status, grpc.StatusCode.PERMISSION_DENIED), refused.message)
        raise  # abort raises; this line is for the type checker


class ChannelMetadata(cm_grpc.ChannelMetadataServiceServicer):
    """Reads only: Sparkwire keeps no channel metadata to update (Update* answer UNIMPLEMENTED)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def _lookup(
        self, context: grpc.aio.ServicerContext, asked: list[cm.ChannelIdentifier]
    ) -> list[cm.ChannelMetadata]:
        principal = await _admit(self.state, context, "read the catalog")
        if len(asked) > MAX_CHANNELS:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(asked)} channel identifiers: at most {MAX_CHANNELS} in one request",
            )
        rids = {a.data_source_rid for a in asked if principal.allows(a.data_source_rid)}
        infos = [i for i in await asyncio.to_thread(self.state.log.series) if i.key.data_source_rid in rids]
        known = channels_of(infos)
        found = []
        for a in dict.fromkeys((a.data_source_rid, a.channel_name) for a in asked):
            if a in known:
                found.append(
                    cm.ChannelMetadata(
                        channel_identifier=cm.ChannelIdentifier(data_source_rid=a[0], channel_name=a[1]),
                        data_type=DATA_TYPE[known[a]],
                        channel_kind=series_pb2.CHANNEL_KIND_STANDARD,
                    )
                )
        return found

    async def BatchGetChannelMetadata(
        self, request: cm.BatchGetChannelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> cm.BatchGetChannelMetadataResponse:
        """Those of the identifiers that name a channel (a data source's channel with points);
        the others are left out, as the SDK expects (`get_channel` then says "not found")."""
        found = await self._lookup(context, list(request.channel_identifiers))
        return cm.BatchGetChannelMetadataResponse(channel_metadata=found)

    async def GetChannelMetadata(
        self, request: cm.GetChannelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> cm.GetChannelMetadataResponse:
        asked = request.channel_identifier
        found = await self._lookup(context, [asked])
        if not found:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no channel {asked.channel_name!r} in data source {asked.data_source_rid!r}",
            )
        return cm.GetChannelMetadataResponse(channel_metadata=found[0])

    async def UpdateChannelMetadata(
        self, request: cm.UpdateChannelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> cm.UpdateChannelMetadataResponse:
        await _admit(self.state, context, "read the catalog")
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, NO_METADATA)
        raise AssertionError("abort raises")

    async def BatchUpdateChannelMetadata(
        self, request: cm.BatchUpdateChannelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> cm.BatchUpdateChannelMetadataResponse:
        await _admit(self.state, context, "read the catalog")
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, NO_METADATA)
        raise AssertionError("abort raises")


class Workspaces(ws_grpc.WorkspaceServiceServicer):
    """The one workspace (WORKSPACE): what the SDK resolves before a search, and filters it by."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def GetDefaultWorkspace(
        self, request: ws.GetDefaultWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> ws.GetDefaultWorkspaceResponse:
        await _admit(self.state, context, "read the catalog")
        return ws.GetDefaultWorkspaceResponse(workspace=WORKSPACE)

    async def GetWorkspace(
        self, request: ws.GetWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> ws.GetWorkspaceResponse:
        await _admit(self.state, context, "read the catalog")
        if request.workspace_rid != WORKSPACE_RID:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no workspace {request.workspace_rid!r}: this server has one, {WORKSPACE_RID}",
            )
        return ws.GetWorkspaceResponse(workspace=WORKSPACE)

    async def GetWorkspaces(
        self, request: ws.GetWorkspacesRequest, context: grpc.aio.ServicerContext
    ) -> ws.GetWorkspacesResponse:
        await _admit(self.state, context, "read the catalog")
        return ws.GetWorkspacesResponse(workspaces=[WORKSPACE])

    async def UpdateWorkspace(
        self, request: ws.UpdateWorkspaceRequest, context: grpc.aio.ServicerContext
    ) -> ws.UpdateWorkspaceResponse:
        await _admit(self.state, context, "read the catalog")
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this server's one workspace is not edited")
        raise AssertionError("abort raises")

    async def GetWorkspaceBanner(
        self, request: ws.GetWorkspaceBannerRequest, context: grpc.aio.ServicerContext
    ) -> ws.GetWorkspaceBannerResponse:
        await _admit(self.state, context, "read the catalog")
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this server's workspace has no banner")
        raise AssertionError("abort raises")


async def start_grpc_server(state: ServerState, address: str) -> grpc.aio.Server:
    """A grpc.aio server with the servicers above, listening on `address` (a grpc target such as
    `unix:/path`), on the running event loop."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", state.settings.max_json_body_bytes),
        ("grpc.so_reuseport", 0),
        # a connection with no call for this long is closed (its relay with it): as WebSockets
        # idle out, an idle HTTP/2 connection does not hold a socket for ever
        ("grpc.max_connection_idle_ms", IDLE_MS),
    ]
    server = grpc.aio.server(options=options)
    cm_grpc.add_ChannelMetadataServiceServicer_to_server(ChannelMetadata(state), server)
    ws_grpc.add_WorkspaceServiceServicer_to_server(Workspaces(state), server)
    server.add_insecure_port(address)
    await server.start()
    return server

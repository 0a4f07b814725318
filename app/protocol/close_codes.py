"""Every WebSocket close code the server sends (RFC 6455 7.4.1; 4000-4999 are private use)."""

from __future__ import annotations

NORMAL = 1000
GOING_AWAY = 1001  # the client stopped answering pings
POLICY_VIOLATION = 1008  # bad Origin or token, an expired token, a flooding client, no first message
MESSAGE_TOO_BIG = 1009  # sent by the WebSocket protocol layer for a message over the size limit
SERVICE_RESTART = 1012  # the server is shutting down
TRY_AGAIN_LATER = 1013  # the server is at its connection limit
SLOW_CONSUMER = 4008  # the client did not read fast enough

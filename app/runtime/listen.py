"""The server's listening socket, bound before anything else starts: a port already taken (or an
address this machine does not have) is then refused in a second, instead of after Spark has
spent half a minute starting for nothing (uvicorn binds only after the app's start-up)."""

from __future__ import annotations

import errno
import socket


class CannotListen(Exception):
    """The address cannot be bound (the message says which and why)."""


def bind_listener(host: str, port: int) -> socket.socket:
    """A bound socket for uvicorn (`Server.run(sockets=[...])`), with the options uvicorn itself
    sets; it listens once uvicorn serves on it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        hint = (
            "; another server is there: stop it or pick another --port"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise CannotListen(f"cannot listen on {host}:{port}: {why}{hint}") from None
    return sock

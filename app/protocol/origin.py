"""Browser `Origin` allowlist against cross-site WebSocket hijacking (and cross-site ingest posts).

Browsers attach `Origin` to every WebSocket handshake and cross-site POST. A request whose Origin is
present and is neither the server's own origin (the scheme and the `Host` it was reached at) nor
listed in `SPARKWIRE_ALLOWED_ORIGINS` (comma-separated, `*` allows all) is refused with 403 before
anything else happens. A request without Origin is not from a browser page and is not refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit


def _normalize(origin: str) -> str | None:
    """`scheme://host[:port]`, lower-case, default ports dropped; None if not an origin at all."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


class OriginPolicy:
    def __init__(self, allowed: str) -> None:
        entries = [e.strip() for e in allowed.split(",") if e.strip()]
        self.allow_all = "*" in entries
        self.allowed = {n for n in map(_normalize, entries) if n is not None}

    def permits(self, headers: Mapping[str, str]) -> bool:
        origin = headers.get("origin")
        if origin is None:
            return True  # not a browser
        normalized = _normalize(origin)
        if normalized is None:  # "null" (sandboxed frames, file://) or garbage
            return self.allow_all
        if self.allow_all or normalized in self.allowed:
            return True
        host = headers.get("host")
        if not host:
            return False
        return normalized in {_normalize(f"http://{host}"), _normalize(f"https://{host}")}

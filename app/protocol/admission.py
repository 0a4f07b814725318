"""Who may use a route: the Origin (browsers; app/protocol/origin.py), then the bearer token
(app/protocol/auth.py). Every route admits through `Admission.admit` (the WebSocket before its
upgrade, ingest, the catalog, the directory) and renders a refusal its own way: an HTTP error body,
or a denial response instead of the upgrade."""

from __future__ import annotations

from collections.abc import Mapping

from app.config import Settings
from app.protocol.auth import ANONYMOUS, Authenticator, AuthError, Principal, bearer_token
from app.protocol.origin import OriginPolicy


class Refused(Exception):
    """403 for an Origin that may not use the route, 401 for a missing or bad token."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Admission:
    def __init__(self, origins: OriginPolicy, auth: Authenticator | None) -> None:
        self.origins = origins
        self.auth = auth  # None: authentication is off, everyone is ANONYMOUS

    @classmethod
    def from_settings(cls, settings: Settings) -> Admission:
        return cls(OriginPolicy(settings.allowed_origins), Authenticator.from_settings(settings))

    def admit(
        self, headers: Mapping[str, str], doing: str, subprotocols: list[str] | None = None
    ) -> Principal:
        """The principal behind a request's headers, or Refused; `doing` completes the refusal
        "this Origin may not ...". `subprotocols`: a WebSocket's offered ones (the token may be
        among them)."""
        if not self.origins.permits(headers):
            raise Refused(403, f"this Origin may not {doing}")
        if self.auth is None:
            return ANONYMOUS
        try:
            return self.auth.authenticate(bearer_token(headers, subprotocols))
        except AuthError as exc:
            raise Refused(401, str(exc)) from None

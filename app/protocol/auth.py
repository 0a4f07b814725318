"""Bearer-token authentication, off by default (the embedded demo) and on by configuration.

Two kinds of token, either or both:
- `SPARKWIRE_JWT_SECRET`: HS256 JWTs (PyJWT) that must carry `exp`;
- `SPARKWIRE_TOKENS_FILE`: static tokens in a JSON file, re-read when the file changes:
  `{"tokens": [{"token": "...", "sub": "...", "dataSourceRids": ["ri.demo.*"], "exp": 1767225600}]}`
  (`exp`, unix seconds, is optional there).

A token's `dataSourceRids` claim lists the data sources it may read and write, as exact rids or
shell-style patterns (`*` for all). A token without the claim authenticates but reaches nothing.
Its `admin` claim (`true`; absent means false) opens the operators' endpoints, the directory of
live computations (`GET /computations`, app/api/directory.py), which shows every data source's
computations whatever `dataSourceRids` says.

Tokens travel in `Authorization: Bearer <token>` or, for browsers (which cannot set headers on a
WebSocket), as the pair `bearer, <token>` in `Sec-WebSocket-Protocol`; the server then selects the
`bearer` subprotocol so the token is never echoed back.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from app.config import Settings

logger = logging.getLogger(__name__)

BEARER_SUBPROTOCOL = "bearer"
CLAIM = "dataSourceRids"
ADMIN_CLAIM = "admin"


class AuthError(Exception):
    """A missing, malformed, unknown or expired token (HTTP 401, WebSocket close 1008)."""


@dataclass(frozen=True)
class Principal:
    subject: str
    data_source_patterns: tuple[str, ...]
    expires_at: float | None  # unix seconds; None: never
    admin: bool = False  # the `admin` claim: the operators' endpoints (app/api/directory.py)

    def allows(self, data_source_rid: str) -> bool:
        return any(fnmatch.fnmatchcase(data_source_rid, p) for p in self.data_source_patterns)

    def denied(self, data_source_rids: Iterable[str]) -> list[str]:
        """The rids among these that this principal may not touch, sorted."""
        return sorted({rid for rid in data_source_rids if not self.allows(rid)})

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at


ANONYMOUS = Principal("anonymous", ("*",), None, admin=True)  # authentication off: everything is open


def _principal(claims: Mapping[str, Any], default_subject: str) -> Principal:
    patterns = claims.get(CLAIM, [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise AuthError(f"claim '{CLAIM}' must be a list of strings")
    exp = claims.get("exp")
    if exp is not None and (not isinstance(exp, int | float) or isinstance(exp, bool)):
        raise AuthError("claim 'exp' must be a number")
    admin = claims.get(ADMIN_CLAIM, False)
    if not isinstance(admin, bool):
        raise AuthError(f"claim '{ADMIN_CLAIM}' must be true or false")
    return Principal(str(claims.get("sub", default_subject)), tuple(patterns), exp, admin)


def _digest(token: str) -> str:
    # Tokens are looked up by hash: the table never holds them, and lookups do not compare secrets.
    return hashlib.sha256(token.encode()).hexdigest()


class TokensFile:
    """Static tokens from a JSON file, re-read when its modification time changes. The time is
    looked at no more than once per `recheck_s` (a message's token lookup costs a dict lookup, not a
    file system call), so an edit of the file reaches lookups within that long."""

    RECHECK_S = 1.0

    def __init__(
        self, path: Path, recheck_s: float = RECHECK_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._mtime_ns: int | None = None
        self._recheck_s, self._clock = recheck_s, clock
        self._checked_at = clock()
        self._tokens: dict[str, Principal] = {}
        self._load()  # a broken file at start-up is a configuration error: fail loudly

    def _load(self) -> None:
        mtime = self.path.stat().st_mtime_ns
        entries = json.loads(self.path.read_text()).get("tokens", [])
        tokens: dict[str, Principal] = {}
        for i, entry in enumerate(entries):
            token = entry.get("token") if isinstance(entry, dict) else None
            if not isinstance(token, str) or not token:
                raise ValueError(f"{self.path}: tokens[{i}] needs a non-empty 'token'")
            tokens[_digest(token)] = _principal(entry, default_subject=f"token-{i}")
        self._tokens, self._mtime_ns = tokens, mtime

    def lookup(self, token: str) -> Principal | None:
        with self._lock:
            now = self._clock()
            if now - self._checked_at >= self._recheck_s:
                self._checked_at = now
                try:
                    if self.path.stat().st_mtime_ns != self._mtime_ns:
                        self._load()
                except (OSError, ValueError):
                    logger.exception("tokens file %s unreadable; keeping the tokens loaded before", self.path)
            return self._tokens.get(_digest(token))


class Authenticator:
    def __init__(self, jwt_secret: str | None, tokens: TokensFile | None) -> None:
        self._secret = jwt_secret
        self._tokens = tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> Authenticator | None:
        """None when authentication is not configured (every request is ANONYMOUS)."""
        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        tokens = TokensFile(settings.tokens_file) if settings.tokens_file else None
        if not secret and tokens is None:
            return None
        return cls(secret or None, tokens)

    def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise AuthError("a bearer token is required")
        if self._tokens is not None:
            principal = self._tokens.lookup(token)
            if principal is not None:
                if principal.expired():
                    raise AuthError("the token has expired")
                return principal
        if self._secret is not None and token.count(".") == 2:
            try:
                claims = jwt.decode(token, self._secret, algorithms=["HS256"], options={"require": ["exp"]})
            except jwt.ExpiredSignatureError as exc:
                raise AuthError("the token has expired") from exc
            except jwt.InvalidTokenError as exc:
                raise AuthError(f"invalid token: {exc}") from exc
            return _principal(claims, default_subject="jwt")
        raise AuthError("unknown token")


def bearer_token(headers: Mapping[str, str], subprotocols: list[str] | None = None) -> str | None:
    """The token from `Authorization: Bearer`, else from the `bearer, <token>` subprotocol pair."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    offered = subprotocols or []
    if BEARER_SUBPROTOCOL in offered:
        i = offered.index(BEARER_SUBPROTOCOL)
        if i + 1 < len(offered):
            return offered[i + 1]
    return None

"""Before a server that needs Redis (role compute/edge, or a catalog in Redis) starts
anything: is Redis there? Without it the first connection fails deep in the app's start-up with a
traceback; checked first, it is one line naming the URL and what went wrong."""

from __future__ import annotations

from urllib.parse import urlsplit

import redis

from app.config import Settings

CONNECT_TIMEOUT_S = 5.0


class RedisUnreachable(Exception):
    """Redis did not answer a PING (the message names the URL and the error)."""


def needs_redis(settings: Settings) -> bool:
    # the tiers and a shared catalog each need it, and each makes the catalog shared
    return settings.shared_catalog


def shown(url: str) -> str:
    """The URL without its password, for a log line."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def check_redis(url: str) -> None:
    try:
        conn = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
        )
    except ValueError as exc:  # not a redis:// (rediss://, unix://) URL
        raise RedisUnreachable(f"--redis-url {shown(url)!r} is not a Redis URL: {exc}") from None
    try:
        conn.ping()
    except redis.RedisError as exc:
        raise RedisUnreachable(
            f"cannot reach Redis at {shown(url)} (--redis-url): {str(exc).rstrip('.')}; "
            "start it or point --redis-url at it"
        ) from None
    finally:
        conn.close()

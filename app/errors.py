"""SerializableError bodies for HTTP responses."""

from __future__ import annotations

import uuid
from typing import Any


def serializable_error(
    name: str, message: str, status: int, params: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "message": message,
        "errorInstanceId": str(uuid.uuid4()),
        "statusCode": status,
        "params": params or {},
    }

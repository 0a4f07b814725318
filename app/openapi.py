"""FastAPI's OpenAPI document, completed with the ingest body: the writer endpoint reads its body raw
(orjson + one pydantic-core pass, answering 400 with a SerializableError), so FastAPI cannot see its
model; the schema is taken from schemas/ingest.py, as the AsyncAPI document is from schemas/."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter

from schemas.conjure import SerializableError
from schemas.ingest import write_request_adapter

REF = "#/components/schemas/{model}"
WRITER_PATH = "/storage/writer/v1"


def _body_schemas() -> dict[str, Any]:
    keys, definitions = TypeAdapter.json_schemas(
        [
            ("WriteBatchesRequest", "validation", write_request_adapter),
            ("SerializableError", "serialization", TypeAdapter(SerializableError)),
        ],
        ref_template=REF,
    )
    schemas: dict[str, Any] = dict(definitions.get("$defs", {}))
    for (name, _), schema in keys.items():
        if "$ref" not in schema:
            schemas[name] = schema
    return schemas


def install(app: FastAPI) -> None:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(_body_schemas())
            operation = schema["paths"][WRITER_PATH]["post"]
            operation["summary"] = "Write points (200 once every point is durable)"
            operation["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": REF.format(model="WriteBatchesRequest")}}
                },
            }
            operation["responses"] = {
                "200": {"description": "every point of the request is durable"},
                "400": {
                    "description": "invalid request: nothing of it is stored",
                    "content": {
                        "application/json": {"schema": {"$ref": REF.format(model="SerializableError")}}
                    },
                },
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]

"""FastAPI's OpenAPI document, completed with the ingest bodies: the writer endpoints read their
bodies raw (app/ingest/writes.py, app/ingest/nominal.py), so FastAPI cannot see their models; the JSON
schema is taken from schemas/ingest.py, as the AsyncAPI document is from schemas/, and every error
answer is described by Conjure's HTTP error body (app/http/errors.py)."""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter

from app.ingest.columnar import COLUMNAR_PATH, NOMINAL_COLUMNAR_PATH
from app.ingest.logs import LOGS_PATH
from app.ingest.prometheus import PROMETHEUS_PATH
from app.ingest.telegraf import TELEGRAF_PATH, TelegrafBody
from schemas.columnar import WriteColumnBatchesRequest
from schemas.conjure import SerializableError
from schemas.ingest import write_request_adapter
from schemas.logs import WriteLogsRequest

REF = "#/components/schemas/{model}"
WRITER_PATH = "/storage/writer/v1"
NOMINAL_WRITER_PATH = "/storage/writer/v1/nominal/{dataSourceRid}"

# Conjure's HTTP error body, with the SerializableError fields the server also keeps beside it.
CONJURE_ERROR: dict[str, Any] = {
    "type": "object",
    "title": "ConjureError",
    "required": ["errorCode", "errorName", "errorInstanceId", "parameters"],
    "properties": {
        "errorCode": {"type": "string", "examples": ["INVALID_ARGUMENT"]},
        "errorName": {"type": "string", "examples": ["Default:InvalidArgument"]},
        "errorInstanceId": {"type": "string", "format": "uuid"},
        "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
        "name": {"type": "string"},
        "message": {"type": "string"},
        "statusCode": {"type": "integer"},
        "params": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
WRITER_ERRORS = {
    "400": "invalid request (the message says what and where): nothing of it is stored",
    "401": "a missing or invalid bearer token",
    "403": "a foreign Origin, or a data source the token does not reach",
    "413": "the body (counted decompressed) or its points over the limits",
    "415": "a Content-Encoding other than zstd, gzip, deflate or none (or, for protobuf, a content type)",
    "507": "the disk is below the log's free-space floor (Storage:InsufficientStorage); retry later",
}


def _writer_responses() -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": REF.format(model="ConjureError")}}}
    responses: dict[str, Any] = {"200": {"description": "every point of the request is durable"}}
    for status, description in WRITER_ERRORS.items():
        responses[status] = {"description": description, "content": error}
    return responses


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


def _msgspec_body(schema: dict[str, Any], model: type) -> dict[str, Any]:
    """A JSON request body whose schema msgspec writes from `model`, its components added."""
    (body,), components = msgspec.json.schema_components([model], ref_template=REF.format(model="{name}"))
    schema["components"]["schemas"].update(components)
    return {"required": True, "content": {"application/json": {"schema": body}}}


def _document_columnar(schema: dict[str, Any]) -> None:
    """The columnar writers (app/ingest/columnar.py): their JSON body's schema from schemas/columnar.py."""
    if COLUMNAR_PATH not in schema["paths"]:  # a compute tier serves no writers
        return
    columnar = schema["paths"][COLUMNAR_PATH]["post"]
    columnar["summary"] = "Write columns of points, one series a batch (200 once every point is durable)"
    columnar["requestBody"] = _msgspec_body(schema, WriteColumnBatchesRequest)
    columnar["responses"] = _writer_responses()
    twin = schema["paths"][NOMINAL_COLUMNAR_PATH]["post"]
    twin["summary"] = "Write columns of points as protobuf (200 once every point is durable)"
    twin["requestBody"] = _protobuf_body("nominal.direct_channel_writer.v2.WriteBatchesRequest")
    twin["responses"] = _writer_responses()


def _document_logs(schema: dict[str, Any]) -> None:
    """The log writer (app/ingest/logs.py): its JSON body's schema from schemas/logs.py."""
    if LOGS_PATH not in schema["paths"]:  # a compute tier serves no writers
        return
    logs = schema["paths"][LOGS_PATH]["post"]
    logs["summary"] = "Write log lines (200 once every line is durable)"
    logs["description"] = (
        'nominal-api\'s WriteLogsRequest: each point a message and its args, to `channel` ("logs" '
        "when absent) of the data source; a channel holds log lines only, and refuses other points."
    )
    logs["requestBody"] = _msgspec_body(schema, WriteLogsRequest)
    logs["responses"] = _writer_responses()


def _document_agents(schema: dict[str, Any]) -> None:
    """The agents' writers: Telegraf's JSON (app/ingest/telegraf.py) and Prometheus remote write
    (app/ingest/prometheus.py) with its health check."""
    if TELEGRAF_PATH not in schema["paths"]:  # a compute tier serves no writers
        return
    telegraf = schema["paths"][TELEGRAF_PATH]["post"]
    telegraf["summary"] = "Write Telegraf's JSON metrics (200 once every point is durable)"
    telegraf["description"] = (
        "Telegraf's json data format, batch (`metrics`) or single form; a channel per field named "
        "`<name>.<field>`, the metric's tags as tags, `timestamp` in nanoseconds "
        '(json_timestamp_units = "1ns").'
    )
    telegraf["requestBody"] = _msgspec_body(schema, TelegrafBody)
    telegraf["responses"] = _writer_responses()
    remote = schema["paths"][PROMETHEUS_PATH]["post"]
    remote["summary"] = "Prometheus remote write 1.0 (200 once every sample is durable)"
    remote["description"] = (
        "`__name__` is the channel, the other labels its tags; Content-Encoding: snappy (the block format)."
    )
    remote["requestBody"] = {
        "required": True,
        "description": "a snappy-compressed Prometheus WriteRequest protobuf "
        "(nominal-api-protos' prometheus_remote_write.proto)",
        "content": {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}},
    }
    remote["responses"] = _writer_responses()
    health = schema["paths"][PROMETHEUS_PATH]["get"]
    health["summary"] = "Remote write health check (Vector's sink): true once the caller is admitted"
    health["responses"] = {
        "200": {"description": "true", "content": {"application/json": {"schema": {"type": "boolean"}}}}
    }


def _protobuf_body(message: str) -> dict[str, Any]:
    """A protobuf writer's request body: `message` of nominal-api-protos, as raw bytes."""
    return {
        "required": True,
        "description": f"a {message} protobuf (package nominal-api-protos), "
        "Content-Encoding zstd, gzip or none",
        "content": {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}},
    }


def install(app: FastAPI) -> None:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(_body_schemas())
            components["ConjureError"] = CONJURE_ERROR
            operation = schema["paths"][WRITER_PATH]["post"]
            operation["summary"] = "Write points (200 once every point is durable)"
            operation["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": REF.format(model="WriteBatchesRequest")}}
                },
            }
            operation["responses"] = _writer_responses()
            nominal = schema["paths"][NOMINAL_WRITER_PATH]["post"]
            nominal["summary"] = "Write points as Nominal's SDKs send them (200 once every point is durable)"
            nominal["requestBody"] = _protobuf_body("WriteRequestNominal")
            nominal["responses"] = _writer_responses()
            _document_columnar(schema)
            _document_logs(schema)
            _document_agents(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]

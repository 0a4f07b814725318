"""An edge's reads of the log's points, answered by the compute tier.

On the Kafka log a request that reads points (ComputeService, data export) is a Spark batch job,
and an edge runs no Spark. Its clients still ask it: an edge is the address a deployment gives them.
So an edge sends such a request, once admitted (its token, its bounded body), to a compute process
its heartbeats named (`advertise-url`), and returns that process's answer as it is: its status,
body and content type. The compute process admits it again with the same token and bounds its cost
as it bounds its own clients' requests. docs/decisions/0103-an-edge-forwards-log-reads.md.

A process that cannot be reached (refused, reset, no connection in time) is passed over for the next
one heard of; one that took the request and gave no answer in time is not asked twice. Either way
the client gets a 503 naming the compute tier.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
from fastapi import Request, Response

from app.http.errors import HttpError

logger = logging.getLogger(__name__)
# What a compute process may take to answer: its own gate queues and times a request (polled-queue,
# polled-time-budget-seconds), well within this.
ANSWER_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 5.0
# The request's headers that change its answer or its admission; the body was read and decoded here.
FORWARDED_HEADERS = ("authorization", "origin", "accept", "content-type")
ANSWER_HEADERS = ("content-disposition",)  # beside the content type, which Response sets


class ForwardedReads:
    def __init__(self, compute_urls: Callable[[], list[str]]) -> None:
        """`compute_urls`: the compute processes' HTTP base URLs, the ones to try first first."""
        self.compute_urls = compute_urls
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(ANSWER_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))
        self._next = 0  # rotates the first choice among the ready processes

    async def forward(self, request: Request, body: bytes) -> Response:
        urls = self.compute_urls()
        if not urls:
            raise unreachable("no compute process is heard from")
        self._next = (self._next + 1) % len(urls)
        headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        failures: list[str] = []
        for url in urls[self._next :] + urls[: self._next]:
            try:
                answer = await self._client.request(
                    request.method, url + target, content=body, headers=headers
                )
            except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:  # it took the request: not sent twice
                logger.warning("edge: a read forwarded to %s was not answered in time (%r)", url, exc)
                raise unreachable(f"{url} did not answer within {ANSWER_TIMEOUT_S:g} s") from None
            except httpx.TransportError as exc:  # no connection, or one lost: a read can go to the next
                failures.append(f"{url}: {type(exc).__name__} {exc}".strip())
                logger.warning("edge: a read forwarded to %s got no answer (%r)", url, exc)
                continue
            kept = {h: answer.headers[h] for h in ANSWER_HEADERS if h in answer.headers}
            return Response(
                answer.content, answer.status_code, kept, media_type=answer.headers.get("content-type")
            )
        raise unreachable("; ".join(failures))

    async def close(self) -> None:
        await self._client.aclose()


def unreachable(why: str) -> HttpError:
    return HttpError(
        503,
        f"this edge reads the Kafka log's points through the compute tier, which did not answer ({why})",
        name="Sparkwire:ComputeTierUnreachable",
    )

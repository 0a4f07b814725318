"""One WebSocket connection's protocol, sans I/O: client messages in, actions out.

`Session` decodes ClientMessages within the limits (app/protocol/limits.py), answers pings, compiles and
admits subscriptions against the token's reach, re-checks them when the token is updated, ends
them when it expires, re-resolves them when an asset or run they read is edited, and decides when
an idle peer is pinged or given up. It never touches a
socket, a task or the hub: every input is a method call (with the time, read by the caller), and
every output is an action (`Send`, `Close`, `StartSubscription`, ...) for the I/O layer
(app/api/ws.py) to carry out in order. What a started subscription came to (running, or failed) is
an input too, so the bookkeeping of which subscriptions are live stays here.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import orjson
from pydantic import ValidationError

from app.protocol import frames
from app.protocol.auth import AuthError, Principal
from app.protocol.close_codes import GOING_AWAY, MESSAGE_TOO_BIG, POLICY_VIOLATION
from app.protocol.ledger import CostLedger
from app.protocol.limits import MAX_JSON_DEPTH, MessageRate, json_depth
from compute.evaluation.compiler.builder import refuse_unhonoured_context
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.datasets import CatalogKind, CatalogUnreachable, CatalogUse
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.cost import EvaluationBudget
from compute.evaluation.errors import ComputeError, MalformedNode
from compute.evaluation.request import ComputationRequest
from compute.storage.catalog_reach import Reach
from schemas.client import (
    ClientPing,
    ClientPong,
    ClientUpdateToken,
    Replay,
    StreamingComputeNodeSubscription,
    Subscribe,
    SubscriptionExtensions,
    Unsubscribe,
    client_message_adapter,
)
from schemas.conjure import absent_nulls
from schemas.timestamps import NANOS_PER_SECOND, split_nanos

logger = logging.getLogger(__name__)


# -- inputs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Instant:
    """The time of an input, on both clocks, read once by the I/O layer: `monotonic` seconds for
    liveness, `unix` seconds (the tokens' `exp`) for expiry."""

    monotonic: float
    unix: float


@dataclass(frozen=True)
class SessionConfig:
    max_subscriptions: int = 128
    limits: Limits = field(default_factory=Limits)  # what compile_plan accepts
    catalogs: Catalogs = NO_CATALOGS  # the assets, runs, modules and events plans look up
    max_messages_per_second: float = 100.0
    max_message_bytes: int = 1 << 20
    ping_interval: float = 20.0  # seconds of silence before the server pings
    ping_timeout: float = 20.0  # seconds to wait for a pong before closing
    # Replay (docs/extensions.md): whether this server can replay (`--role all`: Spark and the log
    # in this process), and the log's retention in seconds (0 = forever), which a replay's start
    # less its window may not reach past.
    replay_available: bool = True
    retention_s: float = 0.0
    max_replays: int = 4  # replay subscriptions one connection may hold (until it unsubscribes them)
    budget: EvaluationBudget = field(default_factory=EvaluationBudget)  # the cost model's limits

    @property
    def heartbeat_period(self) -> float:
        """How often the I/O layer should call `Session.heartbeat`."""
        return min(self.ping_interval, self.ping_timeout) / 2


# -- actions --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    """Queue this frame for the client."""

    frame: str


@dataclass(frozen=True)
class Close:
    """Close the connection (after what is queued is delivered). The session takes no more input."""

    code: int
    reason: str


@dataclass(frozen=True)
class Delivery:
    """How a subscription's updates are paced and shaped: what the session decoded, as the hub
    (app/fanout/hub.py) delivers it."""

    min_delay_s: float
    allow_appends: bool
    append_only: bool
    resume: bool = False  # extensions (docs/extensions.md): a resume token with each update
    late_reports: bool = False  # lateReport messages


@dataclass(frozen=True)
class StartSubscription:
    """Attach the subscription to the computation of `request` (created from `plan` if nobody runs
    it); report the outcome with `subscription_started` or `subscription_failed`."""

    subscription_id: str
    request: ComputationRequest
    plan: Plan
    delivery: Delivery
    resume_token: str | None = None  # extension: resume from here instead of a FullResult
    replay: Replay | None = None  # extension: re-watch a past period instead of following live

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def allowed_lateness_ns(self) -> int | None:
        return self.request.allowed_lateness_ns


@dataclass(frozen=True)
class StopSubscription:
    """Detach the subscription, or abandon its start (only its own wait: creations are shared)."""

    subscription_id: str


@dataclass(frozen=True)
class ArmExpiry:
    """Call `token_expired` at `at` (unix seconds), replacing any earlier timer."""

    at: float


@dataclass(frozen=True)
class DisarmExpiry:
    """The token does not expire (any more): cancel the expiry timer."""


Action = Send | Close | StartSubscription | StopSubscription | ArmExpiry | DisarmExpiry


@dataclass(frozen=True)
class Prepared:
    """A message as `Session.prepare` left it: the answer to one that is not valid (`message`
    None), or the message and, for a subscribe, each subscription's plan or refusal."""

    answer: list[Action]
    message: object = None
    compiled: dict[str, Plan | ComputeError] = field(default_factory=dict)


class Session:
    """The subscriptions of one connection, the token they were made with, and its liveness."""

    def __init__(
        self,
        principal: Principal,
        config: SessionConfig,
        now: Instant,
        *,
        authenticate: Callable[[str], Principal] | None = None,
        label: str = "session",
        ledger: CostLedger | None = None,
    ) -> None:
        """`authenticate` checks an updateToken's token (raising AuthError); None when
        authentication is off, and updateToken is then ignored. `ledger`: the server's cost totals
        (app/protocol/ledger.py); None: this session's alone."""
        self.principal = principal
        self.config = config
        self.label = label  # for logs, e.g. "connection 7"
        self._authenticate = authenticate
        self._costs = (ledger or CostLedger(config.budget)).account(principal.subject)
        self._subscriptions: dict[str, list[str]] = {}  # id -> the data sources it reads
        # Live (not replay) subscriptions that resolved through the asset and run catalog: what they
        # asked and what they read of it, to compile them again when it is edited.
        self._resolved: dict[str, tuple[StreamingComputeNodeSubscription, CatalogUse]] = {}
        # Replay subscriptions whose creation is not answered yet, with the unit their success will
        # report: answered once their start read the log (success), or failed there (a creation error).
        self._unanswered: dict[str, str | None] = {}
        self._replays: set[str] = set()  # the ids of its replay subscriptions
        self._rate = MessageRate(config.max_messages_per_second, now.monotonic)
        self._last_heard = now.monotonic
        self._awaiting_pong_since: float | None = None
        self.closed = False

    @property
    def live(self) -> list[str]:
        """Ids of the subscriptions created and not yet ended (starting or started)."""
        return list(self._subscriptions)

    def start(self) -> list[Action]:
        """The actions owed before any message: the token's expiry timer."""
        return self._expiry_timer()

    # -- messages -------------------------------------------------------------------------------
    def receive(self, data: str | bytes, now: Instant) -> list[Action]:
        """One WebSocket message (text, or binary holding UTF-8 JSON): `admit`, `prepare`, `handle`."""
        text = self.admit(data, now)
        return text if isinstance(text, list) else self.handle(self.prepare(text), now)

    def admit(self, data: str | bytes, now: Instant) -> list[Action] | str:
        """Liveness, the message rate and size: the message's text to `prepare`, or the answer."""
        self._last_heard, self._awaiting_pong_since = now.monotonic, None  # any message is a sign of life
        if self.closed:
            return []
        if not self._rate.allow(now.monotonic):
            if self._rate.abusive:
                return self._close(POLICY_VIOLATION, "message rate limit exceeded")
            if self._rate.should_notify(now.monotonic):
                rate = self.config.max_messages_per_second
                return [_client_error(f"over {rate:g} messages per second: message dropped")]
            return []
        if isinstance(data, bytes):
            try:
                data = data.decode()
            except UnicodeDecodeError:
                return [_client_error("binary frame is not UTF-8 JSON")]
        if len(data.encode()) > self.config.max_message_bytes:
            return self._close(MESSAGE_TOO_BIG, "message too big")
        return data

    def prepare(self, text: str) -> Prepared:
        """The message decoded and, if it subscribes, its subscriptions compiled (or refused). It
        changes nothing of the session, so the I/O layer runs it off the event loop (app/api/ws.py)
        and `handle`s what it gives back there."""
        raw = text.encode()
        if json_depth(raw) > MAX_JSON_DEPTH:
            return Prepared([_client_error(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")])
        try:
            message = client_message_adapter.validate_python(absent_nulls(orjson.loads(text)))
        except (orjson.JSONDecodeError, ValidationError, ValueError) as exc:
            return Prepared([_client_error(_describe(exc))])
        if not isinstance(message, Subscribe):
            return Prepared([], message)
        message, past_cap = _within_cap(message, self.config.max_subscriptions)
        compiled: dict[str, Plan | ComputeError] = {}
        for sub_id, sub in message.subscribe.items():
            try:
                compiled[sub_id] = self._compile(sub)
            except MalformedNode as exc:  # one malformed subscription: the whole message is refused
                return Prepared([_client_error(f"subscription {sub_id}: {exc}")])
            except ComputeError as exc:
                compiled[sub_id] = exc
        return Prepared(past_cap, message, compiled)

    def handle(self, prepared: Prepared, now: Instant) -> list[Action]:
        """What a `prepare`d message does to the session."""
        message = prepared.message
        if self.closed or message is None:
            return [] if self.closed else prepared.answer
        if isinstance(message, ClientPing):
            return [Send(frames.pong(_iso(message.ping.sent_at)))]
        if isinstance(message, ClientPong):
            return []  # liveness is recorded for every message received
        if isinstance(message, Unsubscribe):
            return self._unsubscribe(message.unsubscribe)
        if isinstance(message, Subscribe):
            if not message.subscribe:
                return [_client_error("subscribe names no subscriptions: nothing was subscribed")]
            return self._subscribe(message, prepared.compiled, now) + prepared.answer
        if isinstance(message, ClientUpdateToken):
            return self._update_token(message.update_token.token, now)
        return []

    # -- liveness -------------------------------------------------------------------------------
    def heartbeat(self, now: Instant) -> list[Action]:
        """Ping a peer silent for ping_interval; close one that has not answered within ping_timeout."""
        if self.closed:
            return []
        if self._awaiting_pong_since is not None:
            if now.monotonic - self._awaiting_pong_since > self.config.ping_timeout:
                logger.info("%s: no pong in %.1fs, closing", self.label, self.config.ping_timeout)
                return self._close(GOING_AWAY, "ping timeout")
        elif now.monotonic - self._last_heard > self.config.ping_interval:
            self._awaiting_pong_since = now.monotonic
            return [Send(frames.ping())]
        return []

    # -- tokens ---------------------------------------------------------------------------------
    def token_expired(self) -> list[Action]:
        """The expiry timer fired: every subscription gets SubscriptionAuthExpired, then close 1008."""
        if self.closed:
            return []
        logger.info("%s: token of %s expired", self.label, self.principal.subject)
        err = _auth_expired()
        actions: list[Action] = []
        for sub_id in self.live:
            actions += self._drop(sub_id)
            actions.append(Send(frames.subscription_update(sub_id, frames.error_update(err))))
        return actions + self._close(POLICY_VIOLATION, "token expired")

    def _update_token(self, token: str, now: Instant) -> list[Action]:
        """`updateToken` (extension): a fresh token replaces the old one before it expires."""
        if self._authenticate is None:  # said, so a client does not wait for an effect that never comes
            return [_client_error("updateToken: authentication is off on this server; no token is used")]
        try:
            principal = self._authenticate(token)
        except AuthError as exc:
            logger.info("%s: updateToken refused: %s", self.label, exc)
            return self._close(POLICY_VIOLATION, f"updateToken refused: {exc}"[:120])
        previous, self.principal = self.principal, principal
        actions = self._expiry_timer()
        for sub_id, rids in list(self._subscriptions.items()):  # the new claim may reach less
            denied = principal.denied(rids)
            if denied:
                actions += self._drop(sub_id)
                update = frames.error_update(_permission_denied(denied))
                actions.append(Send(frames.subscription_update(sub_id, update)))
        if _reach(principal) == _reach(previous):  # a token refreshed: nothing compiled (on the loop)
            return actions
        for sub_id in list(self._resolved):  # nor may it see every asset, run or module they resolved
            with contextlib.suppress(CatalogUnreachable):  # out of reach: checked at its next edit
                actions += self.re_resolve(sub_id, now)
        return actions

    def _expiry_timer(self) -> list[Action]:
        expires_at = self.principal.expires_at
        return [DisarmExpiry() if expires_at is None else ArmExpiry(expires_at)]

    # -- subscriptions --------------------------------------------------------------------------
    def _subscribe(
        self, message: Subscribe, compiled: dict[str, Plan | ComputeError], now: Instant
    ) -> list[Action]:
        actions: list[Action] = []
        for sub_id, sub in message.subscribe.items():
            outcome = compiled[sub_id]
            actions += self._drop(sub_id)  # re-using a live id replaces that subscription
            replay = sub.sparkwire.replay if sub.sparkwire is not None else None
            if isinstance(outcome, Plan):
                outcome = self._refusal(outcome, now) or outcome
            if isinstance(outcome, Plan) and replay is not None:
                outcome = self._replay_refusal(replay, outcome, now) or outcome
            if isinstance(outcome, Plan):  # the cost model's budgets, charged if it passes them
                outcome = self._costs.admit(sub_id, outcome) or outcome
            if isinstance(outcome, ComputeError):
                actions.append(Send(frames.creation_error(sub_id, outcome)))
                continue
            self._subscriptions[sub_id] = sorted({s.data_source_rid for s in outcome.selectors})
            if replay is not None:
                self._replays.add(sub_id)
            else:
                self._track_resolution(sub_id, sub, outcome)
            if replay is None:
                actions.append(Send(frames.creation_success(sub_id, outcome.unit)))
            else:  # answered once its start has read the log (`subscription_started` / `_failed`)
                self._unanswered[sub_id] = outcome.unit
            actions.append(_start(sub_id, sub, outcome))
        return actions

    def _compile(self, sub: StreamingComputeNodeSubscription) -> Plan:
        """The subscription's plan. The token's reach is checked first and at each read as the tree
        is expanded, and the compile budget (Limits) as each step is: a request refused costs only
        the steps up to its refusal."""
        if not self.principal.admin and not self.principal.data_source_patterns:
            raise ComputeError(
                "PermissionDenied", "the token reaches no data source", {"rids": ""}, status_code=403
            )
        context = sub.compute_request.context
        refuse_unhonoured_context(
            {
                "defaultFillStrategy": context.default_fill_strategy,
                "defaultAlignmentStrategy": context.default_alignment_strategy,
                "resolveAssetsThroughDatasets": context.resolve_assets_through_datasets,
                "functionVariables": context.function_variables,
            }
        )
        return _request(sub).compile(
            self.config.limits,
            self.principal.allows,
            reach=self._catalog_reach,
            catalogs=self.config.catalogs,
        )

    @property
    def _catalog_reach(self) -> Reach:
        """The catalog entries this token may see (compute/storage/catalog_reach.py)."""
        return Reach(self.principal.data_source_patterns, everything=self.principal.admin)

    def _refusal(self, plan: Plan, now: Instant) -> ComputeError | None:
        """Why this connection may not have this (valid) subscription, if it may not."""
        refused = self._access_refusal(plan, now)
        if refused is not None:
            return refused
        limit = self.config.max_subscriptions
        if len(self._subscriptions) >= limit:
            return ComputeError(
                "TooManySubscriptions",
                f"a connection may hold at most {limit} subscriptions",
                {"limit": str(limit)},
            )
        return None

    def _access_refusal(self, plan: Plan, now: Instant) -> ComputeError | None:
        """Why this connection's token may not read what the plan reads, if it may not."""
        if self.principal.expired(now.unix):
            return _auth_expired()
        denied = self.principal.denied(s.data_source_rid for s in plan.selectors)
        if denied:
            return _permission_denied(denied)
        return None

    def _track_resolution(self, sub_id: str, sub: StreamingComputeNodeSubscription, plan: Plan) -> None:
        if plan.catalog is None:
            self._resolved.pop(sub_id, None)
        else:
            self._resolved[sub_id] = (sub, plan.catalog)

    # -- the asset and run catalog ----------------------------------------------------------------
    def catalog_changed(self, kind: CatalogKind, rid: str, now: Instant) -> list[Action]:
        """An asset or run was created, changed or deleted: every live subscription that resolved
        through it (or searched all of its kind) is compiled again (`re_resolve`)."""
        actions: list[Action] = []
        for sub_id in self.catalog_affected(kind, (rid,)):
            actions += self.re_resolve(sub_id, now)
        return actions

    def catalog_affected(self, kind: str | None, rids: Collection[str]) -> list[str]:
        """The live subscriptions an edit of these rids of this kind of catalog can move (each once,
        however many of the rids it read); kind None: every one that read the catalog."""
        if self.closed:
            return []
        return [
            sub_id
            for sub_id, (_, use) in self._resolved.items()
            if kind is None or any(use.affected_by(kind, rid) for rid in rids)
        ]

    def re_resolve(self, sub_id: str, now: Instant) -> list[Action]:
        """Compile a live subscription again against the catalog as it is now. Resolving as before,
        it goes on untouched. Otherwise it moves to the computation of its new resolution, whose
        FullResult follows; or, if it no longer resolves or now reaches a data source its token does
        not, it gets the error its creation would get now and ends. A catalog out of reach
        (`CatalogUnreachable`) is raised: the subscription keeps its resolution, the caller retries."""
        entry = self._resolved.get(sub_id)
        if self.closed or entry is None:  # gone (or replaced, and compiled then) since it was listed
            return []
        sub, use = entry
        try:
            outcome: Plan | ComputeError = self._compile(sub)
        except CatalogUnreachable:
            raise
        except ComputeError as exc:
            outcome = exc
        except MalformedNode as exc:  # it compiled once, so only a changed catalog can say this
            outcome = ComputeError("InvalidComputation", f"the request no longer compiles: {exc}")
        if isinstance(outcome, Plan):
            if outcome.catalog is not None and outcome.catalog.digest == use.digest:
                return []
            outcome = self._access_refusal(outcome, now) or outcome
        if isinstance(outcome, ComputeError):
            actions = self._drop(sub_id)
            actions.append(Send(frames.subscription_update(sub_id, frames.error_update(outcome))))
            return actions
        logger.info("%s: %s re-resolved after a catalog edit", self.label, _short(sub_id))
        self._subscriptions[sub_id] = sorted({s.data_source_rid for s in outcome.selectors})
        self._track_resolution(sub_id, sub, outcome)
        return [_start(sub_id, sub, outcome, resume=False)]

    def _replay_refusal(self, replay: Replay, plan: Plan, now: Instant) -> ComputeError | None:
        """Why this replay cannot be served, as far as can be told without reading the log (its
        start checks what the log still holds: app/fanout/replay.py)."""
        if not self.config.replay_available:
            return ComputeError(
                "ReplayUnavailable",
                "replay reads the point log with Spark: it needs a server started with --role all "
                "(this one has no Spark and no log reader)",
            )
        if len(self._replays) >= self.config.max_replays:  # each reads its period into memory
            limit = self.config.max_replays
            return ComputeError(
                "TooManyReplays",
                f"a connection may hold at most {limit} replay subscriptions (SPARKWIRE_MAX_REPLAYS_PER_"
                "CONNECTION); unsubscribe one first",
                {"limit": str(limit), "setting": "SPARKWIRE_MAX_REPLAYS_PER_CONNECTION"},
            )
        start, end = replay.start.to_nanos(), replay.end.to_nanos()
        now_ns = int(now.unix * NANOS_PER_SECOND)
        if end <= start:
            return replay_out_of_range("replay.end must be after replay.start", start, end)
        if start > now_ns:
            return replay_out_of_range(f"replay.start ({iso_ns(start)}) is in the future", start, end)
        retention_ns = int(self.config.retention_s * NANOS_PER_SECOND)
        needed_from = start - plan.window_ns - plan.lookback_ns
        if retention_ns > 0 and needed_from < now_ns - retention_ns:
            return replay_out_of_range(
                f"replay.start less the window ({iso_ns(needed_from)}) is past the log's retention of "
                f"{self.config.retention_s:g} s: it holds points from {iso_ns(now_ns - retention_ns)} on",
                start,
                end,
                held_from=now_ns - retention_ns,
            )
        return None

    def subscription_started(self, sub_id: str) -> list[Action]:
        """A StartSubscription succeeded: the subscription is attached to its computation."""
        if sub_id not in self._subscriptions:
            return [StopSubscription(sub_id)]  # ended meanwhile: let go of what was attached
        if sub_id in self._unanswered:  # a replay: created now that its history is read
            unit = self._unanswered.pop(sub_id)
            return [Send(frames.creation_success(sub_id, unit))]
        return []

    def subscription_failed(self, sub_id: str, error: Exception) -> list[Action]:
        """A StartSubscription failed: the client gets the error as the subscription's update (a
        replay whose creation is not answered yet: as its creation error)."""
        self._costs.release(sub_id)
        self._replays.discard(sub_id)
        self._resolved.pop(sub_id, None)
        if self._subscriptions.pop(sub_id, None) is None or self.closed:
            return []
        if not isinstance(error, ComputeError):
            error = ComputeError(
                "ComputeFailed", f"the computation could not start: {error}", status_code=500
            )
        if sub_id in self._unanswered:
            del self._unanswered[sub_id]
            return [Send(frames.creation_error(sub_id, error))]
        return [Send(frames.subscription_update(sub_id, frames.error_update(error)))]

    def _unsubscribe(self, sub_ids: list[str]) -> list[Action]:
        """Each live id is dropped; ids that name no subscription are told, in one message (a typo in
        an id would otherwise leave a subscription running that its client thinks has ended)."""
        unknown = [_short(i) for i in dict.fromkeys(sub_ids) if i not in self._subscriptions]
        actions = [action for sub_id in sub_ids for action in self._drop(sub_id)]
        if unknown:
            shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            actions.append(_client_error(f"unsubscribe: no live subscription has the id(s) {shown}"))
        return actions

    def _drop(self, sub_id: str) -> list[Action]:
        self._costs.release(sub_id)
        self._unanswered.pop(sub_id, None)
        self._replays.discard(sub_id)
        self._resolved.pop(sub_id, None)
        if self._subscriptions.pop(sub_id, None) is None:
            return []
        return [StopSubscription(sub_id)]

    # -- the end --------------------------------------------------------------------------------
    def _close(self, code: int, reason: str) -> list[Action]:
        self.closed = True
        return [Close(code, reason)]

    def close(self) -> list[Action]:
        """The connection is gone: let go of everything."""
        self.closed = True
        actions: list[Action] = [StopSubscription(sub_id) for sub_id in self.live]
        self._subscriptions.clear()
        self._unanswered.clear()
        self._replays.clear()
        self._resolved.clear()
        self._costs.release_all()
        return [*actions, DisarmExpiry()]


def _context(sub: StreamingComputeNodeSubscription) -> dict[str, object]:
    return {k: v.as_json() for k, v in sub.compute_request.context.variables.items()}


def _request(sub: StreamingComputeNodeSubscription) -> ComputationRequest:
    request, options = sub.compute_request, sub.subscription_options
    rc = options.result_configuration
    return ComputationRequest(
        request.node.as_json(),
        request.window_width.to_nanos(),
        _context(sub),
        options.allowed_lateness.to_nanos() if options.allowed_lateness else None,
        ResultOptions(append_only=rc is not None, decimate=rc.append_only.decimate_results if rc else True),
        dict(request.context.dataset_references or {}),
        stream_polled=sub.sparkwire is not None and sub.sparkwire.stream_polled,
    )


def _start(
    sub_id: str, sub: StreamingComputeNodeSubscription, plan: Plan, resume: bool = True
) -> StartSubscription:
    """`resume` False: a re-resolved subscription, which starts over with a FullResult."""
    options, extensions = sub.subscription_options, sub.sparkwire or SubscriptionExtensions()
    delivery = Delivery(
        min_delay_s=options.min_delay / 1000.0,
        allow_appends=bool(options.allow_appends),
        append_only=options.result_configuration is not None,
        resume=extensions.resume or extensions.resume_token is not None,
        late_reports=extensions.late_reports,
    )
    request = _request(sub).resolved(plan)
    if not resume:
        return StartSubscription(sub_id, request, plan, delivery)
    return StartSubscription(sub_id, request, plan, delivery, extensions.resume_token, extensions.replay)


def _within_cap(message: Subscribe, limit: int) -> tuple[Subscribe, list[Action]]:
    """A subscribe's first `limit` subscriptions (no connection holds more), and for those past
    them one answer naming them instead of a creation error each: 1,700 of those overflowed the
    send queue and the connection was closed with 4008 (issue 44)."""
    if len(message.subscribe) <= limit:
        return message, []
    ids = list(message.subscribe)
    kept = {sub_id: message.subscribe[sub_id] for sub_id in ids[:limit]}
    over = [_short(sub_id) for sub_id in ids[limit:]]
    shown = ", ".join(over[:10]) + (f" and {len(over) - 10} more" if len(over) > 10 else "")
    refusal = _client_error(
        f"subscribe names {len(ids)} subscriptions; a connection holds at most {limit} "
        f"(TooManySubscriptions, SPARKWIRE_MAX_SUBSCRIPTIONS_PER_CONNECTION): {shown} not subscribed"
    )
    return message.model_copy(update={"subscribe": kept}), [refusal]


def _client_error(message: str) -> Send:
    return Send(frames.client_message_error(message))


def _auth_expired() -> ComputeError:
    return ComputeError("SubscriptionAuthExpired", "the token expired; send updateToken", status_code=403)


def replay_out_of_range(message: str, start: int, end: int, held_from: int | None = None) -> ComputeError:
    """A replay refused for its period (docs/extensions.md), with the period in its params."""
    params = {"start": iso_ns(start), "end": iso_ns(end)}
    if held_from is not None:
        params["heldFrom"] = iso_ns(held_from)
    return ComputeError("ReplayOutOfRange", message, params)


def iso_ns(ns: int) -> str:
    """An int64 nanosecond timestamp as ISO-8601 UTC (to the microsecond), for messages."""
    seconds, nanos = split_nanos(ns)
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC) + datetime.timedelta(
            microseconds=nanos // 1000
        )
    except (ValueError, OverflowError, OSError):  # outside the calendar's years 1..9999
        return f"{ns} ns since the epoch"
    return _iso(moment)


def _reach(principal: Principal) -> tuple[tuple[str, ...], bool]:
    """What a token may read and see: two tokens of the same reach resolve every request alike."""
    return principal.data_source_patterns, principal.admin


def _permission_denied(rids: list[str]) -> ComputeError:
    return ComputeError(
        "PermissionDenied",
        "the token does not reach these data sources: " + ", ".join(rids),
        {"rids": ",".join(rids)},
        status_code=403,
    )


def _iso(value: datetime.datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(_short(str(p)) for p in first["loc"])  # a key may be an oversized id
        return f"not a ClientMessage: {where}: {first['msg']} ({exc.error_count()} problem(s))"
    if isinstance(exc, orjson.JSONDecodeError | json.JSONDecodeError):
        return f"not JSON: {exc}"
    return f"not a ClientMessage: {exc}"


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]}...({len(text)} characters)"

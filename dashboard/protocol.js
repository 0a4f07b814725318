// The persistent-compute protocol in the browser: the merged view of a subscription (the merge rules
// of docs/protocol.md, as sparkwire_client/view.py applies them) and a connection that answers pings,
// reconnects with backoff and hands over on shutdownNotice.

const SPECIAL = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

/** Conjure Timestamp -> milliseconds since the epoch (a float; sub-microsecond digits are lost). */
export function tsMs(t) {
  return t.seconds * 1000 + t.nanos / 1e6;
}

/** Conjure DOUBLE -> number. */
export function dbl(v) {
  return typeof v === "string" ? SPECIAL[v] : v;
}

const POINT_KINDS = new Set(["numeric", "enum"]);
const BUCKET_KINDS = new Set(["bucketedNumeric", "bucketedEnum"]);
const VALUE_KINDS = new Set(["numericPoint", "enumPoint", "singlePoint"]);
// Histograms and scatters: FullResults only (no append form), kept as the server sent them.
const CHART_KINDS = new Set(["numericHistogram", "enumHistogram", "cartesian", "bucketedCartesian", "bucketedCartesian3d"]);

/** A point's value: a DOUBLE, a label, or a singlePoint's `Value` union (float64Value | stringValue). */
function valueOf(v) {
  if (v !== null && typeof v === "object") return v.type === "stringValue" ? v.stringValue : dbl(v[v.type]);
  return typeof v === "string" && !(v in SPECIAL) ? v : dbl(v);
}

/** A range's value (rangeNumericAggregation): a double, null for noPointsInRange, or absent. */
function rangeValue(value) {
  if (!value) return undefined;
  if (value.type === "double") return dbl(value.double);
  if (value.type === "aggregation") return dbl(value.aggregation.average ?? value.aggregation.mean ?? NaN);
  return null;
}

/** multivariate buckets: bucket end (ms) -> the bucket's values in request order. */
function multivariateEntries(body) {
  const out = new Map();
  for (const b of body.buckets) out.set(tsMs(b.timestamp), b.values.map(valueOf));
  return out;
}

/** numeric / enum points: [ms, value] in time order; points that share a timestamp stay distinct. */
function points(kind, body) {
  return body.timestamps.map((t, i) => [
    tsMs(t),
    kind === "numeric" ? dbl(body.values[i]) : body.categories[body.values[i]],
  ]);
}

/** Buckets: bucket end (ms) -> bucket. */
function entries(kind, body) {
  const out = new Map();
  body.timestamps.forEach((t, i) => {
    const at = tsMs(t);
    if (kind === "bucketedNumeric") {
      const b = body.buckets[i];
      out.set(at, { min: dbl(b.min), max: dbl(b.max), mean: dbl(b.mean), count: b.count });
    } else {
      const b = body.buckets[i];
      const histogram = {};
      for (const [code, n] of Object.entries(b.histogram)) histogram[body.categories[Number(code)]] = n;
      out.set(at, { histogram, first: body.categories[b.firstPoint.value] });
    }
  });
  return out;
}

function ranges(list) {
  return list
    .map((r) => ({ start: r.start ? tsMs(r.start) : null, end: r.end ? tsMs(r.end) : null, value: rangeValue(r.value) }))
    .sort((a, b) => (a.start ?? -Infinity) - (b.start ?? -Infinity));
}

function mergeRanges(old, fresh, start) {
  const kept = [];
  for (let r of old) {
    if (r.start !== null && r.start >= start) continue; // replaced by the append
    if (r.end === null || r.end > start) r = { ...r, end: start }; // cut where it takes over
    kept.push(r);
  }
  for (const r of fresh) {
    const last = kept[kept.length - 1];
    // a valued range (rangeNumericAggregation) comes whole and replaces, never joins
    if (last && r.value === undefined && last.end !== null && r.start !== null && last.end >= r.start) {
      kept[kept.length - 1] = { start: last.start, end: r.end === null ? null : Math.max(r.end, last.end) };
    } else kept.push(r);
  }
  return kept;
}

/** One result (one group of a grouped result) as currently merged. */
export class ResultView {
  constructor() {
    this.kind = null;
    this.points = []; // [ms, value] in time order (numeric, enum)
    this.entries = new Map(); // bucket end (ms) -> bucket
    this.ranges = [];
    this.value = null; // [ms, value] for numericPoint / enumPoint
    this.chart = null; // a histogram's or scatter's body
  }

  replace(kind, body) {
    this.kind = kind;
    this.points = [];
    this.entries = new Map();
    this.ranges = [];
    this.value = null;
    this.chart = null;
    if (POINT_KINDS.has(kind)) this.points = points(kind, body);
    else if (BUCKET_KINDS.has(kind)) this.entries = entries(kind, body);
    else if (kind === "range") this.ranges = ranges(body);
    else if (kind === "rangesSummary") this.ranges = ranges(body.rangesSummary.map((s) => s.range));
    else if (VALUE_KINDS.has(kind)) this.value = body ? [tsMs(body.timestamp), valueOf(body.value)] : null;
    else if (kind === "multivariate") this.entries = multivariateEntries(body);
    else if (CHART_KINDS.has(kind)) this.chart = body;
  }

  merge(kind, body, start, end) {
    if (this.kind === null) this.kind = kind;
    if (POINT_KINDS.has(kind)) {
      const kept = this.points.filter(([t]) => t < start || t > end); // the append's span is replaced
      this.points = kept.concat(points(kind, body)).sort((a, b) => a[0] - b[0]); // (a stable sort)
    } else if (BUCKET_KINDS.has(kind)) {
      for (const [t, v] of entries(kind, body)) this.entries.set(t, v); // same end: the newer wins
    } else if (kind === "range") {
      this.ranges = mergeRanges(this.ranges, ranges(body), start);
    } else if (kind === "multivariate") {
      for (const [t, v] of multivariateEntries(body)) this.entries.set(t, v); // same end: the newer wins
    } else if (VALUE_KINDS.has(kind) && body) {
      this.value = [tsMs(body.timestamp), valueOf(body.value)];
    }
  }

  trim(cutoff) {
    const bucketed = BUCKET_KINDS.has(this.kind) || this.kind === "multivariate";
    for (const t of [...this.entries.keys()]) if (bucketed ? t <= cutoff : t < cutoff) this.entries.delete(t);
    this.points = this.points.filter(([t]) => t >= cutoff);
    this.ranges = this.ranges.filter((r) => r.end === null || r.end > cutoff);
    if (this.value && this.value[0] < cutoff) this.value = null;
  }

  /** [[ms, value-or-bucket], ...] in time order. */
  sorted() {
    if (POINT_KINDS.has(this.kind)) return [...this.points];
    return [...this.entries.entries()].sort((a, b) => a[0] - b[0]);
  }
}

function groupKey(grouping) {
  const tags = (grouping && grouping.tagsWithValues) || {};
  return Object.keys(tags)
    .sort()
    .map((k) => `${k}=${tags[k]}`)
    .join(",");
}

/** A ComputeNodeResponse as [group key, kind, body] per group ("" when not grouped). */
export function resultParts(result) {
  if (result.type !== "grouped") return [["", result.type, result[result.type]]];
  return result.grouped.responses.map((g) => [groupKey(g.grouping), g.response.type, g.response[g.response.type]]);
}

/** A subscription's whole result: one ResultView per group ("" when not grouped). */
export class MergedView {
  constructor(windowMs) {
    this.windowMs = windowMs;
    this.groups = new Map();
    this.end = 0;
  }

  apply(update) {
    if (update.type === "full") {
      this.groups = new Map();
      for (const [key, kind, body] of resultParts(update.full.result)) {
        const view = new ResultView();
        view.replace(kind, body);
        this.groups.set(key, view);
      }
    } else if (update.type === "append") {
      const start = tsMs(update.append.start);
      const end = tsMs(update.append.end);
      this.end = Math.max(this.end, end);
      for (const [key, kind, body] of resultParts(update.append.result)) {
        if (!this.groups.has(key)) this.groups.set(key, new ResultView());
        this.groups.get(key).merge(kind, body, start, end);
      }
      for (const view of this.groups.values()) view.trim(this.end - this.windowMs);
    }
  }
}

function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16)); // plain-http pages have no randomUUID
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const newId = uuid;

function withToken(request, token) {
  if (!token || !request.sparkwire || request.sparkwire.replay) return request; // a replay starts over
  return { ...request, sparkwire: { ...request.sparkwire, resumeToken: token } };
}

/**
 * One logical connection over successive WebSockets. Each subscription follows one socket; a newer
 * socket takes a subscription over with its first FullResult (or error), and older sockets close
 * once nothing follows them. So a restart is a reconnect, and a shutdownNotice a hand-over.
 * A subscription that asked for resume tokens (docs/extensions.md) presents its newest one when it
 * subscribes again, and a newer socket then takes it over with the AppendResult that resumes it.
 */
export class LiveConnection {
  constructor(url, { onState, onUpdate, onError, onReplayEnded, protocols } = {}) {
    this.url = url;
    // The subprotocols each new socket offers, asked anew each time (a bearer token may change).
    this.protocols = protocols || (() => []);
    this.onState = onState || (() => {});
    this.onReplayEnded = onReplayEnded || (() => {});
    this.onUpdate = onUpdate || (() => {});
    this.onError = onError || (() => {});
    this.subscriptions = new Map(); // id -> { request, link }
    this.links = new Set();
    this.current = null;
    this.generation = 0;
    this.backoffMs = 250;
    this.closed = false;
    this.replacing = false;
    this.connections = 0;
    this.resumeOutcomes = {}; // "resumed", or the reason a FullResult came instead -> count
    this.dropped = new Set(); // ids this page unsubscribed lately (an answer about them is no news)
  }

  setState(state, detail = "") {
    this.state = state;
    this.onState(state, detail);
  }

  start() {
    this.open(false);
  }

  close() {
    this.closed = true;
    for (const link of this.links) link.ws.close(1000);
  }

  /** Every socket closed and a new one opened, which subscribes everything again: after a new
   *  token, nothing may go on arriving over a socket the old one opened. */
  restart() {
    if (this.closed) return;
    for (const link of this.links) {
      link.ws.onclose = link.ws.onmessage = null; // no retry, and nothing more read, for these
      link.ws.close(1000);
    }
    this.links.clear();
    this.current = null;
    this.backoffMs = 250;
    this.open(false);
  }

  open(handover) {
    const ws = new WebSocket(this.url, this.protocols());
    const link = { ws, generation: ++this.generation, handover, ready: false };
    this.links.add(link);
    this.setState(handover ? "handing over" : this.connections ? "reconnecting" : "connecting");
    link.ws.onopen = () => {
      link.ready = true;
      this.connections += 1;
      this.backoffMs = 250;
      this.replacing = false;
      this.current = link;
      this.setState("open");
      const subs = {};
      for (const [id, s] of this.subscriptions) {
        if (s.stopped) continue;
        subs[id] = withToken(s.request, s.token);
        s.refused = false; // asked again: the server answers anew
      }
      if (Object.keys(subs).length) this.send(link, { type: "subscribe", subscribe: subs });
      this.retireUnused();
    };
    link.ws.onmessage = (event) => this.dispatch(link, JSON.parse(event.data));
    link.ws.onclose = () => {
      this.links.delete(link);
      if (this.closed) return;
      if (link === this.current || !link.ready) this.retry();
    };
  }

  retry() {
    if (this.replacing) return;
    this.replacing = true;
    const delay = this.backoffMs * (0.8 + 0.4 * Math.random());
    this.backoffMs = Math.min(this.backoffMs * 2, 10000);
    this.setState("reconnecting", `in ${(delay / 1000).toFixed(1)} s`);
    setTimeout(() => {
      this.replacing = false;
      if (!this.closed) this.open(false);
    }, delay);
  }

  send(link, message) {
    if (link && link.ws.readyState === WebSocket.OPEN) link.ws.send(JSON.stringify(message));
  }

  subscribe(id, request) {
    this.subscriptions.set(id, { request, link: this.current, token: null });
    this.send(this.current, { type: "subscribe", subscribe: { [id]: request } });
  }

  /** Every subscription ended; the server is told of those it holds, not of those it refused (it
   *  never took them, and would answer that no subscription has their ids). */
  unsubscribeAll() {
    const ids = [...this.subscriptions].filter(([, s]) => !s.refused).map(([id]) => id);
    this.subscriptions.clear();
    for (const id of ids) this.dropped.add(id);
    while (this.dropped.size > 2000) this.dropped.delete(this.dropped.values().next().value);
    if (ids.length) for (const link of this.links) this.send(link, { type: "unsubscribe", unsubscribe: ids });
  }

  /** A clientMessageError that only says ids this page dropped were already gone (a subscription the
   *  server ended with an error, or refused while the unsubscribe was on its way): nothing to show. */
  staleUnsubscribe(error) {
    const message = error.message ?? "";
    if (!message.startsWith("unsubscribe: no live subscription has the id(s)")) return false;
    const ids = message.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi) ?? [];
    return ids.length > 0 && !/ and \d+ more$/.test(message) && ids.every((id) => this.dropped.has(id));
  }

  dispatch(link, frame) {
    if (frame.type === "subscriptionUpdate") {
      const body = frame.subscriptionUpdate;
      const sub = this.subscriptions.get(body.subscriptionId);
      if (!sub) return;
      const resumed = body.resume && body.resume.outcome === "resumed";
      if (sub.link !== link) {
        if (link !== this.current || (body.update.type === "append" && !resumed)) return;
        sub.link = link; // the newer socket has delivered: switch
        this.retireUnused();
      }
      if (body.resumeToken) sub.token = body.resumeToken;
      if (body.resume) {
        const outcome = resumed ? "resumed" : body.resume.reason;
        this.resumeOutcomes[outcome] = (this.resumeOutcomes[outcome] || 0) + 1;
      }
      if (body.update.type === "error") this.onError(body.subscriptionId, body.update.error.serializableError);
      else this.onUpdate(body.subscriptionId, body.update);
    } else if (frame.type === "replayEnded") {
      const body = frame.replayEnded;
      const sub = this.subscriptions.get(body.subscriptionId);
      if (!sub) return;
      if (body.then === "live") {
        const { replay, ...rest } = sub.request.sparkwire; // from now on, and after a reconnect: live
        sub.request = { ...sub.request, sparkwire: rest };
      } else sub.stopped = true; // nothing more comes: not subscribed again after a reconnect
      this.onReplayEnded(body.subscriptionId, body.then);
    } else if (frame.type === "subscriptionCreation") {
      const body = frame.subscriptionCreation;
      if (body.creation.type === "error" && this.subscriptions.has(body.subscriptionId)) {
        this.subscriptions.get(body.subscriptionId).refused = true; // never taken: not unsubscribed
        this.onError(body.subscriptionId, body.creation.error.serializableError);
      }
    } else if (frame.type === "health") {
      const health = frame.health;
      if (health.type === "ping") {
        const pong = { pingOriginallySentAt: health.ping.sentAt, sentAt: new Date().toISOString() };
        this.send(link, { type: "pong", pong });
      } else if (health.type === "shutdownNotice") {
        if (link === this.current && !link.handover) this.open(true);
      } else if (health.type === "clientMessageError") {
        const error = health.clientMessageError.error;
        if (!this.staleUnsubscribe(error)) this.onError(null, error);
      }
    }
  }

  retireUnused() {
    const used = new Set([...this.subscriptions.values()].map((s) => s.link));
    for (const link of this.links) {
      if (link !== this.current && link.ready && !used.has(link)) link.ws.close(1000);
    }
  }
}

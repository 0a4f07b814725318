// The dashboard page: a form (data source, channels, window, computation), one subscription per
// channel (plus one per channel for threshold ranges), a live chart, and a readout of connection
// state and latency. The chart's data is published on window.sparkwire for scripts and tests.

import { Palette, draw, drawHistogram, drawParallel, drawScatter, drawScatter3d, drawSpectrum, formatValue } from "./chart.js";
import { LiveConnection, MergedView, ResultView, dbl, newId, resultParts, tsMs } from "./protocol.js";

const DEFAULTS = {
  rid: "ri.sparkwire.main.dataset.demo",
  asset: "", // "<asset rid>/<data scope>": read the channels of an asset's data scope instead of `rid`
  channels: "engine.temp",
  tags: "",
  groupBy: "vehicle",
  window: "60",
  mode: "raw",
  buckets: "200",
  op: "GREATER_THAN",
  threshold: "88",
  formula: "", // a key of FORMULAS: the numeric channels charted through it
  expression: "sin(x) * 2 + 1", // formula "expression": Nominal's arithmetic node over the channel x
  // Replay (docs/extensions.md): re-watch [replayFrom, replayTo) of the log; empty: live.
  replayFrom: "",
  replayTo: "",
  speed: "10", // times real time; "max": as fast as the server goes
  then: "live", // at replayTo: follow "live", or "stop"
  cutoff: "1", // mode spectrum: the low-pass filter's cutoff (Hz)
  // mode spectrum: "poll" the ComputeService, or "stream": subscribe under `streamPolled`
  // (docs/extensions.md), each micro-batch's spectrum and filtered window pushed over the WebSocket
  spectrumBy: "poll",
};
const RAW_LIMIT = 10000; // raw points up to this many in the window, buckets beyond
// the modes that put a chart beside the time chart (one subscription of that chart)
const SIDE_MODES = new Set(["histogram", "scatter", "scatter3d", "multivariate"]);
// the mode whose side chart and second series are polled (POST /compute/v2/compute), not subscribed
const POLLED_MODE = "spectrum";
const $ = (id) => document.getElementById(id);
const STALE_MS = 5000; // no append for this long: the latency readout says so instead of an old value
const OP_TEXT = { GREATER_THAN: ">", GREATER_THAN_OR_EQUAL_TO: "≥", LESS_THAN: "<", LESS_THAN_OR_EQUAL_TO: "≤" };

const published = {
  state: "connecting",
  stateDetail: "",
  latencyMs: null,
  latencyMedianMs: null,
  lastAppendAt: null, // when the newest append arrived (ms, this clock), for the readout's staleness
  latencyText: "latency —", // the header's readout as shown
  liveText: "live", // the header's live/replay badge as shown ("reconnecting" while away)
  frames: 0,
  replay: null, // { from, to, ended: null | "stop" | "live" } while the form asks for a replay
  resumes: {}, // how subscriptions came back after a reconnect: "resumed", or why not
  series: {},
  ranges: {},
  // the chart beside the time chart (histogram, scatter, 3D scatter, multivariate): { kind, groups: { group: rows } }
  side: null,
  values: {}, // mode value: label -> [ms, value] of the channel's last point (a singlePoint), or null
  view3d: { azimuth: -0.6, elevation: 0.45 }, // the 3D scatter's turn and tilt (radians); dragged to change
  errors: [],
  notices: [], // what the page says instead of a silent empty chart (a mistyped channel, no points)
  auth: null, // null, or why the server refused the page's reads: "token needed" | "token refused"
  mode: "live", // "live", "replay", or "replay ended"
  ready: null, // the server's /readyz: null until asked, then { ready, reason }
  colors: {}, // label -> the colour the chart draws it in (by the label: the same in every configuration)
  valueColors: {}, // string channel -> value -> the colour of its state blocks and of its key's swatch
  formErrors: [], // why the form's configuration was refused (not applied)
  drawn: null, // what the time chart drew: its panels (one y-axis each), strips and threshold line
  sideDrawn: null, // where the 3D scatter put its labels and dots, or the multivariate panel its rows
  // mode spectrum, polled: { channel, at (the period's end, ms), groups: { group: [[frequency, min, max]] },
  // peaks: { group: { frequency, from, to, amplitude } } } of the first channel (its formula applied)
  spectrum: null,
  // the polls: { periodMs (until the next), tookMs (the last, both requests), spectrum: {...},
  // filter: {...} }, each of the two with ok, at (its period's end), tookMs, error
  polled: null,
  pollErrors: {}, // "spectrum" | "filter" -> why its last poll failed (shown under the chart)
  config: null,
};
window.sparkwire = published;

let connection = null;
let subscriptions = new Map(); // id -> { channel, role: "series"|"ranges", view, index }
let channelTypes = new Map(); // "rid|channel" -> "double" | "string"
let seriesListed = false; // whether GET /series answered (the notices need it)
let connectionState = { state: "connecting", detail: "" };
let scopes = new Map(); // "<asset rid>/<data scope>" -> { dataSourceRid, seriesTags }
let token = ""; // the bearer token (see takeToken); "" when none is given
const latencies = [];
let dirty = true;
let seriesTags = new Map(); // "rid|channel" -> the tag keys its series carry
const seriesPalette = new Palette(); // series label -> colour, kept for the page's life
const sidePalette = new Palette(); // a side chart's group -> colour
const valuePalettes = new Map(); // string channel -> Palette of its values

// -- configuration ---------------------------------------------------------------------------------
function readConfig() {
  const params = new URLSearchParams(location.search);
  const config = {};
  for (const [k, v] of Object.entries(DEFAULTS)) config[k] = params.get(k) ?? v;
  return config;
}

function fillForm(config) {
  // a window the address gives that the list lacks is shown as given (and judged by validate)
  const windowBox = $("window");
  if (![...windowBox.options].some((o) => o.value === config.window)) {
    windowBox.append(new Option(`${config.window} s`, config.window));
  }
  for (const key of Object.keys(DEFAULTS)) $(key).value = config[key];
  showModeFields();
  fitRid();
}

/** Only the fields of the chosen computation: buckets for buckets, the threshold for ranges. */
function showModeFields() {
  const mode = $("mode").value;
  $("buckets-field").hidden = mode !== "buckets" && mode !== "histogram";
  const formula = $("formula").value;
  $("threshold-field").hidden = mode !== "ranges" && mode !== "rangeValues" && formula !== "ifElse";
  $("expression-field").hidden = formula !== "expression";
  $("cutoff-field").hidden = mode !== POLLED_MODE;
  $("spectrumBy-field").hidden = mode !== POLLED_MODE;
}

/** The data source box as wide as its rid (measured in its own font), so the whole rid shows. */
function fitRid() {
  const box = $("rid");
  const context = document.createElement("canvas").getContext("2d");
  context.font = getComputedStyle(box).font;
  const text = Math.ceil(context.measureText(box.value).width);
  box.style.width = "";
  if (text > box.clientWidth - 8) box.style.width = `${text + 24}px`;
}

function formConfig() {
  const config = {};
  for (const key of Object.keys(DEFAULTS)) config[key] = $(key).value.trim();
  return config;
}

/** What is wrong with a configuration, field by field: [[field id, message]]; empty when it may run. */
function validate(config) {
  const problems = [];
  const windowS = Number(config.window);
  if (config.window === "" || !Number.isFinite(windowS) || windowS <= 0) {
    problems.push(["window", `Window must be more than 0 s (got "${config.window}"): a window of no time never holds a point.`]);
  }
  const thresholded = config.mode === "ranges" || config.mode === "rangeValues" || config.formula === "ifElse";
  if (thresholded && (config.threshold === "" || !Number.isFinite(Number(config.threshold)))) {
    problems.push(["threshold", `Threshold needs a number (got "${config.threshold}"): without one every point would count as past it.`]);
  }
  if ((config.mode === "buckets" || config.mode === "histogram") && !(Number.isInteger(Number(config.buckets)) && Number(config.buckets) >= 1)) {
    problems.push(["buckets", `Buckets must be a whole number, 1 or more (got "${config.buckets}").`]);
  }
  const cutoff = Number(config.cutoff);
  if (config.mode === POLLED_MODE && (config.cutoff === "" || !Number.isFinite(cutoff) || cutoff <= 0)) {
    problems.push(["cutoff", `The low-pass cutoff must be more than 0 Hz (got "${config.cutoff}").`]);
  }
  if (config.mode === POLLED_MODE && config.spectrumBy !== "poll" && config.spectrumBy !== "stream") {
    problems.push(["spectrumBy", `The spectrum is polled ("poll") or streamed ("stream") (got "${config.spectrumBy}").`]);
  }
  return problems;
}

/** The refusals beside the form, each field marked: nothing runs until they are put right. */
function renderFormErrors(problems) {
  published.formErrors = problems.map(([, message]) => message);
  for (const id of ["window", "threshold", "buckets", "cutoff", "spectrumBy"]) {
    const problem = problems.find(([field]) => field === id);
    $(id).setCustomValidity(problem ? problem[1] : "");
    $(id).toggleAttribute("aria-invalid", Boolean(problem));
  }
  $("form-errors").innerHTML = published.formErrors.map((e) => `<li>${escape(e)}</li>`).join("");
  $("form-errors").hidden = problems.length === 0;
}

function parseTags(text) {
  const tags = {};
  for (const part of text.split(",")) {
    const [k, ...rest] = part.split("=");
    if (k.trim() && rest.length) tags[k.trim()] = rest.join("=").trim();
  }
  return tags;
}

// -- login -----------------------------------------------------------------------------------------
const TOKEN_KEY = "sparkwire.token";

/** The bearer token for a server with authentication on: given in the address's fragment
 *  (`#token=...`, as the computations page takes it; kept, then taken out of the address) or typed
 *  into the Token field. It lives in this tab's sessionStorage only, and is sent as
 *  `Authorization: Bearer` to the HTTP routes and as the `bearer, <token>` subprotocol pair to the
 *  WebSocket (a browser cannot set a WebSocket's headers). */
function takeToken() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

function setToken(value) {
  token = value;
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

const authorized = () => (token ? { headers: { Authorization: `Bearer ${token}` } } : {});

// The WebSocket takes the token as a subprotocol, which only an HTTP token's characters may form
// (the browser throws on any other): a token with others is not offered, and the server says 401.
const SUBPROTOCOL_SAFE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const bearerProtocols = () => (token && SUBPROTOCOL_SAFE.test(token) ? ["bearer", token] : []);

/** What a refused read (401) says about the token. */
function noteRefusal(answer) {
  if (answer.status === 401) published.auth = token ? "token refused" : "token needed";
  else if (answer.ok) published.auth = null;
}

// -- compute nodes (Conjure JSON) ------------------------------------------------------------------
const literal = (v) => ({ type: "literal", literal: v });

function channelVariable(rid, channel, tags, groupBy) {
  return {
    type: "channel",
    channel: {
      type: "dataSource",
      dataSource: {
        dataSourceRid: literal(rid),
        channel: literal(channel),
        tags: Object.fromEntries(Object.entries(tags).map(([k, v]) => [k, literal(v)])),
        tagsToGroupBy: [],
        groupByTags: groupBy ? [literal(groupBy)] : [],
      },
    },
  };
}

// The formula choices: NumericSeries nodes around the channel `x` (docs/protocol.md lists them all).
const unary = (type) => (x) => ({ type, [type]: { x } });
const seconds = (n) => ({ type: "seconds", seconds: { seconds: literal(n) } }); // a compute Duration
const constant = (v) => ({ type: "constant", constant: { type: "double", double: literal(v) } });
// the threshold field's ThresholdOperator as the BooleanSeries comparison ifElse takes
const COMPARISONS = {
  GREATER_THAN: "greaterThan",
  GREATER_THAN_OR_EQUAL_TO: "greaterThanOrEqualTo",
  LESS_THAN: "lessThan",
  LESS_THAN_OR_EQUAL_TO: "lessThanOrEqualTo",
};
const FORMULAS = {
  "": (x) => x,
  abs: unary("abs"),
  sqrt: unary("sqrt"),
  ln: unary("ln"),
  log10: unary("log10"),
  sin: unary("sin"),
  cos: unary("cos"),
  tan: unary("tan"),
  derivative: (x) => ({ type: "derivative", derivative: { input: x } }),
  bit0: (x) => ({ type: "bitTest", bitTest: { input: x, index: literal(0) } }),
  degFtoCel: (x) => ({
    type: "unitConversion",
    unitConversion: { input: { type: "unitOverride", unitOverride: { input: x, unit: "[degF]" } }, outputUnit: "Cel" },
  }),
  // each group (Group by) against all groups at each timestamp; one group alone has no z-score
  zScore: (x) => ({ type: "zScore", zScore: { input: x, groupByTags: [] } }),
  squared: (x) => ({
    type: "power",
    power: { base: x, exponent: { type: "constant", constant: { type: "double", double: literal(2) } } },
  }),
  rollingMean10s: (x) => ({
    type: "numericAggregation",
    numericAggregation: {
      input: { type: "rollingTime", rollingTime: { input: { type: "numeric", numeric: x }, window: seconds(10) } },
      operator: { type: "average", average: {} },
    },
  }),
  resample1s: (x) => ({ type: "resampleV2", resampleV2: { input: x, interval: seconds(1) } }),
  timeDifference: (x) => ({
    type: "timeDifference",
    timeDifference: { input: { type: "numeric", numeric: x }, timeUnit: "SECONDS" },
  }),
  // the typed expression over x (Nominal's arithmetic node); one the server refuses shows its error
  expression: (x, config) => ({ type: "arithmetic", arithmetic: { inputs: { x }, expression: config.expression } }),
  // x where x <op> threshold holds, else 0 (ifElse; the comparison and threshold of the threshold field)
  ifElse: (x, config) => {
    const comparison = COMPARISONS[config.op];
    const condition = { type: comparison, [comparison]: { left: x, right: constant(Number(config.threshold)) } };
    return { type: "ifElse", ifElse: { condition, trueValue: x, falseValue: constant(0) } };
  },
};

// A channel of an asset's data scope (/assets/v1: the server resolves it, and checks the token
// against the data source behind it).
function assetChannelVariable(asset, channel, tags, groupBy) {
  const slash = asset.indexOf("/");
  return {
    type: "channel",
    channel: {
      type: "asset",
      asset: {
        assetRid: literal(asset.slice(0, slash)),
        dataScopeName: literal(asset.slice(slash + 1)),
        channel: literal(channel),
        additionalTags: Object.fromEntries(Object.entries(tags).map(([k, v]) => [k, literal(v)])),
        tagsToGroupBy: [],
        groupByTags: groupBy ? [literal(groupBy)] : [],
      },
    },
  };
}

/** The data source a channel is read from: the asset scope's when an asset is picked. */
function sourceOf(config) {
  return config.asset ? (scopes.get(config.asset)?.dataSourceRid ?? "") : config.rid;
}

/** The channel's variable as the form picks it: through the asset's scope when an asset is chosen. */
function channelVariableOf(config, channel) {
  const tags = parseTags(config.tags);
  return config.asset
    ? assetChannelVariable(config.asset, channel, tags, config.groupBy)
    : channelVariable(config.rid, channel, tags, config.groupBy);
}

/** The form's window as a Conjure Duration. */
function windowWidthOf(config) {
  const windowMs = Number(config.window) * 1000;
  return { seconds: Math.floor(windowMs / 1000), nanos: Math.round((windowMs % 1000) * 1e6) };
}

function request(config, channel, role) {
  const kind = channelTypes.get(`${sourceOf(config)}|${channel}`) === "string" ? "enum" : "numeric";
  const raw = { type: "raw", raw: { name: "x" } };
  const formula = FORMULAS[config.formula] ?? FORMULAS[""];
  const input = { type: kind, [kind]: kind === "numeric" ? formula(raw, config) : raw };
  let node;
  if (role === "ranges") {
    const threshold = { input: input[kind], threshold: literal(Number(config.threshold)), operator: config.op };
    let ranges = { type: "threshold", threshold };
    if (config.mode === "rangeValues") {
      // each range carries the channel's mean over it (rangeNumericAggregation)
      const body = { ranges, input: input[kind], operation: { type: "average", average: {} } };
      ranges = { type: "rangeNumericAggregation", rangeNumericAggregation: body };
    }
    node = { type: "ranges", ranges: { input: ranges } };
  } else if (role === "value") {
    node = { type: "value", value: { type: "lastValuePoint", lastValuePoint: input } };
  } else {
    const buckets = config.mode === "buckets" ? Number(config.buckets) : RAW_LIMIT;
    node = { type: "series", series: { input, numericAggregations: {}, buckets } };
  }
  return {
    computeRequest: {
      node,
      windowWidth: windowWidthOf(config),
      context: {
        variables: { x: channelVariableOf(config, channel) },
        datasetReferences: {},
      },
    },
    subscriptionOptions: { minDelay: 50, allowAppends: true },
    sparkwire: { resume: true, ...replayRequest(config) }, // docs/extensions.md
  };
}

/** The chart beside the time chart: a histogram of every channel, or the second channel against
 *  the first (docs/protocol.md, the chart types). Channels are the variables c0, c1, ... */
function sideRequest(config, channels, mode) {
  const variables = {};
  const inputs = {};
  channels.forEach((channel, i) => {
    variables[`c${i}`] = channelVariableOf(config, channel);
    inputs[channel] = { type: "raw", raw: { name: `c${i}` } };
  });
  let node;
  if (mode === "histogram") {
    const strings = channels.every((c) => channelTypes.get(`${sourceOf(config)}|${c}`) === "string");
    const body = strings
      ? { type: "enum", enum: { inputs } }
      : {
          type: "numeric",
          numeric: { inputs, bucketStrategy: { type: "bucketCount", bucketCount: literal(Number(config.buckets) || 20) } },
        };
    node = { type: "histogram", histogram: body };
  } else if (mode === "scatter3d") {
    const [x, y, z] = channels.map((_, i) => ({ type: "raw", raw: { name: `c${i}` } }));
    node = { type: "cartesian3d", cartesian3d: { input: { type: "scatter3d", scatter3d: { x, y, z } }, maxPoints: 500 } };
  } else if (mode === "multivariate") {
    const multivariateInputs = channels.map((channel, i) => {
      const series = { type: "raw", raw: { name: `c${i}` } };
      return channelTypes.get(`${sourceOf(config)}|${channel}`) === "string"
        ? { type: "enum", enum: { series, aggregations: ["MODE"] } }
        : { type: "numeric", numeric: { series, aggregations: ["MEAN"] } };
    });
    node = { type: "multivariate", multivariate: { inputs: multivariateInputs, bucketCount: 120 } };
  } else {
    const [x, y] = channels.map((_, i) => ({ type: "raw", raw: { name: `c${i}` } }));
    node = { type: "cartesian", cartesian: { input: { type: "scatter", scatter: { x, y } } } };
  }
  return {
    computeRequest: {
      node,
      windowWidth: windowWidthOf(config),
      context: { variables, datasetReferences: {} },
    },
    subscriptionOptions: { minDelay: 200, allowAppends: mode === "multivariate" },
    sparkwire: { resume: true, ...replayRequest(config) },
  };
}

const isoTs = (ms) => ({ seconds: Math.floor(ms / 1000), nanos: Math.round((ms % 1000) * 1e6) });

/** `{replay: ...}` when the form asks for one (resume tokens then only once it follows live). */
function replayRequest(config) {
  const replay = replayPeriod(config);
  if (!replay) return {};
  const body = { start: isoTs(replay.from), end: isoTs(replay.to), then: config.then === "stop" ? "stop" : "live" };
  if (config.speed !== "max") body.speed = Number(config.speed);
  return { replay: body };
}

function replayPeriod(config) {
  if (!config.replayFrom) return null;
  const from = Date.parse(config.replayFrom);
  const to = config.replayTo ? Date.parse(config.replayTo) : Date.now();
  if (Number.isNaN(from) || Number.isNaN(to)) return null;
  return { from, to };
}

// -- polled computations: a spectrum and a low-pass filter (mode spectrum) -------------------------
// Nominal computes a spectrum (FREQUENCY_DOMAIN) and a signal filter (SIGNAL_FILTER) only when
// polled: a subscription to either is refused with PollingOnlyComputation. So mode spectrum polls
// its ComputeService, POST /compute/v2/compute (docs/protocol.md, "Frequency domain, computed when
// polled" and "Curve fits and signal filters, computed when polled"), over the dashboard's window,
// for the first channel (through the chosen formula): its single-sided amplitude spectrum beside the
// chart, and its low-pass filtered version drawn with the live channel in the time chart.
const SPECTRUM_BUCKETS = 512; // frequency buckets (a bin each until the window holds 1,022 points)
const FILTER_ORDER = 4; // the Butterworth filter's order (applied forwards and backwards: doubled)

/** How often the polled charts are refreshed. A poll recomputes the whole window (an FFT and a
 *  two-way filter of every point in it; nothing of it is carried to the next poll), so the period
 *  grows with the window: 1/60 of it (a poll then meets under 2% new points), never under 1 s (a
 *  person reads a spectrum no faster) nor over 30 s (a long window still shows news within half a
 *  minute). And at least 10 times what the last poll took, so that one page keeps the server busy
 *  at most a tenth of the time: measured on 2 cores, a 1 kHz channel's poll (both requests) took
 *  ~0.4 s over a 60 s window and ~1.4 s over 10 min, so those refresh every ~4 s and ~14 s. The
 *  next poll starts only when the last one has answered: a slow server is never asked twice at once. */
function pollPeriodMs(config, tookMs = 0) {
  const byWindow = Math.min(30000, Math.max(1000, (Number(config.window) * 1000) / 60));
  return Math.max(byWindow, 10 * tookMs);
}

let pollGeneration = 0; // apply() starts a new one: an older poll's answer is dropped
let pollTimer = null;

function stopPolling() {
  pollGeneration += 1;
  clearTimeout(pollTimer);
  pollTimer = null;
}

function startPolling(config, channel) {
  stopPolling();
  const generation = pollGeneration;
  published.polled = { periodMs: pollPeriodMs(config), tookMs: null, spectrum: null, filter: null };
  const tick = async () => {
    const began = performance.now();
    await pollOnce(config, channel, generation);
    if (generation !== pollGeneration) return;
    published.polled.tookMs = performance.now() - began;
    published.polled.periodMs = pollPeriodMs(config, published.polled.tookMs);
    pollTimer = setTimeout(tick, published.polled.periodMs);
  };
  tick();
}

/** The channel's NumericSeries (variable x, through the formula) inside a polled node. */
function polledNodes(config) {
  const input = (FORMULAS[config.formula] ?? FORMULAS[""])({ type: "raw", raw: { name: "x" } }, config);
  const fft = { input, window: "HANN", summarizationStrategy: { type: "buckets", buckets: { buckets: SPECTRUM_BUCKETS } } };
  const lowPass = { cutoffFrequency: literal(Number(config.cutoff)) };
  const filtered = {
    type: "signalFilter",
    signalFilter: { input, signalFilterConfiguration: { type: "lowPass", lowPass }, order: literal(FILTER_ORDER) },
  };
  return {
    spectrum: { type: "frequencyV2", frequencyV2: { type: "fft", fft } },
    filter: { type: "series", series: { input: { type: "numeric", numeric: filtered }, numericAggregations: {}, buckets: RAW_LIMIT } },
  };
}

/** One ComputeService call: the ComputeNodeResponse, or an Error saying what the server said. */
async function compute(node, variable, startMs, endMs) {
  const body = { node, start: isoTs(startMs), end: isoTs(endMs), context: { variables: { x: variable }, datasetReferences: {} } };
  const headers = { "Content-Type": "application/json", ...(authorized().headers ?? {}) };
  let answer;
  try {
    answer = await fetch("compute/v2/compute", { method: "POST", headers, body: JSON.stringify(body) });
  } catch (err) {
    throw new Error(`the server did not answer (${err.message})`);
  }
  noteRefusal(answer);
  if (answer.ok) return answer.json();
  const text = await answer.text();
  let error = null;
  try {
    error = JSON.parse(text);
  } catch {
    // not a Conjure error (a proxy's page): its status and first words are what there is to say
  }
  if (!error || !error.errorName) throw new Error(`${answer.status}: ${text.slice(0, 200)}`);
  const params = Object.entries(error.parameters ?? {}).filter(([k]) => k !== "message");
  const said = error.message ?? error.parameters?.message ?? "";
  const extra = params.length ? ` (${params.map(([k, v]) => `${k}: ${v}`).join(", ")})` : "";
  throw new Error(`${error.errorName}${said ? `: ${said}` : ""}${extra}`);
}

/** The frequency a bucket is drawn at: its bin's own when it holds one (or the higher of two),
 *  else its centre. */
function bucketFrequency(b) {
  const first = b.firstPoint;
  const last = b.lastPoint;
  if (b.count === 1 || !last) return dbl(first.frequency);
  if (b.count === 2) return dbl(last.amplitude) > dbl(first.amplitude) ? dbl(last.frequency) : dbl(first.frequency);
  return dbl(b.frequencyCenter);
}

/** A bucketed spectrum (a poll's answer or a streamed FullResult's result) as published: each
 *  group's [[frequency, min, max]] and its peak. */
function spectrumOf(channel, atMs, response) {
  const groups = {};
  const peaks = {};
  for (const [group, kind, body] of resultParts(response)) {
    if (kind !== "bucketedFrequencyDomain") throw new Error(`unexpected answer ${kind}`);
    groups[group] = body.buckets.map((b) => [bucketFrequency(b), dbl(b.minAmplitude), dbl(b.maxAmplitude)]);
    // the peak above the first bucket (which holds 0 Hz: the mean, not an oscillation)
    let best = null;
    body.buckets.forEach((b, i) => {
      if ((i > 0 || body.buckets.length === 1) && (!best || dbl(b.maxAmplitude) > dbl(best.maxAmplitude))) best = b;
    });
    if (best) {
      const amplitude = dbl(best.maxAmplitude);
      peaks[group] = { frequency: bucketFrequency(best), from: dbl(best.frequencyStart), to: dbl(best.frequencyEnd), amplitude };
    }
  }
  return { channel, at: atMs, groups, peaks };
}

const filteredName = (config, channel, group) => `${label(channel, group)} · low-pass ${config.cutoff} Hz`;

/** The filtered channel's series entry (drawn beside the live channel, marked `polled`). */
function filteredEntry(channel, group, view) {
  const rows = view.sorted();
  const entry = { kind: view.kind, channel, group, polled: true, points: [], buckets: [] };
  if (view.kind === "bucketedNumeric") entry.buckets = rows.map(([t, b]) => [t, b.min, b.max, b.mean, b.count]);
  else entry.points = rows;
  return entry;
}

/** Mode spectrum with spectrumBy "stream": the spectrum's or the filter's node as a subscription
 *  under `streamPolled` (docs/extensions.md): the server re-evaluates it over the window at each
 *  micro-batch and pushes it, instead of this page polling. */
function streamedRequest(config, channel, role) {
  const variable = channelVariableOf(config, channel);
  return {
    computeRequest: {
      node: polledNodes(config)[role],
      windowWidth: windowWidthOf(config),
      context: { variables: { x: variable }, datasetReferences: {} },
    },
    // a spectrum is a whole FullResult at each batch: one a second is as fast as a person reads it
    subscriptionOptions: { minDelay: role === "spectrum" ? 1000 : 50, allowAppends: true },
    sparkwire: { streamPolled: true, ...replayRequest(config) },
  };
}

/** How the polled charts are refreshed, as the legend and the side chart's title say it. */
function refreshedText() {
  if (!published.polled) return "streamed at each micro-batch";
  const every = (published.polled.periodMs / 1000).toFixed(published.polled.periodMs < 10000 ? 1 : 0);
  return `polled every ${every} s`;
}

async function pollOnce(config, channel, generation) {
  const endMs = replaying() ? replayClock() : Date.now();
  const startMs = endMs - Number(config.window) * 1000;
  const variable = channelVariableOf(config, channel);
  const nodes = polledNodes(config);
  const outcome = async (role, use) => {
    const began = performance.now();
    try {
      const response = await compute(nodes[role], variable, startMs, endMs);
      if (generation !== pollGeneration) return;
      use(response);
      published.polled[role] = { ok: true, at: endMs, tookMs: performance.now() - began, error: null };
      delete published.pollErrors[role];
    } catch (err) {
      if (generation !== pollGeneration) return;
      // said under the chart (and kept until a poll succeeds); what was drawn before stays drawn
      const what = role === "spectrum" ? "spectrum" : `low-pass ${config.cutoff} Hz`;
      published.polled[role] = { ok: false, at: endMs, tookMs: performance.now() - began, error: err.message };
      published.pollErrors[role] = `${channel} (${what}, polled): ${err.message}`;
    }
  };
  await Promise.all([
    outcome("spectrum", (response) => {
      published.spectrum = spectrumOf(channel, endMs, response);
    }),
    outcome("filter", (response) => {
      for (const name of Object.keys(published.series)) if (published.series[name].polled) delete published.series[name];
      for (const [group, kind, body] of resultParts(response)) {
        const view = new ResultView();
        view.replace(kind, body);
        published.series[filteredName(config, channel, group)] = filteredEntry(channel, group, view);
      }
    }),
  ]);
  if (generation !== pollGeneration) return;
  renderErrors();
  dirty = true;
}

// -- subscriptions ---------------------------------------------------------------------------------
function apply(config) {
  const problems = validate(config);
  renderFormErrors(problems);
  if (problems.length) {
    // refused: nothing subscribed; what ran before stops only on a first load with nothing else to show
    if (published.config === null) {
      published.config = { ...config, channels: "", window: DEFAULTS.window };
      renderNotices();
    }
    return false;
  }
  published.config = config;
  published.latencyMs = null;
  published.latencyMedianMs = null;
  published.lastAppendAt = null;
  latencies.length = 0;
  published.series = {};
  published.ranges = {};
  published.side = null;
  published.values = {};
  published.errors = [];
  published.spectrum = null;
  published.polled = null;
  published.pollErrors = {};
  stopPolling();
  const period = replayPeriod(config);
  published.replay = period ? { ...period, ended: null } : null;
  connection.unsubscribeAll();
  subscriptions = new Map();
  const channels = config.channels.split(",").map((c) => c.trim()).filter(Boolean);
  channels.forEach((channel, index) => {
    const roles =
      config.mode === "ranges" || config.mode === "rangeValues"
        ? ["series", "ranges"]
        : config.mode === "value"
          ? ["series", "value"]
          : ["series"];
    for (const role of roles) {
      const id = newId();
      subscriptions.set(id, { channel, role, index, view: new MergedView(Number(config.window) * 1000) });
      connection.subscribe(id, request(config, channel, role));
    }
  });
  const side = SIDE_MODES.has(config.mode) || config.mode === POLLED_MODE;
  $("side").hidden = !side;
  $("charts").classList.toggle("with-side", side);
  $("tiles").hidden = config.mode !== "value";
  if (config.mode === "scatter" && channels.length !== 2) {
    published.errors.push("scatter: name two channels, x first, then y");
  } else if (config.mode === "scatter3d" && channels.length !== 3) {
    published.errors.push("3D scatter: name three channels, x, y, then z");
  } else if (config.mode === POLLED_MODE) {
    const first = channels[0];
    if (!first) published.errors.push("spectrum: name a channel (the first one is polled)");
    else if (channelTypes.get(`${sourceOf(config)}|${first}`) === "string") {
      published.errors.push(`spectrum: ${first} is a string channel; a spectrum and a filter need numbers`);
    } else if (config.spectrumBy === "stream") {
      for (const role of ["spectrum", "filter"]) {
        const id = newId();
        subscriptions.set(id, { channel: first, role, index: 0, view: new MergedView(Number(config.window) * 1000) });
        connection.subscribe(id, streamedRequest(config, first, role));
      }
    } else startPolling(config, first);
  } else if (side && channels.length) {
    const id = newId();
    const sub = { channel: channels.join(", "), role: config.mode, index: 0, view: new MergedView(0) };
    subscriptions.set(id, sub);
    connection.subscribe(id, sideRequest(config, channels, config.mode));
  }
  const url = new URL(location.href);
  for (const [k, v] of Object.entries(config)) url.searchParams.set(k, v);
  history.replaceState(null, "", url);
  renderErrors();
  renderNotices();
  renderMode();
  dirty = true;
  return true;
}

function onUpdate(id, update) {
  const sub = subscriptions.get(id);
  if (!sub) return;
  sub.view.apply(update);
  if (update.type === "full") {
    sub.received = true;
    sub.fullResult = update.full.result; // a streamed spectrum's, read whole by publish()
  }
  if (update.type === "full" || published.notices.length) renderNotices();
  published.frames += 1;
  published.resumes = { ...connection.resumeOutcomes };
  if (update.type === "append" && !replaying()) {
    const latency = Date.now() - tsMs(update.append.end);
    latencies.push(latency);
    if (latencies.length > 50) latencies.shift();
    published.latencyMs = latency;
    published.lastAppendAt = Date.now();
    published.latencyMedianMs = [...latencies].sort((a, b) => a - b)[Math.floor(latencies.length / 2)];
  }
  publish(sub);
  dirty = true;
}

function onError(id, error) {
  const sub = id && subscriptions.get(id);
  // no subscription named: the server's answer to a message of this page (not a broken connection)
  const where = sub ? `${sub.channel} (${sub.role})` : "server";
  published.errors.push(`${where}: ${error.name}: ${error.message ?? ""}`);
  renderErrors();
}

function label(channel, group) {
  return group ? `${channel} {${group}}` : channel;
}

/** Copy a subscription's merged view into window.sparkwire (plain arrays of [ms, ...]). */
function publish(sub) {
  if (SIDE_MODES.has(sub.role)) {
    publishSide(sub);
    return;
  }
  const config = published.config;
  if (sub.role === "spectrum") {
    try {
      published.spectrum = spectrumOf(sub.channel, Date.now(), sub.fullResult);
      delete published.pollErrors.spectrum;
    } catch (err) {
      published.pollErrors.spectrum = `${sub.channel} (spectrum, streamed): ${err.message}`; // said under the chart
    }
    renderErrors();
    return;
  }
  if (sub.role === "filter") {
    for (const [group, view] of sub.view.groups) {
      published.series[filteredName(config, sub.channel, group)] = filteredEntry(sub.channel, group, view);
    }
    return;
  }
  for (const [group, view] of sub.view.groups) {
    const name = label(sub.channel, group);
    if (sub.role === "ranges") {
      // [start, end], or [start, end, value] when each range carries one (null: no points in it)
      published.ranges[name] = view.ranges.map((r) => (r.value === undefined ? [r.start, r.end] : [r.start, r.end, r.value]));
      continue;
    }
    if (sub.role === "value") {
      published.values[name] = view.value;
      continue;
    }
    const rows = view.sorted();
    const entry = { kind: view.kind, channel: sub.channel, group, points: [], buckets: [] };
    if (view.kind === "bucketedNumeric") entry.buckets = rows.map(([t, b]) => [t, b.min, b.max, b.mean, b.count]);
    else if (view.kind === "bucketedEnum") entry.points = rows.map(([t, b]) => [t, b.first]);
    else entry.points = rows;
    published.series[name] = entry;
  }
}

/** The side chart's rows per group: histogram buckets [lower, upper, {channel: count}] (or
 *  [label, {channel: count}]), scatter pairs [t, x, y], or scatter buckets [minX, maxX, minY, maxY, count]. */
function publishSide(sub) {
  const groups = {};
  let kind = null;
  for (const [group, view] of sub.view.groups) {
    kind = view.kind;
    if (kind === "multivariate") {
      groups[group] = view.sorted().map(([t, values]) => [t, ...values]); // merged like buckets
      continue;
    }
    const body = view.chart;
    if (!body) continue;
    const counts = (b) => Object.fromEntries(Object.entries(b.countsByChannel).map(([k, v]) => [k, v.count]));
    if (kind === "numericHistogram") groups[group] = body.buckets.map((b) => [dbl(b.lowerBound), dbl(b.upperBound), counts(b)]);
    else if (kind === "enumHistogram") groups[group] = body.buckets.map((b) => [b.value, counts(b)]);
    else if (kind === "cartesian") groups[group] = body.timestamps.map((t, i) => [tsMs(t), dbl(body.xValues[i]), dbl(body.yValues[i])]);
    else if (kind === "bucketedCartesian") groups[group] = body.buckets.map((b) => [b.minX, b.maxX, b.minY, b.maxY, b.count].map(dbl));
    else if (kind === "bucketedCartesian3d") groups[group] = body.buckets.map((b) => [b.meanX, b.meanY, b.meanZ, b.count].map(dbl));
  }
  published.side = { kind, channels: sub.channel, groups };
}

function drawSide(config) {
  if (config.mode === POLLED_MODE) {
    const spectrum = published.spectrum;
    if (!spectrum) return;
    const groups = Object.keys(spectrum.groups).sort();
    const colors = sidePalette.assign(groups);
    const name = (group) => label(spectrum.channel, group);
    // each group's spectrum in its series' colour (that of the live line in the time chart)
    const color = (group) => published.colors[name(group)] ?? colors[group];
    const sets = groups.map((group) => ({ label: name(group), color: color(group), buckets: spectrum.groups[group] }));
    const peaks = groups.filter((g) => spectrum.peaks[g]).map((g) => ({ label: name(g), ...spectrum.peaks[g] }));
    const title = `amplitude spectrum · ${spectrum.channel} · the last ${config.window} s, ${refreshedText()}`;
    published.sideDrawn = drawSpectrum($("side"), { sets, peaks, title });
    return;
  }
  const side = published.side;
  if (!side || !side.kind) return;
  const groups = Object.keys(side.groups).sort();
  if (side.kind === "bucketedCartesian3d") {
    const colors = sidePalette.assign(groups);
    const sets = groups.map((group) => ({ label: group || side.channels, color: colors[group], points: side.groups[group] }));
    published.sideDrawn = drawScatter3d($("side"), { sets, title: `3D scatter · ${side.channels}`, ...published.view3d });
    return;
  }
  if (side.kind === "multivariate") {
    const axes = side.channels.split(", ");
    const lines = [];
    const colors = sidePalette.assign(groups);
    // a label column (an enum channel's MODE) is placed by its label's rank among all those shown,
    // and its axis is marked with the labels themselves
    const allRows = groups.flatMap((group) => side.groups[group]);
    const ranks = axes.map((_, k) => [...new Set(allRows.map((r) => r[k + 1]).filter((v) => typeof v === "string"))].sort());
    groups.forEach((group) => {
      for (const row of side.groups[group]) {
        const values = row.slice(1).map((v, k) => (typeof v === "string" ? ranks[k].indexOf(v) : v));
        lines.push({ color: colors[group], values });
      }
    });
    const labels = ranks.map((r) => (r.length ? r : null));
    published.sideDrawn = drawParallel($("side"), { axes, lines, labels, title: `multivariate · one line per time bucket · ${side.channels}` });
    return;
  }
  if (side.kind === "numericHistogram" || side.kind === "enumHistogram") {
    const channels = config.channels.split(",").map((c) => c.trim()).filter(Boolean);
    const bars = [];
    for (const group of groups) {
      channels.forEach((channel) => {
        const name = label(channel, group);
        const rows = side.groups[group].map((row) => [...row.slice(0, -1), row[row.length - 1][channel] ?? 0]);
        const color = published.colors[name] ?? seriesPalette.assign([name])[name];
        bars.push({ label: name, color, valueColors: published.valueColors[channel], buckets: rows });
      });
    }
    drawHistogram($("side"), { bars, title: `histogram · ${side.channels}` });
  } else {
    const colors = sidePalette.assign(groups);
    const sets = groups.map((group) => {
      const rows = side.groups[group];
      const bucketed = side.kind === "bucketedCartesian";
      return {
        label: group || side.channels,
        color: colors[group],
        points: bucketed ? [] : rows.map(([, px, py]) => [px, py]),
        boxes: bucketed ? rows : [],
      };
    });
    const [xName, yName] = side.channels.split(", ");
    const what = side.kind === "bucketedCartesian" ? "spatial buckets" : "pairs";
    drawScatter($("side"), { sets, title: `${yName} against ${xName} · ${what}` });
  }
}

/** The 3D scatter turns as the pointer drags across it (sideways: about the vertical axis; up and
 *  down: the tilt, kept between looking from below and from above). */
function turnByDragging(canvas) {
  let last = null;
  canvas.addEventListener("pointerdown", (e) => {
    last = [e.clientX, e.clientY];
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointerup", () => (last = null));
  canvas.addEventListener("pointermove", (e) => {
    if (!last || published.side?.kind !== "bucketedCartesian3d") return;
    const view = published.view3d;
    view.azimuth += (e.clientX - last[0]) * 0.01;
    view.elevation = Math.max(-1.5, Math.min(1.5, view.elevation + (e.clientY - last[1]) * 0.01));
    last = [e.clientX, e.clientY];
    dirty = true;
  });
}

/** Mode value: a tile per channel (and group) with its last point's value and time. */
function renderTiles(series) {
  if ($("tiles").hidden) return;
  const colors = Object.fromEntries(series.map((s) => [s.label, s.color]));
  $("tiles").innerHTML = Object.keys(published.values)
    .sort()
    .map((name) => {
      const point = published.values[name];
      const value = point ? formatValue(point[1]) : "no point";
      const at = point ? new Date(point[0]).toISOString().slice(11, 23) : "";
      return `<div class="tile" data-tile="${escape(name)}" style="--color:${colors[name] ?? "#2f7ed8"}"><div class="name">${escape(name)}</div><div class="value">${escape(value)}</div><div class="at">${escape(at)}</div></div>`;
    })
    .join("");
}

// -- drawing ---------------------------------------------------------------------------------------
let lastDraw = 0;

function frame() {
  const config = published.config;
  const now = Date.now();
  if (config && (dirty || now - lastDraw > 200)) {  // redraw on news, and as time slides on
    dirty = false;
    lastDraw = now;
    const endMs = replaying() ? replayClock() : now;
    const startMs = endMs - Number(config.window) * 1000;
    const names = Object.keys(published.series).sort();
    const colors = seriesPalette.assign([...names, ...Object.keys(published.ranges)]);
    const series = names.map((name) => ({ label: name, color: colors[name], ...published.series[name] }));
    published.colors = colors;
    const ranges = Object.entries(published.ranges).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, spans]) => ({
      label: name,
      color: colors[name],
      spans,
    }));
    // each string channel's values, a colour each (kept for the page's life), for its strip and its key
    const enums = series.filter((s) => s.kind === "enum" || s.kind === "bucketedEnum");
    const valueColors = {};
    for (const channel of new Set(enums.map((s) => s.channel))) {
      if (!valuePalettes.has(channel)) valuePalettes.set(channel, new Palette());
      const values = enums.filter((s) => s.channel === channel).flatMap((s) => s.points.map(([, v]) => String(v)));
      valueColors[channel] = valuePalettes.get(channel).assign(values);
    }
    published.valueColors = valueColors;
    // the threshold drawn where one applies to the series shown (never for a refused, empty one)
    const thresholded =
      (config.mode === "ranges" || config.mode === "rangeValues" || config.formula === "ifElse") &&
      config.threshold !== "" && Number.isFinite(Number(config.threshold)) && series.length > 0;
    const threshold = thresholded ? { value: Number(config.threshold), text: `${OP_TEXT[config.op] ?? ""} ${config.threshold}` } : null;
    published.drawn = draw($("chart"), { series, ranges, startMs, endMs, threshold, valueColors });
    drawSide(config);
    renderTiles(series);
    // every series (a string channel with its values' key), then each range lane (top to bottom)
    const key = (s) =>
      Object.entries(valueColors[s.channel] ?? {})
        .map(([value, color]) => `<span class="value" data-value="${escape(value)}"><i style="background:${color}"></i>${escape(value)}</span>`)
        .join("");
    $("legend").innerHTML = [
      ...series.map((s) =>
        enums.includes(s)
          ? `<span data-series="${escape(s.label)}" class="enum"><b>${escape(s.label)}</b> · ${s.kind}: ${key(s)}</span>`
          : `<span data-series="${escape(s.label)}"><i style="background:${s.color}"></i>${escape(s.label)} · ${s.kind ?? "…"}${s.polled ? ` (order ${FILTER_ORDER} Butterworth, both ways; ${refreshedText()})` : ""}</span>`,
      ),
      ...ranges.map(
        (r, i) =>
          `<span data-lane="${i}"><i class="lane" style="background:${r.color}"></i>${escape(r.label)} · ranges${r.spans.some((sp) => sp.length > 2) ? ", each with its mean" : ""} (lane ${i + 1})</span>`,
      ),
      ...(threshold ? [`<span data-threshold><i class="threshold"></i>threshold ${escape(threshold.text)}</span>`] : []),
      ...((published.drawn?.panels.length ?? 0) > 1 ? ['<span class="note" data-axes>channels far apart in scale: a y-axis each</span>'] : []),
    ].join("");
  }
  requestAnimationFrame(frame);
}

function replaying() {
  return published.replay !== null && published.replay.ended !== "live";
}

/** Where a replay stands: the newest end its appends reached (its start before any). */
function replayClock() {
  let clock = published.replay.from;
  for (const sub of subscriptions.values()) clock = Math.max(clock, sub.view.end);
  return Math.min(clock, published.replay.to);
}

function onReplayEnded(id, then) {
  if (subscriptions.has(id) && published.replay) published.replay.ended = then;
  renderMode();
  dirty = true;
}

const utc = (ms) => `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;

/** Live or replay, said beside the connection state: a replay must not pass for live data. */
function renderMode() {
  const replay = published.replay;
  const config = published.config;
  let mode = "live";
  let text = "live";
  if (replay && replay.ended === "stop") {
    mode = "replay ended";
    text = `replay ended: ${utc(replay.from)} → ${utc(replay.to)}`;
  } else if (replay && replay.ended !== "live") {
    mode = "replay";
    const speed = config.speed === "max" ? "max speed" : `${config.speed}x`;
    text = `replay ${utc(replay.from)} → ${utc(replay.to)} at ${speed}`;
  }
  published.mode = mode;
  let shown = mode === "live" ? "live" : "replay";
  if (mode !== "replay ended" && published.state !== "open" && published.state !== "handing over") {
    // nothing arrives now: not "live" (published.mode keeps what the form asked for)
    shown = "away";
    text = published.state === "waiting" ? "waiting for the server" : published.state === "connecting" ? "connecting" : "reconnecting";
  }
  published.liveText = text;
  $("live").textContent = text;
  $("live").dataset.mode = shown;
}

/** Why the chart is empty, when it is: a data source or channel never written, or no points in
 *  the window. */
function renderNotices() {
  const config = published.config;
  const notices = [];
  if (published.auth === "token needed") notices.push("This server needs a token: enter yours in Token.");
  if (published.auth === "token refused") notices.push("The server refused the token (401): enter another in Token.");
  if (config && seriesListed) {
    const rids = new Set([...channelTypes.keys()].map((key) => key.slice(0, key.lastIndexOf("|"))));
    const channels = config.channels.split(",").map((c) => c.trim()).filter(Boolean);
    if (!rids.has(config.rid)) {
      notices.push(`No data source "${config.rid}" has been written to yet (known: ${[...rids].join(", ") || "none"}).`);
    } else {
      const known = [...channelTypes.keys()].filter((k) => k.startsWith(`${config.rid}|`)).map((k) => k.slice(config.rid.length + 1));
      for (const channel of channels) {
        if (!channelTypes.has(`${config.rid}|${channel}`)) {
          notices.push(`No channel "${channel}" in ${config.rid} (its channels: ${known.join(", ")}).`);
        }
      }
    }
  }
  // a Group by tag that none of the chosen series carries groups nothing: said, not silently merged
  if (config && seriesListed && config.groupBy) {
    const rid = sourceOf(config);
    const channels = config.channels.split(",").map((c) => c.trim()).filter((c) => channelTypes.has(`${rid}|${c}`));
    const keys = new Set(channels.flatMap((c) => [...(seriesTags.get(`${rid}|${c}`) ?? [])]));
    if (channels.length && !keys.has(config.groupBy)) {
      const known = [...keys].sort();
      notices.push(
        `No series of ${channels.join(", ")} has the tag "${config.groupBy}" to group by (${known.length ? `their tags: ${known.join(", ")}` : "they have no tags"}): each channel is shown as one group.`,
      );
    }
  }
  if (!notices.length) {
    for (const sub of subscriptions.values()) {
      if (sub.role !== "series" || !sub.received) continue;
      const empty = [...sub.view.groups.values()].every((view) => view.sorted().length === 0);
      if (empty) notices.push(`No points of ${sub.channel} in the last ${config.window} s${config.tags ? ` with tags ${config.tags}` : ""}.`);
    }
  }
  published.notices = notices;
  $("notice").textContent = notices.join(" ");
  $("notice").hidden = notices.length === 0;
}

function renderState(state, detail) {
  connectionState = { state, detail };
  showState();
}

/** The connection's state, unless the server behind an open connection is not ready (an edge
 *  whose compute tier is away, Spark's query restarting): then "waiting" and why, not a green "open". */
function showState() {
  let { state, detail } = connectionState;
  if (state === "open" && published.ready && !published.ready.ready) {
    state = "waiting";
    detail = `(server not ready: ${published.ready.reason})`;
  }
  published.state = state;
  published.stateDetail = detail;
  const badge = $("state");
  badge.textContent = detail ? `${state} ${detail}` : state;
  badge.dataset.state = state.replace(/\s/g, "-");
  if (published.config) renderMode();
  renderLatency();
}

async function pollReadiness() {
  try {
    const answer = await fetch("readyz");
    const body = await answer.json();
    published.ready = { ready: answer.ok, reason: answer.ok ? "" : body.reason ?? String(answer.status) };
  } catch (err) {
    published.ready = null; // unreachable: the connection's own state says so
  }
  showState();
}

/** The latency of the newest append, while it is news: with nothing arriving for STALE_MS it says
 *  how long nothing came, and while the connection is away, that (never an old number). */
function renderLatency() {
  const last = published.latencyMs;
  const box = $("latency");
  let text;
  let stale = false;
  if (published.state !== "open" && published.state !== "handing over") {
    text = "latency — (not connected)";
    stale = true;
  } else if (last === null) {
    text = "latency —";
  } else {
    const quiet = Date.now() - published.lastAppendAt;
    if (quiet > STALE_MS) {
      text = `latency — (no update for ${Math.floor(quiet / 1000)} s)`;
      stale = true;
    } else text = `latency ${last.toFixed(0)} ms (median ${published.latencyMedianMs.toFixed(0)} ms)`;
  }
  published.latencyText = text;
  box.textContent = text;
  box.dataset.stale = String(stale);
}

function renderErrors() {
  const polled = Object.values(published.pollErrors).map((e) => `<li data-polled>${escape(e)}</li>`);
  $("errors").innerHTML = [...published.errors.map((e) => `<li>${escape(e)}</li>`), ...polled].join("");
}

function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// -- the channel list ------------------------------------------------------------------------------
async function loadSeries() {
  await loadAssets();
  try {
    const answer = await fetch("series", authorized());
    noteRefusal(answer);
    if (!answer.ok) {
      seriesListed = false; // what an earlier token listed says nothing now
      throw new Error(`GET /series: ${answer.status}`);
    }
    const list = await answer.json();
    channelTypes = new Map(list.map((s) => [`${s.dataSourceRid}|${s.channel}`, s.type]));
    seriesTags = new Map();
    for (const s of list) {
      const key = `${s.dataSourceRid}|${s.channel}`;
      if (!seriesTags.has(key)) seriesTags.set(key, new Set());
      for (const tag of Object.keys(s.tags)) seriesTags.get(key).add(tag);
    }
    const rids = [...new Set(list.map((s) => s.dataSourceRid))];
    $("rids").innerHTML = rids.map((r) => `<option value="${escape(r)}">`).join("");
    const asset = $("asset").value.trim();
    const scope = asset ? scopes.get(asset) : null;
    const rid = asset ? (scope?.dataSourceRid ?? "") : $("rid").value.trim();
    const within = (s) =>
      s.dataSourceRid === rid && Object.entries(scope?.seriesTags ?? {}).every(([k, v]) => s.tags[k] === v);
    const channels = [...new Set(list.filter(within).map((s) => s.channel))];
    $("channel-list").innerHTML = channels.map((c) => `<option value="${escape(c)}">`).join("");
    seriesListed = true;
  } catch (err) {
    console.warn("could not list series", err);
  }
}

// The assets' data scopes, offered as "<asset rid>/<data scope>" (labelled with the asset's title).
async function loadAssets() {
  try {
    const answer = await fetch("assets/v1/assets", authorized());
    noteRefusal(answer);
    if (!answer.ok) return; // refused (a missing or bad token): said by renderNotices
    const assets = await answer.json();
    scopes = new Map();
    const options = [];
    for (const a of assets) {
      for (const s of a.dataScopes) {
        const key = `${a.rid}/${s.dataScopeName}`;
        scopes.set(key, s);
        options.push(`<option value="${escape(key)}">${escape(a.title)} · ${escape(s.dataScopeName)}</option>`);
      }
    }
    $("assets").innerHTML = options.join("");
  } catch (err) {
    console.warn("could not list assets", err);
  }
}

async function main() {
  const config = readConfig();
  token = takeToken();
  fillForm(config);
  $("token").value = token;
  await loadSeries();
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  connection = new LiveConnection(`${scheme}//${location.host}/persistent-compute/ws`, {
    onState: renderState,
    onUpdate,
    onError,
    onReplayEnded,
    protocols: bearerProtocols,
  });
  connection.start();
  apply(config);
  $("form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const typed = $("token").value.trim();
    const newToken = typed !== token;
    if (newToken) setToken(typed);
    await loadSeries();
    if (newToken) connection.restart(); // the subscriptions are made again on a socket with the new token
    apply(formConfig());
  });
  $("rid").addEventListener("change", loadSeries);
  $("rid").addEventListener("input", fitRid);
  $("mode").addEventListener("change", showModeFields);
  $("formula").addEventListener("change", showModeFields);
  turnByDragging($("side"));
  await pollReadiness();
  setInterval(pollReadiness, 2000);
  $("asset").addEventListener("change", loadSeries);
  window.addEventListener("pagehide", () => connection.close()); // leave the server a clean close
  setInterval(renderLatency, 250);
  requestAnimationFrame(frame);
}

main();

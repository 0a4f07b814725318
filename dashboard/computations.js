// The directory of live computations (GET /computations), refreshed every few seconds.
// What the page shows is published on window.sparkwireDirectory (the browser tests read it).

const REFRESH_MS = 3000;
const body = document.querySelector("#computations tbody");
const stateBadge = document.getElementById("state");
const updated = document.getElementById("updated");
const empty = document.getElementById("empty");
const errors = document.getElementById("errors");

window.sparkwireDirectory = { computations: [], refreshes: 0, error: null };

function token() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function seconds(t) {
  return t ? t.seconds + t.nanos / 1e9 : null;
}

function duration(t) {
  const s = seconds(t);
  if (s === null) return "—";
  return s >= 60 && s % 60 === 0 ? `${s / 60} min` : `${s} s`;
}

function series(entry) {
  return entry.series
    .map((s) => {
      const tags = Object.entries(s.tags).map(([k, v]) => `${k}=${v}`).join(",");
      return `${s.dataSourceRid} / ${s.channel}${tags ? ` {${tags}}` : ""}`;
    })
    .join("; ");
}

/** Every time on this page in one zone, UTC, labelled: `2026-11-26 10:47:12.123 UTC`. */
function utc(ms) {
  return `${new Date(ms).toISOString().replace("T", " ").replace("Z", "")} UTC`;
}

function late(entry) {
  const newest = seconds(entry.late.newestDroppedTimestamp);
  if (!entry.late.droppedPoints) return "0";
  return `${entry.late.droppedPoints} (newest ${utc(newest * 1000)})`;
}

/** A computation with no subscriber left, kept for a resume, is idle (not "live" with 0
 *  subscribers, which would read as a leak): said so, with the time before it is released. */
function state(entry) {
  if (entry.error) return `${entry.state}: ${entry.error}`;
  if (entry.keptForResume) return `idle, kept for resume (${Math.ceil(seconds(entry.keptForResume))} s left)`;
  return entry.state;
}

function cell(row, text, name) {
  const td = row.insertCell();
  td.textContent = text;
  td.dataset.field = name;
}

function render(list) {
  body.replaceChildren();
  for (const entry of list) {
    const row = body.insertRow();
    row.dataset.id = entry.id;
    cell(row, entry.id, "id");
    cell(row, entry.nodeKind, "nodeKind");
    cell(row, series(entry), "series");
    cell(row, duration(entry.window), "window");
    cell(row, state(entry), "state");
    row.dataset.kept = String(Boolean(entry.keptForResume));
    cell(row, String(entry.subscribers), "subscribers");
    cell(row, String(entry.connections), "connections");
    const held = entry.pointsHeld;
    cell(row, held.window === null ? `${held.output} out` : `${held.window} in / ${held.output} out`, "pointsHeld");
    const last = entry.lastUpdate ? Date.parse(entry.lastUpdate) : NaN;
    cell(row, Number.isNaN(last) ? entry.lastUpdate ?? "—" : utc(last), "lastUpdate");
    cell(row, late(entry), "late");
    cell(row, entry.lag.points === null ? "—" : String(entry.lag.points), "lag");
  }
  empty.hidden = list.length > 0;
}

async function refresh() {
  const headers = {};
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  try {
    const response = await fetch("../computations", { headers });
    const answer = await response.json();
    if (!response.ok) throw new Error(`${response.status} ${answer.errorName}: ${answer.message}`);
    render(answer);
    window.sparkwireDirectory = { computations: answer, refreshes: window.sparkwireDirectory.refreshes + 1, error: null };
    stateBadge.dataset.state = "open";
    const kept = answer.filter((e) => e.keptForResume).length;
    stateBadge.textContent = kept ? `${answer.length - kept} live · ${kept} kept for resume` : `${answer.length} live`;
    updated.textContent = `updated ${utc(Date.now()).slice(11)}`;
    errors.replaceChildren();
  } catch (err) {
    window.sparkwireDirectory = { ...window.sparkwireDirectory, error: String(err.message ?? err) };
    stateBadge.dataset.state = "reconnecting";
    stateBadge.textContent = "error";
    const item = document.createElement("li");
    item.textContent = String(err.message ?? err);
    errors.replaceChildren(item);
  }
}

await refresh();
setInterval(refresh, REFRESH_MS);

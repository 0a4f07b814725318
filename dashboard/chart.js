// A time chart on a canvas: lines for raw points, a min/max band with a mean line for buckets,
// a state strip for string channels, shaded spans for ranges. No library: the page ships as is.

// Twenty colours that stay apart on white (lines, bars and state blocks); past twenty, more are
// spread around the hue circle by the golden angle.
const COLORS = [
  "#2f7ed8", "#e4572e", "#17a398", "#f3a712", "#8e44ad", "#5d6d7e", "#c0392b", "#27ae60",
  "#d81b60", "#1a237e", "#9e9d24", "#6d4c41", "#00acc1", "#ff7043", "#7cb342", "#5e35b1",
  "#ad1457", "#00695c", "#f06292", "#455a64",
];
const PAD = { left: 64, right: 16, top: 12, bottom: 28 };
const STRIP = 22; // height of one string-channel strip below numeric panels
const LANE = 8; // height of one series' range lane, above the plot
const VALUE_LANE = 16; // a lane whose ranges carry values (rangeNumericAggregation): room for them
// A channel whose values would fill less than 1/SCALE_APART of a shared y-axis (a temperature beside
// rpm) draws as a flat line there: then each channel gets an axis of its own. Channels merely offset
// from each other (0-1 beside 8-10) still share one.
const SCALE_APART = 20;

/** The i-th colour of the palette (and, past it, more hues). */
export function colorOf(index) {
  if (index < COLORS.length) return COLORS[index];
  const hue = (index * 137.508) % 360;
  return hsl(hue, 62, 42);
}

function hsl(h, s, l) {
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    const c = l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(c * 255).toString(16).padStart(2, "0");
  };
  return `#${f(0)}${f(8)}${f(4)}`;
}

/**
 * Colours by identity: a key (a series' label, a string channel's value) keeps its colour for as
 * long as the page lives, whatever else is shown beside it; a new key takes the palette slot its
 * name hashes to, or the next one free among the keys shown with it. So a series is the same colour
 * alone or among others, and no two keys shown together share one.
 */
export class Palette {
  constructor() {
    this.remembered = new Map();
  }

  /** key -> colour for the keys shown together (each distinct). */
  assign(keys) {
    const shown = [...new Set(keys)].sort();
    const taken = new Map(); // slot -> key
    const out = {};
    const later = [];
    for (const key of shown) {
      const slot = this.remembered.get(key);
      if (slot !== undefined && !taken.has(slot)) {
        taken.set(slot, key);
        out[key] = colorOf(slot);
      } else later.push(key);
    }
    for (const key of later) {
      let slot = hash(key) % COLORS.length;
      for (let tries = 0; taken.has(slot); tries++) slot = tries < COLORS.length ? (slot + 1) % COLORS.length : COLORS.length + tries;
      taken.set(slot, key);
      this.remembered.set(key, slot);
      out[key] = colorOf(slot);
    }
    return out;
  }
}

/** Black or white, whichever reads better on `color` (#rrggbb). */
export function inkOn(color) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(color.slice(i, i + 2), 16) / 255);
  return 0.299 * r + 0.587 * g + 0.114 * b > 0.6 ? "#1b2631" : "#ffffff";
}

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * mag;
}

// time steps a person reads: whole seconds, minutes, hours
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);

function timeStep(spanMs, count) {
  const raw = spanMs / Math.max(1, count);
  return TIME_STEPS.find((s) => s >= raw) ?? niceStep(spanMs, count);
}

function timeLabel(ms, step) {
  const iso = new Date(ms).toISOString();
  return step >= 60000 && ms % 60000 === 0 ? iso.slice(11, 16) : iso.slice(11, 19);
}

/** Text cut to `room` pixels, with an ellipsis ("" if not even one character and it fit). */
export function fitText(ctx, text, room) {
  text = String(text);
  if (ctx.measureText(text).width <= room) return text;
  for (let n = text.length - 1; n >= 1; n--) {
    const cut = `${text.slice(0, n)}…`;
    if (ctx.measureText(cut).width <= room) return cut;
  }
  return "";
}

/** Runs of points with no outage between them: a gap longer than `factor` times the usual spacing
 *  (the median; at least 3 points to tell) starts a new run, so no line is drawn across it. */
export function runs(points, factor) {
  if (points.length < 3) return points.length ? [points] : [];
  const usual = usualGap(points);
  const out = [[points[0]]];
  for (let i = 1; i < points.length; i++) {
    if (usual > 0 && points[i][0] - points[i - 1][0] > factor * usual) out.push([]);
    out[out.length - 1].push(points[i]);
  }
  return out;
}

/** The median spacing of points in time (0 below 3 points: too few to tell). */
function usualGap(points) {
  if (points.length < 3) return 0;
  const gaps = [];
  for (let i = 1; i < points.length; i++) gaps.push(points[i][0] - points[i - 1][0]);
  return gaps.sort((a, b) => a - b)[Math.floor(gaps.length / 2)];
}

function extentOf(list) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of list) {
    for (const [, v] of s.points) if (Number.isFinite(v)) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
    for (const [, mn, mx] of s.buckets) {
      if (Number.isFinite(mn)) lo = Math.min(lo, mn);
      if (Number.isFinite(mx)) hi = Math.max(hi, mx);
    }
  }
  return [lo, hi];
}

/** The numeric series on one y-axis, or, when one channel's span is less than 1/SCALE_APART of
 *  the shared axis (a temperature beside rpm), one panel per channel, each on its own axis. */
function panelsOf(numeric) {
  const channels = [...new Set(numeric.map((s) => s.channel ?? s.label))];
  const one = [{ series: numeric, extent: extentOf(numeric) }];
  if (channels.length < 2) return one;
  const each = channels.map((c) => {
    const series = numeric.filter((s) => (s.channel ?? s.label) === c);
    return { series, extent: extentOf(series), name: c };
  });
  const known = each.filter((p) => Number.isFinite(p.extent[0]));
  if (known.length < 2) return one;
  const spans = known.map((p) => Math.max(p.extent[1] - p.extent[0], 1e-9 + Math.abs(p.extent[1]) * 1e-3));
  const [all] = [extentOf(numeric)];
  const apart = all[1] - all[0] > SCALE_APART * Math.min(...spans);
  return apart ? each : one;
}

/**
 * series: [{label, channel, color, kind, points: [[ms, value]], buckets: [[ms, min, max, mean]]}]
 * ranges: [{label, color, spans: [[startMs|null, endMs|null]]}]
 * threshold: null, or {value, text} drawn as a dashed line on each numeric axis
 * valueColors: channel -> value -> colour, for string channels' state blocks
 * Returns what it drew: { panels: [{names, y0, y1, lo, hi}], strips: [{label, y0, y1}], thresholdY }.
 */
export function draw(canvas, { series, ranges, startMs, endMs, threshold = null, valueColors = {} }) {
  const { ctx, width, height } = surface(canvas);
  const strips = series.filter((s) => s.kind === "enum" || s.kind === "bucketedEnum");
  const numeric = series.filter((s) => !strips.includes(s));
  const valued = ranges.some((r) => r.spans.some((sp) => sp.length > 2));
  const laneHeight = valued ? VALUE_LANE : LANE;
  const lanes = ranges.length ? ranges.length * laneHeight + 4 : 0; // one lane per series' ranges
  const top = PAD.top + lanes;
  const bottom = height - PAD.bottom;
  const x0 = PAD.left;
  const x1 = width - PAD.right;
  const x = (ms) => x0 + ((ms - startMs) / (endMs - startMs)) * (x1 - x0);
  // string channels: a strip each, under the numeric panels, or the whole height when alone
  const stripHeight = numeric.length ? STRIP : Math.max(STRIP, Math.min(160, (bottom - top) / Math.max(1, strips.length)));
  const stripsTop = bottom - strips.length * stripHeight;
  const drawn = { panels: [], strips: [], thresholdY: null, x0, x1, startMs, endMs, timeLabels: [] };

  // time grid and labels, across everything
  ctx.strokeStyle = "#e5e8ec";
  ctx.fillStyle = "#5d6d7e";
  ctx.lineWidth = 1;
  const xStep = timeStep(endMs - startMs, Math.max(2, Math.floor((x1 - x0) / 80)));
  ctx.textAlign = "center";
  for (let t = Math.ceil(startMs / xStep) * xStep; t <= endMs; t += xStep) {
    ctx.beginPath();
    ctx.moveTo(x(t), top);
    ctx.lineTo(x(t), bottom);
    ctx.stroke();
    const text = timeLabel(t, xStep);
    const half = ctx.measureText(text).width / 2;
    if (x(t) - half >= 0 && x(t) + half <= width) {
      ctx.fillText(text, x(t), height - 8);
      drawn.timeLabels.push({ text, left: x(t) - half, right: x(t) + half });
    }
  }

  // ranges: each series' in a lane of its own colour above the plot, so that several stay readable
  // (the legend names each lane), and a faint band behind the data; an instant is a 2 px tick
  // a range's value (rangeNumericAggregation) is written in its span where it fits
  ctx.save();
  ctx.beginPath();
  ctx.rect(x0, PAD.top, x1 - x0, bottom - PAD.top);
  ctx.clip();
  ranges.forEach((r, i) => {
    const laneTop = PAD.top + i * laneHeight;
    for (const [s, e, value] of r.spans) {
      const a = x(s ?? startMs);
      const b = x(e ?? endMs);
      ctx.fillStyle = r.color;
      ctx.fillRect(a, laneTop, Math.max(2, b - a), laneHeight - 2);
      ctx.fillStyle = r.color + "14";
      ctx.fillRect(a, top, Math.max(1, b - a), (strips.length ? stripsTop - 4 : bottom) - top);
      if (value !== undefined) {
        const text = value === null ? "–" : formatValue(value);
        if (ctx.measureText(text).width + 6 <= b - a) {
          ctx.fillStyle = "#ffffff";
          ctx.textAlign = "left";
          ctx.fillText(text, a + 3, laneTop + laneHeight - 5);
        }
      }
    }
  });
  ctx.restore();

  // numeric panels, stacked, each with its own y-axis
  const panels = numeric.length ? panelsOf(numeric) : [];
  const gap = 12;
  const room = (strips.length ? stripsTop - 4 : bottom) - top;
  const each = panels.length ? (room - gap * (panels.length - 1)) / panels.length : 0;
  panels.forEach((panel, k) => {
    const y0 = top + k * (each + gap);
    const y1 = y0 + each;
    let [lo, hi] = panel.extent;
    if (threshold && Number.isFinite(threshold.value)) {
      lo = Math.min(lo, threshold.value);
      hi = Math.max(hi, threshold.value);
    }
    if (!Number.isFinite(lo)) [lo, hi] = [0, 1];
    if (hi - lo < 1e-9) [lo, hi] = [lo - 1, hi + 1];
    const margin = (hi - lo) * 0.06;
    [lo, hi] = [lo - margin, hi + margin];
    const y = (v) => y1 - ((v - lo) / (hi - lo)) * (y1 - y0);
    ctx.strokeStyle = "#e5e8ec";
    ctx.fillStyle = "#5d6d7e";
    ctx.textAlign = "right";
    const yStep = niceStep(hi - lo, Math.max(2, Math.min(5, Math.floor(each / 28))));
    for (let v = Math.ceil(lo / yStep) * yStep; v <= hi; v += yStep) {
      ctx.beginPath();
      ctx.moveTo(x0, y(v));
      ctx.lineTo(x1, y(v));
      ctx.stroke();
      ctx.fillText(Number(v.toPrecision(6)).toString(), x0 - 6, y(v) + 4);
    }
    if (panels.length > 1) {
      ctx.strokeStyle = "#aab7c4";
      ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(x0, y0, x1 - x0, y1 - y0);
    ctx.clip();
    for (const s of panel.series) {
      if (s.buckets.length) {
        for (const run of runs(s.buckets, 1.5)) {
          ctx.fillStyle = s.color + "40"; // min/max band
          ctx.beginPath();
          run.forEach(([t, , mx], i) => (i ? ctx.lineTo(x(t), y(mx)) : ctx.moveTo(x(t), y(mx))));
          for (let i = run.length - 1; i >= 0; i--) ctx.lineTo(x(run[i][0]), y(run[i][1]));
          ctx.closePath();
          ctx.fill();
          line(ctx, run.map(([t, , , mean]) => [x(t), y(mean)]), s.color, 1.5);
        }
      }
      if (s.points.length) {
        const parts = runs(s.points, 5);
        for (const run of parts) line(ctx, run.map(([t, v]) => [x(t), y(v)]), s.color, 1.5);
        ctx.fillStyle = s.color;
        for (const run of parts) {
          if (run.length === 1 || s.points.length < 120) for (const [t, v] of run) ctx.fillRect(x(t) - 1.5, y(v) - 1.5, 3, 3);
        }
      }
    }
    if (threshold && Number.isFinite(threshold.value)) {
      const ty = Math.round(y(threshold.value)) + 0.5; // on a pixel row: a crisp 1 px line
      ctx.strokeStyle = "#1b2631";
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x0, ty);
      ctx.lineTo(x1, ty);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = "#1b2631";
      ctx.textAlign = "right";
      ctx.fillText(threshold.text, x1 - 4, ty - 4);
      drawn.thresholdY = ty;
    }
    ctx.restore();
    if (panels.length > 1) {
      // which channel this axis is: named at the panel's top left, in its first series' colour
      ctx.font = "bold 11px system-ui, sans-serif";
      ctx.textAlign = "left";
      const name = fitText(ctx, panel.name, x1 - x0 - 8);
      const w = ctx.measureText(name).width;
      ctx.fillStyle = "#ffffffd0";
      ctx.fillRect(x0 + 1, y0 + 1, w + 8, 15);
      ctx.fillStyle = panel.series[0].color;
      ctx.fillText(name, x0 + 4, y0 + 12);
      ctx.font = "11px system-ui, sans-serif";
    }
    drawn.panels.push({ names: panel.series.map((s) => s.label), y0, y1, lo, hi });
  });

  // string channels: one strip each, a block per run of one state in that value's own colour,
  // labelled with the value where it fits (the legend keys every value's colour)
  ctx.save();
  ctx.beginPath();
  ctx.rect(x0, PAD.top, x1 - x0, bottom - PAD.top);
  ctx.clip();
  strips.forEach((s, i) => {
    const y0 = stripsTop + i * stripHeight;
    const h = stripHeight - 4;
    const colors = valueColors[s.channel ?? s.label] ?? {};
    const states = s.points;
    // a state holds until the next point, unless that is an outage away (more than 5 times the
    // usual spacing, as a line breaks there): then the block stops one usual spacing after it
    const usual = usualGap(states);
    const until = (j) => {
      const next = j + 1 < states.length ? states[j + 1][0] : endMs;
      return usual > 0 && next - states[j][0] > 5 * usual ? states[j][0] + usual : next;
    };
    let j = 0;
    while (j < states.length) {
      let k = j;
      while (k + 1 < states.length && states[k + 1][1] === states[j][1] && until(k) === states[k + 1][0]) k++;
      const a = x(states[j][0]);
      const b = x(until(k));
      const color = colors[states[j][1]] ?? "#7f8c8d";
      ctx.fillStyle = color;
      ctx.fillRect(a, y0, Math.max(1, b - a), h);
      const left = Math.max(a, x0);
      const text = fitText(ctx, states[j][1], Math.min(b, x1) - left - 6);
      if (text) {
        ctx.fillStyle = inkOn(color);
        ctx.textAlign = "left";
        ctx.fillText(text, left + 3, y0 + h / 2 + 4);
      }
      j = k + 1;
    }
    drawn.strips.push({ label: s.label, y0, y1: y0 + h });
  });
  ctx.restore();
  // each strip named beside it, where a numeric axis has its numbers
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "right";
  for (const [i, s] of strips.entries()) {
    const y0 = stripsTop + i * stripHeight;
    ctx.fillText(fitText(ctx, s.label, x0 - 8), x0 - 6, y0 + (stripHeight - 4) / 2 + 4);
  }
  if (!panels.length && !strips.length) {
    ctx.strokeStyle = "#e5e8ec";
    ctx.strokeRect(x0, top, x1 - x0, bottom - top);
  }
  return drawn;
}

function line(ctx, pts, color, width) {
  ctx.strokeStyle = color;
  ctx.lineWidth = width;
  ctx.beginPath();
  pts.forEach(([px, py], i) => (i ? ctx.lineTo(px, py) : ctx.moveTo(px, py)));
  ctx.stroke();
}

function hash(text) {
  let h = 0;
  for (const c of String(text)) h = (h * 31 + c.charCodeAt(0)) | 0;
  return Math.abs(h);
}

/** The canvas sized to its box (device pixels), cleared: its 2D context and CSS size. */
function surface(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  return { ctx, width, height };
}

function axis(ctx, lo, hi, at, vertical, plot) {
  ctx.strokeStyle = "#e5e8ec";
  ctx.fillStyle = "#5d6d7e";
  const step = niceStep(hi - lo, 5);
  ctx.textAlign = vertical ? "right" : "center";
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ctx.beginPath();
    if (vertical) {
      ctx.moveTo(plot.x0, at(v));
      ctx.lineTo(plot.x1, at(v));
    } else {
      ctx.moveTo(at(v), plot.y0);
      ctx.lineTo(at(v), plot.y1);
    }
    ctx.stroke();
    const text = Number(v.toPrecision(6)).toString();
    if (vertical) ctx.fillText(text, plot.x0 - 6, at(v) + 4);
    else ctx.fillText(text, at(v), plot.y1 + 16);
  }
}

function span(values) {
  let [lo, hi] = [Math.min(...values), Math.max(...values)];
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) [lo, hi] = [0, 1];
  if (hi - lo < 1e-9) [lo, hi] = [lo - 1, hi + 1];
  return [lo, hi];
}

/**
 * A histogram: bars: [{label, color, buckets: [[lower, upper, count]] or [[name, count]]}], one
 * bar per bucket and input, the inputs side by side in each bucket.
 */
export function drawHistogram(canvas, { bars, title }) {
  const { ctx, width, height } = surface(canvas);
  const plot = { x0: 48, x1: width - 12, y0: 24, y1: height - 40 };
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  ctx.fillText(title, plot.x0, 14);
  const numeric = bars.some((b) => b.buckets.some((k) => k.length === 3));
  const counts = bars.flatMap((b) => b.buckets.map((k) => k[k.length - 1]));
  const top = Math.max(1, ...counts) * 1.08;
  const y = (n) => plot.y1 - (n / top) * (plot.y1 - plot.y0);
  axis(ctx, 0, top, y, true, plot);
  const slots = bars.length || 1;
  if (numeric) {
    const [lo, hi] = span(bars.flatMap((b) => b.buckets.flatMap(([l, u]) => [l, u])));
    const x = (v) => plot.x0 + ((v - lo) / (hi - lo)) * (plot.x1 - plot.x0);
    axis(ctx, lo, hi, x, false, plot);
    bars.forEach((b, i) => {
      ctx.fillStyle = b.color + "cc";
      for (const [lower, upper, count] of b.buckets) {
        const w = (x(upper) - x(lower)) / slots;
        ctx.fillRect(x(lower) + i * w + 0.5, y(count), Math.max(1, w - 1), plot.y1 - y(count));
      }
    });
  } else {
    const labels = [...new Set(bars.flatMap((b) => b.buckets.map(([name]) => name)))].sort();
    const band = (plot.x1 - plot.x0) / Math.max(1, labels.length);
    ctx.textAlign = "center";
    ctx.fillStyle = "#5d6d7e";
    labels.forEach((name, j) => ctx.fillText(name, plot.x0 + (j + 0.5) * band, plot.y1 + 16));
    bars.forEach((b, i) => {
      for (const [name, count] of b.buckets) {
        // one string channel: each value's bar in the colour of its blocks in the strip
        ctx.fillStyle = (bars.length === 1 && b.valueColors?.[name] ? b.valueColors[name] : b.color) + "cc";
        const j = labels.indexOf(name);
        const w = (band * 0.8) / slots;
        ctx.fillRect(plot.x0 + j * band + band * 0.1 + i * w, y(count), Math.max(1, w - 1), plot.y1 - y(count));
      }
    });
  }
  ctx.strokeStyle = "#5d6d7e";
  ctx.strokeRect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
}

/**
 * A scatter: sets: [{label, color, points: [[x, y]], boxes: [[minX, maxX, minY, maxY, count]]}]:
 * a dot per pair, or (bucketed) each bucket's extent as a box shaded by how many pairs it holds.
 */
export function drawScatter(canvas, { sets, title }) {
  const { ctx, width, height } = surface(canvas);
  const plot = { x0: 56, x1: width - 12, y0: 24, y1: height - 40 };
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  ctx.fillText(title, plot.x0, 14);
  const xs = sets.flatMap((s) => [...s.points.map((p) => p[0]), ...s.boxes.flatMap((b) => [b[0], b[1]])]);
  const ys = sets.flatMap((s) => [...s.points.map((p) => p[1]), ...s.boxes.flatMap((b) => [b[2], b[3]])]);
  let [xlo, xhi] = span(xs);
  let [ylo, yhi] = span(ys);
  [xlo, xhi] = [xlo - (xhi - xlo) * 0.04, xhi + (xhi - xlo) * 0.04];
  [ylo, yhi] = [ylo - (yhi - ylo) * 0.04, yhi + (yhi - ylo) * 0.04];
  const x = (v) => plot.x0 + ((v - xlo) / (xhi - xlo)) * (plot.x1 - plot.x0);
  const y = (v) => plot.y1 - ((v - ylo) / (yhi - ylo)) * (plot.y1 - plot.y0);
  axis(ctx, ylo, yhi, y, true, plot);
  axis(ctx, xlo, xhi, x, false, plot);
  for (const s of sets) {
    const most = Math.max(1, ...s.boxes.map((b) => b[4]));
    for (const [x0, x1, y0, y1, count] of s.boxes) {
      const alpha = Math.round(64 + (191 * Math.log1p(count)) / Math.log1p(most));
      ctx.fillStyle = s.color + alpha.toString(16).padStart(2, "0");
      ctx.fillRect(x(x0) - 1.5, y(y1) - 1.5, Math.max(3, x(x1) - x(x0) + 3), Math.max(3, y(y0) - y(y1) + 3));
    }
    ctx.fillStyle = s.color;
    for (const [px, py] of s.points) ctx.fillRect(x(px) - 2, y(py) - 2, 4, 4);
  }
  ctx.strokeStyle = "#5d6d7e";
  ctx.strokeRect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
}

/** A number as a tile or a label shows it: up to 4 significant digits past the point. */
export function formatValue(v) {
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  return Math.abs(v) >= 1e6 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : Number(v.toPrecision(5)).toString();
}

/**
 * A 3D scatter, projected: sets: [{label, color, points: [[x, y, z, count]]}] (each bucket's mean),
 * turned by `azimuth` about the vertical (z) axis and tilted by `elevation` (radians), drawn back to
 * front in a unit cube whose edges and axes are labelled; a bucket's dot grows with its count.
 */
export function drawScatter3d(canvas, { sets, title, azimuth, elevation }) {
  const { ctx, width, height } = surface(canvas);
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  ctx.fillText(title, 12, 14);
  const all = sets.flatMap((s) => s.points);
  const ranges = [0, 1, 2].map((k) => span(all.map((p) => p[k])));
  const unit = (p) => p.slice(0, 3).map((v, k) => (v - ranges[k][0]) / (ranges[k][1] - ranges[k][0]) - 0.5);
  const [ca, sa, ce, se] = [Math.cos(azimuth), Math.sin(azimuth), Math.cos(elevation), Math.sin(elevation)];
  const scale = Math.min(width, height - 30) * 0.5;
  const project = ([ux, uy, uz]) => {
    const rx = ux * ca - uy * sa; // turned about z
    const ry = ux * sa + uy * ca;
    const depth = ry * ce + uz * se; // tilted: positive is farther away
    const up = uz * ce - ry * se;
    return [width / 2 + rx * scale, height / 2 + 8 - up * scale, depth];
  };
  // the cube's twelve edges, and the three axes from the cube's low corner, labelled
  ctx.strokeStyle = "#d5dbe1";
  ctx.lineWidth = 1;
  const corners = [];
  for (const a of [-0.5, 0.5]) for (const b of [-0.5, 0.5]) for (const c of [-0.5, 0.5]) corners.push([a, b, c]);
  for (let i = 0; i < 8; i++) {
    for (let j = i + 1; j < 8; j++) {
      const diff = corners[i].filter((v, k) => v !== corners[j][k]).length;
      if (diff !== 1) continue;
      const [p, q] = [project(corners[i]), project(corners[j])];
      ctx.beginPath();
      ctx.moveTo(p[0], p[1]);
      ctx.lineTo(q[0], q[1]);
      ctx.stroke();
    }
  }
  const names = title.split(" · ")[1]?.split(", ") ?? ["x", "y", "z"];
  // each axis named beside the outermost of the cube's four edges along it, pushed outwards from
  // the cube's centre: outside the cloud of dots, whichever way it is turned
  const centre = project([0, 0, 0]);
  const labels = [];
  ctx.fillStyle = "#1b2631";
  ["x", "y", "z"].forEach((axisName, k) => {
    let best = null;
    for (const a of [-0.5, 0.5]) {
      for (const b of [-0.5, 0.5]) {
        const mid = [a, b];
        mid.splice(k, 0, 0);
        const p = project(mid);
        const d = Math.hypot(p[0] - centre[0], p[1] - centre[1]);
        if (!best || d > best.d) best = { p, d };
      }
    }
    const [dx, dy] = [best.p[0] - centre[0], best.p[1] - centre[1]];
    const norm = Math.max(1e-9, Math.hypot(dx, dy));
    const [lo, hi] = ranges[k];
    const text = `${names[k] ?? axisName} ${formatValue(lo)}…${formatValue(hi)}`;
    const w = ctx.measureText(text).width;
    let px = best.p[0] + (dx / norm) * 16;
    const py = best.p[1] + (dy / norm) * 16 + 4;
    ctx.textAlign = "center";
    px = Math.max(w / 2 + 4, Math.min(width - w / 2 - 4, px)); // whole on the canvas
    const baseline = Math.max(28, Math.min(height - 6, py));
    ctx.fillText(text, px, baseline);
    labels.push({ text, left: px - w / 2, right: px + w / 2, top: baseline - 10, bottom: baseline + 2 });
  });
  const dots = sets.flatMap((s) => s.points.map((p) => [project(unit(p)), s.color, p[3] ?? 1]));
  const most = Math.max(1, ...dots.map((d) => d[2]));
  dots.sort((a, b) => b[0][2] - a[0][2]); // far ones first
  for (const [[px, py, depth], color, count] of dots) {
    const r = 2 + 3 * Math.sqrt(count / most) - depth; // nearer: bigger
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(px, py, Math.max(1.5, r), 0, 2 * Math.PI);
    ctx.fill();
  }
  return { labels, dots: dots.map(([[px, py]]) => [px, py]) };
}

/**
 * Multivariate buckets as parallel coordinates: axes: [name], lines: [{color, values: [v per axis]}]
 * (one line per time bucket, newer ones darker); each axis scaled to its own extent.
 */
export function drawParallel(canvas, { axes, lines, title, labels = [] }) {
  const { ctx, width, height } = surface(canvas);
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  const shownTitle = fitText(ctx, title, width - 24);
  ctx.fillText(shownTitle, 12, 14);
  const extents = axes.map((_, k) => span(lines.map((l) => l.values[k]).filter(Number.isFinite)));
  // the axes inset by half their widest label, so no name is cut at the canvas's edge
  ctx.font = "bold 11px system-ui, sans-serif";
  const widest = Math.max(0, ...axes.map((name) => ctx.measureText(name).width));
  ctx.font = "11px system-ui, sans-serif";
  const n = Math.max(1, axes.length);
  const inset = Math.min(width / (2 * n), Math.max(40, widest / 2 + 8));
  // the title, then each axis's name, then its top value: three rows, none over another
  const plot = { x0: inset, x1: width - inset, y0: 52, y1: height - 30 };
  const at = (k) => (n === 1 ? (plot.x0 + plot.x1) / 2 : plot.x0 + (k / (n - 1)) * (plot.x1 - plot.x0));
  const room = n === 1 ? width - 16 : (plot.x1 - plot.x0) / (n - 1) - 6;
  const y = (k, v) => plot.y1 - ((v - extents[k][0]) / (extents[k][1] - extents[k][0])) * (plot.y1 - plot.y0);
  lines.forEach((l, i) => {
    const alpha = Math.round(40 + (200 * (i + 1)) / lines.length);
    ctx.strokeStyle = l.color + alpha.toString(16).padStart(2, "0");
    ctx.lineWidth = 1.2;
    ctx.beginPath();
    l.values.forEach((v, k) => (k ? ctx.lineTo(at(k), y(k, v)) : ctx.moveTo(at(k), y(k, v))));
    ctx.stroke();
  });
  ctx.strokeStyle = "#5d6d7e";
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "center";
  axes.forEach((name, k) => {
    ctx.beginPath();
    ctx.moveTo(at(k), plot.y0);
    ctx.lineTo(at(k), plot.y1);
    ctx.stroke();
    ctx.font = "bold 11px system-ui, sans-serif";
    ctx.fillText(fitText(ctx, name, Math.max(room, 2 * inset - 8)), at(k), 32);
    ctx.font = "11px system-ui, sans-serif";
    if (labels[k]) {
      // a label axis: each label at its rank, on a white ground beside the axis
      ctx.textAlign = k === n - 1 && n > 1 ? "right" : "left";
      const dx = ctx.textAlign === "right" ? -4 : 4;
      labels[k].forEach((text, rank) => {
        const w = ctx.measureText(text).width;
        const ty = y(k, rank) + 4;
        ctx.fillStyle = "#ffffffd0";
        ctx.fillRect(ctx.textAlign === "right" ? at(k) + dx - w - 2 : at(k) + dx - 2, ty - 10, w + 4, 13);
        ctx.fillStyle = "#1b2631";
        ctx.fillText(text, at(k) + dx, ty);
      });
      ctx.textAlign = "center";
    } else {
      ctx.fillText(formatValue(extents[k][1]), at(k), plot.y0 - 5);
      ctx.fillText(formatValue(extents[k][0]), at(k), plot.y1 + 14);
    }
  });
  // the rows' baselines (11 px text): the title, the axes' names, their top values
  return { title: shownTitle, titleY: 14, namesY: 32, topValuesY: plot.y0 - 5, axisTop: plot.y0, names: axes.map((_, k) => at(k)) };
}

/**
 * An amplitude spectrum: sets: [{label, color, buckets: [[frequency, min, max]]}] (a bucket's
 * frequency, and the least and greatest amplitude of the bins it holds), drawn as the greatest
 * amplitude's line over a band down to the least, on a frequency axis in Hz from 0. The first
 * bucket holds 0 Hz (the mean): it does not set the amplitude scale (it would flatten everything
 * else on a channel far from zero) and is clipped, its value written, when it stands above it.
 * peaks: [{label, frequency, amplitude}] marked with a dot and their frequency.
 * Returns { x0, x1, fmax, top } (where it drew).
 */
export function drawSpectrum(canvas, { sets, title, peaks = [] }) {
  const { ctx, width, height } = surface(canvas);
  const plot = { x0: 56, x1: width - 12, y0: 24, y1: height - 40 };
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  ctx.fillText(fitText(ctx, title, width - 24), 12, 14);
  const fmax = Math.max(1e-9, ...sets.flatMap((s) => s.buckets.map(([f]) => f)));
  const scaled = sets.flatMap((s) => s.buckets.slice(s.buckets.length > 1 ? 1 : 0).map(([, , mx]) => mx));
  const top = Math.max(1e-12, ...scaled.filter(Number.isFinite)) * 1.1;
  const x = (f) => plot.x0 + (f / fmax) * (plot.x1 - plot.x0);
  const y = (a) => Math.max(plot.y0, plot.y1 - (a / top) * (plot.y1 - plot.y0));
  axis(ctx, 0, top, y, true, plot);
  axis(ctx, 0, fmax, x, false, plot);
  ctx.fillStyle = "#5d6d7e";
  ctx.textAlign = "right";
  ctx.fillText("Hz", plot.x1, plot.y1 + 30);
  ctx.save();
  ctx.beginPath();
  ctx.rect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
  ctx.clip();
  for (const s of sets) {
    if (!s.buckets.length) continue;
    ctx.fillStyle = s.color + "40"; // the band from each bucket's least to its greatest amplitude
    ctx.beginPath();
    s.buckets.forEach(([f, , mx], i) => (i ? ctx.lineTo(x(f), y(mx)) : ctx.moveTo(x(f), y(mx))));
    for (let i = s.buckets.length - 1; i >= 0; i--) ctx.lineTo(x(s.buckets[i][0]), y(s.buckets[i][1]));
    ctx.closePath();
    ctx.fill();
    line(ctx, s.buckets.map(([f, , mx]) => [x(f), y(mx)]), s.color, 1.5);
  }
  ctx.restore();
  ctx.font = "11px system-ui, sans-serif";
  for (const s of sets) {
    const [f, , mx] = s.buckets[0] ?? [];
    if (s.buckets.length > 1 && mx > top) {
      ctx.fillStyle = s.color;
      ctx.textAlign = "left";
      ctx.fillText(`0 Hz: ${formatValue(mx)} ↑`, x(f) + 4, plot.y0 + 12);
    }
  }
  peaks.forEach((p, i) => {
    const color = sets.find((s) => s.label === p.label)?.color ?? "#1b2631";
    const [px, py] = [x(p.frequency), y(p.amplitude)];
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(px, py, 3.5, 0, 2 * Math.PI);
    ctx.fill();
    const text = `${formatValue(p.frequency)} Hz · ${formatValue(p.amplitude)}`;
    const w = ctx.measureText(text).width;
    ctx.textAlign = "left";
    const tx = Math.max(plot.x0 + 2, Math.min(plot.x1 - w - 2, px + 6));
    const ty = Math.max(plot.y0 + 12, py - 6) + i * 13;
    ctx.fillStyle = "#ffffffd0";
    ctx.fillRect(tx - 2, ty - 10, w + 4, 13);
    ctx.fillStyle = "#1b2631";
    ctx.fillText(text, tx, ty);
  });
  ctx.strokeStyle = "#5d6d7e";
  ctx.strokeRect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
  return { x0: plot.x0, x1: plot.x1, fmax, top };
}

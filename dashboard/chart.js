// A time chart on a canvas: lines for raw points, a min/max band with a mean line for buckets,
// a state strip for string channels, shaded spans for ranges. No library: the page ships as is.

const COLORS = ["#2f7ed8", "#e4572e", "#17a398", "#f3a712", "#8e44ad", "#5d6d7e", "#c0392b", "#27ae60"];
const PAD = { left: 64, right: 16, top: 12, bottom: 28 };
const STRIP = 18; // height of one string-channel strip
const LANE = 8; // height of one series' range lane, above the plot
const VALUE_LANE = 16; // a lane whose ranges carry values (rangeNumericAggregation): room for them

export function colorOf(index) {
  return COLORS[index % COLORS.length];
}

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * mag;
}

function timeLabel(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

/**
 * series: [{label, color, kind, points: [[ms, value]], buckets: [[ms, min, max, mean]]}]
 * ranges: [{label, color, spans: [[startMs|null, endMs|null]]}]
 */
export function draw(canvas, { series, ranges, startMs, endMs }) {
  const dpr = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);

  const strips = series.filter((s) => s.kind === "enum" || s.kind === "bucketedEnum");
  const numeric = series.filter((s) => !strips.includes(s));
  const plotBottom = height - PAD.bottom - strips.length * STRIP;
  const valued = ranges.some((r) => r.spans.some((sp) => sp.length > 2));
  const laneHeight = valued ? VALUE_LANE : LANE;
  const lanes = ranges.length ? ranges.length * laneHeight + 4 : 0; // one lane per series' ranges
  const top = PAD.top + lanes;
  const plot = { x0: PAD.left, x1: width - PAD.right, y0: top, y1: Math.max(top + 20, plotBottom) };
  const x = (ms) => plot.x0 + ((ms - startMs) / (endMs - startMs)) * (plot.x1 - plot.x0);

  let lo = Infinity;
  let hi = -Infinity;
  for (const s of numeric) {
    for (const [, v] of s.points) if (Number.isFinite(v)) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
    for (const [, mn, mx] of s.buckets) {
      if (Number.isFinite(mn)) lo = Math.min(lo, mn);
      if (Number.isFinite(mx)) hi = Math.max(hi, mx);
    }
  }
  if (!Number.isFinite(lo)) [lo, hi] = [0, 1];
  if (hi - lo < 1e-9) [lo, hi] = [lo - 1, hi + 1];
  const margin = (hi - lo) * 0.06;
  [lo, hi] = [lo - margin, hi + margin];
  const y = (v) => plot.y1 - ((v - lo) / (hi - lo)) * (plot.y1 - plot.y0);

  // grid and axes
  ctx.strokeStyle = "#e5e8ec";
  ctx.fillStyle = "#5d6d7e";
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  const yStep = niceStep(hi - lo, 5);
  ctx.textAlign = "right";
  for (let v = Math.ceil(lo / yStep) * yStep; v <= hi; v += yStep) {
    ctx.beginPath();
    ctx.moveTo(plot.x0, y(v));
    ctx.lineTo(plot.x1, y(v));
    ctx.stroke();
    ctx.fillText(Number(v.toPrecision(6)).toString(), plot.x0 - 6, y(v) + 4);
  }
  const xStep = niceStep(endMs - startMs, 6);
  ctx.textAlign = "center";
  for (let t = Math.ceil(startMs / xStep) * xStep; t <= endMs; t += xStep) {
    ctx.beginPath();
    ctx.moveTo(x(t), plot.y0);
    ctx.lineTo(x(t), plot.y1);
    ctx.stroke();
    ctx.fillText(timeLabel(t), x(t), height - 8);
  }

  ctx.save();
  ctx.beginPath();
  ctx.rect(plot.x0, PAD.top, plot.x1 - plot.x0, height - PAD.top);
  ctx.clip();

  // ranges: each series' in a lane of its own colour above the plot, so that several stay readable
  // (the legend names each lane), and a faint band behind the data; an instant is a 2 px tick
  // a range's value (rangeNumericAggregation) is written in its span where it fits
  ranges.forEach((r, i) => {
    const laneTop = PAD.top + i * laneHeight;
    for (const [s, e, value] of r.spans) {
      const a = x(s ?? startMs);
      const b = x(e ?? endMs);
      ctx.fillStyle = r.color;
      ctx.fillRect(a, laneTop, Math.max(2, b - a), laneHeight - 2);
      ctx.fillStyle = r.color + "14";
      ctx.fillRect(a, plot.y0, Math.max(1, b - a), plot.y1 - plot.y0);
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

  for (const s of numeric) {
    if (s.buckets.length) {
      ctx.fillStyle = s.color + "40"; // min/max band
      ctx.beginPath();
      s.buckets.forEach(([t, , mx], i) => (i ? ctx.lineTo(x(t), y(mx)) : ctx.moveTo(x(t), y(mx))));
      for (let i = s.buckets.length - 1; i >= 0; i--) ctx.lineTo(x(s.buckets[i][0]), y(s.buckets[i][1]));
      ctx.closePath();
      ctx.fill();
      line(ctx, s.buckets.map(([t, , , mean]) => [x(t), y(mean)]), s.color, 1.5);
    }
    if (s.points.length) {
      line(ctx, s.points.map(([t, v]) => [x(t), y(v)]), s.color, 1.5);
      if (s.points.length < 120) {
        ctx.fillStyle = s.color;
        for (const [t, v] of s.points) ctx.fillRect(x(t) - 1.5, y(v) - 1.5, 3, 3);
      }
    }
  }

  // string channels: one strip each, a block per state, labelled where it fits
  strips.forEach((s, i) => {
    const top = plot.y1 + 4 + i * STRIP;
    const states = s.points;
    states.forEach(([t, v], j) => {
      const a = x(t);
      const b = j + 1 < states.length ? x(states[j + 1][0]) : x(endMs);
      ctx.fillStyle = colorOf(hash(v)) + "99";
      ctx.fillRect(a, top, Math.max(1, b - a), STRIP - 4);
      if (b - a > 40 && (j === 0 || states[j - 1][1] !== v)) {
        ctx.fillStyle = "#1b2631";
        ctx.textAlign = "left";
        ctx.fillText(String(v), a + 3, top + STRIP - 8);
      }
    });
  });
  ctx.restore();
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
      ctx.fillStyle = b.color + "cc";
      for (const [name, count] of b.buckets) {
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
  const scale = Math.min(width, height - 30) * 0.62;
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
  ctx.fillStyle = "#5d6d7e";
  ["x", "y", "z"].forEach((axisName, k) => {
    const end = [-0.5, -0.5, -0.5];
    end[k] = 0.6;
    const [px, py] = project(end);
    const [lo, hi] = ranges[k];
    ctx.textAlign = "center";
    ctx.fillText(`${names[k] ?? axisName} ${formatValue(lo)}…${formatValue(hi)}`, px, py);
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
}

/**
 * Multivariate buckets as parallel coordinates: axes: [name], lines: [{color, values: [v per axis]}]
 * (one line per time bucket, newer ones darker); each axis scaled to its own extent.
 */
export function drawParallel(canvas, { axes, lines, title }) {
  const { ctx, width, height } = surface(canvas);
  const plot = { x0: 40, x1: width - 40, y0: 30, y1: height - 40 };
  ctx.fillStyle = "#1b2631";
  ctx.textAlign = "left";
  ctx.fillText(title, 12, 14);
  const n = Math.max(1, axes.length);
  const at = (k) => (n === 1 ? (plot.x0 + plot.x1) / 2 : plot.x0 + (k / (n - 1)) * (plot.x1 - plot.x0));
  const extents = axes.map((_, k) => span(lines.map((l) => l.values[k]).filter(Number.isFinite)));
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
    ctx.fillText(name, at(k), plot.y1 + 16);
    ctx.fillText(formatValue(extents[k][1]), at(k), plot.y0 - 6);
    ctx.fillText(formatValue(extents[k][0]), at(k), plot.y1 + 30);
  });
}

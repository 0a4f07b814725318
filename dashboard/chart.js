// A time chart on a canvas: lines for raw points, a min/max band with a mean line for buckets,
// a state strip for string channels, shaded spans for ranges. No library: the page ships as is.

const COLORS = ["#2f7ed8", "#e4572e", "#17a398", "#f3a712", "#8e44ad", "#5d6d7e", "#c0392b", "#27ae60"];
const PAD = { left: 64, right: 16, top: 12, bottom: 28 };
const STRIP = 18; // height of one string-channel strip

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
  const plot = { x0: PAD.left, x1: width - PAD.right, y0: PAD.top, y1: Math.max(PAD.top + 20, plotBottom) };
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
  ctx.rect(plot.x0, plot.y0, plot.x1 - plot.x0, height - plot.y0);
  ctx.clip();

  // ranges: shaded spans behind the data
  for (const r of ranges) {
    ctx.fillStyle = r.color + "33";
    for (const [s, e] of r.spans) {
      const a = x(s ?? startMs);
      const b = x(e ?? endMs);
      ctx.fillRect(a, plot.y0, Math.max(1, b - a), plot.y1 - plot.y0);
    }
  }

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

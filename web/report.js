/*
 * The sale report's view on the operator page: its figures and its charts,
 * drawn as inline SVG in this page (no library, nothing loaded from
 * elsewhere). The charts are laid out as the load tool's HTML report lays
 * out its own (deploy/tools/loadtest/html.go): the same viewBox, round axis
 * steps, one flat step per bucket of the timeline, a legend under the plot.
 * A bucket is the report's bucket_seconds wide: a second for a sale of up to
 * an hour, wider for a longer span (gateway/openapi.yaml, SaleReport), so the
 * counts are per bucket and the time axis is in the unit that suits the span.
 *
 * window.saleReport.render(root, report) fills root with the report of
 * GET /api/v1/admin/vouchers/{id}/report. Hooks for tests:
 *   [data-field="<figure>"] dd        a figure (attempts, accepted, replayed, bots_refused,
 *                                      sold_out, time_in_line, admitted_bought, conversion,
 *                                      paid, payments_refunds, late_payments, timed_out,
 *                                      returned_resold)
 *   [data-refusal="<code>"] dd         refused attempts by error code
 *   svg.chart[data-chart="answers|line|orders"] path.series[data-series="<name>"]
 *   svg.chart[data-bucket-seconds]    the width of the chart's steps
 */
'use strict';

(() => {
  const SVG = 'http://www.w3.org/2000/svg';

  // The load tool's colours for the answers it knows; the rest are picked
  // from the palette in the order they first appear.
  const COLORS = {
    attempts: '#9e9e9e', accepted: '#2e7d32', replayed: '#81c784', sold_out: '#1565c0', limit_exceeded: '#6a1b9a',
    rate_limited: '#ef6c00', unavailable: '#c62828', not_started: '#8d6e63',
    waiting: '#6a1b9a', admitted: '#2e7d32', paid: '#1565c0', returned: '#ef6c00', timed_out: '#c62828',
  };
  const PALETTE = ['#00838f', '#ad1457', '#558b2f', '#4527a0', '#f9a825', '#37474f', '#d84315'];

  // niceScale picks a round step (1, 2, 2.5 or 5 × 10^k) giving about n
  // ticks up to at least v, and the top of the axis.
  function niceScale(v, n) {
    if (!(v > 0)) return { step: 1, top: 1 };
    const raw = v / n;
    const mag = 10 ** Math.floor(Math.log10(raw));
    let step = 10 * mag;
    for (const m of [1, 2, 2.5, 5]) {
      if (m * mag >= raw) { step = m * mag; break; }
    }
    return { step, top: Math.ceil(v / step - 1e-9) * step };
  }

  const trim = (v) => String(Math.round(v * 1000) / 1000);

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // chart draws series (each {name, color, dash, values: one per bucket})
  // over the buckets of axis ({bucket: seconds, unit: seconds per unit of
  // the x axis, label}).
  function chart(name, title, yLabel, axis, series) {
    const W = 900; const H = 330; const L = 70; const T = 20; const PW = 800; const PH = 230;
    const legendY = T + PH + 52;
    let yMax = 0;
    let n = 0;
    for (const s of series) {
      n = Math.max(n, s.values.length);
      for (const v of s.values) yMax = Math.max(yMax, v);
    }
    const step = axis.bucket / axis.unit;
    const xs = niceScale(n * step, 10);
    const ys = niceScale(yMax, 5);
    const x = (v) => L + (v / xs.top) * PW;
    const y = (v) => T + PH - (v / ys.top) * PH;
    const svg = el('svg', {
      class: 'chart', 'data-chart': name, 'data-bucket-seconds': axis.bucket, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title,
    });
    const grid = el('g', { class: 'grid' });
    const axes = el('g', { class: 'axes' });
    for (let v = 0; v <= ys.top + ys.step / 2; v += ys.step) {
      grid.append(el('line', { x1: L, x2: L + PW, y1: y(v), y2: y(v) }));
      svg.append(el('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, trim(v)));
    }
    for (let v = 0; v <= xs.top + xs.step / 2; v += xs.step) {
      svg.append(el('text', { x: x(v), y: T + PH + 16, 'text-anchor': 'middle' }, trim(v)));
    }
    axes.append(el('line', { x1: L, y1: T, x2: L, y2: T + PH }), el('line', { x1: L, y1: T + PH, x2: L + PW, y2: T + PH }));
    svg.prepend(grid, axes);
    svg.append(el('text', { x: L + PW / 2, y: T + PH + 34, 'text-anchor': 'middle' }, axis.label));
    svg.append(el('text', { x: 16, y: T + PH / 2, 'text-anchor': 'middle', transform: `rotate(-90 16 ${T + PH / 2})` }, yLabel));
    let legendX = L;
    for (const s of series) {
      // One flat step per bucket: what a bucket's counts honestly are.
      let d = '';
      s.values.forEach((v, i) => {
        d += `${i === 0 ? 'M' : 'L'}${x(i * step).toFixed(1)} ${y(v).toFixed(1)}L${x((i + 1) * step).toFixed(1)} ${y(v).toFixed(1)}`;
      });
      if (!d) continue;
      const stroke = { fill: 'none', stroke: s.color, 'stroke-width': 1.6 };
      if (s.dash) stroke['stroke-dasharray'] = s.dash;
      svg.append(el('path', { class: 'series', 'data-series': s.name, d, ...stroke }));
      const legend = el('g', { class: 'legend' });
      const mark = { x1: legendX, x2: legendX + 22, y1: legendY, y2: legendY, stroke: s.color, 'stroke-width': 3 };
      if (s.dash) mark['stroke-dasharray'] = s.dash;
      legend.append(el('line', mark), el('text', { x: legendX + 28, y: legendY + 4 }, s.name));
      svg.append(legend);
      legendX += 30 + 7.5 * s.name.length + 20;
    }
    const figure = document.createElement('figure');
    const caption = document.createElement('figcaption');
    caption.textContent = title;
    figure.append(caption, svg);
    return figure;
  }

  function colorOf(name, used) {
    if (COLORS[name]) return COLORS[name];
    if (!used.has(name)) used.set(name, PALETTE[used.size % PALETTE.length]);
    return used.get(name);
  }

  function figure(dl, field, label, value) {
    const div = document.createElement('div');
    div.dataset.field = field;
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = label;
    dd.textContent = value;
    div.append(dt, dd);
    dl.append(div);
    return div;
  }

  // bucketName says a bucket of w seconds after "per": "second",
  // "10 s", "minute", "6 h", ...
  function bucketName(w) {
    const names = { 1: 'second', 60: 'minute', 3600: 'hour', 86400: 'day', 604800: 'week' };
    if (names[w]) return names[w];
    for (const [u, unit] of [[86400, 'days'], [3600, 'h'], [60, 'min']]) {
      if (w % u === 0) return `${w / u} ${unit}`;
    }
    return `${w} s`;
  }

  // timeAxis is the x axis of a timeline of n buckets of w seconds from
  // start: in seconds, minutes, hours or days, whichever keeps its numbers
  // short.
  function timeAxis(start, n, w) {
    const span = n * w;
    const [unit, name] = span <= 2 * 3600 ? [1, 'seconds'] : span <= 2 * 86400 ? [60, 'minutes']
      : span <= 60 * 86400 ? [3600, 'hours'] : [86400, 'days'];
    const from = unit < 3600 ? new Date(start).toLocaleTimeString() : new Date(start).toLocaleString();
    return { bucket: w, unit, label: `${name} from ${from}` };
  }

  const seconds = (ms) => `${trim(ms / 1000)} s`;
  const pct = (v) => `${(v * 100).toFixed(1)}%`;

  function render(root, r) {
    root.replaceChildren();
    const tl = r.timeline || [];
    const start = tl.length ? Date.parse(tl[0].t) : NaN;
    const first = r.first_buy_at ? Date.parse(r.first_buy_at) : NaN;

    const dl = document.createElement('dl');
    dl.className = 'report-figures';
    figure(dl, 'attempts', 'Buy attempts', String(r.attempts));
    figure(dl, 'accepted', 'Accepted', String(r.accepted));
    figure(dl, 'replayed', 'Replayed (a retry answered with its order)', String(r.replayed || 0));
    figure(dl, 'bots_refused', 'Bots refused (limits, captcha, no pass)', String(r.bots_refused));
    figure(dl, 'sold_out', 'Sold out', r.sold_out_at
      ? (Number.isNaN(first) ? new Date(r.sold_out_at).toISOString() : `${seconds(Math.max(Date.parse(r.sold_out_at) - first, 0))} after the first buy`)
      : 'not sold out');
    figure(dl, 'time_in_line', 'Time in line p50 / p99', r.time_in_line_ms && r.time_in_line_ms.p50 !== null
      ? `${seconds(r.time_in_line_ms.p50)} / ${seconds(r.time_in_line_ms.p99)}` : 'no line');
    figure(dl, 'admitted_bought', 'Admitted / bought', `${r.admitted} / ${r.bought}`);
    figure(dl, 'conversion', 'Paid (conversion)', `${r.paid} (${pct(r.conversion)})`);
    figure(dl, 'payments_refunds', 'Payments / refunds', `${r.payments || 0} / ${r.refunds || 0}`);
    figure(dl, 'late_payments', 'Late payments (refunded automatically)', String(r.late_payments || 0));
    figure(dl, 'timed_out', 'Payment timeouts', String(r.timed_out));
    figure(dl, 'returned_resold', 'Units returned / resold', `${r.returned} / ${r.resold}`);
    root.append(dl);

    const codes = Object.keys(r.refusals || {}).filter((c) => r.refusals[c] > 0).sort((a, b) => r.refusals[b] - r.refusals[a]);
    if (codes.length) {
      const refusals = document.createElement('dl');
      refusals.className = 'report-figures refusals';
      for (const c of codes) {
        let label = c;
        if (c === 'rate_limited' && r.limiters) {
          const by = Object.entries(r.limiters).filter(([, n]) => n > 0).map(([l, n]) => `${l.replace('_limit', '')} ${n}`);
          if (by.length) label += ` (${by.join(', ')})`;
        }
        figure(refusals, 'refusal', label, String(r.refusals[c])).dataset.refusal = c;
      }
      const h = document.createElement('h3');
      h.textContent = 'Refused, by answer';
      root.append(h, refusals);
    }

    if (!tl.length) {
      const p = document.createElement('p');
      p.className = 'muted';
      p.textContent = 'Nothing recorded yet: the figures appear within a second of the first buy.';
      root.append(p);
      return;
    }
    const w = r.bucket_seconds > 0 ? r.bucket_seconds : 1;
    const axis = timeAxis(start, tl.length, w);
    const per = `per ${bucketName(w)}`;
    const used = new Map();
    const pick = (f) => tl.map(f);
    const answers = [
      { name: 'attempts', dash: '4 3', values: pick((s) => s.attempts) },
      { name: 'accepted', values: pick((s) => s.accepted) },
      ...(r.replayed > 0 ? [{ name: 'replayed', dash: '2 2', values: pick((s) => s.replayed || 0) }] : []),
      ...codes.map((c) => ({ name: c, values: pick((s) => (s.refusals && s.refusals[c]) || 0) })),
    ];
    for (const s of answers) s.color = colorOf(s.name, used);
    root.append(chart('answers', `Buy attempts ${per}, by answer`, per, axis, answers));
    if (tl.some((s) => s.waiting > 0 || s.admitted > 0)) {
      root.append(chart('line', `The waiting line: its longest length and admissions ${per}`, 'shoppers', axis, [
        { name: 'waiting', color: COLORS.waiting, values: pick((s) => s.waiting) },
        { name: 'admitted', color: COLORS.admitted, dash: '4 3', values: pick((s) => s.admitted) },
      ]));
    }
    root.append(chart('orders', `Payments, timeouts and returned units ${per}`, per, axis, [
      { name: 'paid', color: COLORS.paid, values: pick((s) => s.paid) },
      { name: 'timed_out', color: COLORS.timed_out, values: pick((s) => s.timed_out) },
      { name: 'returned', color: COLORS.returned, dash: '4 3', values: pick((s) => s.returned) },
    ]));
  }

  window.saleReport = { render };
})();

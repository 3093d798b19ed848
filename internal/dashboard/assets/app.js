// The hpsearch dashboard: the studies, and per study its trials table,
// optimization history, parallel coordinates, learning curves with the
// scheduler's decisions, and cost breakdown.
//
// One script, two modes. Served by `hpsearch serve`, it reads the HTTP API
// with a bearer token and follows the study's events (Server-Sent Events
// read with fetch, which can send the Authorization header that
// EventSource cannot). In a file written by `hpsearch report`, it reads
// the study and its trials from the JSON script element #hps-data.
//
// Every plot is an inline SVG whose root has data-plot (its kind) and
// data-points (how many trials it draws).
'use strict';
(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const TOKEN_KEY = 'hpsearch-token';
  const TRIAL_STATES = ['queued', 'running', 'completed', 'failed', 'pruned', 'interrupted'];
  const STATE_COLOR = {
    queued: '#718096', running: '#b7791f', completed: '#2b6cb0',
    failed: '#c53030', pruned: '#a0aec0', interrupted: '#dd6b20',
  };
  const ACTION_COLOR = {continue: '#2f855a', stop: '#c53030', exploit: '#6b46c1'};
  // VIRIDIS colours values from worst (0) to best (1), as the viridis map
  // with its pale yellow end darkened to show on white: the best are the
  // darkest, drawn on top.
  const VIRIDIS = ['#c9a900', '#5ec962', '#21918c', '#3b528b', '#440154'];

  // S is the page's state: the study shown and what the page is doing.
  const S = {
    mode: 'live',
    token: '',
    study: null,
    spec: {},
    trials: new Map(),
    lastEventId: 0,
    events: 0,
    following: false,
    generatedAt: '',
    abort: new AbortController(),
    timer: 0,
    renderPending: false,
    table: {sort: 'number', dir: 1, text: '', state: ''},
  };

  // ---- DOM helpers ----

  // el makes an HTML element; attributes named on* are listeners, and
  // children that are not nodes become text.
  function el(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  // sv makes an SVG element.
  function sv(tag, attrs, ...children) {
    return fill(document.createElementNS(SVGNS, tag), attrs, children);
  }

  function fill(node, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const byId = id => document.getElementById(id);

  // ---- formatting ----

  const isNum = v => typeof v === 'number' && Number.isFinite(v);

  function fmt(v) {
    if (!isNum(v)) return '–';
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
    return String(Number(v.toPrecision(5)));
  }

  const usd = v => '$' + (v || 0).toFixed(6);
  const pct = (part, whole) => whole > 0 ? (100 * part / whole).toFixed(1) + '%' : '–';
  const paramText = v => typeof v === 'number' ? fmt(v) : String(v);

  function duration(seconds) {
    const s = Math.round(seconds || 0);
    const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), x = s % 60;
    if (h) return `${h}h ${String(m).padStart(2, '0')}m`;
    if (m) return `${m}m ${String(x).padStart(2, '0')}s`;
    return `${x}s`;
  }

  // ---- the stored space document ----

  // parseSpec reads the canonical space document the server stores
  // (indented "key: value" lines) into nested objects of strings.
  function parseSpec(text) {
    const root = {};
    const stack = [{indent: -1, obj: root}];
    for (const raw of String(text || '').split('\n')) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      const m = /^("(?:[^"\\]|\\.)*"|[^:]+):(?:\s+(.*))?$/.exec(line);
      if (!m) continue;
      const indent = raw.length - raw.trimStart().length;
      while (stack.length > 1 && stack[stack.length - 1].indent >= indent) stack.pop();
      const parent = stack[stack.length - 1].obj;
      const key = unquote(m[1]);
      if (m[2] === undefined) {
        const obj = {};
        parent[key] = obj;
        stack.push({indent, obj});
      } else {
        parent[key] = m[2];
      }
    }
    return root;
  }

  function unquote(s) {
    if (!s.startsWith('"')) return s;
    try {
      return JSON.parse(s);
    } catch (_) {
      return s.slice(1, -1);
    }
  }

  // flowList reads a YAML flow list such as [16, 32, "a b"] as strings.
  function flowList(s) {
    const inner = String(s || '').trim().replace(/^\[/, '').replace(/\]$/, '');
    return (inner.match(/"(?:[^"\\]|\\.)*"|[^,]+/g) || []).map(x => unquote(x.trim())).filter(x => x !== '');
  }

  const specParams = () => (typeof S.spec.parameters === 'object' ? S.spec.parameters : {});
  const specScheduler = () => (typeof S.spec.scheduler === 'object' ? S.spec.scheduler : {});

  // ---- the objective ----

  const metricName = () => (S.study && S.study.objective && S.study.objective.metric) || 'value';
  const minimize = () => S.study && S.study.objective && S.study.objective.goal === 'minimize';
  const better = (a, b) => (minimize() ? a < b : a > b);
  const trialList = () => [...S.trials.values()].sort((a, b) => a.number - b.number);
  const completed = trials => trials.filter(t => t.state === 'completed' && isNum(t.value));

  function bestTrial(trials) {
    let best = null;
    for (const t of completed(trials)) if (!best || better(t.value, best.value)) best = t;
    return best;
  }

  // ranker maps a value to 0 (the worst of values) .. 1 (the best) by its
  // rank, so that one outlier does not wash out the others' colours.
  function ranker(values) {
    const sorted = values.filter(isNum).sort((a, b) => a - b);
    const last = sorted.length - 1;
    return v => {
      if (last < 1) return 1;
      let first = sorted.findIndex(x => x >= v);
      if (first < 0) first = last;
      let end = first;
      while (end < last && sorted[end + 1] === v) end++;
      const f = (first + end) / 2 / last;
      return minimize() ? 1 - f : f;
    };
  }

  function viridis(f) {
    const x = Math.min(1, Math.max(0, f)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
    const a = hex(VIRIDIS[i]), b = hex(VIRIDIS[i + 1]), t = x - i;
    return '#' + a.map((c, k) => Math.round(c + (b[k] - c) * t).toString(16).padStart(2, '0')).join('');
  }

  const hex = c => [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16));

  // ---- scales and axes ----

  function extent(values) {
    let lo = Infinity, hi = -Infinity;
    for (const v of values) {
      if (!isNum(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    return lo <= hi ? [lo, hi] : [0, 1];
  }

  // padded widens a domain by a margin, or around a single value.
  function padded([lo, hi], frac) {
    if (lo === hi) {
      const d = Math.abs(lo) * 0.05 || 0.5;
      return [lo - d, hi + d];
    }
    const d = (hi - lo) * frac;
    return [lo - d, hi + d];
  }

  // scale maps a domain onto a range, linearly or (log, positive domain)
  // logarithmically; scale.ticks(n) gives round values to label.
  function scale(domain, range, log) {
    const [r0, r1] = range;
    if (log && domain[0] > 0 && domain[1] > domain[0]) {
      const l0 = Math.log10(domain[0]), l1 = Math.log10(domain[1]);
      const f = v => r0 + (Math.log10(v) - l0) / (l1 - l0) * (r1 - r0);
      f.ticks = () => logTicks(domain[0], domain[1]);
      return f;
    }
    const [d0, d1] = domain[0] === domain[1] ? padded(domain, 0) : domain;
    const f = v => r0 + (v - d0) / (d1 - d0) * (r1 - r0);
    f.ticks = n => niceTicks(d0, d1, n);
    return f;
  }

  function niceTicks(lo, hi, n) {
    const raw = (hi - lo) / Math.max(1, n);
    if (!(raw > 0)) return [lo];
    const mag = 10 ** Math.floor(Math.log10(raw));
    const r = raw / mag;
    const step = mag * (r >= 7.5 ? 10 : r >= 3.5 ? 5 : r >= 1.5 ? 2 : 1);
    const out = [];
    for (let i = Math.ceil(lo / step); i * step <= hi + step * 1e-9; i++) out.push(Number((i * step).toPrecision(12)));
    return out;
  }

  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) {
        const v = Number((m * 10 ** e).toPrecision(12));
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push(v);
      }
    }
    const decades = out.filter(v => Number.isInteger(Math.log10(v)));
    if (out.length > 7 && decades.length >= 2) return decades;
    return out.length >= 2 ? out : [lo, hi];
  }

  // plotSVG is the root of a plot: data-plot names it, data-points counts
  // the trials it draws.
  function plotSVG(kind, points, w, h, label) {
    const id = 'plot-title-' + kind;
    return sv('svg', {
      class: 'plot', viewBox: `0 0 ${w} ${h}`, role: 'img', 'aria-labelledby': id,
      'data-plot': kind, 'data-points': points, preserveAspectRatio: 'xMidYMid meet',
    }, sv('title', {id}, label));
  }

  function axisBottom(svg, sc, ticks, y, x0, x1, label) {
    const g = sv('g', {class: 'axis'}, sv('line', {x1: x0, x2: x1, y1: y, y2: y}));
    for (const v of ticks) {
      const x = sc(v);
      g.append(sv('line', {x1: x, x2: x, y1: y, y2: y + 4}), sv('text', {x, y: y + 16, 'text-anchor': 'middle'}, fmt(v)));
    }
    g.append(sv('text', {class: 'axis-label', x: (x0 + x1) / 2, y: y + 32, 'text-anchor': 'middle'}, label));
    svg.append(g);
  }

  // axisLeft draws a vertical axis at x, with grid lines to right.
  function axisLeft(svg, sc, ticks, x, right, y0, y1, label) {
    const g = sv('g', {class: 'axis'}, sv('line', {x1: x, x2: x, y1: y0, y2: y1}));
    for (const v of ticks) {
      const y = sc(v);
      g.append(sv('line', {x1: x - 4, x2: x, y1: y, y2: y}), sv('line', {class: 'grid', x1: x, x2: right, y1: y, y2: y}),
        sv('text', {x: x - 7, y: y + 4, 'text-anchor': 'end'}, fmt(v)));
    }
    const my = (y0 + y1) / 2;
    g.append(sv('text', {class: 'axis-label', x: 14, y: my, 'text-anchor': 'middle', transform: `rotate(-90 14 ${my})`}, label));
    svg.append(g);
  }

  function empty(text) {
    return el('p', {class: 'empty'}, text);
  }

  // ---- plots ----

  // historyPlot draws each completed trial's value by trial number, and
  // the best value so far as a step line.
  function historyPlot(trials) {
    const pts = completed(trials);
    if (!pts.length) return empty('No completed trial yet.');
    const W = 640, H = 320, m = {l: 64, r: 16, t: 14, b: 44};
    const nums = extent(pts.map(t => t.number));
    const xs = scale([nums[0] - 0.5, nums[1] + 0.5], [m.l, W - m.r]);
    const ydom = padded(extent(pts.map(t => t.value)), 0.06);
    const ys = scale(ydom, [H - m.b, m.t]);
    const best = bestTrial(pts);
    const svg = plotSVG('history', pts.length, W, H,
      `Optimization history: ${metricName()} of ${pts.length} completed trials and the best so far (${minimize() ? 'minimize' : 'maximize'})`);
    svg.setAttribute('data-best', best ? best.number : '');
    axisLeft(svg, ys, ys.ticks(5), m.l, W - m.r, H - m.b, m.t, metricName());
    axisBottom(svg, xs, xs.ticks(8).filter(Number.isInteger), H - m.b, m.l, W - m.r, 'trial');
    let run = null;
    let d = '';
    for (const t of pts) {
      if (run === null || better(t.value, run)) run = t.value;
      d += d ? ` H${xs(t.number).toFixed(1)} V${ys(run).toFixed(1)}` : `M${xs(t.number).toFixed(1)} ${ys(run).toFixed(1)}`;
    }
    d += ` H${(W - m.r).toFixed(1)}`;
    svg.append(sv('path', {class: 'best-line', d, fill: 'none', stroke: '#c05621', 'stroke-width': 2}));
    const dots = sv('g', {class: 'points'});
    for (const t of pts) {
      const isBest = best && t.number === best.number;
      dots.append(sv('circle', {
        cx: xs(t.number).toFixed(1), cy: ys(t.value).toFixed(1), r: isBest ? 6 : 4,
        fill: isBest ? '#c05621' : STATE_COLOR.completed, stroke: '#fff', 'stroke-width': 1, 'data-trial': t.number,
      }, sv('title', {}, `trial ${t.number}: ${metricName()} ${fmt(t.value)}${isBest ? ' (best)' : ''}`)));
    }
    svg.append(dots);
    return [svg, legend([
      [swatch('circle', STATE_COLOR.completed), 'a trial’s value'],
      [swatch('line', '#c05621'), 'best so far'],
    ])];
  }

  // paramAxes are the axes of the parallel-coordinates plot: one per
  // parameter that varies, numeric or categorical, in the space's order.
  function paramAxes(trials) {
    const defs = specParams();
    const names = Object.keys(defs);
    for (const t of trials) for (const k of Object.keys(t.params || {})) if (!names.includes(k)) names.push(k);
    const axes = [];
    for (const name of names) {
      const def = typeof defs[name] === 'object' ? defs[name] : {};
      const values = trials.map(t => (t.params || {})[name]).filter(v => v !== undefined && v !== null);
      const distinct = new Set(values.map(String));
      if (!values.length || def.type === 'constant' || (!def.type && distinct.size < 2)) continue;
      const numeric = def.type === 'float' || def.type === 'int' || (!def.type && values.every(isNum));
      if (numeric) {
        let [lo, hi] = extent(values);
        if (def.min !== undefined && isNum(Number(def.min))) lo = Math.min(lo, Number(def.min));
        if (def.max !== undefined && isNum(Number(def.max))) hi = Math.max(hi, Number(def.max));
        axes.push({name, kind: 'num', domain: [lo, hi], log: def.log === 'true'});
      } else {
        const cats = flowList(def.values).map(String);
        for (const v of [...distinct].sort()) if (!cats.includes(v)) cats.push(v);
        axes.push({name, kind: 'cat', cats});
      }
    }
    return axes;
  }

  // parallelPlot draws one line per trial through its parameters and,
  // for completed trials, its value, coloured by how good the value is.
  function parallelPlot(trials) {
    const axes = paramAxes(trials);
    const done = completed(trials);
    const [vlo, vhi] = extent(done.map(t => t.value));
    const goodness = ranker(done.map(t => t.value));
    if (done.length) axes.push({name: metricName(), kind: 'num', domain: [vlo, vhi], objective: true});
    const drawn = trials.filter(t => t.params && Object.keys(t.params).length);
    if (axes.length < 2 || !drawn.length) return empty('Nothing to compare yet: no trial with parameters that vary.');
    const m = {l: 80, r: 64, t: 40, b: 24};
    const W = Math.max(640, 130 * (axes.length - 1) + m.l + m.r), H = 340;
    const step = (W - m.l - m.r) / (axes.length - 1);
    for (const [i, a] of axes.entries()) {
      a.x = m.l + i * step;
      if (a.kind === 'num') {
        a.scale = scale(a.domain, [H - m.b, m.t], a.log);
        a.y = v => (isNum(v) ? a.scale(v) : null);
        a.ticks = a.scale.ticks(4).map(v => [v, fmt(v)]);
      } else {
        const n = a.cats.length;
        a.y = v => {
          const i = a.cats.indexOf(String(v));
          return i < 0 ? null : (n === 1 ? (H - m.b + m.t) / 2 : H - m.b - i * (H - m.b - m.t) / (n - 1));
        };
        a.ticks = a.cats.map(c => [c, c]);
      }
    }
    const svg = plotSVG('parallel', drawn.length, W, H,
      `Parallel coordinates: ${drawn.length} trials through ${axes.length - (done.length ? 1 : 0)} parameters and ${metricName()}`);
    const lines = sv('g', {class: 'lines', fill: 'none'});
    const order = [...drawn].sort((a, b) => rank(a) - rank(b));
    for (const t of order) {
      const ok = t.state === 'completed' && isNum(t.value);
      let d = '', pen = false;
      for (const a of axes) {
        const v = a.objective ? (ok ? t.value : undefined) : (t.params || {})[a.name];
        const y = v === undefined || v === null ? null : a.y(v);
        if (y === null) {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${a.x.toFixed(1)} ${y.toFixed(1)} `;
        pen = true;
      }
      if (!d) continue;
      const color = ok ? viridis(goodness(t.value)) : '#b8c0cc';
      lines.append(sv('path', {
        d: d.trim(), stroke: color, 'stroke-width': ok ? 1.8 : 1, 'stroke-opacity': ok ? 0.9 : 0.7,
        'stroke-dasharray': ok ? null : '4 3', 'data-trial': t.number,
      }, sv('title', {}, `trial ${t.number} (${t.state})${ok ? ': ' + fmt(t.value) : ''}`)));
    }
    svg.append(lines);
    for (const a of axes) {
      const g = sv('g', {class: 'axis' + (a.objective ? ' objective' : '')},
        sv('line', {x1: a.x, x2: a.x, y1: m.t, y2: H - m.b}),
        sv('text', {class: 'axis-label', x: a.x, y: m.t - 18, 'text-anchor': 'middle'}, a.name + (a.log ? ' (log)' : '')));
      for (const [v, label] of a.ticks) {
        const y = a.y(v);
        if (y === null) continue;
        g.append(sv('line', {x1: a.x - 3, x2: a.x + 3, y1: y, y2: y}),
          sv('text', {class: 'tick', x: a.x + 6, y: y + 4}, label));
      }
      svg.append(g);
    }
    return [svg, done.length ? gradientLegend(vlo, vhi) : null];
  }

  // rank orders lines so that the better ones are drawn last, on top.
  function rank(t) {
    if (t.state !== 'completed' || !isNum(t.value)) return -Infinity;
    return minimize() ? -t.value : t.value;
  }

  // curvesPlot draws each trial's objective per step, and the scheduler's
  // decisions at its rungs.
  function curvesPlot(trials) {
    const metric = metricName();
    const curves = trials.map(t => ({
      t, pts: (t.metrics || []).filter(x => x.name === metric && isNum(x.value) && isNum(x.step)).sort((a, b) => a.step - b.step),
    })).filter(c => c.pts.length);
    const rungs = trials.flatMap(t => (t.rungs || []).map(r => ({t, r})));
    if (!curves.length) return empty(`No trial has reported ${metric} during training yet.`);
    const W = 640, H = 320, m = {l: 64, r: 16, t: 14, b: 44};
    const steps = curves.flatMap(c => c.pts.map(p => p.step)).concat(rungs.map(x => x.r.resource));
    const values = curves.flatMap(c => c.pts.map(p => p.value)).concat(rungs.map(x => x.r.value));
    const sched = specScheduler();
    const [slo, shi] = extent(steps);
    const logX = (sched.type === 'asha' || sched.type === 'hyperband') && slo > 0 && shi / slo >= 9;
    const xs = scale(logX ? [slo, shi] : padded([slo, shi], 0.02), [m.l, W - m.r], logX);
    const ys = scale(padded(extent(values), 0.06), [H - m.b, m.t]);
    const unit = sched.resource || 'step';
    const svg = plotSVG('curves', curves.length, W, H,
      `Learning curves: ${metric} by ${unit} of ${curves.length} trials, with ${rungs.length} scheduler decisions`);
    svg.setAttribute('data-rungs', rungs.length);
    axisLeft(svg, ys, ys.ticks(5), m.l, W - m.r, H - m.b, m.t, metric);
    axisBottom(svg, xs, xs.ticks(8), H - m.b, m.l, W - m.r, unit + (logX ? ' (log)' : ''));
    const rungSteps = [...new Set(rungs.map(x => x.r.resource))];
    for (const s of rungSteps) {
      svg.append(sv('line', {class: 'rung-line', x1: xs(s), x2: xs(s), y1: m.t, y2: H - m.b}));
    }
    const goodness = ranker(completed(trials).map(t => t.value));
    const lines = sv('g', {class: 'lines', fill: 'none'});
    for (const {t, pts} of [...curves].sort((a, b) => rank(a.t) - rank(b.t))) {
      const ok = t.state === 'completed' && isNum(t.value);
      const color = ok ? viridis(goodness(t.value)) : (STATE_COLOR[t.state] || '#718096');
      const title = sv('title', {}, `trial ${t.number} (${t.state}): ${metric} ${fmt(pts[pts.length - 1].value)} at ${unit} ${fmt(pts[pts.length - 1].step)}`);
      if (pts.length === 1) {
        lines.append(sv('circle', {cx: xs(pts[0].step), cy: ys(pts[0].value), r: 2.5, fill: color, 'data-trial': t.number}, title));
        continue;
      }
      const d = pts.map((p, i) => `${i ? 'L' : 'M'}${xs(p.step).toFixed(1)} ${ys(p.value).toFixed(1)}`).join(' ');
      lines.append(sv('path', {
        d, stroke: color, 'stroke-width': ok ? 1.8 : 1.2, 'stroke-dasharray': t.state === 'pruned' ? '4 3' : null, 'data-trial': t.number,
      }, title));
    }
    svg.append(lines);
    const marks = sv('g', {class: 'rungs'});
    for (const {t, r} of rungs) {
      const x = xs(r.resource), y = ys(r.value);
      const donor = r.donor !== undefined && r.donor !== null ? `, copied trial ${r.donor}` : '';
      const title = sv('title', {}, `trial ${t.number} at ${unit} ${fmt(r.resource)}: ${r.action}${donor} (${fmt(r.value)})${r.reason ? ' — ' + r.reason : ''}`);
      marks.append(marker(r.action, x, y, title, t.number));
    }
    svg.append(marks);
    const actions = new Set(rungs.map(x => x.r.action));
    return [svg, legend([
      ['continue', 'continue (promoted)'], ['stop', 'stop (pruned)'], ['exploit', 'exploit (copied a better trial)'],
    ].filter(([a]) => actions.has(a)).map(([a, text]) => [marker(a, 6, 6), text]).concat(
      curves.some(c => c.t.state === 'pruned') ? [[swatch('dash', STATE_COLOR.pruned), 'pruned trial']] : [],
      [[swatch('line', viridis(1)), 'completed, coloured by rank of the value']]))];
  }

  function marker(action, x, y, title, trial) {
    const color = ACTION_COLOR[action] || '#4a5568';
    const attrs = {class: 'rung rung-' + action, 'data-action': action, 'data-trial': trial};
    if (action === 'stop') {
      return sv('g', attrs, sv('path', {d: `M${x - 4} ${y - 4} L${x + 4} ${y + 4} M${x - 4} ${y + 4} L${x + 4} ${y - 4}`, stroke: color, 'stroke-width': 2.2}), title);
    }
    if (action === 'exploit') {
      return sv('g', attrs, sv('path', {d: `M${x} ${y - 6} L${x + 6} ${y} L${x} ${y + 6} L${x - 6} ${y} Z`, fill: color, stroke: '#fff'}), title);
    }
    return sv('g', attrs, sv('circle', {cx: x, cy: y, r: 4.5, fill: color, stroke: '#fff'}), title);
  }

  function swatch(kind, color) {
    const shape = kind === 'circle' ? sv('circle', {cx: 6, cy: 6, r: 4, fill: color})
      : kind === 'rect' ? sv('rect', {x: 1, y: 1, width: 10, height: 10, fill: color})
        : sv('line', {x1: 0, x2: 12, y1: 6, y2: 6, stroke: color, 'stroke-width': 2, 'stroke-dasharray': kind === 'dash' ? '3 2' : null});
    return shape;
  }

  function legend(items) {
    return el('ul', {class: 'legend'}, items.map(([shape, text]) => el('li', {},
      sv('svg', {class: 'key', viewBox: '0 0 12 12', width: 12, height: 12, 'aria-hidden': 'true'}, shape), ' ', text)));
  }

  function gradientLegend(lo, hi) {
    const worst = minimize() ? hi : lo, best = minimize() ? lo : hi;
    const stops = VIRIDIS.map((c, i) => sv('stop', {offset: `${100 * i / (VIRIDIS.length - 1)}%`, 'stop-color': c}));
    return el('p', {class: 'legend gradient'}, `${metricName()}, coloured by rank: worse ${fmt(worst)} `,
      sv('svg', {class: 'ramp', viewBox: '0 0 120 10', width: 120, height: 10, 'aria-hidden': 'true'},
        sv('defs', {}, sv('linearGradient', {id: 'value-ramp'}, stops)),
        sv('rect', {width: 120, height: 10, fill: 'url(#value-ramp)'})),
      ` better ${fmt(best)}; grey, dashed: trials without a value`);
  }

  // costParts splits the cost of every attempt by outcome (useful: kept by
  // a completed trial; pruned; wasted: work lost; other: running, failed
  // or interrupted trials) and by backend (the function backend, or the
  // pool the trial was placed on, and the pool's idle time).
  function costParts(trials) {
    const backend = (S.study && S.study.backend) || 'functions';
    let useful = 0, pruned = 0, wasted = 0, other = 0;
    const byBackend = new Map();
    for (const t of trials) {
      const where = t.placement && t.placement.pool ? 'pool ' + t.placement.pool : 'functions (' + backend + ')';
      for (const a of t.attempts || []) {
        const c = a.cost_usd || 0, w = Math.min(c, a.wasted_cost_usd || 0);
        wasted += w;
        if (t.state === 'completed') useful += c - w;
        else if (t.state === 'pruned') pruned += c - w;
        else other += c - w;
        byBackend.set(where, (byBackend.get(where) || 0) + c);
      }
    }
    const pool = S.study && S.study.progress && S.study.progress.pool;
    if (pool && pool.idle_cost_usd > 0) byBackend.set(`pool ${pool.name} idle`, pool.idle_cost_usd);
    const palette = ['#2b6cb0', '#6b46c1', '#319795', '#d53f8c', '#718096'];
    return {
      outcome: [['useful', useful, '#2f855a'], ['pruned', pruned, '#a0aec0'], ['wasted', wasted, '#c53030'], ['running, failed or interrupted', other, '#d69e2e']],
      backend: [...byBackend.entries()].map(([k, v], i) => [k, v, k.endsWith(' idle') ? '#d6bcfa' : palette[i % palette.length]]),
    };
  }

  // costPlot draws the cost breakdown as two stacked bars.
  function costPlot(trials) {
    const parts = costParts(trials);
    const rows = [['by outcome', parts.outcome], ['by backend', parts.backend]];
    const segments = rows.reduce((n, [, items]) => n + items.filter(([, v]) => v > 0).length, 0);
    if (!segments) return empty('Nothing has been billed yet.');
    const W = 640, H = 120, x0 = 110, x1 = W - 10;
    const svg = plotSVG('cost', segments, W, H, 'Cost breakdown by outcome and by backend');
    for (const [i, [label, items]] of rows.entries()) {
      const y = 18 + i * 52, total = items.reduce((s, [, v]) => s + v, 0);
      svg.append(sv('text', {class: 'bar-label', x: 0, y: y + 17}, label));
      svg.append(sv('text', {class: 'tick', x: x0, y: y - 4}, usd(total)));
      let x = x0;
      for (const [name, v, color] of items) {
        if (!(v > 0)) continue;
        const w = total > 0 ? (x1 - x0) * v / total : 0;
        svg.append(sv('rect', {x: x.toFixed(1), y, width: Math.max(0.5, w).toFixed(1), height: 26, fill: color, 'data-part': name},
          sv('title', {}, `${label}: ${name} ${usd(v)} (${pct(v, total)})`)));
        x += w;
      }
    }
    const table = el('table', {class: 'cost-table'},
      el('thead', {}, el('tr', {}, el('th', {scope: 'col'}, 'part'), el('th', {scope: 'col', class: 'num'}, 'cost'), el('th', {scope: 'col', class: 'num'}, 'share'))),
      rows.map(([label, items]) => {
        const total = items.reduce((s, [, v]) => s + v, 0);
        return el('tbody', {},
          el('tr', {class: 'group'}, el('th', {scope: 'rowgroup', colspan: 3}, label)),
          items.map(([name, v, color]) => el('tr', {},
            el('td', {}, sv('svg', {class: 'key', viewBox: '0 0 12 12', width: 12, height: 12, 'aria-hidden': 'true'}, swatch('rect', color)), ' ', name),
            el('td', {class: 'num'}, usd(v)), el('td', {class: 'num'}, pct(v, total)))));
      }));
    return [svg, table];
  }

  // ---- the trials table ----

  function rungText(t) {
    return (t.rungs || []).map(r => {
      const what = r.action === 'continue' ? 'go' : r.action === 'exploit' ? `copy#${r.donor}` : r.action;
      return `${fmt(r.resource)} ${what}`;
    }).join(', ');
  }

  function placementText(t) {
    if (!t.placement) return '';
    return t.placement.pool ? 'pool ' + t.placement.pool : (S.study && S.study.backend) || 'functions';
  }

  const trialCost = t => (t.attempts || []).reduce((s, a) => s + (a.cost_usd || 0), 0);

  function columns(trials) {
    const names = Object.keys(specParams());
    for (const t of trials) for (const k of Object.keys(t.params || {})) if (!names.includes(k)) names.push(k);
    return [
      {key: 'number', label: '#', get: t => t.number, num: true},
      {key: 'state', label: 'state', get: t => t.state, cell: t => el('span', {class: 'badge state-' + t.state}, t.state)},
      {key: 'value', label: metricName(), get: t => t.value, text: t => fmt(t.value), num: true},
      ...names.map(p => ({
        key: 'param:' + p, label: p, get: t => (t.params || {})[p],
        text: t => ((t.params || {})[p] === undefined ? '' : paramText(t.params[p])), num: trials.some(t => isNum((t.params || {})[p])),
      })),
      {key: 'rungs', label: 'rungs', get: rungText},
      {key: 'placement', label: 'placement', get: placementText, title: t => t.placement && t.placement.reason},
      {key: 'attempts', label: 'attempts', get: t => (t.attempts || []).length, num: true},
      {key: 'cost', label: 'cost', get: trialCost, text: t => usd(trialCost(t)), num: true},
    ];
  }

  function compare(a, b) {
    const na = a === undefined || a === null || a === '', nb = b === undefined || b === null || b === '';
    if (na || nb) return na && nb ? 0 : na ? 1 : -1;
    if (isNum(a) && isNum(b)) return a - b;
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  function renderTable() {
    const table = byId('trials');
    if (!table || !S.study) return;
    const trials = trialList();
    const cols = columns(trials);
    const T = S.table;
    const col = cols.find(c => c.key === T.sort) || cols[0];
    const words = T.text.toLowerCase().split(/\s+/).filter(Boolean);
    const best = bestTrial(trials);
    const rows = trials.map(t => ({t, text: cols.map(c => (c.text ? c.text(t) : String(c.get(t) ?? ''))).join(' ').toLowerCase()}))
      .filter(r => (!T.state || r.t.state === T.state) && words.every(w => r.text.includes(w)))
      .sort((a, b) => {
        const va = col.get(a.t), vb = col.get(b.t);
        const blank = v => v === undefined || v === null || v === '';
        if (blank(va) || blank(vb)) return compare(va, vb) || a.t.number - b.t.number;
        return T.dir * compare(va, vb) || a.t.number - b.t.number;
      });
    const head = el('tr', {}, cols.map(c => el('th', {
      scope: 'col', class: c.num ? 'num' : null,
      'aria-sort': c.key === col.key ? (T.dir > 0 ? 'ascending' : 'descending') : 'none',
    }, el('button', {type: 'button', 'data-sort': c.key, onclick: () => sortBy(c.key)},
      c.label, c.key === col.key ? (T.dir > 0 ? ' ▲' : ' ▼') : ''))));
    const body = rows.map(({t}) => el('tr', {
      'data-trial': t.number, class: 'state-' + t.state + (best && best.number === t.number ? ' best' : ''),
    }, cols.map(c => el('td', {class: c.num ? 'num' : null, title: c.title ? c.title(t) : null},
      c.cell ? c.cell(t) : c.text ? c.text(t) : String(c.get(t) ?? '')))));
    table.replaceChildren(
      el('caption', {class: 'visually-hidden'}, `Trials of study ${S.study.name}; the column headers sort them`),
      el('thead', {}, head), el('tbody', {}, body));
    const states = TRIAL_STATES.filter(s => trials.some(t => t.state === s));
    const select = byId('state-filter');
    const options = ['', ...states];
    if (select.options.length !== options.length || options.some((s, i) => select.options[i].value !== s)) {
      select.replaceChildren(...options.map(s => el('option', {value: s, selected: s === T.state}, s ? `${s} (${trials.filter(t => t.state === s).length})` : 'every state')));
    }
    byId('trial-count').textContent = rows.length === trials.length ? `${trials.length} trials` : `${rows.length} of ${trials.length} trials`;
  }

  function sortBy(key) {
    const T = S.table;
    if (T.sort === key) T.dir = -T.dir;
    else {
      T.sort = key;
      // The value column sorts best first.
      T.dir = key === 'value' && !minimize() ? -1 : 1;
    }
    renderTable();
  }

  // ---- the study page ----

  function section(id, title, note) {
    return el('section', {class: 'card', id: 'card-' + id, 'aria-labelledby': 'h-' + id},
      el('h2', {id: 'h-' + id}, title), el('div', {class: 'figure', id: 'fig-' + id}), note ? el('p', {class: 'note'}, note) : null);
  }

  // buildStudyPage lays out a study's page; render fills it.
  function buildStudyPage(name) {
    document.title = `${name} · hpsearch`;
    main().replaceChildren(
      el('div', {class: 'study-head'}, el('h1', {}, name), el('dl', {class: 'summary', id: 'summary'})),
      el('div', {class: 'plots'},
        section('history', 'Optimization history', 'Each completed trial’s value, and the best value so far.'),
        section('parallel', 'Parameters and objective', 'One line per trial through its parameters and its value.'),
        section('curves', 'Learning curves', 'The objective as trials trained, and the scheduler’s decisions at its rungs.'),
        section('cost', 'Cost', 'Useful: kept by completed trials; wasted: work lost to crashes, interruptions and retries.')),
      el('section', {class: 'card trials', 'aria-labelledby': 'h-trials'},
        el('h2', {id: 'h-trials'}, 'Trials'),
        el('div', {class: 'controls'},
          el('label', {}, 'Filter ', el('input', {
            type: 'search', id: 'filter', placeholder: 'e.g. sgd 0.9', value: S.table.text, autocomplete: 'off',
            oninput: e => { S.table.text = e.target.value; renderTable(); },
          })),
          el('label', {}, 'State ', el('select', {id: 'state-filter', onchange: e => { S.table.state = e.target.value; renderTable(); }})),
          el('span', {id: 'trial-count', class: 'muted', 'aria-live': 'polite'})),
        el('div', {class: 'table-wrap'}, el('table', {id: 'trials', class: 'trials'}))));
  }

  function renderSummary() {
    const st = S.study, p = st.progress || {}, trials = trialList();
    const count = s => trials.filter(t => t.state === s).length;
    const best = bestTrial(trials) || (p.best && isNum(p.best.value) ? p.best : null);
    const max = p.max_trials || trials.length;
    const others = ['running', 'queued', 'pruned', 'failed', 'interrupted'].map(s => [s, count(s)]).filter(([, n]) => n);
    const sched = specScheduler();
    const items = [
      ['state', [el('span', {class: 'badge state-' + st.state}, st.state), st.active ? ' (running in the server)' : '']],
      ['trials', [`${count('completed')} of ${max} completed`, others.length ? el('span', {class: 'muted'}, ' · ' + others.map(([s, n]) => `${n} ${s}`).join(', ')) : '']],
      [`best ${metricName()}`, best ? `${fmt(best.value)} (trial ${best.number}, ${minimize() ? 'minimize' : 'maximize'})` : '–'],
      ['cost', [usd(p.cost_usd), el('span', {class: 'muted'}, ` · wasted ${usd(p.wasted_cost_usd)}`)]],
      ['elapsed', duration(p.elapsed_seconds || st.elapsed_seconds)],
      ['search', [st.sampler || '', sched.type ? ` + ${sched.type}` : '', st.backend ? ` on ${st.backend}` : '']],
    ];
    byId('summary').replaceChildren(...items.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  function renderPlots() {
    const trials = trialList();
    const fill = (id, content) => byId('fig-' + id).replaceChildren(...[content].flat().filter(Boolean));
    fill('history', historyPlot(trials));
    fill('parallel', parallelPlot(trials));
    fill('curves', curvesPlot(trials));
    fill('cost', costPlot(trials));
  }

  function render() {
    if (!S.study || !byId('summary')) return;
    renderSummary();
    renderPlots();
    renderTable();
    setStatus();
  }

  function scheduleRender() {
    if (S.renderPending) return;
    S.renderPending = true;
    setTimeout(() => {
      S.renderPending = false;
      render();
    }, 150);
  }

  // ---- the studies list ----

  function renderStudies(studies) {
    document.title = 'Studies · hpsearch';
    const rows = studies.map(st => {
      const p = st.progress || {};
      const metric = (st.objective && st.objective.metric) || 'value';
      return el('tr', {'data-study': st.name},
        el('td', {}, el('a', {href: '#study=' + encodeURIComponent(st.name)}, st.name)),
        el('td', {}, el('span', {class: 'badge state-' + st.state}, st.state), st.active ? ' (active)' : ''),
        el('td', {class: 'num'}, `${p.completed || 0}/${p.max_trials || 0}`),
        el('td', {}, p.best && isNum(p.best.value) ? `${metric} ${fmt(p.best.value)} (trial ${p.best.number})` : '–'),
        el('td', {class: 'num'}, usd(p.cost_usd)),
        el('td', {}, st.created_at ? new Date(st.created_at).toLocaleString() : ''));
    });
    main().replaceChildren(el('h1', {}, 'Studies'), studies.length
      ? el('div', {class: 'card table-wrap'}, el('table', {id: 'studies', class: 'trials'},
        el('caption', {class: 'visually-hidden'}, 'Studies on this server'),
        el('thead', {}, el('tr', {}, ['study', 'state', 'trials', 'best', 'cost', 'created'].map(h => el('th', {scope: 'col'}, h)))),
        el('tbody', {}, rows)))
      : empty('No studies yet: create one with hpsearch run --server URL SPACE.yaml, or POST /v1/studies.'));
  }

  // ---- talking to the API ----

  class AuthError extends Error {}

  async function errorText(r) {
    try {
      const body = await r.json();
      if (body && body.error && body.error.message) return body.error.message;
    } catch (_) {
      // Not an API error body: say what the status says.
    }
    return `${r.status} ${r.statusText}`;
  }

  function headers(accept) {
    const h = {Accept: accept};
    if (S.token) h.Authorization = 'Bearer ' + S.token;
    return h;
  }

  async function api(path, signal) {
    const r = await fetch(path, {headers: headers('application/json'), signal, cache: 'no-store'});
    if (r.status === 401) throw new AuthError(await errorText(r));
    if (!r.ok) throw new Error(`${path}: ${await errorText(r)}`);
    return r.json();
  }

  const studyPath = name => 'v1/studies/' + encodeURIComponent(name);

  async function allTrials(name, signal) {
    const out = [];
    for (let offset = 0; ;) {
      const page = await api(`${studyPath(name)}/trials?limit=1000&offset=${offset}`, signal);
      out.push(...(page.trials || []));
      if (!page.next_offset) return out;
      offset = page.next_offset;
    }
  }

  // guarded runs a step of the page and shows what stops it: the token
  // form when the server wants a token, else the error.
  async function guarded(step) {
    try {
      await step();
    } catch (e) {
      if (e && e.name === 'AbortError') return;
      if (e instanceof AuthError) askToken(e.message);
      else showError(e && e.message ? e.message : String(e));
    }
  }

  const sleep = (ms, signal) => new Promise((resolve, reject) => {
    const stop = () => {
      clearTimeout(id);
      reject(new DOMException('aborted', 'AbortError'));
    };
    const id = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve();
    }, ms);
    signal.addEventListener('abort', stop, {once: true});
  });

  // load reads the study, then its trials: the events after the study's
  // last_event_id then bring the trials up to date.
  async function load(name, signal) {
    const study = await api(studyPath(name), signal);
    const trials = await allTrials(name, signal);
    S.study = study;
    S.spec = parseSpec(study.spec);
    S.trials = new Map(trials.map(t => [t.number, t]));
    S.lastEventId = Math.max(S.lastEventId, study.last_event_id || 0);
    render();
  }

  const running = () => S.study && S.study.active && S.study.state === 'running';

  // follow applies the study's events as they come, reconnecting after
  // the last event seen while the study runs, until it finishes; then it
  // polls the study in case it is resumed.
  async function follow(name, signal) {
    S.following = true;
    setStatus();
    let wait = 1000;
    try {
      for (;;) {
        let got;
        try {
          got = await stream(name, signal);
        } catch (e) {
          if (e.name === 'AbortError' || e instanceof AuthError) throw e;
          got = {received: 0, finished: false};
        }
        if (got.received) {
          await load(name, signal);
          wait = 1000;
        }
        if (got.finished || !running()) break;
        await sleep(wait, signal);
        wait = Math.min(2 * wait, 10000);
      }
    } finally {
      S.following = false;
      setStatus();
    }
    poll(name, signal);
  }

  // poll reads the study every 10 seconds while it is not followed, and
  // follows it again when it runs (it was resumed).
  function poll(name, signal) {
    S.timer = setTimeout(() => guarded(async () => {
      const study = await api(studyPath(name), signal);
      if (study.last_event_id > S.lastEventId || study.updated_at !== S.study.updated_at) await load(name, signal);
      if (running()) await follow(name, signal);
      else poll(name, signal);
    }), 10000);
  }

  // stream reads one connection of the study's event stream, after the
  // last event seen. The server answers 204 when it has nothing to send
  // and the study is not running, and ends the stream after the study's
  // study_finished event.
  async function stream(name, signal) {
    const h = headers('text/event-stream');
    if (S.lastEventId > 0) h['Last-Event-ID'] = String(S.lastEventId);
    const r = await fetch(studyPath(name) + '/events', {headers: h, signal, cache: 'no-store'});
    if (r.status === 401) throw new AuthError(await errorText(r));
    const got = {received: 0, finished: false};
    if (r.status === 204) return got;
    if (!r.ok) throw new Error(`events: ${await errorText(r)}`);
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '', data = [], id = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return got;
      buf += value;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (let line of lines) {
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) {
            const e = JSON.parse(data.join('\n'));
            if (id) e.id = Number(id);
            apply(e, name, signal);
            got.received++;
            if (e.kind === 'study_finished') got.finished = true;
          }
          data = [];
          id = '';
          continue;
        }
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let v = i < 0 ? '' : line.slice(i + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'data') data.push(v);
        else if (field === 'id') id = v;
      }
    }
  }

  // apply puts an event in the page: the trial it is about, with the
  // metrics it reported since its previous event, and the progress.
  function apply(e, name, signal) {
    S.events++;
    if (e.id) S.lastEventId = Math.max(S.lastEventId, e.id);
    if (e.kind === 'resync') {
      guarded(() => load(name, signal));
      return;
    }
    if (S.study) {
      if (e.state) S.study.state = e.state;
      if (e.progress) S.study.progress = Object.assign({}, S.study.progress, e.progress);
      if (e.kind === 'study_finished') S.study.active = false;
    }
    if (e.trial) {
      const old = S.trials.get(e.trial.number);
      S.trials.set(e.trial.number, Object.assign({}, e.trial, {metrics: mergeMetrics(old && old.metrics, e.metrics)}));
    }
    scheduleRender();
  }

  // mergeMetrics adds metrics to a history; a metric reported again at a
  // step (a retried segment) replaces the earlier one.
  function mergeMetrics(old, added) {
    const out = (old || []).slice();
    for (const m of added || []) {
      const i = out.findIndex(o => o.name === m.name && o.step === m.step);
      if (i >= 0) out[i] = m;
      else out.push(m);
    }
    return out;
  }

  // ---- page chrome ----

  const main = () => byId('app');

  function buildChrome() {
    document.body.append(
      el('header', {class: 'top'},
        S.mode === 'live' ? el('a', {class: 'brand', href: '#'}, 'hpsearch') : el('span', {class: 'brand'}, 'hpsearch report'),
        el('span', {id: 'status', class: 'status', role: 'status', 'aria-live': 'polite', 'data-events': 0}),
        S.mode === 'live' ? el('button', {type: 'button', id: 'forget', class: 'link', hidden: true, onclick: forgetToken}, 'Forget token') : null),
      el('div', {id: 'errors', class: 'errors', role: 'alert'}),
      el('main', {id: 'app', tabindex: -1}, el('p', {class: 'muted'}, 'Loading…')));
  }

  function setStatus() {
    const s = byId('status');
    if (!s) return;
    s.setAttribute('data-events', S.events);
    if (S.mode === 'report') {
      s.textContent = S.generatedAt ? `generated ${new Date(S.generatedAt).toLocaleString()}` : '';
    } else if (S.following) {
      s.textContent = `● live · ${S.events} events`;
    } else {
      s.textContent = S.study ? (running() ? 'reconnecting…' : 'not running') : '';
    }
    const forget = byId('forget');
    if (forget) forget.hidden = !S.token;
  }

  function showError(text) {
    byId('errors').append(el('p', {'data-error': true}, text));
  }

  function askToken(message) {
    document.title = 'Token · hpsearch';
    const input = el('input', {type: 'password', id: 'token-input', autocomplete: 'off', required: true, spellcheck: 'false'});
    main().replaceChildren(el('section', {class: 'card narrow'},
      el('h1', {}, 'This server needs a token'),
      el('p', {}, S.token ? `The server refused the token: ${message}` : 'Paste a bearer token the server accepts. hpsearch token makes one.'),
      el('form', {id: 'token-form', onsubmit: e => {
        e.preventDefault();
        S.token = input.value.trim();
        sessionStorage.setItem(TOKEN_KEY, S.token);
        route();
      }}, el('label', {for: 'token-input'}, 'Token'), input, el('button', {type: 'submit'}, 'Open')),
      el('p', {class: 'muted'}, 'The page keeps the token in this tab only (session storage), and sends it to this server only. A link can carry it as #token=… (the part after # never reaches a server).')));
    input.focus();
  }

  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
    S.token = '';
    route();
  }

  // ---- routes: #study=NAME, or the studies list ----

  const hashParams = () => new URLSearchParams(location.hash.replace(/^#/, ''));

  function route() {
    const p = hashParams();
    if (p.has('token')) {
      S.token = p.get('token');
      sessionStorage.setItem(TOKEN_KEY, S.token);
      p.delete('token');
      const rest = p.toString();
      history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
    }
    S.abort.abort();
    S.abort = new AbortController();
    clearTimeout(S.timer);
    Object.assign(S, {study: null, spec: {}, trials: new Map(), lastEventId: 0, events: 0, following: false});
    byId('errors').replaceChildren();
    setStatus();
    const name = hashParams().get('study');
    const signal = S.abort.signal;
    if (name) {
      buildStudyPage(name);
      guarded(async () => {
        await load(name, signal);
        await follow(name, signal);
      });
    } else {
      studiesLoop(signal);
    }
  }

  function studiesLoop(signal) {
    guarded(async () => {
      const {studies} = await api('v1/studies', signal);
      renderStudies(studies || []);
      S.timer = setTimeout(() => studiesLoop(signal), 10000);
    });
  }

  function start() {
    window.addEventListener('error', e => showError(e.message));
    window.addEventListener('unhandledrejection', e => showError(String((e.reason && e.reason.message) || e.reason)));
    const embedded = byId('hps-data');
    if (embedded) {
      S.mode = 'report';
      buildChrome();
      const data = JSON.parse(embedded.textContent);
      S.study = data.study;
      S.spec = parseSpec(data.study.spec);
      S.trials = new Map((data.trials || []).map(t => [t.number, t]));
      S.generatedAt = data.generated_at || '';
      buildStudyPage(data.study.name);
      render();
      return;
    }
    buildChrome();
    S.token = sessionStorage.getItem(TOKEN_KEY) || '';
    window.addEventListener('hashchange', route);
    route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();

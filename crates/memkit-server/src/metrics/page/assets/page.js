// memkitd's page: polls /api/now once a second (stats and the new points of the 15-minute
// series), /api/classes and, with --dashboard-keys, /api/hot every 5 s; searches keys on
// demand. Everything shown is also written into data-* attributes, which the browser test
// reads. Text from the server goes in through textContent only.
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const POINTS = 900;
  const COLORS = ['#2f6fde', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#64748b'];
  const state = { seq: null, cols: null, charts: {}, keys: false, hotTimer: null, more: null, prefix: '' };

  // Formatting.
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function bytes(n) {
    if (n == null || !isFinite(n)) return '–';
    let i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
  }
  function num(n) {
    if (n == null || !isFinite(n)) return '–';
    if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + ' G';
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + ' M';
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + ' k';
    return Number.isInteger(n) ? String(n) : n.toFixed(1);
  }
  function pct(r) { return r == null ? '–' : (r * 100).toFixed(2) + ' %'; }
  function duration(s) {
    if (s == null) return '–';
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d > 0) return d + 'd ' + h + 'h';
    if (h > 0) return h + 'h ' + m + 'm';
    if (m > 0) return m + 'm ' + Math.floor(s % 60) + 's';
    return Math.floor(s) + 's';
  }
  function setText(id, text) { const e = $(id); if (e) e.textContent = text; }
  function cell(tr, text, cls) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  async function getJSON(url) {
    const r = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
    if (!r.ok) { const e = new Error(url + ': ' + r.status); e.status = r.status; throw e; }
    return r.json();
  }

  // The 15-minute series, as columns, appended to and trimmed to POINTS.
  function merge(s) {
    if (!state.cols) {
      state.cols = {};
      for (const k of Object.keys(s)) if (Array.isArray(s[k]) && k !== 'commands') state.cols[k] = [];
      state.commands = s.commands;
    }
    for (const k of Object.keys(state.cols)) {
      const col = state.cols[k];
      for (const v of s[k] || []) col.push(v);
      if (col.length > POINTS) col.splice(0, col.length - POINTS);
    }
    state.seq = s.seq;
  }

  function width(el) { return Math.max(300, el.clientWidth - 4); }

  function lineChart(id, series, opts) {
    const el = $(id);
    const o = Object.assign({
      width: width(el), height: 220,
      scales: { x: { time: true } },
      series: [{}].concat(series.map((s, i) => Object.assign({ stroke: COLORS[i % COLORS.length], width: 1.5, points: { show: false } }, s))),
      axes: [{}, { size: 64, values: (u, v) => v.map(num) }],
      legend: { live: true },
    }, opts || {});
    return new uPlot(o, [[]].concat(series.map(() => [])), el);
  }

  function makeCharts() {
    const c = state.charts;
    c.rates = lineChart('chart-rates', state.commands.map((k) => ({ label: k, value: (u, v) => num(v) })));
    c.hits = lineChart('chart-hits', [{ label: 'hit ratio', value: (u, v) => pct(v), fill: 'rgba(47,111,222,.08)' }], {
      scales: { x: { time: true }, y: { range: [0, 1] } },
      axes: [{}, { size: 64, values: (u, v) => v.map((x) => (x * 100).toFixed(0) + ' %') }],
    });
    c.evictions = lineChart('chart-evictions', [
      { label: 'evictions/s', stroke: '#dc2626', value: (u, v) => num(v) },
      { label: 'expired/s (reclaimed)', stroke: '#ca8a04', value: (u, v) => num(v) },
    ]);
    c.traffic = lineChart('chart-traffic', [
      { label: 'read/s', stroke: '#2f6fde', value: (u, v) => bytes(v) },
      { label: 'written/s', stroke: '#16a34a', value: (u, v) => bytes(v) },
      { label: 'connections', stroke: '#64748b', scale: 'conns', value: (u, v) => num(v) },
    ], {
      axes: [{}, { size: 72, values: (u, v) => v.map(bytes) }, { scale: 'conns', side: 1, size: 48, grid: { show: false } }],
    });
  }

  function drawSeries() {
    const s = state.cols, c = state.charts;
    if (!c.rates) makeCharts();
    c.rates.setData([s.t].concat(state.commands.map((k) => s[k])));
    c.hits.setData([s.t, s.hit_ratio]);
    c.evictions.setData([s.t, s.evictions, s.expired]);
    c.traffic.setData([s.t, s.bytes_read, s.bytes_written, s.conns]);
    document.body.dataset.points = String(s.t.length);
  }

  function sumLast(col, n) { let t = 0; for (const v of col.slice(-n)) t += v || 0; return t; }

  function drawNow(now) {
    const st = now.stats;
    setText('version', st.version || '');
    setText('where', location.host);
    const hr = $('hit-ratio');
    hr.textContent = pct(now.hit_ratio);
    hr.dataset.value = now.hit_ratio == null ? '' : String(now.hit_ratio);
    hr.dataset.hits = String(st.get_hits);
    hr.dataset.misses = String(st.get_misses);
    if (state.cols) {
      const h = sumLast(state.cols.hits, 60), m = sumLast(state.cols.misses, 60);
      setText('hit-ratio-recent', h + m > 0 ? pct(h / (h + m)) : '–');
    }
    const used = st.bytes, limit = st.limit_maxbytes;
    setText('memory', bytes(used));
    setText('memory-sub', num(st.curr_items) + ' items · limit ' + bytes(limit) + ' · mapped ' + bytes(st.memkit_mapped_bytes));
    gauge('memory-bar', used / limit);
    setText('conns', num(st.curr_connections));
    setText('conns-sub', 'of -c ' + num(st.max_connections) + ' · ' + num(st.rejected_connections) + ' refused · ' + num(st.total_connections) + ' since start');
    gauge('conns-bar', st.curr_connections / st.max_connections);
    $('conns').dataset.value = String(st.curr_connections);
    if (state.cols && state.cols.t.length) {
      const n = state.cols.t.length - 1;
      setText('traffic', bytes(state.cols.bytes_read[n] + state.cols.bytes_written[n]) + '/s');
    }
    setText('traffic-sub', 'in ' + bytes(st.bytes_read) + ' · out ' + bytes(st.bytes_written) + ' since start');
    setText('evictions', num(st.evictions));
    setText('evictions-sub', num(st.reclaimed) + ' expired reclaimed · ' + num(st.evicted_unfetched) + ' evicted unfetched');
    setText('uptime', duration(st.uptime));
    setText('uptime-sub', 'pid ' + st.pid + ' · ' + st.threads + ' threads');
    const tb = $('settings-table').tBodies[0];
    tb.replaceChildren();
    for (const [k, v] of Object.entries(now.settings)) {
      const tr = document.createElement('tr');
      cell(tr, k); cell(tr, v);
      tb.appendChild(tr);
    }
  }

  function gauge(id, frac) {
    const e = $(id);
    const f = isFinite(frac) ? Math.max(0, Math.min(1, frac)) : 0;
    e.style.width = (f * 100).toFixed(1) + '%';
    e.classList.toggle('high', f > 0.9);
  }

  async function pollNow() {
    try {
      const url = '/api/now' + (state.seq == null ? '' : '?since=' + state.seq);
      const now = await getJSON(url);
      merge(now.series);
      drawSeries();
      drawNow(now);
      if ((now.keys || now.hot) && !state.keys) enableKeys(now.keys, now.hot);
      setText('status', 'live');
      $('status').className = 'live';
      document.body.dataset.now = '1';
    } catch (e) {
      setText('status', 'no answer (' + e.message + ')');
      $('status').className = 'stale';
    }
    setTimeout(pollNow, 1000);
  }

  // Memory by size class: memkitd's bytes beside memcached's for the same items.
  async function pollClasses() {
    try {
      const c = await getJSON('/api/classes');
      drawClasses(c);
      document.body.dataset.classes = '1';
    } catch (e) { setText('classes-note', 'no answer (' + e.message + ')'); }
    setTimeout(pollClasses, 5000);
  }

  function drawClasses(c) {
    const rows = c.classes;
    const x = rows.map((_, i) => i);
    const data = [x, rows.map((r) => r.bytes), rows.map((r) => r.mc_bytes)];
    const labels = rows.map((r) => bytes(r.chunk));
    if (!state.charts.classes) {
      const el = $('chart-classes');
      state.labels = labels;
      state.charts.classes = new uPlot({
        width: width(el), height: 260,
        scales: { x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] } },
        series: [
          { label: 'class', value: (u, v) => v == null ? '–' : (state.labels[v] || '') },
          { label: 'memkitd', stroke: '#2f6fde', fill: 'rgba(47,111,222,.75)', paths: uPlot.paths.bars({ size: [0.4, 40], align: -1 }), value: (u, v) => bytes(v) },
          { label: 'memcached (same items)', stroke: '#94a3b8', fill: 'rgba(148,163,184,.75)', paths: uPlot.paths.bars({ size: [0.4, 40], align: 1 }), value: (u, v) => bytes(v) },
        ],
        axes: [
          { values: (u, v) => v.map((i) => state.labels[i] || ''), gap: 4 },
          { size: 72, values: (u, v) => v.map(bytes) },
        ],
      }, data, el);
    } else {
      state.labels = labels;
      state.charts.classes.setData(data);
    }
    const tb = $('classes-table').tBodies[0];
    tb.replaceChildren();
    for (const r of rows) {
      const tr = document.createElement('tr');
      tr.dataset.chunk = String(r.chunk);
      tr.dataset.items = String(r.items);
      tr.dataset.bytes = String(r.bytes);
      tr.dataset.mcBytes = String(r.mc_bytes);
      cell(tr, bytes(r.chunk)); cell(tr, num(r.items)); cell(tr, bytes(r.bytes));
      cell(tr, num(r.mc_items)); cell(tr, bytes(r.mc_bytes));
      tb.appendChild(tr);
    }
    setText('classes-items', num(c.items));
    setText('classes-bytes', bytes(c.bytes));
    setText('classes-mc-bytes', bytes(c.mc_bytes));
    $('classes-table').dataset.bytes = String(c.bytes);
    const more = c.bytes > 0 ? c.mc_bytes / c.bytes - 1 : null;
    setText('classes-note', num(c.items) + ' items take ' + bytes(c.bytes) + ' in memkitd; memcached would take ' +
      bytes(c.mc_bytes) + ' of chunks for them' + (more == null ? '' : ' (' + (more * 100).toFixed(0) + ' % more)') +
      ', cut from ' + num(c.mc_pages) + ' pages of 1 MiB' +
      (c.exact ? '.' : ' (estimated from ' + num(c.sampled) + ' items sampled).'));
  }

  // Keys: shown only with --dashboard-keys (the routes answer 404 otherwise).
  function enableKeys(keys, hot) {
    state.keys = true;
    if (hot) { $('hot-panel').hidden = false; pollHot(); }
    if (!keys) return;
    $('keys-panel').hidden = false;
    $('search').addEventListener('click', () => search(false));
    $('more').addEventListener('click', () => search(true));
    $('prefix').addEventListener('keydown', (e) => { if (e.key === 'Enter') search(false); });
    const p = new URLSearchParams(location.search).get('prefix');
    if (p != null) { $('prefix').value = p; search(false); }
  }

  async function pollHot() {
    try {
      const h = await getJSON('/api/hot');
      const tb = $('hot-table').tBodies[0];
      tb.replaceChildren();
      for (const k of h.keys.slice(0, 10)) {
        const tr = document.createElement('tr');
        tr.dataset.key = k.key;
        cell(tr, k.key, 'key'); cell(tr, num(k.per_sec)); cell(tr, pct(k.hit_ratio));
        tb.appendChild(tr);
      }
      setText('hot-note', h.age == null ? '(sampling: the first interval of ' + h.interval + ' s is under way)'
        : '(one fetch in ' + h.sample + ' sampled, over the last ' + h.interval + ' s)');
      document.body.dataset.hot = String(h.keys.length);
    } catch (e) { setText('hot-note', e.status === 401 ? '(login needed)' : '(' + e.message + ')'); }
    setTimeout(pollHot, 5000);
  }

  async function search(more) {
    const tb = $('keys-table').tBodies[0];
    if (!more) { state.prefix = $('prefix').value; state.more = null; tb.replaceChildren(); }
    let url = '/api/keys?prefix=' + encodeURIComponent(state.prefix);
    if (more && state.more != null) url += '&more=' + state.more;
    try {
      const r = await getJSON(url);
      if (r.error) { setText('keys-note', r.error); return; }
      for (const k of r.keys) {
        const tr = document.createElement('tr');
        tr.dataset.key = k.key;
        tr.dataset.ttl = String(k.ttl);
        tr.dataset.size = String(k.size);
        tr.dataset.flags = String(k.flags);
        cell(tr, k.key, 'key');
        cell(tr, k.ttl < 0 ? 'never' : duration(k.ttl));
        cell(tr, bytes(k.size)); cell(tr, String(k.flags));
        cell(tr, duration(k.idle) + ' ago');
        cell(tr, k.fetched ? 'yes' : 'no'); cell(tr, String(k.cas));
        tb.appendChild(tr);
      }
      state.more = r.more;
      $('more').hidden = r.more == null;
      setText('keys-note', tb.rows.length + ' shown · ' + num(r.scanned) + ' looked at' + (r.more == null ? ' · end of the cache' : ''));
      document.body.dataset.keys = String(tb.rows.length);
    } catch (e) { setText('keys-note', e.status === 401 ? 'login needed' : e.message); }
  }

  window.addEventListener('resize', () => {
    for (const [id, c] of Object.entries(state.charts)) {
      const el = $('chart-' + id);
      c.setSize({ width: width(el), height: c.height });
    }
  });

  pollNow();
  pollClasses();
})();

/*
 * Flash Sale operator page. Plain JavaScript, no build step.
 *
 * The admin token lives in one variable of this closure: never in storage,
 * cookies or the URL, so reloading the page forgets it.
 *
 * Hooks for tests and scripts (keep them stable):
 *   #admin-token #token-apply #token-forget #token-state
 *   #breaker-auto #breaker-open #breaker-closed (radios)  #breaker-apply
 *   #breaker-mode #breaker-state                      what the API reports
 *   #v-title #v-kind #v-price #v-currency #v-stock #v-limit #v-begin #v-end #v-captcha #v-pow #v-create #v-soon
 *   #v-room #v-room-rate #v-room-prequeue                 the waiting room of a new voucher
 *   #v-room-mode (line|draw) #v-room-draw-pass            its order, and a draw winner's pass
 *   #v-room-adaptive #v-room-p99 #v-room-min #v-room-max  adaptive admission and its bounds
 *   #v-entry-token #v-entry-allowlist                     who may join (entry tokens, allowlist)
 *   #s-voucher #s-add-stock #s-rate #s-end #s-apply       steer a running sale (PATCH)
 *   #changes li[data-voucher-id="<id>"]                   each change made to the voucher in
 *                                                         #s-voucher, as recorded, newest first,
 *                                                         with the operator's fingerprint (as logged)
 *   #stats tbody tr[data-voucher-id="<id>"] td[data-field="<stats field>"]
 *     (fields: id, title, sale, stock_total, stock_left, reserved, created, paid, cancelled, failed,
 *      queue: the line's figures "W waiting · A admitted · E expired · U used", – without a room)
 *   #stats-updated #message #server-clock
 *   #report-voucher #report-show #report-csv        the sale report of one voucher
 *   #report-draw-csv                                 its draw's entries, for an audit
 *   #report                                          the report, drawn by report.js (see its hooks);
 *     its data-voucher-id is the voucher shown
 *   #stats tbody tr td[data-field="pause"] button.report-open   shows that row's report
 */
'use strict';

(() => {
  const API = '/api/v1';
  const REFRESH_MS = 2000;
  const MAX_VOUCHERS = 50; // one stats call each, every 2 s: keep it bounded

  const $ = (sel, root = document) => root.querySelector(sel);

  let token = '';
  let refreshTimer = 0;
  let refreshing = false;
  const clock = { lo: -Infinity, hi: Infinity };

  // Same server-clock estimate as the shopper page: each answer bounds the
  // offset between the server's clock and this device's (X-Server-Time in
  // unix ms when the gateway sends it, else the whole-second Date header).
  function observeDate(res, sentAt, receivedAt) {
    const precise = Number(res.headers.get('X-Server-Time'));
    const d = Date.parse(res.headers.get('Date') || '');
    let lo0;
    let hi0;
    if (precise > 0) { lo0 = precise - receivedAt; hi0 = precise - sentAt; }
    else if (!Number.isNaN(d)) { lo0 = d - receivedAt; hi0 = d + 2000 - sentAt; }
    else return;
    let lo = Math.max(clock.lo, lo0);
    let hi = Math.min(clock.hi, hi0);
    if (lo > hi) { lo = lo0; hi = hi0; }
    clock.lo = lo;
    clock.hi = hi;
  }
  const serverNow = () => Date.now() + (Number.isFinite(clock.lo) ? (clock.lo + clock.hi) / 2 : 0);
  const fmtTime = (ms) => new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

  function say(text, kind = 'info') {
    const el = $('#message');
    el.dataset.kind = kind;
    el.textContent = text;
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || code);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body, admin = true) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (admin) headers.Authorization = `Bearer ${token}`;
    const sentAt = Date.now();
    let res;
    try {
      res = await fetch(API + path, {
        method, headers, cache: 'no-store', credentials: 'omit',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, 'network', 'network error');
    }
    observeDate(res, sentAt, Date.now());
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(res.status, err.code || 'internal', err.message || '');
    }
    return data;
  }

  function sentence(err) {
    switch (err.code) {
      case 'network': return 'Can’t reach the server.';
      case 'unauthenticated':
      case 'forbidden': return 'The admin token was refused. Check it and enter it again.';
      case 'invalid_input': return `The server refused the values${err.message ? `: ${err.message}` : ''}.`;
      case 'not_found': return 'Not found.';
      case 'too_large': return 'That request was too large.';
      case 'rate_limited': return 'Too many requests; slowing down.';
      case 'unavailable': return 'A dependency is unavailable right now.';
      default: return 'The server had a problem. Please try again.';
    }
  }

  function tokenRefused(err) {
    if (err.code !== 'unauthenticated' && err.code !== 'forbidden') return false;
    setToken('');
    say(sentence(err), 'error');
    $('#admin-token').focus();
    return true;
  }

  function setToken(t) {
    token = t;
    const badge = $('#token-state');
    badge.textContent = t ? 'In use' : 'Not set';
    clearTimeout(refreshTimer);
    if (t) refresh();
    else {
      $('#stats-updated').textContent = 'Enter the admin token to see the figures.';
      $('#breaker-mode').textContent = '–';
      $('#breaker-state').textContent = '–';
    }
  }

  // ---- Breaker ------------------------------------------------------------

  let breakerShown = '';

  function showBreaker(b) {
    $('#breaker-mode').textContent = b.mode;
    $('#breaker-state').textContent = b.state;
    // Follow the fleet's mode unless the operator is choosing a new one.
    const chosen = document.querySelector('input[name="mode"]:checked');
    if (!chosen || chosen.value === breakerShown) {
      const radio = document.getElementById(`breaker-${b.mode}`);
      if (radio) radio.checked = true;
    }
    breakerShown = b.mode;
  }

  async function applyBreaker() {
    if (!token) { say('Enter the admin token first.', 'warn'); $('#admin-token').focus(); return; }
    const chosen = document.querySelector('input[name="mode"]:checked');
    if (!chosen) { say('Pick a mode first.', 'warn'); return; }
    const button = $('#breaker-apply');
    button.disabled = true;
    try {
      const b = await api('PUT', '/admin/breaker', { mode: chosen.value });
      breakerShown = b.mode;
      showBreaker(b);
      say(`Breaker mode is now “${b.mode}” for every instance.`, b.mode === 'open' ? 'warn' : 'ok');
    } catch (err) {
      if (!tokenRefused(err)) say(sentence(err), 'error');
    } finally {
      button.disabled = false;
    }
  }

  // ---- Vouchers -----------------------------------------------------------

  // minorDigits is how many decimals a currency's minor unit has (ISO 4217),
  // the unit price_cents counts in: 0 for JPY, 3 for KWD, 2 for most.
  function minorDigits(code) {
    if (/^(BIF|CLP|DJF|GNF|ISK|JPY|KMF|KRW|PYG|RWF|UGX|VND|VUV|XAF|XOF|XPF)$/.test(code)) return 0;
    if (/^(BHD|IQD|JOD|KWD|LYD|OMR|TND)$/.test(code)) return 3;
    return 2;
  }

  // money shows an amount in a currency's minor unit as its decimal price.
  function money(minor, code) {
    const d = minorDigits(code);
    return `${(minor / 10 ** d).toFixed(d)} ${code || ''}`.trim();
  }

  // cents parses a decimal price exactly (no floating point) into the
  // currency's minor unit: "12.5" -> 1250 in CNY, "1200" -> 1200 in JPY.
  function cents(text, digits = 2) {
    const m = /^\s*(\d{1,9})(?:[.,](\d{1,3}))?\s*$/.exec(text);
    if (!m || (m[2] || '').length > digits) return NaN;
    return Number(m[1]) * 10 ** digits + Number((m[2] || '').padEnd(digits, '0') || '0');
  }

  // localInput formats a time for a datetime-local field.
  function localInput(ms) {
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  }

  function fillTimes(beginInMs) {
    const begin = Math.ceil((serverNow() + beginInMs) / 1000) * 1000;
    $('#v-begin').value = localInput(begin);
    $('#v-end').value = localInput(begin + 3600 * 1000);
  }

  async function createVoucher(ev) {
    ev.preventDefault();
    if (!token) { say('Enter the admin token first.', 'warn'); $('#admin-token').focus(); return; }
    const title = $('#v-title').value.trim();
    const currency = $('#v-currency').value.trim().toUpperCase();
    const price = cents($('#v-price').value, minorDigits(currency));
    const stock = Number($('#v-stock').value);
    const limit = Number($('#v-limit').value);
    const begin = new Date($('#v-begin').value);
    const end = new Date($('#v-end').value);
    const problems = [];
    if (!title) problems.push(['#v-title', 'a title']);
    if (!Number.isFinite(price)) problems.push(['#v-price', 'a price such as 9.99']);
    if (currency && !/^[A-Z]{3}$/.test(currency)) problems.push(['#v-currency', 'a currency code of three letters, such as CNY, or none']);
    if (!Number.isInteger(stock) || stock < 1) problems.push(['#v-stock', 'a stock of at least 1']);
    if (!Number.isInteger(limit) || limit < 1) problems.push(['#v-limit', 'a per-shopper limit of at least 1']);
    const room = $('#v-room').checked;
    const rate = Number($('#v-room-rate').value);
    const prequeue = Number($('#v-room-prequeue').value);
    if (room && (!Number.isInteger(rate) || rate < 1)) problems.push(['#v-room-rate', 'an admission rate of at least 1 a second']);
    if (room && (!Number.isInteger(prequeue) || prequeue < 0)) problems.push(['#v-room-prequeue', 'a pre-queue of 0 seconds or more']);
    const draw = room && $('#v-room-mode').value === 'draw';
    const pass = Number($('#v-room-draw-pass').value);
    if (draw && Number.isInteger(prequeue) && prequeue < 1) problems.push(['#v-room-prequeue', 'a pre-queue of at least 1 second (a draw takes its entries then)']);
    if (draw && (!Number.isInteger(pass) || pass < 1 || pass > 86400)) problems.push(['#v-room-draw-pass', 'a winner’s pass of 1 to 86400 seconds']);
    const adaptive = room && $('#v-room-adaptive').checked;
    const entryToken = room && $('#v-entry-token').checked;
    const entryList = room && $('#v-entry-allowlist').checked;
    const p99 = Number($('#v-room-p99').value);
    const lo = Number($('#v-room-min').value);
    const hi = Number($('#v-room-max').value);
    if (adaptive && (!Number.isInteger(p99) || p99 < 1 || p99 > 60000)) problems.push(['#v-room-p99', 'a target p99 of 1 to 60000 ms']);
    if (adaptive && (!Number.isInteger(lo) || lo < 1 || !Number.isInteger(hi) || hi < lo)) problems.push(['#v-room-min', 'a slowest rate of at least 1 and a fastest no lower']);
    else if (adaptive && (rate < lo || rate > hi)) problems.push(['#v-room-rate', `an admission rate between the slowest and the fastest (${lo} to ${hi} a second)`]);
    if (Number.isNaN(begin.getTime()) || Number.isNaN(end.getTime())) problems.push(['#v-begin', 'opening and closing times']);
    else if (end <= begin) problems.push(['#v-end', 'a closing time after the opening time']);
    if (problems.length) {
      say(`Please give ${problems.map((p) => p[1]).join(', ')}.`, 'warn');
      $(problems[0][0]).focus();
      return;
    }
    const button = $('#v-create');
    button.disabled = true;
    try {
      const v = await api('POST', '/admin/vouchers', {
        title,
        kind: $('#v-kind').value,
        price_cents: price,
        ...(currency ? { currency } : {}),
        stock,
        per_user_limit: limit,
        begin_at: begin.toISOString(),
        end_at: end.toISOString(),
        captcha_required: $('#v-captcha').checked,
        challenge: $('#v-pow').checked ? 'pow' : $('#v-captcha').checked ? 'captcha' : 'none',
        waiting_room: room ? {
          admit_per_second: rate,
          prequeue_seconds: prequeue,
          mode: draw ? 'draw' : 'line',
          ...(draw ? { draw_pass_seconds: pass } : {}),
          adaptive: adaptive ? { target_p99_ms: p99, min_per_second: lo, max_per_second: hi } : null,
        } : null,
        entry: room && (entryToken || entryList) ? { token_required: entryToken, allowlist: entryList } : null,
      });
      say(`Voucher ${v.id} “${v.title}” created.`, 'ok');
      refresh();
    } catch (err) {
      if (!tokenRefused(err)) say(sentence(err), 'error');
    } finally {
      button.disabled = false;
    }
  }

  // changesOf is the voucher whose changes #changes lists ('' none).
  let changesOf = '';

  // changeText says what one recorded change did.
  function changeText(c) {
    const what = [];
    if (c.add_stock) what.push(`+${c.add_stock} stock (total ${c.stock_total})`);
    if (c.admit_per_second) what.push(`admit ${c.admit_per_second}/s`);
    if (c.end_at) what.push(`closes ${new Date(c.end_at).toLocaleString()}`);
    return what.join(', ');
  }

  // showChanges lists every change operators made to voucher id's sale, as
  // the record keeps them (GET /api/v1/admin/vouchers/{id}/changes): newest
  // first, with who made it (the fingerprint the server logs), whether made
  // from this page, another tab or a script.
  async function showChanges(id) {
    changesOf = id;
    const list = $('#changes');
    if (!id) { list.replaceChildren(); return; }
    const changes = await api('GET', `/admin/vouchers/${encodeURIComponent(id)}/changes`);
    if (changesOf !== id) return; // another voucher was asked for meanwhile
    $('#changes-title').textContent = `Changes of voucher ${id}`;
    list.replaceChildren(...changes.slice().reverse().map((c) => {
      const li = document.createElement('li');
      li.dataset.voucherId = id;
      li.textContent = `${new Date(c.at).toLocaleString()} · voucher ${id}: ${changeText(c)} · by ${c.by}`;
      return li;
    }));
    if (!changes.length) {
      const li = document.createElement('li');
      li.textContent = `No change made to voucher ${id} yet.`;
      list.replaceChildren(li);
    }
  }

  // steerVoucher changes a running sale (PATCH /api/v1/admin/vouchers/{id}):
  // stock added, the waiting room's rate, a later end. Every instance obeys
  // within a second; the change is listed under the form.
  async function steerVoucher(ev) {
    ev.preventDefault();
    if (!token) { say('Enter the admin token first.', 'warn'); $('#admin-token').focus(); return; }
    const id = $('#s-voucher').value.trim();
    const body = {};
    const add = $('#s-add-stock').value.trim();
    const rate = $('#s-rate').value.trim();
    const end = $('#s-end').value;
    if (!/^\d+$/.test(id)) { say('Please give the voucher’s ID.', 'warn'); $('#s-voucher').focus(); return; }
    if (add) body.add_stock = Number(add);
    if (rate) body.admit_per_second = Number(rate);
    if (end) {
      const t = new Date(end);
      if (Number.isNaN(t.getTime())) { say('Please give a valid closing time.', 'warn'); $('#s-end').focus(); return; }
      body.end_at = t.toISOString();
    }
    if (!Object.keys(body).length) { say('Give stock to add, a rate or a new closing time.', 'warn'); return; }
    const button = $('#s-apply');
    button.disabled = true;
    try {
      const v = await api('PATCH', `/admin/vouchers/${encodeURIComponent(id)}`, body);
      const what = changeText({ ...body, stock_total: v.stock_total, end_at: body.end_at && v.end_at });
      say(`Voucher ${v.id} changed: ${what}. Every instance follows within a second.`, 'ok');
      for (const f of ['#s-add-stock', '#s-rate', '#s-end']) $(f).value = '';
      await showChanges(v.id);
      refresh();
    } catch (err) {
      if (tokenRefused(err)) return;
      say(err.code === 'conflict' ? `Voucher ${id} was not changed: its sale has ended.` : `Voucher ${id} was not changed: ${sentence(err)}`, 'error');
    } finally {
      button.disabled = false;
    }
  }

  const STAT_FIELDS = ['stock_total', 'stock_left', 'reserved', 'created', 'paid', 'cancelled', 'failed'];

  // queueText is a line's figures, from the stats' queue object.
  function queueText(q) {
    if (!q) return undefined;
    return `${q.waiting} waiting · ${q.admitted} admitted · ${q.expired} expired · ${q.passes_used} used`;
  }

  function saleOf(v, now) {
    if (now < Date.parse(v.begin_at)) return 'upcoming';
    if (now >= Date.parse(v.end_at)) return 'ended';
    return 'live';
  }

  function row(v) {
    const body = $('#stats tbody');
    let tr = body.querySelector(`tr[data-voucher-id="${CSS.escape(v.id)}"]`);
    if (!tr) {
      tr = document.createElement('tr');
      tr.dataset.voucherId = v.id;
      for (const f of ['id', 'title', 'sale', ...STAT_FIELDS, 'queue', 'pause']) {
        const td = document.createElement('td');
        td.dataset.field = f;
        if (STAT_FIELDS.includes(f)) td.className = 'num';
        if (f === 'title') {
          td.className = 'title-cell';
          td.append(document.createElement('span'), document.createElement('span'));
          td.firstChild.className = 'name';
          td.lastChild.className = 'sub';
        }
        if (f === 'pause') {
          const b = document.createElement('button');
          b.type = 'button';
          b.className = 'pause';
          b.addEventListener('click', () => togglePause(tr.dataset.voucherId, b));
          const r = document.createElement('button');
          r.type = 'button';
          r.className = 'report-open';
          r.textContent = 'Report';
          r.setAttribute('aria-label', `Sale report of voucher ${v.id}`);
          r.addEventListener('click', () => {
            $('#report-voucher').value = tr.dataset.voucherId;
            showReport();
          });
          td.append(b, r);
        }
        tr.append(td);
      }
      body.append(tr);
    }
    return tr;
  }

  // togglePause pauses one voucher's sale, or ends its pause, for the whole
  // fleet (PUT /api/v1/admin/vouchers/{id}/state). Beside the breaker: it
  // stops this voucher only.
  async function togglePause(id, button) {
    const want = button.dataset.paused === 'true' ? 'on_sale' : 'paused';
    button.disabled = true;
    try {
      const v = await api('PUT', `/admin/vouchers/${encodeURIComponent(id)}/state`, { state: want });
      showPause(button, v);
      const tr = button.closest('tr');
      if (tr) setCell(tr, 'sale', saleText(v));
      say(want === 'paused'
        ? `Voucher ${id} is paused. Buyers are told to try again shortly; every instance follows within a second.`
        : `Voucher ${id} is back on sale (${saleText(v)}).`, 'ok');
    } catch (err) {
      if (!tokenRefused(err)) say(`Voucher ${id} was not changed: ${sentence(err)}`, 'error');
    } finally {
      button.disabled = false;
    }
  }

  function showPause(button, v) {
    const paused = v.state === 'paused';
    button.dataset.paused = String(paused);
    const label = paused ? 'Resume' : 'Pause';
    if (button.textContent !== label) button.textContent = label;
    button.setAttribute('aria-label', `${label} voucher ${v.id}`);
    button.hidden = v.state === 'ended';
  }

  // saleText is the voucher's state as the API says it (older servers
  // without state: from the window).
  function saleText(v) {
    if (v.state) return v.state.replace('_', ' ');
    return saleOf(v, serverNow());
  }

  function setCell(tr, field, value) {
    const td = tr.querySelector(`td[data-field="${field}"]`);
    const text = value === undefined || value === null ? '–' : String(value);
    if (td.textContent !== text) td.textContent = text;
  }

  // entryText is how the voucher list sums up who may join.
  function entryText(e) {
    if (!e) return '';
    const how = [e.token_required ? 'entry token' : '', e.allowlist ? 'allowlist' : ''].filter(Boolean).join(' + ');
    return ` · by invitation (${how})`;
  }

  // roomText is how the voucher list sums up a waiting room.
  function roomText(wr) {
    if (!wr) return '';
    const how = wr.mode === 'draw' ? `draw, waitlist ${wr.admit_per_second}/s` : `line ${wr.admit_per_second}/s`;
    const a = wr.adaptive;
    return ` · ${how}${a ? ` (adaptive ${a.min_per_second}–${a.max_per_second}/s, p99 ≤ ${a.target_p99_ms} ms)` : ''}`;
  }

  async function refresh() {
    clearTimeout(refreshTimer);
    if (!token || refreshing) return;
    refreshing = true;
    try {
      const [vouchers, breaker] = await Promise.all([
        api('GET', '/vouchers', undefined, false),
        api('GET', '/admin/breaker'),
      ]);
      showBreaker(breaker);
      const list = (vouchers || []).map((v) => ({ ...v, id: String(v.id) })).slice(0, MAX_VOUCHERS);
      const stats = await Promise.all(list.map((v) => api('GET', `/admin/vouchers/${encodeURIComponent(v.id)}/stats`).catch((e) => e)));
      const keep = new Set();
      list.forEach((v, i) => {
        keep.add(v.id);
        const tr = row(v);
        setCell(tr, 'id', v.id);
        const title = tr.querySelector('td[data-field="title"]');
        title.firstChild.textContent = v.title;
        const wr = v.waiting_room;
        title.lastChild.textContent = `${v.kind} · ${money(v.price_cents, v.currency)} · limit ${v.per_user_limit}${v.captcha_required ? ' · captcha' : ''}${v.challenge === 'pow' ? ' · device check' : ''}${roomText(wr)}${entryText(v.entry)}`;
        setCell(tr, 'sale', saleText(v));
        showPause(tr.querySelector('td[data-field="pause"] button'), v);
        const s = stats[i];
        if (s instanceof ApiError) {
          if (tokenRefused(s)) throw s;
          for (const f of STAT_FIELDS) setCell(tr, f, undefined);
          setCell(tr, 'stock_total', v.stock_total);
          setCell(tr, 'stock_left', v.stock_left);
        } else {
          for (const f of STAT_FIELDS) setCell(tr, f, s[f]);
          setCell(tr, 'queue', queueText(s.queue));
        }
      });
      for (const tr of [...$('#stats tbody').children]) {
        if (!keep.has(tr.dataset.voucherId)) tr.remove();
      }
      if (changesOf) await showChanges(changesOf);
      $('#stats-updated').textContent = `Updated ${fmtTime(serverNow())}`;
    } catch (err) {
      if (!tokenRefused(err)) $('#stats-updated').textContent = `Not updated: ${sentence(err)}`;
    } finally {
      refreshing = false;
    }
    if (token) refreshTimer = setTimeout(refresh, document.hidden ? 10000 : REFRESH_MS);
  }

  // ---- Sale report --------------------------------------------------------

  function reportVoucher() {
    const id = $('#report-voucher').value.trim();
    if (!/^[1-9][0-9]{0,18}$/.test(id)) {
      say('Please give a voucher ID.', 'warn');
      $('#report-voucher').focus();
      return '';
    }
    if (!token) { say('Enter the admin token first.', 'warn'); $('#admin-token').focus(); return ''; }
    return id;
  }

  async function showReport(ev) {
    if (ev) ev.preventDefault();
    const id = reportVoucher();
    if (!id) return;
    const button = $('#report-show');
    button.disabled = true;
    try {
      const r = await api('GET', `/admin/vouchers/${encodeURIComponent(id)}/report`);
      const root = $('#report');
      window.saleReport.render(root, r);
      root.dataset.voucherId = r.voucher_id;
      say(`Sale report of voucher ${r.voucher_id}.`, 'ok');
      root.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      if (!tokenRefused(err)) say(`No report for voucher ${id}: ${sentence(err)}`, 'error');
    } finally {
      button.disabled = false;
    }
  }

  // download saves one of the voucher's CSV exports as a file (what names
  // it in the page's messages). The exports need the token in a header,
  // which a plain link cannot send.
  async function download(button, path, file, what) {
    const id = reportVoucher();
    if (!id) return;
    button.disabled = true;
    try {
      const res = await fetch(`${API}/admin/vouchers/${encodeURIComponent(id)}/${path}`, {
        headers: { Authorization: `Bearer ${token}` }, cache: 'no-store', credentials: 'omit',
      });
      if (!res.ok) {
        let e = {};
        try { e = (await res.json()).error || {}; } catch (x) { e = {}; }
        throw new ApiError(res.status, e.code || 'internal', e.message || '');
      }
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = `voucher-${id}-${file}`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      say(`${what[0].toUpperCase()}${what.slice(1)} of voucher ${id} downloaded.`, 'ok');
    } catch (err) {
      if (err instanceof ApiError) {
        if (!tokenRefused(err)) say(`No ${what} for voucher ${id}: ${sentence(err)}`, 'error');
      } else say(sentence(new ApiError(0, 'network', '')), 'error');
    } finally {
      button.disabled = false;
    }
  }

  function start() {
    $('#token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('#admin-token').value.trim();
      $('#admin-token').value = ''; // not left in the field either
      if (!t) { say('Please enter the admin token.', 'warn'); $('#admin-token').focus(); return; }
      setToken(t);
      say('Token set. Loading the figures…', 'info');
    });
    $('#token-forget').addEventListener('click', () => { setToken(''); say('Token forgotten.', 'info'); });
    $('#breaker-apply').addEventListener('click', applyBreaker);
    $('#report-form').addEventListener('submit', showReport);
    $('#report-csv').addEventListener('click', (ev) => download(ev.currentTarget, 'orders.csv', 'orders.csv', 'orders'));
    $('#report-draw-csv').addEventListener('click', (ev) => download(ev.currentTarget, 'draw/entries', 'draw-entries.csv', 'draw entries'));
    $('#voucher-form').addEventListener('submit', createVoucher);
    $('#steer-form').addEventListener('submit', steerVoucher);
    $('#s-voucher').addEventListener('change', () => {
      const id = $('#s-voucher').value.trim();
      showChanges(/^\d+$/.test(id) && token ? id : '').catch((err) => { if (!tokenRefused(err)) say(sentence(err), 'error'); });
    });
    $('#v-soon').addEventListener('click', () => fillTimes(60000));
    const roomFields = () => {
      const on = $('#v-room').checked;
      for (const f of ['#v-room-rate', '#v-room-prequeue', '#v-room-mode', '#v-room-adaptive', '#v-entry-token', '#v-entry-allowlist']) $(f).disabled = !on;
      $('#v-room-draw-pass').disabled = !on || $('#v-room-mode').value !== 'draw';
      const adaptive = on && $('#v-room-adaptive').checked;
      for (const f of ['#v-room-p99', '#v-room-min', '#v-room-max']) $(f).disabled = !adaptive;
    };
    for (const f of ['#v-room', '#v-room-mode', '#v-room-adaptive']) $(f).addEventListener('change', roomFields);
    document.addEventListener('visibilitychange', () => { if (!document.hidden && token) refresh(); });
    fillTimes(5 * 60000);
    const tick = () => { $('#server-clock').textContent = fmtTime(serverNow()); };
    tick();
    setInterval(tick, 250);
    // One unauthenticated call so the clock is right before any token.
    api('GET', '/vouchers', undefined, false).then(() => fillTimes(5 * 60000)).catch(() => {});
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();

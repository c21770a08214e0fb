/*
 * Flash Sale shopper page. Plain JavaScript, no build step, no network access
 * beyond this site's own /api/v1 (gateway/openapi.yaml) and /api/v1/ws.
 *
 * Hooks for tests (chromedp) and for anyone scripting the page. They are a
 * contract: keep them stable.
 *
 *   #message                    the status line (aria-live); data-kind = info|ok|warn|error
 *   #username #password         log-in form fields
 *   #login #register            buttons (register logs in right after)
 *   #login-captcha              shown once a login needs a captcha (its username had many
 *                               failed logins), or a sign-up does (the server asks for one):
 *                               #login-captcha-why #login-captcha-img #login-captcha-answer
 *                               #login-captcha-refresh
 *   #auth                       the log-in card (hidden once logged in)
 *   #account-bar #whoami #logout  shown once logged in
 *   #server-clock               server time, from the Date header of API answers
 *   #vouchers                   the voucher list
 *     [data-voucher-id="<id>"]  one card (data-testid="voucher"); data-state =
 *                               upcoming|live|soldout|ended
 *       .stock-left .stock-total  live stock figures
 *       .countdown              "Opens in …" / "Ends in …"
 *       .qty                    quantity input (id qty-<voucher id>)
 *       .captcha                shown when the voucher has captcha_required
 *         .captcha-img .captcha-answer .captcha-refresh   (answer id captcha-<voucher id>)
 *         .captcha-listen .captcha-audio                  the same captcha read aloud
 *       .pow-status             a pow voucher's check in progress (pow.js, a Web Worker)
 *       .buy                    the Buy button (disabled while a request is in flight,
 *                               while waiting out a 429, when sold out or not on sale;
 *                               on a voucher with a waiting room, shown only once admitted)
 *       .queue                  the waiting room (vouchers with waiting_room); data-state =
 *                               none|waiting|sold_out|admitted|used|expired|closed, and
 *                               in a draw (waiting_room.mode "draw")
 *                               none|entered|won|used|expired|waitlisted|lost|void
 *         .queue-headline .queue-position .queue-ahead .queue-eta .queue-bar
 *       .join                   "Join the line" (shown until the shopper is in line)
 *   #orders-section             "My orders", shown once logged in; #orders-empty when none
 *   #orders                     the order list, newest first
 *     [data-order-id="<id>"]    one order (data-testid="order"); data-status = the API's status
 *       .status                 the API's status word (reserved|created|paid|cancelled|failed|refunded)
 *       .deadline               time left to pay (server clock)
 *       .pay .cancel            buttons, shown while the order is "created"
 *   #ws-state                   socket state; data-state = offline|connecting|live|reconnecting
 *
 * The log-in token is kept in sessionStorage (this tab only, gone when it closes).
 *
 * It stays one file on purpose: the page has no build step, and its sections
 * (marked "----" below: state, server clock, HTTP, session, vouchers, orders,
 * socket) share one closure's state, which separate scripts would have to
 * put on window. Read it by section; the Card class is one voucher's article.
 */
// @ts-check
'use strict';

(() => {
  const API = '/api/v1';
  const SESSION_KEY = 'seckill.session';
  const CURRENCY = 'USD';
  // Status words of the API, ranked: a status never moves back down, whatever
  // order the socket, the snapshot and REST answers arrive in.
  // refunded comes after paid or cancelled (the money went back), so a late
  // "cancelled" never hides it.
  const RANK = { reserved: 0, created: 1, paid: 2, cancelled: 2, failed: 2, refunded: 3 };
  const STATUS_HINT = {
    reserved: 'Confirming your order…',
    created: '',
    paid: 'Paid. Enjoy!',
    cancelled: 'Cancelled, stock returned.',
    failed: 'Could not be completed, nothing was charged.',
    refunded: 'Refunded: the money went back to you.',
  };

  const $ = (sel, root = document) => root.querySelector(sel);
  // setText skips writes that change nothing: the clock ticks four times a
  // second and most of the page stays the same.
  const setText = (el, text) => { if (el.textContent !== text) el.textContent = text; };

  // ---- State ------------------------------------------------------------

  const state = {
    session: null, // {token, userId, username, expiresAt(ms, server clock)}
    vouchers: new Map(), // id -> voucher (API object)
    cards: new Map(), // id -> card controller
    orders: new Map(), // id -> order (API object)
    orderEls: new Map(), // id -> <li>
    vouchersLoadedOnce: false,
  };

  // ---- Server clock -------------------------------------------------------
  // Every API answer bounds the offset between the server's clock and ours.
  // The server stamped it at some moment S between our send and our receive,
  // so offset = S - local lies in [S - receivedAt, S - sentAt]. S is known to
  // the millisecond from an X-Server-Time header (unix ms) when the gateway
  // sends one; otherwise only from the Date header, which has whole seconds
  // and which fasthttp refreshes once a second, so S lies in [D, D + 2 s).
  // Intersecting the intervals of many answers narrows the offset; we use
  // the middle.
  const clock = { lo: -Infinity, hi: Infinity };

  function bound(lo, hi) {
    let nlo = Math.max(clock.lo, lo);
    let nhi = Math.min(clock.hi, hi);
    if (nlo > nhi) { // a clock jumped (device slept, NTP step): start over
      nlo = lo;
      nhi = hi;
    }
    clock.lo = nlo;
    clock.hi = nhi;
  }

  function observeDate(res, sentAt, receivedAt) {
    const precise = Number(res.headers.get('X-Server-Time'));
    if (precise > 0) {
      bound(precise - receivedAt, precise - sentAt);
      return;
    }
    const header = res.headers.get('Date');
    const d = header ? Date.parse(header) : NaN;
    if (!Number.isNaN(d)) bound(d - receivedAt, d + 2000 - sentAt);
  }

  // learnServerTime narrows the offset with what an answer proved: that the
  // server's clock was past (after=true) or not yet at (after=false) instant
  // `at` when it answered. A not_started or a first successful buy right at
  // the opening pins the offset exactly where it matters.
  function learnServerTime(at, after, sentAt, receivedAt) {
    if (after) {
      if (at - receivedAt <= clock.hi) clock.lo = Math.max(clock.lo, at - receivedAt);
    } else if (at - sentAt >= clock.lo) {
      clock.hi = Math.min(clock.hi, at - sentAt);
    }
  }

  function serverNow() {
    const offset = Number.isFinite(clock.lo) ? (clock.lo + clock.hi) / 2 : 0;
    return Date.now() + offset;
  }

  // ---- Formatting ---------------------------------------------------------

  const money = new Intl.NumberFormat(undefined, { style: 'currency', currency: CURRENCY });
  const fmtMoney = (cents) => money.format(Number(cents) / 100);
  const fmtTime = (ms) => new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  const fmtDateTime = (ms) => new Date(ms).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });

  function fmtDuration(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(total / 86400);
    const h = Math.floor((total % 86400) / 3600);
    const m = Math.floor((total % 3600) / 60);
    const s = total % 60;
    const two = (n) => String(n).padStart(2, '0');
    if (d > 0) return `${d}d ${two(h)}:${two(m)}:${two(s)}`;
    if (h > 0) return `${h}:${two(m)}:${two(s)}`;
    return `${two(m)}:${two(s)}`;
  }

  // shortRef keeps the end of a long order id, which is the part that differs.
  const shortRef = (id) => `#…${String(id).slice(-6)}`;

  // ---- Status line --------------------------------------------------------

  function say(text, kind = 'info') {
    const el = $('#message');
    el.dataset.kind = kind;
    el.textContent = text;
  }

  // ---- HTTP ---------------------------------------------------------------

  class ApiError extends Error {
    /**
     * @param {number} status
     * @param {string} code
     * @param {string} message
     * @param {number} retryAfter
     * @param {Partial<ApiErrorBody['error']>} [detail] the error body's fields and retry_at
     */
    constructor(status, code, message, retryAfter, detail = {}) {
      super(message || code);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter; // seconds, or 0 when absent
      this.fields = detail.fields || []; // invalid_input: [{field, reason}]
      this.retry_at = detail.retry_at || ''; // unpaid_limit: RFC 3339
    }
  }

  const CODE_FOR_STATUS = {
    400: 'invalid_input', 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found',
    409: 'conflict', 413: 'too_large', 429: 'rate_limited', 503: 'unavailable',
  };

  function parseRetryAfter(value) {
    if (!value) return 0;
    const secs = Number(value);
    if (Number.isFinite(secs)) return Math.max(0, Math.ceil(secs));
    const at = Date.parse(value);
    return Number.isNaN(at) ? 0 : Math.max(0, Math.ceil((at - serverNow()) / 1000));
  }

  // nextPage is the path (under API) of the page a list's Link header names
  // (rel="next"), or '' on the last page.
  function nextPage(res) {
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(res.headers.get('Link') || '');
    if (!m) return '';
    const url = new URL(m[1], location.href);
    return url.pathname.startsWith(API + '/') ? url.pathname.slice(API.length) + url.search : '';
  }

  /**
   * apiList reads every page of a list (GET /vouchers, GET /orders),
   * following Link, at most maxPages of them.
   * @template T
   * @param {string} path
   * @param {ApiOptions} [opts]
   * @param {number} [maxPages]
   * @returns {Promise<T[]>}
   */
  async function apiList(path, opts = {}, maxPages = 20) {
    /** @type {T[]} */
    const all = [];
    for (let i = 0; path && i < maxPages; i++) {
      let next = '';
      const page = await api('GET', path, { ...opts, onResponse: (res) => { next = nextPage(res); } });
      if (Array.isArray(page)) all.push(...page);
      path = next;
    }
    return all;
  }

  /**
   * @typedef {object} ApiOptions
   * @property {unknown} [body] sent as JSON
   * @property {Record<string, string>} [headers]
   * @property {boolean} [auth] sign the request with the session's token (default true)
   * @property {((res: Response) => void) | null} [onResponse] sees a 2xx answer's headers
   */

  /**
   * api sends one request to the API and returns its JSON body, or throws an
   * ApiError with the error body's code, message, fields and retry_at.
   * @param {string} method
   * @param {string} path under API, e.g. '/orders'
   * @param {ApiOptions} [opts]
   * @returns {Promise<any>}
   */
  async function api(method, path, { body, headers = {}, auth = true, onResponse = null } = {}) {
    /** @type {Record<string, string>} */
    const h = { Accept: 'application/json', ...headers };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    if (auth && state.session) h.Authorization = `Bearer ${state.session.token}`;
    const sentAt = Date.now();
    let res;
    try {
      res = await fetch(API + path, {
        method,
        headers: h,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', // a cached answer would carry a stale Date
        credentials: 'same-origin',
      });
    } catch (e) {
      throw new ApiError(0, 'network', 'network error', 0);
    }
    observeDate(res, sentAt, Date.now());
    if (onResponse && res.ok) onResponse(res);
    const text = await res.text().catch(() => '');
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const err = data && data.error ? data.error : {};
      throw new ApiError(res.status, err.code || CODE_FOR_STATUS[res.status] || 'internal',
        err.message || '', parseRetryAfter(res.headers.get('Retry-After')), err);
    }
    return data;
  }

  // sentence turns an API error into what a shopper reads. what says what
  // was being done, for the few codes whose meaning depends on it.
  /**
   * @param {Pick<ApiError, 'code'> & Partial<ApiError>} err
   * @param {string} [what]
   * @returns {string}
   */
  function sentence(err, what) {
    const wait = err.retryAfter || 1;
    switch (err.code) {
      case 'network': return 'Can’t reach the shop right now. Check your connection and try again.';
      case 'invalid_input': return `That didn’t look right${err.message ? `: ${err.message}` : ''}.`;
      case 'captcha_invalid': return 'The captcha answer wasn’t right (or it expired). Here’s a new picture — please try again.';
      case 'challenge_invalid':
        return what === 'register'
          ? 'The captcha answer wasn’t right (or it expired). Here’s a new picture — please try again.'
          : 'This device’s check expired before the buy reached the shop. Please press Buy again.';
      case 'pow_failed': return 'This browser couldn’t run the shop’s device check. Please try again, or use another browser.';
      case 'not_eligible':
        return `This sale takes entries only from shoppers its merchant invited${err.message ? `: ${err.message}` : '.'}`;
      case 'unauthenticated':
        return what === 'login' ? 'Wrong username or password.' : 'Your session has ended. Please log in again.';
      case 'forbidden': return 'Your account isn’t allowed to do that.';
      case 'not_found':
        return what === 'order' ? 'That order wasn’t found.' : 'That voucher isn’t on sale any more.';
      case 'sold_out': return 'Sorry — this voucher is sold out.';
      case 'limit_exceeded': return 'You already have as many of this voucher as one shopper may buy.';
      case 'not_started': return 'This sale hasn’t opened yet. The countdown shows when it does.';
      case 'ended': return 'This sale has ended.';
      case 'conflict':
        if (what === 'pay') return 'This order can’t be paid any more — it was cancelled or its time to pay ran out.';
        if (what === 'cancel') return 'This order can’t be cancelled any more.';
        return 'That can’t be done in the order’s current state.';
      case 'username_taken': return 'That username is taken. Please pick another one.';
      case 'too_large': return 'That request was too large.';
      case 'rate_limited': return `Too many tries — trying again in ${wait} s.`;
      case 'unavailable': return `The shop is very busy right now — please try again in ${wait} s.`;
      case 'sale_paused': return 'The shop paused this sale for a moment. The page shows when it reopens.';
      case 'not_admitted': return 'This sale has a waiting room: your turn to buy comes when the line lets you in.';
      case 'unpaid_limit': {
        // error.retry_at is when the refusal ends (gateway/openapi.yaml).
        const when = err.retry_at ? new Date(err.retry_at).toLocaleString() : 'later';
        return `Too many of your holds ran out unpaid or were cancelled recently — you can buy again from ${when}.`;
      }
      default: return 'Something went wrong on our side. Please try again.';
    }
  }

  // uuid is the Idempotency-Key. crypto.randomUUID needs a secure context;
  // a shop reached over plain http on a LAN still gets a v4 UUID.
  function uuid() {
    if (window.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  // ---- Session ------------------------------------------------------------

  function loadSession() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
      if (s && s.token && s.userId) return s;
    } catch (e) { /* storage blocked or corrupt: start logged out */ }
    return null;
  }

  function saveSession(s) {
    try {
      if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
      else sessionStorage.removeItem(SESSION_KEY);
    } catch (e) { /* storage blocked: the token lives in memory only */ }
  }

  function setSession(s) {
    state.session = s;
    saveSession(s);
    const inside = Boolean(s);
    $('#auth').hidden = inside;
    $('#account-bar').hidden = !inside;
    $('#whoami').textContent = inside ? s.username : '';
    $('#orders-section').hidden = !inside;
    socket.reopen();
    if (inside) {
      refreshOrders();
    } else {
      state.orders.clear();
      state.orderEls.clear();
      $('#orders').replaceChildren();
    }
    updateOrdersEmpty();
    for (const card of state.cards.values()) {
      card.queue = null; // another shopper's place is not this one's
      card.update();
    }
  }

  function endSession(text) {
    setSession(null);
    say(text, 'warn');
    $('#username').focus();
  }

  function credentials() {
    const username = $('#username').value.trim();
    const password = $('#password').value;
    if (!username || !password) {
      say('Please enter a username and a password.', 'warn');
      (username ? $('#password') : $('#username')).focus();
      return null;
    }
    return { username, password };
  }

  // entryToken is the merchant's entry token the page was opened with
  // (?entry_token=...), or ''.
  function entryToken() {
    return new URLSearchParams(window.location.search).get('entry_token') || '';
  }

  // loginCaptcha is the captcha a login needs once its username had too
  // many failed logins: the server then answers captcha_invalid until a
  // login carries a solved one. Each one serves one try, right or wrong.
  const LOGIN_WHY = 'Many wrong passwords were tried for this username: type the characters in the picture to log in.';
  const REGISTER_WHY = 'Creating an account takes a captcha: type the characters in the picture, then press Create account.';
  const loginCaptcha = {
    id: '',
    async load(why = LOGIN_WHY) {
      $('#login-captcha-why').textContent = why;
      $('#login-captcha').hidden = false;
      $('#login-captcha-answer').value = '';
      this.id = '';
      try {
        const res = await api('GET', '/captcha', { auth: false });
        this.id = res.captcha_id;
        const img = $('#login-captcha-img');
        img.src = res.image;
        img.hidden = false;
      } catch (err) {
        say(`The captcha could not be loaded. ${sentence(err, 'captcha')}`, 'error');
      }
    },
    hide() {
      this.id = '';
      $('#login-captcha').hidden = true;
    },
    // with adds the typed answer to a login's body while a captcha is shown.
    with(creds) {
      if (!this.id) return creds;
      return { ...creds, captcha_id: this.id, captcha_answer: $('#login-captcha-answer').value.trim() };
    },
  };

  async function login(creds, quiet) {
    let res;
    try {
      res = await api('POST', '/sessions', { body: loginCaptcha.with(creds), auth: false });
    } catch (err) {
      // A captcha shown was spent by this try; one asked for is shown.
      if (loginCaptcha.id || err.code === 'captcha_invalid') loginCaptcha.load();
      throw err;
    }
    loginCaptcha.hide();
    const expiresAt = Date.parse(res.expires_at);
    setSession({
      token: res.token,
      userId: String(res.user_id),
      username: creds.username,
      expiresAt: Number.isNaN(expiresAt) ? 0 : expiresAt,
    });
    $('#password').value = '';
    if (!quiet) say(`Welcome back, ${creds.username}.`, 'ok');
  }

  async function withButton(button, work) {
    if (button.disabled) return;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await work();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  function onLogin(ev) {
    ev.preventDefault();
    const creds = credentials();
    if (!creds) return;
    withButton($('#login'), async () => {
      const withCaptcha = Boolean(loginCaptcha.id);
      try {
        await login(creds, false);
      } catch (err) {
        if (err.code === 'captcha_invalid') {
          say(withCaptcha
            ? sentence(err, 'login')
            : 'Many wrong passwords were tried for this username. Type the characters in the picture, then log in again.', 'warn');
          $('#login-captcha-answer').focus();
          return;
        }
        say(sentence(err, 'login'), 'error');
        $('#password').focus();
      }
    });
  }

  function onRegister() {
    const creds = credentials();
    if (!creds) return;
    withButton($('#register'), async () => {
      const withCaptcha = Boolean(loginCaptcha.id);
      try {
        await api('POST', '/users', { body: loginCaptcha.with(creds), auth: false });
      } catch (err) {
        // A captcha shown was spent by this try; one asked for is shown.
        if (loginCaptcha.id || err.code === 'challenge_invalid') loginCaptcha.load(REGISTER_WHY);
        if (err.code === 'challenge_invalid') {
          say(withCaptcha ? sentence(err, 'register') : REGISTER_WHY, 'warn');
          $('#login-captcha-answer').focus();
          return;
        }
        say(sentence(err, 'register'), 'error');
        $('#username').focus();
        return;
      }
      loginCaptcha.hide();
      try {
        await login(creds, true);
        say(`Account created. Welcome, ${creds.username}!`, 'ok');
      } catch (err) {
        say(sentence(err, 'login'), 'error');
        $('#username').focus();
      }
    });
  }

  // ---- Vouchers -------------------------------------------------------------

  function phaseOf(v, now) {
    if (now >= Date.parse(v.end_at)) return 'ended';
    if (v.state === 'paused') return 'paused';
    if (now < Date.parse(v.begin_at)) return 'upcoming';
    return 'live';
  }

  // Card drives one voucher's article: its figures, countdown, captcha and
  // the buy intent (one Idempotency-Key per intent, reused by every retry).
  class Card {
    constructor(v) {
      this.id = v.id;
      const el = $('#voucher-template').content.firstElementChild.cloneNode(true);
      this.el = el;
      el.dataset.voucherId = v.id;
      const qty = $('.qty', el);
      qty.id = `qty-${v.id}`;
      $('.qty-label', el).htmlFor = qty.id;
      const answer = $('.captcha-answer', el);
      answer.id = `captcha-${v.id}`;
      $('.captcha-label', el).htmlFor = answer.id;
      this.buyButton = $('.buy', el);
      this.qty = qty;
      this.answer = answer;
      this.intent = null; // {key, qty, tries}
      this.inflight = false;
      this.waitUntil = 0; // Date.now() ms until which a 429/503 is waited out
      this.retryAfterWait = false;
      this.doneUntil = 0; // short pause after a success, so a double click cannot buy twice
      this.soldOut = false; // learnt from a 409 sold_out, until the stock figure rises
      this.captcha = { id: '', loadedAt: 0, loading: false, failedAt: 0 };
      this.pow = null; // a pow voucher's challenge being solved (solvePow)
      // The waiting room: the shopper's place (the API's queue object, as
      // answered or pushed), when it came, and the first position seen (the
      // progress bar runs from it to admission).
      this.joinButton = $('.join', el);
      this.queue = null;
      this.queueAt = 0;
      this.queueStart = 0;
      this.joining = false;
      this.joinButton.addEventListener('click', () => this.join());
      $('.buy-form', el).addEventListener('submit', (ev) => { ev.preventDefault(); this.buy(); });
      $('.captcha-refresh', el).addEventListener('click', () => this.loadCaptcha(true));
      $('.captcha-listen', el).addEventListener('click', () => this.loadCaptcha(true, 'audio'));
      qty.addEventListener('change', () => { this.intent = null; });
    }

    get voucher() { return state.vouchers.get(this.id); }

    // render copies the voucher's figures into the card.
    render() {
      const v = this.voucher;
      const el = this.el;
      $('.title', el).textContent = v.title;
      $('.kind', el).textContent = v.kind === 'seckill' ? 'Flash sale' : v.kind === 'limit' ? 'Limited' : 'Regular';
      $('.kind', el).dataset.kind = v.kind;
      $('.price', el).textContent = fmtMoney(v.price_cents);
      $('.stock-left', el).textContent = v.stock_left;
      $('.stock-total', el).textContent = v.stock_total;
      const bar = $('.stock-bar', el);
      bar.max = Math.max(1, v.stock_total);
      bar.value = Math.max(0, v.stock_left);
      bar.setAttribute('aria-label', `${v.stock_left} of ${v.stock_total} left`);
      $('.limit', el).textContent = v.per_user_limit ? `· up to ${v.per_user_limit} each` : '';
      this.qty.max = String(Math.max(1, Math.min(v.per_user_limit || 100, 100)));
      if (v.stock_left > 0) this.soldOut = false; // stock came back (a cancel or a timeout)
      this.update();
    }

    // update refreshes what depends on the clock: phase, countdown, button.
    update() {
      const v = this.voucher;
      if (!v) return;
      const now = serverNow();
      let phase = phaseOf(v, now);
      if (phase === 'live' && (this.soldOut || v.stock_left <= 0)) phase = 'soldout';
      this.el.dataset.state = phase;
      const cd = $('.countdown', this.el);
      cd.dataset.phase = phase;
      if (phase === 'upcoming') setText(cd, `Opens in ${fmtDuration(Date.parse(v.begin_at) - now)}`);
      else if (phase === 'live') setText(cd, `On sale · ends in ${fmtDuration(Date.parse(v.end_at) - now)}`);
      else if (phase === 'soldout') setText(cd, 'Sold out');
      else if (phase === 'paused') setText(cd, 'Paused by the shop · back soon');
      else setText(cd, `Ended ${fmtDateTime(Date.parse(v.end_at))}`);

      const b = this.buyButton;
      const wait = Math.ceil((this.waitUntil - Date.now()) / 1000);
      let label = 'Buy';
      let disabled = false;
      if (this.inflight) { label = 'Buying…'; disabled = true; }
      else if (wait > 0) { label = `Wait ${wait} s`; disabled = true; }
      else if (Date.now() < this.doneUntil) { label = 'Reserved ✓'; disabled = true; }
      else if (phase === 'upcoming') { label = 'Not open yet'; disabled = true; }
      else if (phase === 'soldout') { label = 'Sold out'; disabled = true; }
      else if (phase === 'paused') { label = 'Paused'; disabled = true; }
      else if (phase === 'ended') { label = 'Sale ended'; disabled = true; }
      else if (!state.session) { label = 'Log in to buy'; }
      const room = this.updateQueue(phase, now);
      if (room.hideBuy !== b.hidden) b.hidden = room.hideBuy;
      setText(b, label);
      if (b.disabled !== disabled) {
        const hadFocus = document.activeElement === b;
        b.disabled = disabled;
        // Disabling drops keyboard focus to <body>; hand it back when re-enabled.
        if (disabled && hadFocus) this.refocus = true;
        if (!disabled && this.refocus && document.activeElement === document.body) b.focus();
        if (!disabled) this.refocus = false;
      }
      b.classList.toggle('soldout', phase === 'soldout');

      if (this.retryAfterWait && wait <= 0 && !this.inflight) {
        this.retryAfterWait = false;
        say('Trying again now…', 'info');
        this.buy();
      }

      // A captcha is shown and fetched only for shoppers who may use it
      // soon, and renewed before it could expire.
      const wantCaptcha = v.captcha_required && Boolean(state.session) && room.wantCaptcha &&
        (phase === 'live' || (phase === 'upcoming' && Date.parse(v.begin_at) - now < 120000) || room.joinable);
      const box = $('.captcha', this.el);
      if (box.hidden === wantCaptcha) box.hidden = !wantCaptcha;
      // A pow voucher's check is solved as soon as buying is near, so the
      // press finds it done.
      if (v.challenge === 'pow' && state.session &&
        (phase === 'live' || (phase === 'upcoming' && Date.parse(v.begin_at) - now < 60000))) {
        this.solvePow().catch(() => {});
      }
      if (wantCaptcha) {
        const stale = Date.now() - this.captcha.loadedAt > 240000;
        if ((!this.captcha.id || stale) && !this.captcha.loading && !this.captchaFailedRecently()) {
          this.loadCaptcha(false);
        }
      }
    }

    // updateQueue draws the waiting room of a voucher that has one: the
    // join button, then place, people ahead, progress and the estimated
    // wait, then the buy button at admission (pushed on the socket, no
    // reload). It says whether the buy button shows and a captcha is wanted.
    updateQueue(phase, now) {
      const v = this.voucher;
      const box = $('.queue', this.el);
      const join = this.joinButton;
      if (!v.waiting_room) {
        if (!box.hidden) box.hidden = true;
        if (!join.hidden) join.hidden = true;
        return { hideBuy: false, wantCaptcha: true, joinable: false };
      }
      if (box.hidden) box.hidden = false;
      const opens = Date.parse(v.begin_at) - (v.waiting_room.prequeue_seconds || 0) * 1000;
      // A sold-out line still takes joins and keeps places: units that
      // come back go to the line in order. Only the end closes it.
      const over = phase === 'ended';
      const joinable = now >= opens && !over && phase !== 'paused';
      let q = this.queue;
      let st = q ? q.state : 'none';
      if (st === 'won') st = 'admitted'; // a draw's winner holds a pass as the admitted do
      if (st === 'admitted' && !q.pass) st = 'used';
      if (st === 'admitted' && Date.parse(q.pass_expires_at) <= now) st = 'expired';
      if (st === 'none' && over) st = 'closed';
      const headline = $('.queue-headline', box);
      const bar = $('.queue-bar', box);
      if (v.waiting_room.mode === 'draw') return this.updateDraw(st, phase, now, headline, bar, box, join);
      box.dataset.state = st;
      let showJoin = false;
      switch (st) {
        case 'none':
          showJoin = true;
          if (!state.session) setText(headline, 'This sale has a waiting room. Log in, then join the line.');
          else if (now < opens) setText(headline, `This sale has a waiting room. The line opens in ${fmtDuration(opens - now)}.`);
          else setText(headline, 'This sale has a waiting room: join the line for your turn to buy.');
          bar.value = 0;
          break;
        case 'waiting': {
          const drawn = now < Date.parse(v.begin_at);
          setText(headline, drawn
            ? 'You’re in the line. Places are drawn at random when the sale opens.'
            : `You’re number ${q.position} in line.`);
          setText($('.queue-position', box), String(q.position));
          setText($('.queue-ahead', box), String(q.ahead));
          // The estimate counts down between pushes.
          const eta = Math.max(0, q.eta_seconds * 1000 - (Date.now() - this.queueAt));
          setText($('.queue-eta', box), eta > 0 ? fmtDuration(eta) : 'any moment');
          bar.max = Math.max(1, this.queueStart);
          bar.value = Math.max(0, this.queueStart - q.position);
          break;
        }
        case 'sold_out':
          setText(headline, 'Sold out — you keep your place; units may come back.');
          setText($('.queue-position', box), String(q.position));
          setText($('.queue-ahead', box), String(q.ahead));
          setText($('.queue-eta', box), 'when units come back');
          break;
        case 'admitted':
          setText(headline, `It’s your turn! Buy within ${fmtDuration(Date.parse(q.pass_expires_at) - now)}.`);
          bar.max = 1;
          bar.value = 1;
          break;
        case 'used':
          setText(headline, 'You used your turn.');
          bar.max = 1;
          bar.value = 1;
          break;
        case 'expired':
          setText(headline, 'Your turn passed: the pass was not used in time.');
          break;
        default:
          setText(headline, 'The line is closed: the sale is over.');
      }
      if (join.hidden === showJoin) join.hidden = !showJoin;
      setText(join, this.joining ? 'Joining…' : 'Join the line');
      join.disabled = this.joining || !joinable || !state.session;
      return { hideBuy: st !== 'admitted', wantCaptcha: st === 'none' || st === 'admitted', joinable };
    }

    // updateDraw is updateQueue for a sale by draw: enter, then the draw's
    // result (won with a pass, waitlisted with a place, or lost) and the
    // shopper's own ticket beside the cut-off, to check by hand.
    updateDraw(st, phase, now, headline, bar, box, join) {
      const v = this.voucher;
      const q = this.queue;
      const begin = Date.parse(v.begin_at);
      const opens = begin - (v.waiting_room.prequeue_seconds || 0) * 1000;
      const d = v.draw || {};
      const joinable = now >= opens && now < begin && phase !== 'paused' && phase !== 'ended';
      if (st === 'closed') st = 'lost';
      box.dataset.state = st === 'admitted' ? 'won' : st;
      let showJoin = false;
      let text;
      switch (st) {
        case 'none':
          showJoin = true;
          if (!state.session) text = 'This sale is a draw. Log in, then enter it.';
          else if (now < opens) text = `This sale is a draw. Entries open in ${fmtDuration(opens - now)}.`;
          else if (now < begin) text = `This sale is a draw: enter before it opens, in ${fmtDuration(begin - now)}. Arriving first gives no advantage.`;
          else text = 'Entries to this draw are closed.';
          bar.value = 0;
          break;
        case 'entered':
          text = now < begin
            ? `You’re in the draw. It is made when the sale opens, in ${fmtDuration(begin - now)}.`
            : 'You’re in the draw. It is being made…';
          break;
        case 'admitted':
          text = `You won the draw! Buy within ${fmtDuration(Date.parse(q.pass_expires_at) - now)}.`;
          bar.max = 1;
          bar.value = 1;
          break;
        case 'used':
          text = 'You won the draw and used your turn.';
          break;
        case 'void':
          text = 'This draw is void: its entries were lost before it was made, so nobody won it. The shop will announce a new one.';
          break;
        case 'waitlisted':
          text = `You’re number ${q.position} on the waitlist: units a winner does not buy come to you in draw order.`;
          setText($('.queue-position', box), String(q.position));
          setText($('.queue-ahead', box), String(q.ahead));
          setText($('.queue-eta', box), 'when units come back');
          break;
        default:
          text = 'The draw is over for you: the sale ended, or the turn you won passed.';
      }
      if (d.void && st === 'none') text = 'This draw is void: its entries were lost before it was made, so nobody won it.';
      if (q && q.entry_id && st !== 'void') text += ` Your entry is ${q.entry_id.slice(0, 12)}…;`;
      if (q && q.ticket && d.cutoff) text += ` Your ticket ${q.ticket.slice(0, 12)}…, the cut-off ${d.cutoff.slice(0, 12)}… (the lowest tickets win).`;
      else if (d.beacon && !d.beacon.signature && !d.void) text += ` The draw takes its luck from drand round ${d.beacon.round}, due at ${new Date(d.beacon.round_at).toLocaleTimeString()}: nobody can know it before then.`;
      else if (d.commitment && !d.seed) text += ` Commitment: ${d.commitment.slice(0, 16)}…`;
      setText(headline, text);
      if (join.hidden === showJoin) join.hidden = !showJoin;
      setText(join, this.joining ? 'Entering…' : 'Enter the draw');
      join.disabled = this.joining || !joinable || !state.session;
      return { hideBuy: st !== 'admitted', wantCaptcha: st === 'none' || st === 'admitted', joinable };
    }

    // setQueue takes the shopper's place, answered or pushed.
    setQueue(q) {
      if (q && q.state === 'waiting' && (!this.queue || this.queue.state !== 'waiting' || q.position > this.queueStart)) {
        this.queueStart = q.position;
      }
      if (q && (q.state === 'admitted' || q.state === 'won') && q.pass && (!this.queue || this.queue.pass !== q.pass)) {
        say(`It’s your turn to buy “${this.voucher ? this.voucher.title : ''}”!`, 'ok');
      }
      this.queue = q;
      this.queueAt = Date.now();
      this.update();
    }

    // withCaptcha adds the captcha's id and the typed answer to a request
    // body when the voucher asks for them. It says false, after asking the
    // shopper to type the answer, when there is none yet.
    withCaptcha(body) {
      if (!this.voucher || !this.voucher.captcha_required) return true;
      const answer = this.answer.value.trim();
      if (!this.captcha.id || !answer) {
        say('Please type the characters from the captcha picture first.', 'warn');
        this.answer.focus();
        return false;
      }
      body.captcha_id = this.captcha.id;
      body.captcha_answer = answer;
      return true;
    }

    async join() {
      const v = this.voucher;
      if (!v || this.joining) return;
      if (!state.session) {
        say('Please log in first, then join the line.', 'warn');
        $('#username').focus();
        return;
      }
      const body = {};
      if (!this.withCaptcha(body)) return;
      this.joining = true;
      this.update();
      try {
        // A merchant who invites its shoppers links here with the entry
        // token it signed (?entry_token=...); the join carries it.
        const headers = entryToken() ? { 'Seckill-Entry-Token': entryToken() } : {};
        this.setQueue(await api('POST', `/vouchers/${encodeURIComponent(v.id)}/queue`, { body, headers }));
        say('You’re in the line. This page shows your place live; your turn to buy comes without a reload.', 'ok');
      } catch (err) {
        if (err.code === 'unauthenticated') endSession(sentence(err));
        else say(sentence(err, 'join'), err.code === 'captcha_invalid' ? 'warn' : 'error');
      } finally {
        this.joining = false;
        if (v.captcha_required) this.loadCaptcha(false);
        this.update();
      }
    }

    // readQueue asks for the shopper's place (the socket just opened: it
    // also tells the instance holding the socket to push from now on).
    async readQueue() {
      const v = this.voucher;
      if (!v || !v.waiting_room || !state.session) return;
      try {
        this.setQueue(await api('GET', `/vouchers/${encodeURIComponent(v.id)}/queue`));
      } catch (err) {
        if (err.code === 'not_found') this.setQueue(null);
      }
    }

    // captchaFailedRecently keeps a failing captcha fetch from hammering.
    captchaFailedRecently() {
      const at = this.captcha.failedAt;
      return Boolean(at) && Date.now() - at < 10000;
    }

    // loadCaptcha shows a new captcha: a picture, or with kind 'audio' the
    // same kind of captcha read aloud (kept until the shopper asks for a
    // picture again).
    async loadCaptcha(byUser, kind) {
      const c = this.captcha;
      if (c.loading) return;
      c.loading = true;
      if (kind) c.kind = kind === 'audio' ? 'audio' : 'image';
      else if (byUser) c.kind = 'image';
      const audio = c.kind === 'audio';
      try {
        const res = await api('GET', audio ? '/captcha?kind=audio' : '/captcha', { auth: false });
        c.id = res.captcha_id;
        c.loadedAt = Date.now();
        c.failedAt = 0;
        const img = $('.captcha-img', this.el);
        const player = $('.captcha-audio', this.el);
        if (audio) player.src = res.audio;
        else img.src = res.image;
        img.hidden = audio;
        player.hidden = !audio;
        setText($('.captcha-label', this.el), audio ? 'Digits you hear' : 'Characters in the picture');
        setText($('.captcha-refresh', this.el), audio ? 'Show a picture' : 'New picture');
        setText($('.captcha-listen', this.el), audio ? 'Listen to a new one' : 'Listen instead');
        $('.captcha-wait', this.el).hidden = true;
        this.answer.value = '';
        if (byUser) this.answer.focus();
      } catch (err) {
        c.failedAt = Date.now();
        $('.captcha-wait', this.el).textContent = 'The picture could not be loaded. Press “New picture”.';
        if (byUser) say(`The captcha could not be loaded. ${sentence(err, 'captcha')}`, 'error');
      } finally {
        c.loading = false;
      }
    }

    async buy() {
      const v = this.voucher;
      if (!v || this.inflight || Date.now() < this.waitUntil || Date.now() < this.doneUntil) return;
      if (!state.session) {
        say('Please log in first, then press Buy again.', 'warn');
        $('#username').focus();
        return;
      }
      const qty = Number(this.qty.value);
      const max = Number(this.qty.max);
      if (!Number.isInteger(qty) || qty < 1 || qty > max) {
        say(`Please choose a quantity from 1 to ${max}.`, 'warn');
        this.qty.focus();
        return;
      }
      const body = { quantity: qty };
      if (!this.withCaptcha(body)) return;
      const pow = v.challenge === 'pow';
      /** @type {Record<string, string>} */
      const headers = {};
      if (v.waiting_room) {
        if (!this.queue || !this.queue.pass) {
          say(sentence({ code: 'not_admitted' }), 'warn');
          return;
        }
        headers['Seckill-Pass'] = this.queue.pass;
      }
      // One key per intent: a retry of the same intent (double click, network
      // error, waiting out a 429) sends the same key, so it buys once.
      if (!this.intent || this.intent.qty !== qty) this.intent = { key: uuid(), qty, tries: 0 };
      headers['Idempotency-Key'] = this.intent.key;
      this.intent.tries++;
      this.inflight = true;
      this.el.setAttribute('aria-busy', 'true');
      this.update();
      let spent = true; // whether the captcha was used up by this try
      const sentAt = Date.now();
      try {
        if (pow) {
          // A press asks again at once even if the last fetch failed; only
          // the page's own polling waits out a failure.
          if (this.pow && this.pow.failedAt) this.pow = null;
          Object.assign(body, await this.solvePow());
        }
        const res = await api('POST', `/vouchers/${encodeURIComponent(v.id)}/orders`, {
          body,
          headers,
        });
        if (v.waiting_room && this.queue) this.queue = { ...this.queue, pass: null }; // used
        learnServerTime(Date.parse(v.begin_at), true, sentAt, Date.now());
        this.intent = null;
        this.doneUntil = Date.now() + 1500;
        upsertOrder({
          order_id: String(res.order_id),
          voucher_id: v.id,
          user_id: state.session.userId,
          quantity: qty,
          amount_cents: qty * v.price_cents,
          status: res.status || 'reserved',
          created_at: new Date(serverNow()).toISOString(),
          pay_deadline: null,
          payment: null,
        }, false);
        say(`Got it! Order ${shortRef(res.order_id)} is reserved and being confirmed.`, 'ok');
        fetchOrder(String(res.order_id));
        scheduleVouchers(300);
      } catch (err) {
        if (err.code === 'not_started') learnServerTime(Date.parse(v.begin_at), false, sentAt, Date.now());
        spent = !['rate_limited', 'network', 'unauthenticated'].includes(err.code);
        this.buyFailed(err);
      } finally {
        this.inflight = false;
        this.el.removeAttribute('aria-busy');
        if (v.captcha_required && spent) this.loadCaptcha(false);
        if (pow && spent) this.pow = null; // update() starts the next one
        this.update();
      }
    }

    // solvePow gets a challenge for a pow voucher and solves it in a Web
    // Worker (pow.js); it answers the buy's {challenge_id,
    // challenge_answer}. One solve is shared by every caller until a buy
    // spends it or it nears its expiry; a failure is kept 10 s, so a page
    // that cannot reach the shop does not ask again every second.
    solvePow() {
      const p = this.pow;
      if (p && (p.failedAt ? Date.now() - p.failedAt < 10000 : !p.expiresAt || p.expiresAt - serverNow() > 15000)) {
        return p.promise;
      }
      const v = this.voucher;
      const status = $('.pow-status', this.el);
      const pow = { expiresAt: 0, failedAt: 0, promise: null };
      this.pow = pow;
      pow.promise = (async () => {
        const ch = await api('GET', `/challenges?voucher_id=${encodeURIComponent(v.id)}`, { auth: false });
        pow.expiresAt = Date.parse(ch.expires_at);
        const nonce = await new Promise((resolve, reject) => {
          let w;
          try { w = new Worker('pow.js'); } catch (e) { reject(new ApiError(0, 'pow_failed', String(e), 0)); return; }
          w.onmessage = (ev) => {
            const m = ev.data || {};
            if (m.progress) {
              // Only slow devices see this: a fast one is done within a second.
              status.hidden = false;
              setText(status, `Checking this device for the sale… ${Math.round(m.ms / 1000)} s`);
              return;
            }
            w.terminate();
            if (m.error) reject(new ApiError(0, 'pow_failed', m.error, 0));
            else resolve(m.nonce);
          };
          w.onerror = (e) => { w.terminate(); reject(new ApiError(0, 'pow_failed', e.message || 'worker', 0)); };
          w.postMessage({ salt: ch.salt, bits: ch.difficulty_bits });
        });
        status.hidden = true;
        this.el.dataset.pow = 'ready';
        return { challenge_id: ch.challenge_id, challenge_answer: nonce };
      })();
      pow.promise.catch(() => { pow.failedAt = Date.now(); status.hidden = true; });
      delete this.el.dataset.pow;
      return pow.promise;
    }

    buyFailed(err) {
      switch (err.code) {
        case 'rate_limited': {
          const wait = err.retryAfter || 1;
          this.waitUntil = Date.now() + wait * 1000;
          // Waited out, then retried with the same key, a few times at most.
          this.retryAfterWait = this.intent && this.intent.tries < 5;
          say(this.retryAfterWait ? sentence(err) : `Too many tries. Please wait ${wait} s and press Buy again.`, 'warn');
          return;
        }
        case 'unavailable':
          this.waitUntil = Date.now() + (err.retryAfter || 2) * 1000;
          say(sentence(err), 'warn');
          return;
        case 'sale_paused': {
          // The socket brings the end of the pause; keep the intent, so
          // pressing Buy again then cannot buy twice.
          const v = this.voucher;
          if (v) state.vouchers.set(v.id, { ...v, state: 'paused' });
          say(sentence(err), 'warn');
          this.update();
          return;
        }
        case 'network':
          say('Can’t reach the shop right now. Press Buy again to retry: it won’t buy twice.', 'error');
          return;
        case 'sold_out':
          this.soldOut = true;
          this.intent = null;
          say(sentence(err), 'warn');
          scheduleVouchers(300);
          return;
        case 'captcha_invalid':
          say(sentence(err), 'warn');
          this.answer.value = '';
          this.answer.focus();
          return;
        case 'unauthenticated':
          endSession(sentence(err));
          return;
        case 'not_started':
        case 'ended':
        case 'not_found':
          this.intent = null;
          say(sentence(err), 'warn');
          scheduleVouchers(0);
          return;
        case 'limit_exceeded':
        case 'unpaid_limit':
          this.intent = null;
          say(sentence(err), 'warn');
          return;
        case 'not_admitted':
          this.intent = null;
          say(sentence(err), 'warn');
          this.readQueue();
          return;
        default:
          this.intent = null;
          say(sentence(err, 'buy'), 'error');
      }
    }
  }

  function newCard(v) {
    const card = new Card(v);
    if (v.waiting_room && socket.isLive()) setTimeout(() => card.readQueue(), 0);
    return card;
  }

  /**
   * applyQueue takes a place in line pushed on the socket.
   * @param {Queue} q
   */
  function applyQueue(q) {
    if (!q || q.voucher_id === undefined) return;
    const card = state.cards.get(String(q.voucher_id));
    if (card) card.setQueue(q);
  }

  let vouchersTimer = 0;

  function scheduleVouchers(delay) {
    clearTimeout(vouchersTimer);
    vouchersTimer = setTimeout(refreshVouchers, delay);
  }

  // The catalog is read once, and again each time the socket (re)opens;
  // while it is open every change of stock or state arrives on it, so the
  // page does not poll. Only while the socket is down is the catalog read
  // again, every 30 s (a crowd of open pages must not poll the shop).
  const FALLBACK_REFRESH = 30000;

  async function refreshVouchers() {
    clearTimeout(vouchersTimer);
    let next = FALLBACK_REFRESH;
    try {
      // The plain address: its page is built once per change of the catalog.
      applyVouchers(/** @type {Voucher[]} */ (await apiList('/vouchers', { auth: false })));
      $('#vouchers-updated').textContent = socket.isLive() ? 'Live' : `Updated ${fmtTime(serverNow())}`;
    } catch (err) {
      if (!state.vouchersLoadedOnce) {
        $('#vouchers-empty').textContent = 'Couldn’t load the vouchers. Trying again…';
        $('#vouchers').setAttribute('aria-busy', 'false');
        next = 5000;
      }
    }
    if (!socket.isLive()) scheduleVouchers(next + Math.random() * 1000);
  }

  // applyVoucher takes one voucher pushed on the socket: its live stock and
  // state, or a voucher new to the page (placed first: newest first).
  function applyVoucher(raw) {
    if (!raw || raw.id === undefined) return;
    const v = { ...raw, id: String(raw.id) };
    const was = state.vouchers.get(v.id);
    state.vouchers.set(v.id, v);
    let card = state.cards.get(v.id);
    const drawnOf = (x) => !!(x && x.draw && ((x.draw.beacon && x.draw.beacon.signature) || x.draw.seed || x.draw.void));
    if (card && drawnOf(v) && !drawnOf(was) && card.queue) {
      card.readQueue(); // the draw is made (or void): the entrant's result
    }
    if (!card) {
      if (!state.vouchersLoadedOnce) return; // the list on its way has it
      card = newCard(v);
      state.cards.set(v.id, card);
      const grid = $('#vouchers');
      grid.insertBefore(card.el, grid.firstElementChild);
      $('#vouchers-empty').hidden = true;
    }
    card.render();
  }

  /** @param {Voucher[]} list the whole catalog, newest first */
  function applyVouchers(list) {
    state.vouchersLoadedOnce = true;
    const grid = $('#vouchers');
    grid.setAttribute('aria-busy', 'false');
    const seen = new Set();
    let prev = null;
    for (const raw of list) {
      const v = { ...raw, id: String(raw.id) };
      seen.add(v.id);
      state.vouchers.set(v.id, v);
      let card = state.cards.get(v.id);
      if (!card) {
        card = newCard(v);
        state.cards.set(v.id, card);
      }
      card.render();
      // Keep the server's order without re-inserting nodes that are in place
      // (re-inserting would drop focus from a field being typed in).
      const want = prev ? prev.nextElementSibling : grid.firstElementChild;
      if (want !== card.el) grid.insertBefore(card.el, want);
      prev = card.el;
    }
    for (const [id, card] of state.cards) {
      if (!seen.has(id)) {
        card.el.remove();
        state.cards.delete(id);
        state.vouchers.delete(id);
      }
    }
    const empty = $('#vouchers-empty');
    empty.textContent = 'Nothing on sale right now. Check back soon.';
    empty.hidden = list.length > 0;
    if (!empty.hidden && empty.parentElement !== grid) grid.append(empty);
    for (const o of state.orders.values()) renderOrder(o); // titles may have arrived
  }

  // ---- Orders -------------------------------------------------------------

  function compareIds(a, b) { // decimal strings, beyond 2^53
    if (a.length !== b.length) return a.length - b.length;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // upsertOrder merges one order from any source (REST, snapshot, push).
  // announce says whether a change is news worth saying aloud.
  /**
   * @param {Order} raw
   * @param {boolean} announce
   */
  function upsertOrder(raw, announce) {
    if (!raw || raw.order_id === undefined) return;
    const o = { ...raw, order_id: String(raw.order_id), voucher_id: String(raw.voucher_id) };
    if (state.session && raw.user_id !== undefined && String(raw.user_id) !== state.session.userId) return;
    const old = state.orders.get(o.order_id);
    if (old) {
      if ((RANK[o.status] ?? 0) < (RANK[old.status] ?? 0)) return; // stale
      if (!o.pay_deadline && old.pay_deadline) o.pay_deadline = old.pay_deadline;
    }
    state.orders.set(o.order_id, o);
    renderOrder(o);
    updateOrdersEmpty();
    if (announce && old && old.status !== o.status) {
      const ref = shortRef(o.order_id);
      const news = {
        created: `Order ${ref} is confirmed. Please pay before the timer runs out.`,
        paid: `Order ${ref} is paid.`,
        cancelled: `Order ${ref} was cancelled.`,
        failed: `Order ${ref} could not be completed; the stock was returned.`,
        refunded: `Order ${ref} was refunded; the money went back to you.`,
      }[o.status];
      if (news) say(news, o.status === 'failed' || o.status === 'cancelled' ? 'warn' : 'ok');
      if (o.status === 'failed' || o.status === 'cancelled') scheduleVouchers(300); // stock came back
    }
  }

  function renderOrder(o) {
    let li = state.orderEls.get(o.order_id);
    if (!li) {
      li = $('#order-template').content.firstElementChild.cloneNode(true);
      li.dataset.orderId = o.order_id;
      $('.pay', li).addEventListener('click', (ev) => payOrCancel(o.order_id, 'pay', ev.currentTarget));
      $('.cancel', li).addEventListener('click', (ev) => payOrCancel(o.order_id, 'cancel', ev.currentTarget));
      state.orderEls.set(o.order_id, li);
      // Newest first: ids are time-ordered.
      const list = $('#orders');
      let before = null;
      for (const other of list.children) {
        if (compareIds(other.dataset.orderId, o.order_id) < 0) { before = other; break; }
      }
      list.insertBefore(li, before);
    }
    const v = state.vouchers.get(o.voucher_id);
    $('.order-title', li).textContent = v ? v.title : `Voucher ${o.voucher_id}`;
    $('.order-qty', li).textContent = `${o.quantity} ×`;
    $('.order-amount', li).textContent = fmtMoney(o.amount_cents);
    $('.order-ref', li).textContent = `Order ${shortRef(o.order_id)}`;
    $('.order-ref', li).title = o.order_id;
    li.dataset.status = o.status;
    const st = $('.status', li);
    st.textContent = o.status;
    st.dataset.status = o.status;
    const payable = o.status === 'created';
    $('.pay', li).hidden = !payable;
    $('.cancel', li).hidden = !payable;
    $('.pay', li).setAttribute('aria-label', `Pay order ${shortRef(o.order_id)}`);
    $('.cancel', li).setAttribute('aria-label', `Cancel order ${shortRef(o.order_id)}`);
    updateDeadline(o, li);
  }

  function updateDeadline(o, li) {
    const el = $('.deadline', li);
    if (o.status !== 'created') {
      setText(el, STATUS_HINT[o.status] || '');
      el.dataset.urgent = 'false';
      return;
    }
    const deadline = o.pay_deadline ? Date.parse(o.pay_deadline) : NaN;
    if (Number.isNaN(deadline)) {
      setText(el, 'Waiting for payment');
      return;
    }
    const left = deadline - serverNow();
    const pay = $('.pay', li);
    if (left <= 0) {
      setText(el, 'Time to pay has run out');
      el.dataset.urgent = 'true';
      if (!pay.disabled) pay.disabled = true;
      return;
    }
    setText(el, `Pay within ${fmtDuration(left)}`);
    el.dataset.urgent = String(left < 60000);
    if (pay.disabled && !pay.hasAttribute('aria-busy')) pay.disabled = false;
  }

  function updateOrdersEmpty() {
    $('#orders-empty').hidden = state.orders.size > 0;
  }

  async function refreshOrders() {
    if (!state.session) return;
    try {
      for (const o of /** @type {Order[]} */ (await apiList('/orders?limit=100'))) upsertOrder(o, false);
    } catch (err) {
      if (err.code === 'unauthenticated') endSession(sentence(err));
    }
  }

  async function fetchOrder(id) {
    try {
      upsertOrder(await api('GET', `/orders/${encodeURIComponent(id)}`), false);
    } catch (err) {
      if (err.code === 'unauthenticated') endSession(sentence(err));
    }
  }

  function payOrCancel(id, action, button) {
    withButton(button, async () => {
      try {
        const o = await api('POST', `/orders/${encodeURIComponent(id)}/${action}`);
        upsertOrder(o, false);
        say(action === 'pay' ? `Order ${shortRef(id)} is paid. Thank you!` : `Order ${shortRef(id)} is cancelled; the stock went back on sale.`, 'ok');
        if (action === 'cancel') scheduleVouchers(300);
      } catch (err) {
        if (err.code === 'unauthenticated') { endSession(sentence(err)); return; }
        say(sentence(err, action === 'pay' || action === 'cancel' ? action : 'order'), 'error');
        fetchOrder(id); // show what the order really is now
      }
    });
  }

  // ---- Socket -------------------------------------------------------------
  // Order status arrives here: on connect the server sends every non-final
  // order, then every change. We reconnect with exponential backoff and
  // jitter, ping to find dead connections, and re-read the order list on
  // every (re)connect, since orders that ended while we were away are not
  // in the snapshot.

  const socket = {
    ws: null,
    attempt: 0,
    retryTimer: 0,
    pingTimer: 0,
    lastHeard: 0,
    openedAt: 0,
    PING_EVERY: 20000,
    DEAD_AFTER: 30000,

    setState(s, text) {
      const el = $('#ws-state');
      el.dataset.state = s;
      el.textContent = text;
    },

    connect() {
      clearTimeout(this.retryTimer);
      if (this.ws) return;
      if (state.session && state.session.expiresAt && serverNow() >= state.session.expiresAt) {
        endSession('Your session has ended. Please log in again.');
        return;
      }
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      // Without a session the socket is public: voucher changes only.
      const query = state.session ? `?token=${encodeURIComponent(state.session.token)}` : '';
      const url = `${scheme}//${location.host}${API}/ws${query}`;
      let ws;
      try {
        ws = new WebSocket(url);
      } catch (e) {
        this.retry();
        return;
      }
      this.ws = ws;
      this.setState('connecting', 'Connecting…');
      ws.onopen = () => {
        this.openedAt = Date.now();
        this.lastHeard = Date.now();
        this.setState('live', 'Live');
        this.startPings();
        if (state.session) refreshOrders();
        refreshVouchers(); // what changed while the socket was down
        if (state.session) for (const card of state.cards.values()) card.readQueue();
      };
      ws.onmessage = (ev) => {
        this.lastHeard = Date.now();
        if (this.openedAt && Date.now() - this.openedAt > 10000) this.attempt = 0; // it held: reset backoff
        let msg;
        try { msg = JSON.parse(ev.data); } catch (e) { return; }
        if (msg && msg.type === 'order') upsertOrder(msg.order, true);
        else if (msg && msg.type === 'queue') applyQueue(msg.queue);
        else if (msg && msg.type === 'voucher') applyVoucher(msg.voucher);
      };
      ws.onclose = () => this.closed(ws);
      ws.onerror = () => { /* onclose follows */ };
    },

    closed(ws) {
      if (this.ws !== ws) return;
      this.ws = null;
      clearInterval(this.pingTimer);
      if (this.openedAt && Date.now() - this.openedAt > 10000) this.attempt = 0;
      this.openedAt = 0;
      scheduleVouchers(FALLBACK_REFRESH);
      this.retry();
    },

    isLive() {
      return Boolean(this.ws) && this.ws.readyState === WebSocket.OPEN;
    },

    // reopen starts a new socket: a session began or ended, and the
    // socket's token must follow.
    reopen() {
      this.disconnect();
      this.connect();
    },

    retry() {
      clearTimeout(this.retryTimer);
      this.attempt++;
      // Exponential backoff with jitter, so a fleet restart does not bring
      // every shopper back in the same second.
      const ceiling = Math.min(30000, 500 * 2 ** Math.min(this.attempt - 1, 10));
      const delay = ceiling / 2 + Math.random() * (ceiling / 2);
      this.setState('reconnecting', `Reconnecting in ${Math.ceil(delay / 1000)} s`);
      // The browser hides why a handshake failed; after a few failures ask
      // the API whether the token is still good.
      if (this.attempt >= 3 && state.session) refreshOrders();
      this.retryTimer = setTimeout(() => this.connect(), delay);
    },

    startPings() {
      clearInterval(this.pingTimer);
      this.pingTimer = setInterval(() => {
        const ws = this.ws;
        if (!ws || ws.readyState !== WebSocket.OPEN) return;
        if (Date.now() - this.lastHeard > this.DEAD_AFTER) {
          // No pong: the connection is dead even if the browser has not
          // noticed. Do not wait for a close handshake that will not come.
          ws.onclose = null;
          ws.close();
          this.closed(ws);
          return;
        }
        try { ws.send(JSON.stringify({ type: 'ping' })); } catch (e) { /* onclose follows */ }
      }, this.PING_EVERY / 2);
    },

    disconnect() {
      clearTimeout(this.retryTimer);
      clearInterval(this.pingTimer);
      const ws = this.ws;
      this.ws = null;
      this.attempt = 0;
      if (ws) {
        ws.onclose = null;
        ws.close(1000, 'logged out');
      }
      this.setState('offline', 'Offline');
    },

    // nudge reconnects at once when the network or the tab comes back.
    nudge() {
      if (!this.ws) {
        this.attempt = 0;
        this.connect();
      }
    },
  };

  // ---- Clock tick -----------------------------------------------------------

  function tick() {
    setText($('#server-clock'), fmtTime(serverNow()));
    for (const card of state.cards.values()) card.update();
    for (const [id, li] of state.orderEls) updateDeadline(state.orders.get(id), li);
    if (state.session && state.session.expiresAt && serverNow() >= state.session.expiresAt) {
      endSession('Your session has ended. Please log in again.');
    }
  }

  // ---- Start --------------------------------------------------------------

  function start() {
    $('#auth-form').addEventListener('submit', onLogin);
    $('#register').addEventListener('click', onRegister);
    $('#login-captcha-refresh').addEventListener('click', () => loginCaptcha.load());
    $('#logout').addEventListener('click', () => {
      setSession(null);
      say('You are logged out.', 'info');
      $('#username').focus();
    });
    window.addEventListener('online', () => { socket.nudge(); });
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) socket.nudge();
    });
    setSession(loadSession());
    refreshVouchers();
    tick();
    setInterval(tick, 250);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();

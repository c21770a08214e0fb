// @ts-check
// A shopper's whole journey through the typed client, against a live
// server: register, sign in, page through the vouchers, join the line of
// the one with a waiting room and buy with the pass, pay that order, buy
// another and cancel it. deploy/tools/systemtest runs it (TestTypeScriptClientJourney)
// with the shop's address and the titles of the two vouchers it made:
//
//	node journey.js http://127.0.0.1:8080 <line voucher title> <plain voucher title>
//
// It prints one JSON line, {"user_id", "paid", "cancelled"}, and exits 1 on
// any surprise.
import { createSeckillClient, nextCursor } from './index.js';

/** @typedef {import('./index.js').Voucher} Voucher */
/** @typedef {import('./index.js').Order} Order */

const [baseUrl, lineTitle, plainTitle] = process.argv.slice(2);
if (!baseUrl || !lineTitle || !plainTitle) {
  console.error('usage: node journey.js BASE_URL LINE_TITLE PLAIN_TITLE');
  process.exit(2);
}

let token = '';
// SECKILL_JOURNEY_ADDRESS, when set, is the shopper's address as a proxy
// the shop trusts would name it (X-Forwarded-For): the test runs the
// journey from an address of its own, so that its sign-in spends no budget
// of another test's.
const address = process.env.SECKILL_JOURNEY_ADDRESS || '';
/** @type {typeof globalThis.fetch} */
const fromAddress = (input, init) => {
  const request = new Request(input, init);
  if (address) request.headers.set('X-Forwarded-For', address);
  return globalThis.fetch(request);
};
const api = createSeckillClient({ baseUrl, token: () => token, fetch: fromAddress });

/**
 * must returns an answer's data or throws with its error.
 * @template {{ data?: unknown, error?: unknown, response: Response }} R
 * @param {string} what
 * @param {R} r
 * @returns {NonNullable<R['data']>}
 */
function must(what, r) {
  if (r.data === undefined) {
    throw new Error(`${what}: HTTP ${r.response.status} ${JSON.stringify(r.error)}`);
  }
  return /** @type {NonNullable<R['data']>} */ (r.data);
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * settled waits until the order has left reserved (the workers persisted it).
 * @param {string} id
 * @returns {Promise<Order>}
 */
async function settled(id) {
  for (let i = 0; i < 200; i++) {
    const o = must('get order', await api.GET('/api/v1/orders/{id}', { params: { path: { id } } }));
    if (o.status !== 'reserved') return o;
    await sleep(50);
  }
  throw new Error(`order ${id} stayed reserved`);
}

async function main() {
  // A bad registration names each bad field.
  const bad = await api.POST('/api/v1/users', { body: { username: '!', password: 'short' } });
  /** @type {import('./index.js').ApiError | undefined} */
  const refusal = bad.error;
  const fields = (refusal?.error.fields || []).map((f) => f.field).sort();
  if (bad.response.status !== 400 || JSON.stringify(fields) !== '["/password","/username"]') {
    throw new Error(`bad registration: HTTP ${bad.response.status} ${JSON.stringify(bad.error)}`);
  }

  const username = `ts_${Math.random().toString(36).slice(2, 12)}`;
  const password = 'correct horse battery';
  must('register', await api.POST('/api/v1/users', { body: { username, password } }));
  const session = must('log in', await api.POST('/api/v1/sessions', { body: { username, password } }));
  token = session.token;

  // The catalog a voucher a page, following the cursors to the end.
  /** @type {Voucher[]} */
  const vouchers = [];
  let cursor = '';
  for (let pages = 0; pages < 1000; pages++) {
    const r = await api.GET('/api/v1/vouchers', { params: { query: cursor ? { limit: 1, cursor } : { limit: 1 } } });
    vouchers.push(...must('list vouchers', r));
    cursor = nextCursor(r.response);
    if (!cursor) break;
  }
  const line = vouchers.find((v) => v.title === lineTitle);
  const plain = vouchers.find((v) => v.title === plainTitle);
  if (!line || !plain || !line.waiting_room) throw new Error(`vouchers not listed: ${JSON.stringify(vouchers.map((v) => v.title))}`);

  // Join the line, wait for the pass, buy with it.
  let q = must('join the line', await api.POST('/api/v1/vouchers/{id}/queue', { params: { path: { id: line.id } } }));
  for (let i = 0; i < 400 && !q.pass; i++) {
    await sleep(50);
    q = must('read the line', await api.GET('/api/v1/vouchers/{id}/queue', { params: { path: { id: line.id } } }));
  }
  if (!q.pass) throw new Error(`never admitted: ${JSON.stringify(q)}`);
  const held = must('buy with the pass', await api.POST('/api/v1/vouchers/{id}/orders', {
    params: { path: { id: line.id }, header: { 'Seckill-Pass': q.pass, 'Idempotency-Key': `ts-${username}-1` } },
    body: { quantity: 1 },
  }));
  const paid = must('pay', await api.POST('/api/v1/orders/{id}/pay', { params: { path: { id: (await settled(held.order_id)).order_id } } }));
  if (paid.status !== 'paid') throw new Error(`paid order is ${paid.status}`);

  // Buy another and change our mind.
  const other = must('buy', await api.POST('/api/v1/vouchers/{id}/orders', { params: { path: { id: plain.id } }, body: { quantity: 1 } }));
  await settled(other.order_id);
  const cancelled = must('cancel', await api.POST('/api/v1/orders/{id}/cancel', { params: { path: { id: other.order_id } } }));
  if (cancelled.status !== 'cancelled') throw new Error(`cancelled order is ${cancelled.status}`);

  // The orders, a page of one at a time, then only the paid ones.
  /** @type {string[]} */
  const mine = [];
  cursor = '';
  for (let pages = 0; pages < 10; pages++) {
    const r = await api.GET('/api/v1/orders', { params: { query: cursor ? { limit: 1, cursor } : { limit: 1 } } });
    mine.push(...must('list orders', r).map((o) => o.order_id));
    cursor = nextCursor(r.response);
    if (!cursor) break;
  }
  if (JSON.stringify(mine) !== JSON.stringify([other.order_id, paid.order_id])) {
    throw new Error(`orders newest first: ${JSON.stringify(mine)}`);
  }
  const onlyPaid = must('list paid orders', await api.GET('/api/v1/orders', { params: { query: { status: 'paid' } } }));
  if (onlyPaid.length !== 1 || onlyPaid[0].order_id !== paid.order_id) throw new Error(`paid orders: ${JSON.stringify(onlyPaid)}`);

  console.log(JSON.stringify({ user_id: session.user_id, paid: paid.order_id, cancelled: cancelled.order_id }));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

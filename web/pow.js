'use strict';
// pow.js is the Web Worker that solves a voucher's proof-of-work challenge
// off the page's thread (the README's "Challenges"): it finds a decimal
// nonce such that SHA-256(salt + nonce) begins with `bits` zero bits, with
// Web Crypto. Message in: {salt, bits}. Messages out: {progress: hashes
// tried} about every second, then {nonce, hashes, ms}, or {error}.
//
// crypto.subtle.digest is asynchronous, so the hashes are asked for in
// batches and awaited together: one at a time would spend most of the time
// between promises rather than hashing.

const BATCH = 512;

// zeroBits counts the leading zero bits of a digest.
function zeroBits(buf) {
  const b = new Uint8Array(buf);
  let n = 0;
  for (let i = 0; i < b.length; i++) {
    if (b[i] === 0) { n += 8; continue; }
    return n + Math.clz32(b[i]) - 24;
  }
  return n;
}

async function solve(salt, bits) {
  const enc = new TextEncoder();
  const started = performance.now();
  let lastNote = started;
  for (let base = 0; ; base += BATCH) {
    const batch = [];
    for (let i = 0; i < BATCH; i++) {
      batch.push(crypto.subtle.digest('SHA-256', enc.encode(salt + String(base + i))));
    }
    const sums = await Promise.all(batch);
    for (let i = 0; i < BATCH; i++) {
      if (zeroBits(sums[i]) >= bits) {
        return { nonce: String(base + i), hashes: base + i + 1, ms: performance.now() - started };
      }
    }
    const now = performance.now();
    if (now - lastNote > 1000) {
      lastNote = now;
      self.postMessage({ progress: base + BATCH, ms: now - started });
    }
  }
}

self.onmessage = async (ev) => {
  const { salt, bits } = ev.data || {};
  if (typeof salt !== 'string' || !Number.isInteger(bits) || bits < 0 || bits > 40) {
    self.postMessage({ error: 'bad challenge' });
    return;
  }
  try {
    self.postMessage(await solve(salt, bits));
  } catch (err) {
    self.postMessage({ error: String(err && err.message || err) });
  }
};

// @ts-check
// The platform's typed client: openapi-fetch over the types openapi-typescript
// generates from gateway/openapi.yaml (schema.d.ts; `npm run generate`).
// Plain JavaScript checked against those types, so a web page, a Node
// script or a React Native app imports it without a build step.
import createClient from 'openapi-fetch';

/** @typedef {import('./schema.js').paths} paths */
/** @typedef {import('./schema.js').components} components */

/**
 * createSeckillClient returns a client of the API at baseUrl (the address
 * of the shop, without /api/v1). token() is asked before every request:
 * the shopper's session token, or '' when signed out.
 *
 * @param {{ baseUrl: string, token?: () => string, fetch?: typeof globalThis.fetch }} opts
 */
export function createSeckillClient({ baseUrl, token = () => '', fetch = globalThis.fetch }) {
  /** @type {import('openapi-fetch').Client<paths>} */
  const client = createClient({ baseUrl, fetch });
  client.use({
    onRequest({ request }) {
      const t = token();
      if (t && !request.headers.has('Authorization')) request.headers.set('Authorization', `Bearer ${t}`);
      return request;
    },
  });
  return client;
}

/**
 * nextCursor is the cursor of the page a list's Link header names
 * (rel="next"), or '' on the last page.
 *
 * @param {Response} response
 * @returns {string}
 */
export function nextCursor(response) {
  const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(response.headers.get('Link') || '');
  if (!m) return '';
  return new URL(m[1], 'http://relative.invalid').searchParams.get('cursor') || '';
}

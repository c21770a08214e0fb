// The types of index.js (kept by hand: two functions).
import type { Client } from 'openapi-fetch';
import type { paths, components } from './schema.js';

export type { paths, components };
/** A voucher as the API shows it. */
export type Voucher = components['schemas']['Voucher'];
/** An order as the API shows it. */
export type Order = components['schemas']['Order'];
/** Every error answer's body. */
export type ApiError = components['schemas']['Error'];

/** A client of the API at baseUrl; token() is the shopper's session token, or ''. */
export function createSeckillClient(opts: {
  baseUrl: string;
  token?: () => string;
  fetch?: typeof globalThis.fetch;
}): Client<paths>;

/** The cursor of the page a list's Link header names, or '' on the last page. */
export function nextCursor(response: Response): string;

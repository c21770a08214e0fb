// The API's types for app.js's JSDoc, from the TypeScript client generated
// from gateway/openapi.yaml (deploy/clients/typescript/schema.d.ts). Only
// `make lint` (tsc --noEmit) reads this file; the page is served as is.
import type { components } from '../deploy/clients/typescript/schema.js';

declare global {
  type Voucher = components['schemas']['Voucher'];
  type Order = components['schemas']['Order'];
  type Queue = components['schemas']['Queue'];
  type ApiErrorBody = components['schemas']['Error'];
  type FieldError = components['schemas']['FieldError'];
  type Session = components['schemas']['Session'];
}

export {};

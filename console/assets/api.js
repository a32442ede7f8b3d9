// @ts-check
// The console's only way to the node: the Connect API, JSON over HTTP,
// the same calls and permissions as every other client (docs/console.md).

const service = '/logd.v1.LogService/';
const tokenKey = 'logd.console.token';

// ApiError is a refused call: code is Connect's (unauthenticated,
// permission_denied, not_found, invalid_argument, ...), reason logd's
// typed reason from the error details when present.
export class ApiError extends Error {
  constructor(code, message, reason, retryAfterMs) {
    super(message || code);
    this.code = code;
    this.reason = reason || '';
    this.retryAfterMs = retryAfterMs || 0;
  }
}

export function token() {
  return sessionStorage.getItem(tokenKey) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

/** @typedef {import('../apitypes.js').Procedures} Procedures */

// call runs one unary procedure with a JSON request and returns the JSON
// answer. Field names follow protobuf's JSON mapping: lowerCamelCase,
// 64-bit integers as strings, bytes as base64 (their types:
// ../apitypes.js).
/**
 * @template {keyof Procedures} M
 * @param {M} method
 * @param {Procedures[M][0]} [request]
 * @param {{signal?: AbortSignal, keepalive?: boolean}} [opts]
 * @returns {Promise<Procedures[M][1]>}
 */
export async function call(method, request = {}, opts = {}) {
  const headers = {
    'Content-Type': 'application/json',
    'Connect-Protocol-Version': '1',
    'X-Logd-Client': 'console',
  };
  const t = token();
  if (t) headers['Authorization'] = 'Bearer ' + t;
  let resp;
  try {
    resp = await fetch(service + method, {
      method: 'POST',
      headers,
      body: JSON.stringify(request),
      signal: opts.signal,
      // keepalive lets a call finish while the page unloads (a group
      // member's leave when the tab closes).
      keepalive: !!opts.keepalive,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError('unavailable', 'node unreachable: ' + e.message);
  }
  const text = await resp.text();
  let body = {};
  if (text) {
    try { body = JSON.parse(text); } catch { body = { message: text }; }
  }
  if (!resp.ok) {
    throw new ApiError(body.code || 'unknown', body.message || resp.statusText,
      reasonOf(body), Number(resp.headers.get('Retry-After') || 0) * 1000);
  }
  return body;
}

// reasonOf digs logd's typed reason out of a Connect error's details,
// when the server sent it in readable form.
function reasonOf(body) {
  for (const d of body.details || []) {
    const v = d.debug || {};
    if (v.reason) return v.reason;
  }
  return '';
}

// num reads a protobuf JSON integer (a string for 64-bit fields, absent
// for zero) as a Number.
export function num(v) {
  if (v === undefined || v === null || v === '') return 0;
  return Number(v);
}

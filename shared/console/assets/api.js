// The API client: the console's only way to the service. It calls the
// public routes (/api/slaves, /api/logs) relative to the page, as any other
// client does, and turns every failure into an ApiError that says what
// happened in the service's own words.

import { authorization, authHeader, signedOut } from "./auth.js";

// ApiError is a failed call: status 0 when the network failed, else the
// HTTP status with the body's message; retryAfter (seconds) on a 503; and
// on a 412 (a conditional change to a slave that moved since the caller
// read it) now, where the slave is now: {sequence, state}.
export class ApiError extends Error {
  constructor(status, message, retryAfter, now) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
    this.now = now;
  }
  // moved: the change was conditioned on a sequence the slave has moved
  // past, and nothing was done.
  get moved() { return this.status === 412; }
  // retryable: the same request (with the same Idempotency-Key) may be sent again.
  get retryable() { return this.status === 0 || this.status >= 500; }
  describe() {
    if (this.status === 0) return "The service cannot be reached (network down or blocked). Nothing was lost: try again.";
    if (this.status === 503) return `${this.message}. The service is busy: try again${this.retryAfter ? ` in ${this.retryAfter} s` : ""}.`;
    if (this.status === 401) return `Not signed in (${this.message}).`;
    return this.message;
  }
}

// call sends one request; key is the Idempotency-Key of a change, seq the
// slave's sequence it is conditioned on (If-Match, docs/behaviour.md
// "Conditional changes"; none when the page read no sequence, as from an
// API older than them), and signal aborts it (a follow of the change feed
// that the page stops).
export async function call(method, path, { body, query, key, seq, signal } = {}) {
  const url = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(query || {})) if (v != null && v !== "") url.searchParams.set(k, v);
  const headers = { Accept: "application/json" };
  const auth = authorization();
  if (auth) headers[authHeader()] = auth;
  if (key) headers["Idempotency-Key"] = key;
  if (Number.isSafeInteger(seq) && seq >= 0) headers["If-Match"] = `"${seq}"`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store", signal });
  } catch {
    throw new ApiError(0, "network error");
  }
  // A fleet list is tens of megabytes: parsed straight from the body, it
  // never becomes one JavaScript string first.
  // (A change answers 200 with an empty body, so only reads are parsed so.)
  if (res.ok && method === "GET") {
    const out = await res.json();
    // A list carries the change feed's cursor of the state it answered
    // (docs/behaviour.md "The change feed"): following from it misses and
    // repeats nothing.
    const cursor = res.headers.get("X-Changes-Cursor");
    if (cursor) Object.defineProperty(out, "cursor", { value: cursor });
    return out;
  }
  const text = await res.text();
  if (!res.ok) {
    let message = res.statusText || "request failed";
    let now;
    try {
      const b = JSON.parse(text);
      message = b.message || message;
      if (res.status === 412) now = { sequence: Number.isSafeInteger(b.sequence) ? b.sequence : undefined, state: typeof b.state === "string" ? b.state : undefined };
    } catch { /* not JSON: keep the status text */ }
    if (res.status === 401) signedOut();
    throw new ApiError(res.status, message, Number(res.headers.get("Retry-After")) || undefined, now);
  }
  return text ? JSON.parse(text) : null;
}

const slave = (id) => "api/slaves/slave/" + encodeURIComponent(id);

export const slaves = () => call("GET", "api/slaves");
export const deadSlaves = () => call("GET", "api/slaves", { query: { state: "DEAD" } });
export const details = (id) => call("GET", slave(id) + "/details");
export const history = (id) => call("GET", slave(id));
export const expiring = () => call("GET", "api/slaves/expiring");
// changes answers the feed after the cursor since (from now without one),
// holding the request up to wait seconds while there is none: {changes,
// cursor}. select is the selectors the service applies (docs/behaviour.md
// "Selectors"): {id} follows one machine; none, the fleet.
export const changes = (since, wait, signal, select) => call("GET", "api/slaves/changes", { query: { ...select, since, wait }, signal });
// initial answers the fleet as it is now in the feed's shape: every slave
// as an added change, then the bookmark that ends the initial state, and
// the cursor to follow from.
export const initial = () => call("GET", "api/slaves/changes", { query: { initial: "true" } });

// The changes take the Idempotency-Key the caller keeps for the request
// (see Change), so a retry is answered once, and the slave's sequence as
// the page showed it (seq), so a slave that moved meanwhile is left alone.
export const change = (id, action, body, key, seq) => call("POST", `${slave(id)}/${action}`, { body, key, seq });
export const remove = (id, key, seq) => call("DELETE", slave(id), { key, seq });
export const makePermanent = (id, key, seq) => call("DELETE", slave(id) + "/expiring", { key, seq });
export const removeDead = (key) => call("DELETE", "api/slaves/dead", { key });

export const searchLogs = (body) => call("POST", "api/logs/search", { body });

// Change is one change request as the user asked for it: it keeps its
// Idempotency-Key while the answer is unknown (network down, 5xx), so that
// sending the same request again is a retry the service answers once, and
// takes a fresh key once the request changes or got an answer.
export class Change {
  constructor() { this.key = null; this.sig = null; }
  async send(sig, fn) {
    if (this.sig !== sig || !this.key) { this.key = newKey(); this.sig = sig; }
    try {
      const out = await fn(this.key);
      this.key = null;
      return out;
    } catch (e) {
      if (!(e instanceof ApiError && e.retryable)) this.key = null;
      throw e;
    }
  }
}

export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

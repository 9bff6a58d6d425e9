// follow keeps a list current from the change feed (docs/behaviour.md "The
// change feed"): list() is the list held, with its cursor (the initial
// state's, or the list's X-Changes-Cursor, then each answer's), or the one
// machine a page shows, with the cursor taken before it was read. It holds one request open at a
// time (wait=20), hands every answer's changes to apply, and moves the
// held list's cursor on; an answer that comes after the page listed again
// is dropped. It stops while the tab is hidden and catches up from the
// cursor when the tab shows again. A cursor the feed no longer keeps (410)
// or refuses (400) makes it list again (relist, which replaces what list()
// returns) and follow from the new list's cursor. Network failures and 5xx
// are retried after a delay that doubles up to MAX_DELAY, jittered so that
// consoles cut off together do not come back together; a 401 or 403 stops
// it, as it stops the rest of the console. show(state, detail) is told
// what it is doing: "live", "reconnecting" (detail: seconds to the next
// try), "reloading" (detail: the refusal), or "offline" (detail: the
// ApiError, or "browser" when the browser says it has no network). select
// is the selectors of every request (api.changes): a page that shows one
// machine is sent that machine's changes only.

import * as api from "./api.js";

// WAIT is how long, in seconds, the feed holds a request while nothing changes.
const WAIT = 20;
// The delay before retrying a failed request: FIRST_DELAY, doubled per
// failure in a row, at most MAX_DELAY (ms), then jittered down by up to half.
const FIRST_DELAY = 1000;
const MAX_DELAY = 30000;

export function follow({ list, apply, relist, show, select }) {
  let run = 0; // the current loop's number: a loop whose number is not current stops
  let abort = null;
  let wake = null; // ends a wait early (back online, stopped)
  let stopped = false;

  // read asks the feed for the changes after the held list's cursor and
  // applies them to that list, unless the page listed again meanwhile.
  async function read(wait, signal) {
    const held = list();
    const page = await api.changes(held.cursor, wait, signal, select);
    if (!page || !Array.isArray(page.changes) || typeof page.cursor !== "string") throw new api.ApiError(502, "the change feed answered something that is not a page of changes");
    if (list() !== held) return -1;
    held.cursor = page.cursor;
    if (page.changes.length) apply(page.changes);
    return page.changes.length;
  }

  async function loop(me) {
    let failures = 0;
    let relisted = false; // a 400 straight after a fresh list is not listed again
    while (me === run) {
      abort = new AbortController();
      if (failures === 0) show("live");
      try {
        await read(WAIT, abort.signal);
        if (me !== run) return;
        failures = 0;
        relisted = false;
        continue;
      } catch (e) {
        if (me !== run) return;
        let err = e;
        const status = err instanceof api.ApiError ? err.status : -1;
        if ((status === 410 || status === 400) && !relisted) {
          show("reloading", err);
          try {
            await relist(err);
            if (me !== run) return;
            relisted = true;
            failures = 0;
            continue;
          } catch (again) {
            if (me !== run) return;
            err = again;
          }
        }
        if (err instanceof api.ApiError && [400, 401, 403].includes(err.status)) { show("offline", err); return; }
        if (!navigator.onLine) {
          show("offline", "browser");
          await pause(me, 0); // until the browser is back online
          continue;
        }
        failures++;
        const delay = Math.max(backoff(failures), (err.retryAfter || 0) * 1000);
        show("reconnecting", Math.ceil(delay / 1000));
        await pause(me, delay);
      }
    }
  }

  // pause waits ms (0: until woken), or until the loop is stopped or woken.
  function pause(me, ms) {
    return new Promise((resolve) => {
      const timer = ms ? setTimeout(() => done(), ms) : 0;
      const done = () => { clearTimeout(timer); wake = null; resolve(); };
      wake = done;
      if (me !== run) done();
    });
  }

  function start() {
    if (stopped || document.hidden) return;
    loop(++run);
  }

  // halt ends the current loop and its request.
  function halt() {
    run++;
    abort?.abort();
    wake?.();
  }

  const visibility = () => { halt(); start(); }; // start follows only a visible tab
  const online = () => wake?.();
  document.addEventListener("visibilitychange", visibility);
  window.addEventListener("online", online);
  start();

  return {
    // restart follows from the held list's cursor now (the page listed
    // again: the request open on the old list's cursor is dropped).
    restart() { halt(); start(); },
    // catchUp applies every change up to now before it resolves (a bulk
    // change reads the states it decides on), then follows on. It lists
    // again when the cursor is refused.
    async catchUp() {
      halt();
      try {
        while (await read(0) !== 0) { /* the next page */ }
      } catch (e) {
        if (!(e instanceof api.ApiError && (e.status === 410 || e.status === 400))) throw e;
        await relist(e);
      } finally {
        start();
      }
    },
    stop() {
      stopped = true;
      halt();
      document.removeEventListener("visibilitychange", visibility);
      window.removeEventListener("online", online);
    },
  };
}

// backoff is the delay before the nth retry in a row.
function backoff(n) {
  const capped = Math.min(MAX_DELAY, FIRST_DELAY * 2 ** Math.min(n - 1, 10));
  return capped / 2 + Math.random() * (capped / 2);
}

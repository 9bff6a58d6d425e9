// The indicator of a page that follows the change feed (follow.js): it
// says in words whether the page is live, reconnecting (and when it tries
// next), reading again, or offline (the dot only repeats the words in
// colour), as a live region that says each change once. A refusal that
// stopped the follow shows in errors, with a button that asks again.

import { h } from "./dom.js";
import { ApiError } from "./api.js";
import { problem } from "./notice.js";

// liveIndicator returns the indicator (el) and show, which follow calls:
// reloading is what the page says while it reads again after the feed
// refused its cursor, unfed what it says from an API without the feed
// (show("offline", "none")), and retry follows again after a refusal.
export function liveIndicator({ errors, retry, reloading, unfed }) {
  const el = h("span", { class: "live", role: "status" });
  function show(state, detail) {
    const words = {
      live: "Live",
      reloading,
      reconnecting: `Reconnecting… (next try in ${detail} s)`,
      offline: detail === "none" ? unfed : detail === "browser" ? "Offline: no network" : "Offline",
    }[state];
    if (el.dataset.state !== state || el.textContent !== words) {
      el.dataset.state = state;
      el.replaceChildren(h("span", { class: "dot", "aria-hidden": "true" }), words);
    }
    if (state === "offline" && detail instanceof ApiError) errors.replaceChildren(problem(detail, () => { errors.replaceChildren(); retry(); }));
  }
  return { el, show };
}

// problem shows a failed call as the service worded it (see ApiError),
// announced to assistive technology; moved says in plain words that a
// change was refused because its machine changed since the page showed it
// (a 412); info shows an expected outcome that is not an error ("no logs in
// this window").

import { h } from "./dom.js";
import { ApiError } from "./api.js";

export function problem(err, retry) {
  const text = err instanceof ApiError ? err.describe() : String(err?.message || err);
  const status = err instanceof ApiError && err.status ? `${err.status} ` : "";
  return h("div", { class: "problem", role: "alert" },
    h("strong", {}, status ? `Refused (${status.trim()}): ` : "Failed: "), text,
    retry && h("button", { type: "button", class: "link", onclick: retry }, "Try again"));
}

// moved is a 412 of the machine named name, said for a person: what it is
// now (the service's state, shown as text like everything it sends) and
// that nothing was done.
export function moved(err, name) {
  const now = err?.now?.state ? `: it is now ${err.now.state}` : "";
  return h("div", { class: "problem", role: "alert" },
    h("strong", {}, "Changed meanwhile: "), `${name} changed since you opened this page${now}. Nothing was done; review it and try again.`);
}

export const info = (text) => h("p", { class: "info", role: "status" }, text);

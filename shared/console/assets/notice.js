// problem shows a failed call as the service worded it (see ApiError),
// announced to assistive technology; info shows an expected outcome that is
// not an error ("no logs in this window").

import { h } from "./dom.js";
import { ApiError } from "./api.js";

export function problem(err, retry) {
  const text = err instanceof ApiError ? err.describe() : String(err?.message || err);
  const status = err instanceof ApiError && err.status ? `${err.status} ` : "";
  return h("div", { class: "problem", role: "alert" },
    h("strong", {}, status ? `Refused (${status.trim()}): ` : "Failed: "), text,
    retry && h("button", { type: "button", class: "link", onclick: retry }, "Try again"));
}

export const info = (text) => h("p", { class: "info", role: "status" }, text);

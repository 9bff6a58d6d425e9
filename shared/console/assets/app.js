// The console's entry point: sign-in first (auth.js), then the page the
// address names, re-rendered when the address changes. One clock keeps every
// relative time and countdown on the page current.

import * as auth from "./auth.js";
import { current } from "./router.js";
import { ago, span } from "./format.js";
import * as fleet from "./fleet.js";
import * as machine from "./machine.js";
import * as expiring from "./expiring.js";
import * as logs from "./logs.js";

const pages = { fleet, machine, expiring, logs };
const titles = { fleet: "Fleet", machine: "Machine", expiring: "Expiring changes", logs: "Task logs" };
const main = document.getElementById("main");
let stop = null;

function show() {
  if (stop) stop();
  stop = null;
  const route = current();
  const name = pages[route.page] ? route.page : "fleet";
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === (name === "machine" ? "fleet" : name)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.getElementById("session").replaceChildren(...[].concat(auth.session()));
  document.title = `${titles[name]}${route.parts[0] ? " " + route.parts[0] : ""} · Fleet console`;
  if (!auth.ready()) {
    main.replaceChildren(auth.signIn());
    return;
  }
  stop = pages[name].render(main, route) || null;
}

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll("time[data-ago]")) el.textContent = ago(Number(el.dataset.ago), now);
  for (const el of document.querySelectorAll("time[data-until]")) {
    const left = Number(el.dataset.until) - now;
    el.textContent = left > 0 ? "in " + span(left) : "due now";
  }
}

await auth.load(show);
window.addEventListener("hashchange", () => { show(); main.focus({ preventScroll: true }); });
show();
setInterval(tick, 1000);

// The fleet page's bulk change: freeze, decommission or activate every
// selected machine with one message and expiry. The confirmation names the
// count; the changes go out a few at a time (PARALLEL), each with its own
// Idempotency-Key and conditioned on the machine's sequence as the page held
// it when the change was asked for (If-Match); each machine gets its result
// (applied, changed meanwhile and left alone, or refused in the API's words). An optional guard keeps at most N machines of the selection
// out of ACTIVE at once: a selected machine counts as out in any state but
// ACTIVE, those already out included, so freeze and decommission change at
// most N minus those of the ACTIVE ones and hold the rest back (they are not
// sent). Activate never takes a machine out and is never held back.

import { h, field, id } from "./dom.js";
import * as api from "./api.js";
import { confirm } from "./confirm.js";
import { problem } from "./notice.js";
import { href } from "./router.js";
import { number, span, exact } from "./format.js";
import { ACTIONS, EXPIRIES, NEXT } from "./actions.js";

// PARALLEL is how many changes are in flight at once.
const PARALLEL = 8;

// ZERO_GUARD refuses a guard of 0, a budget that allows no disruption.
const ZERO_GUARD = "A guard of 0 allows no machine out of ACTIVE, so nothing would change: give 1 or more, or leave it empty for no limit.";

// bulkPanel is the form that changes the selection: ids() is the selected
// machines, select(ids) replaces the selection (the "next" buttons),
// states() reads every machine's current state afresh (a Map by id), and
// seen(ids) is the sequence of each machine as the page holds it (a Map by
// id), and changed() is called once a run is over (the "next" buttons show
// once it resolves: the page holds the run's changes by then). panel is
// hidden while there is nothing to change or show; update() follows the
// selection.
export function bulkPanel({ ids, select, states, seen, changed }) {
  const name = id("bulk");
  let action = "freeze";
  let stopped = false;
  let running = false;
  const radios = Object.entries(ACTIONS).map(([key, a]) => h("label", { class: "choice" },
    h("input", { type: "radio", name, value: key, checked: key === action, onchange: () => { action = key; sync(); } }), " ", a.label));
  const message = h("textarea", { rows: 2, maxLength: 4096, placeholder: "Why (goes into every machine's history)" });
  const expiry = h("select", { onchange: () => sync() }, EXPIRIES.filter(([v]) => v !== "custom").map(([v, l]) => h("option", { value: v }, l)));
  const revert = h("select");
  const revertField = field("Then return to", revert);
  // A guard of 0 would allow no change at all: the browser refuses it on
  // submit, in these words.
  const guard = h("input", { type: "number", min: "1", step: "1", inputMode: "numeric", placeholder: "no limit",
    oninput: () => guard.setCustomValidity(guard.value !== "" && Number(guard.value) === 0 ? ZERO_GUARD : "") });
  const submit = h("button", { class: "primary", type: "submit" });
  const summary = h("p", { class: "muted", "aria-live": "polite" });
  const results = h("ol", { class: "bulk-results", "aria-label": "Result per machine" });
  const next = h("div", { class: "buttons" });
  const heading = h("h2", { id: name + "-h" });

  function sync() {
    const n = ids().length;
    heading.textContent = `Change ${number(n)} selected machine${n === 1 ? "" : "s"}`;
    submit.textContent = `${ACTIONS[action].label} ${number(n)}…`;
    submit.disabled = running || n === 0;
    revertField.hidden = expiry.value === "";
    // The page calls sync at every draw, as the feed brings changes: the
    // list is built again only when the action's choices differ from it,
    // so a list open under the pointer stays open and chosen.
    const options = ACTIONS[action].reverts;
    if ([...revert.options].map((o) => o.value).join() === options.join()) return;
    const keep = revert.value;
    revert.replaceChildren(...options.map((s) => h("option", { value: s, selected: s === keep }, s)));
  }

  function choose(key) {
    action = key;
    for (const r of radios) r.firstChild.checked = r.firstChild.value === key;
    sync();
  }

  async function onsubmit(e) {
    e.preventDefault();
    const chosen = ids();
    // The machines as the operator asked: one that changes after this is
    // left alone (412) and said to have changed.
    const seqs = seen(chosen);
    const a = ACTIONS[action];
    const limit = guard.value === "" ? 0 : Number(guard.value);
    if (guard.value !== "" && !(Number.isInteger(limit) && limit > 0)) {
      summary.replaceChildren(problem(new Error(limit === 0 ? ZERO_GUARD : "the guard must be a whole number of machines, 1 or more")));
      guard.focus();
      return;
    }
    const body = {};
    if (message.value.trim()) body.message = message.value.trim();
    if (expiry.value) { body.durationMillis = Number(expiry.value); body.revertToState = revert.value; }
    const n = chosen.length;
    const ok = await confirm({
      title: `${a.label} ${number(n)} machine${n === 1 ? "" : "s"}?`,
      body: [
        h("p", {}, `${number(n)} machine${n === 1 ? " goes" : "s go"} to ${a.target}. ${a.says}`),
        body.durationMillis ? h("p", {}, `For ${span(body.durationMillis)}: at about ${exact(Date.now() + body.durationMillis)} they return to ${body.revertToState}.`) : h("p", {}, "The change is permanent until someone changes it again."),
        limit > 0 && action !== "activate" && h("p", {}, `Guard: at most ${number(limit)} of them out of ACTIVE at once; the rest are held back.`),
        body.message && h("p", {}, "Message: ", h("q", {}, body.message)),
      ],
      action: `${a.label} ${number(n)}`,
      danger: action === "decommission",
    });
    if (!ok) return;
    running = submit.disabled = true;
    next.replaceChildren();
    summary.textContent = "Reading the machines' states…";
    let now;
    try { now = await states(); } catch (err) { summary.replaceChildren(problem(err)); running = submit.disabled = false; return; }
    const done = await run(chosen, now, seqs, action, body, limit);
    summary.textContent = `${number(done.applied.length)} applied, ${number(done.refused)} refused, ${number(done.held)} held back by the guard.` +
      (done.moved ? ` ${number(done.moved)} changed since this page showed ${done.moved === 1 ? "it" : "them"}: nothing was done to ${done.moved === 1 ? "it" : "them"}; review and try again.` : "");
    // The page holds the machines as the run left them before a next
    // change can be asked for, else that change would find them moved.
    if (!stopped) { try { await changed(); } catch { /* the page says why */ } }
    if (done.applied.length) {
      next.replaceChildren(`Next for the ${number(done.applied.length)} applied: `, ...NEXT[done.action].map((k) => h("button", { type: "button",
        onclick: () => { select(done.applied); choose(k); submit.focus(); } }, ACTIONS[k].label + "…")));
    }
    // The next change starts as the machine page's does: no message, no
    // expiry (an expiring change on machines that now have one would be
    // refused, as they have one already).
    message.value = "";
    expiry.value = "";
    running = submit.disabled = false;
    sync();
  }

  // run sends the changes, PARALLEL at a time, and shows each result as it
  // comes; the guard decides before anything is sent which are held back.
  async function run(chosen, now, seqs, act, body, limit) {
    const rows = new Map();
    let budget = Infinity;
    if (limit && act !== "activate") budget = limit - chosen.filter((m) => now.get(m) !== "ACTIVE").length;
    const queue = [];
    let held = 0;
    results.replaceChildren(...chosen.map((m) => {
      const status = h("span", { class: "muted" }, "waiting");
      rows.set(m, status);
      const out = now.get(m) === "ACTIVE" && budget <= 0;
      if (out) { held++; status.textContent = "held back by the guard"; } else { queue.push(m); if (now.get(m) === "ACTIVE") budget--; }
      return h("li", { "data-id": m }, h("a", { href: href(["machine", m]) }, m), " ", status);
    }));
    const applied = [];
    let refused = 0, moved = 0;
    async function worker() {
      while (queue.length && !stopped) {
        const m = queue.shift();
        const status = rows.get(m);
        status.textContent = "sending…";
        try {
          await new api.Change().send(m, (key) => api.change(m, act, body, key, seqs.get(m)));
          applied.push(m);
          status.replaceWith(h("span", { class: "ok" }, `applied: ${ACTIONS[act].target}`));
        } catch (err) {
          if (err instanceof api.ApiError && err.moved) {
            moved++;
            status.replaceWith(h("span", { class: "problem" }, h("strong", {}, "Changed meanwhile: "),
              `${err.now?.state ? `it is now ${err.now.state}. ` : ""}Nothing was done to it.`));
          } else {
            refused++;
            status.replaceWith(problem(err));
          }
        }
      }
    }
    summary.textContent = `Sending ${number(queue.length)} change${queue.length === 1 ? "" : "s"}, ${PARALLEL} at a time…`;
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker));
    return { applied, refused, moved, held, action: act };
  }

  const panel = h("form", { class: "panel bulk", onsubmit, "aria-labelledby": name + "-h", hidden: true },
    heading,
    h("fieldset", { class: "choices" }, h("legend", {}, "Action"), radios),
    field("Message (optional)", message),
    h("div", { class: "row" }, field("Expires", expiry), revertField,
      field("At most N at a time out of ACTIVE (optional)", guard,
        "Counts the selected machines in any state but ACTIVE, those already out included. Freeze and decommission change ACTIVE ones only while fewer than N are out and hold the rest back; activate is never held back.")),
    h("div", { class: "buttons" }, submit),
    summary, next, results);
  sync();

  return {
    panel,
    // update follows the selection: the panel shows while it has machines
    // or results to show.
    update() { panel.hidden = ids().length === 0 && !results.firstChild; sync(); },
    stop() { stopped = true; },
  };
}

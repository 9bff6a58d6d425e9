// The change form of the machine page: freeze, decommission or activate,
// with a message and an optional expiry that reverts the change. It asks
// for confirmation saying exactly what will happen, sends the change with
// an Idempotency-Key (kept for a retry of the same request) and the
// machine's sequence as the page read it (If-Match: a machine that changed
// meanwhile is left alone, and the page says so and shows it as it is now),
// shows a refusal in the API's own words next to the button, and keeps what
// was typed.
// After a change it offers the next sensible one (NEXT), once done (the
// page reading the machine again) is over.

import { h, field, id } from "./dom.js";
import * as api from "./api.js";
import { confirm } from "./confirm.js";
import { problem, moved } from "./notice.js";
import { span, exact } from "./format.js";

export const ACTIONS = {
  freeze: { label: "Freeze", target: "FROZEN", says: "No new tasks are placed on it; running tasks keep running.", reverts: ["ACTIVE", "STARTING_DECOMMISSION"] },
  decommission: { label: "Decommission", target: "STARTING_DECOMMISSION", says: "Its tasks are moved off and it leaves the fleet. Only a few machines may decommission at once.", reverts: ["ACTIVE"] },
  activate: { label: "Activate", target: "ACTIVE", says: "It takes new tasks again.", reverts: ["FROZEN", "STARTING_DECOMMISSION"] },
};
// NEXT is what usually follows a change that succeeded, never itself.
export const NEXT = { freeze: ["activate", "decommission"], decommission: ["activate"], activate: ["freeze", "decommission"] };
export const EXPIRIES = [["", "Never (permanent)"], ["3600000", "1 hour"], ["14400000", "4 hours"], ["28800000", "8 hours"], ["86400000", "1 day"], ["custom", "Custom…"]];
const UNITS = [["60000", "minutes"], ["3600000", "hours"], ["86400000", "days"]];

export function actionForm(current, done) {
  const pending = new api.Change();
  const name = id("action");
  let action = current().currentState.state === "FROZEN" ? "activate" : "freeze";

  const radios = Object.entries(ACTIONS).map(([key, a]) => h("label", { class: "choice" },
    h("input", { type: "radio", name, value: key, checked: key === action, onchange: () => { action = key; sync(); } }), " ", a.label));
  // choose picks an action as its radio does, for the "next" buttons.
  function choose(key, focus) {
    action = key;
    for (const r of radios) r.firstChild.checked = r.firstChild.value === key;
    sync();
    if (focus) submit.focus();
  }
  const message = h("textarea", { rows: 2, maxLength: 4096, placeholder: "Why (goes into the history)" });
  const expiry = h("select", { onchange: () => sync() }, EXPIRIES.map(([v, l]) => h("option", { value: v }, l)));
  const amount = h("input", { type: "number", min: "1", step: "any", value: "2", inputMode: "decimal" });
  const unit = h("select", {}, UNITS.map(([v, l]) => h("option", { value: v, selected: l === "hours" }, l)));
  const revert = h("select");
  const custom = h("div", { class: "row", hidden: true }, field("For", amount), field("Unit", unit));
  const revertField = field("Then return to", revert, "The state it goes back to when the time is up.");
  const submit = h("button", { class: "primary", type: "submit" });
  const result = h("div", { class: "result", "aria-live": "polite" });

  function sync() {
    const a = ACTIONS[action];
    submit.textContent = a.label + "…";
    custom.hidden = expiry.value !== "custom";
    revertField.hidden = expiry.value === "";
    const keep = revert.value;
    const prev = current().currentState.state;
    const best = a.reverts.includes(keep) ? keep : a.reverts.includes(prev) ? prev : a.reverts[0];
    revert.replaceChildren(...a.reverts.map((s) => h("option", { value: s, selected: s === best }, s)));
  }
  sync();

  function duration() {
    if (expiry.value === "") return 0;
    if (expiry.value !== "custom") return Number(expiry.value);
    return Math.round(Number(amount.value) * Number(unit.value));
  }

  async function onsubmit(e) {
    e.preventDefault();
    const a = ACTIONS[action];
    const slave = current();
    const ms = duration();
    if (expiry.value === "custom" && !(ms > 0)) {
      result.replaceChildren(problem(new Error("the custom expiry must be a positive number")));
      amount.focus();
      return;
    }
    const body = {};
    if (message.value.trim()) body.message = message.value.trim();
    if (ms) { body.durationMillis = ms; body.revertToState = revert.value; }
    const who = slave.host ? `${slave.host} (${slave.id})` : slave.id;
    const ok = await confirm({
      title: `${a.label} ${slave.host || slave.id}?`,
      body: [
        h("p", {}, `${who} goes from ${slave.currentState.state} to ${a.target}. ${a.says}`),
        ms ? h("p", {}, `For ${span(ms)}: at about ${exact(Date.now() + ms)} it returns to ${body.revertToState}.`) : h("p", {}, "The change is permanent until someone changes it again."),
        body.message && h("p", {}, "Message: ", h("q", {}, body.message)),
      ],
      action: a.label,
      danger: action === "decommission",
    });
    if (!ok) return;
    submit.disabled = true;
    result.replaceChildren(h("span", { class: "muted" }, "Sending…"));
    try {
      await pending.send(JSON.stringify([slave.id, action, body, slave.sequence]), (key) => api.change(slave.id, action, body, key, slave.sequence));
      // The page shows the machine as the change left it before the result
      // shows: the details above the form change height with it, and the
      // next actions must not move once they can be aimed at.
      await done();
      result.replaceChildren(h("span", { class: "ok" }, `Done: ${slave.id} is ${a.target}${ms ? ` for ${span(ms)}` : ""}.`),
        h("span", { class: "next" }, " Next: ", NEXT[action].map((k) => h("button", { type: "button", class: "link", onclick: () => choose(k, true) }, ACTIONS[k].label + "…"))));
      message.value = "";
      expiry.value = "";
      choose(NEXT[action][0]);
    } catch (err) {
      if (err instanceof api.ApiError && err.moved) {
        // The machine as it is now shows before the words that say so,
        // as after a change that was made.
        await done();
        result.replaceChildren(moved(err, slave.host || slave.id));
        sync();
      } else result.replaceChildren(problem(err));
    } finally {
      submit.disabled = false;
    }
  }

  return h("form", { class: "panel actions", onsubmit, "aria-labelledby": name + "-h" },
    h("h2", { id: name + "-h" }, "Change state"),
    h("fieldset", { class: "choices" }, h("legend", {}, "Action"), radios),
    field("Message (optional)", message),
    h("div", { class: "row" }, field("Expires", expiry), custom, revertField),
    h("div", { class: "buttons" }, submit, result));
}

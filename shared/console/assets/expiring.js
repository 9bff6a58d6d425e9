// The fleet-wide page of pending changes: every expiring change with its
// countdown (soonest first), and "remove dead machines", whose confirmation
// names how many machines it removes.

import { h } from "./dom.js";
import * as api from "./api.js";
import { href } from "./router.js";
import { time, number } from "./format.js";
import { problem, info } from "./notice.js";
import { confirm } from "./confirm.js";
import { forget } from "./fleet.js";
import { linkTasks } from "./tasklinks.js";

export function render(root) {
  const list = h("section", { class: "panel", "aria-labelledby": "exp-h" });
  const dead = h("section", { class: "panel", "aria-labelledby": "dead-h" });
  root.replaceChildren(h("h1", {}, "Expiring changes"), list, dead);
  const removal = new api.Change();
  let timer = 0;

  async function refresh() {
    clearTimeout(timer);
    try {
      const [exp, deadOnes] = await Promise.all([api.expiring(), api.deadSlaves()]);
      drawList(exp);
      drawDead(deadOnes.length);
    } catch (e) {
      list.replaceChildren(h("h2", { id: "exp-h" }, "Pending"), problem(e, refresh));
    }
    timer = setTimeout(refresh, 15000);
  }

  function drawList(exp) {
    const due = (x) => x.startMillis + x.expiringAPIRequestObject.durationMillis;
    exp.sort((a, b) => due(a) - due(b));
    list.replaceChildren(h("h2", { id: "exp-h" }, `Pending (${number(exp.length)})`),
      exp.length ? h("div", { class: "table-wrap" }, h("table", { class: "grid" },
        h("caption", { class: "sr-only" }, "Expiring changes, soonest first"),
        h("thead", {}, h("tr", {}, ["Machine", "Returns to", "In", "Asked", "By", "Message"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, exp.map((x) => h("tr", {},
          h("td", {}, h("a", { href: href(["machine", x.machineId]) }, x.machineId)),
          h("td", {}, x.revertToState),
          h("td", {}, due(x) > Date.now() ? time(due(x), "until") : "due now"),
          h("td", {}, time(x.startMillis)),
          h("td", {}, x.user || ""),
          h("td", { class: "msg" }, linkTasks(x.expiringAPIRequestObject.message)))))))
        : info("No expiring changes."));
  }

  function drawDead(n) {
    const out = h("div", { class: "result", "aria-live": "polite" });
    const btn = h("button", { type: "button", class: "danger", disabled: n === 0, onclick: async () => {
      const ok = await confirm({ title: `Remove ${number(n)} dead machine${n === 1 ? "" : "s"}?`, action: `Remove ${number(n)}`, danger: true,
        body: h("p", {}, `Every machine in state DEAD (${number(n)} now) is removed with its history and expiring change. A machine that comes back to life meanwhile is kept. This cannot be undone.`) });
      if (!ok) return;
      btn.disabled = true;
      try {
        await removal.send("dead", (key) => api.removeDead(key));
        forget();
        out.replaceChildren(h("span", { class: "ok" }, "Removed."));
        refresh();
      } catch (e) { out.replaceChildren(problem(e)); btn.disabled = false; }
    } }, n ? `Remove ${number(n)} dead machine${n === 1 ? "" : "s"}…` : "No dead machines");
    dead.replaceChildren(h("h2", { id: "dead-h" }, "Dead machines"),
      h("p", {}, "DEAD machines are removed on their own a while after they died; this removes them now. ",
        h("a", { href: href("fleet", { state: "DEAD" }) }, "See them")),
      h("div", { class: "buttons" }, btn, out));
  }

  refresh();
  return () => clearTimeout(timer);
}

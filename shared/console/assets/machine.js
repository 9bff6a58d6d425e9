// The machine page: details, the pending expiring change, the state history
// as a timeline (newest first), the change form, "make permanent" and
// delete. Each change is conditioned on the machine as the page last read
// it (its sequence in If-Match): one that changed meanwhile is left alone,
// and the page says so and shows it as it is now. It refreshes itself (every 5 s while a change is pending, so a
// revert shows up on its own; every 30 s otherwise, and after a change)
// without touching the form, so nothing typed is lost; a refresh keeps
// every node that did not change, and waits to draw while the pointer is
// on the form or the manage panel (see release).

import { h, patch, pointerOn } from "./dom.js";
import * as api from "./api.js";
import { href } from "./router.js";
import { time, exact, number } from "./format.js";
import { badge } from "./badge.js";
import { problem, info, moved } from "./notice.js";
import { confirm } from "./confirm.js";
import { actionForm } from "./actions.js";
import { pending, forget } from "./fleet.js";
import { linkTasks } from "./tasklinks.js";

export function render(root, route) {
  const machineID = route.parts[0] || "";
  const head = h("div");
  const details = h("section", { class: "panel", "aria-labelledby": "details-h" });
  const change = h("div");
  const historyList = h("section", { class: "panel", "aria-labelledby": "history-h" });
  const manage = h("section", { class: "panel", "aria-labelledby": "manage-h" });
  root.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: href("fleet") }, "Fleet"), " / ", machineID),
    head, h("div", { class: "columns2" }, h("div", {}, details, change, manage), historyList));

  let form = null;
  let current = null; // the machine as last read: what a confirmation says it changes from
  let held = null; // the last read, while a draw waits for the pointer to leave
  let timer = 0;
  let stopped = false;
  const permanent = new api.Change();
  const removal = new api.Change();

  // refresh reads the machine again and draws it; mine says the read
  // follows the operator's own change, drawn at once (see release).
  async function refresh(mine = false) {
    clearTimeout(timer);
    let slave = null, hist = [], exp = null, err = null;
    try {
      [slave, hist, exp] = await Promise.all([
        api.details(machineID).catch((e) => { if (e.status === 404) return null; throw e; }),
        api.history(machineID),
        api.expiring().then((all) => all.find((x) => x.machineId === machineID) || null),
      ]);
    } catch (e) { err = e; }
    if (stopped) return;
    if (err) {
      head.replaceChildren(h("h1", {}, machineID), problem(err, () => refresh()));
    } else {
      if (slave) current = slave;
      held = [slave, hist, exp];
      release(mine);
    }
    timer = setTimeout(() => refresh(), exp ? 5000 : 30000);
  }

  // A draw waits while the pointer is on the change form or the manage
  // panel (see pointerOn): the details above the form grow and shrink with
  // the machine (its user, message, tasks), so it would move the button
  // aimed at and the press would land on something else, or miss the
  // choice it was for. The parts it would change say aria-busy meanwhile;
  // what is sent and confirmed is the machine as last read all the same.
  // The read after the operator's own change is drawn at once: its result
  // and next actions show with it (actions.js), so nothing moves after.
  const aiming = pointerOn([change, manage], () => release());
  let drawn = ""; // the read last drawn, as JSON
  function release(mine = false) {
    if (!held || stopped) return;
    const read = JSON.stringify(held);
    const waiting = !mine && aiming() && read !== drawn;
    for (const el of [head, details, historyList]) {
      if (waiting) el.setAttribute("aria-busy", "true"); else el.removeAttribute("aria-busy");
    }
    if (waiting) return;
    const [slave, hist, exp] = held;
    held = null;
    drawn = read;
    draw(slave, hist, exp);
  }

  function draw(slave, hist, exp) {
    if (!slave) {
      head.replaceChildren(h("h1", {}, machineID), info("No such machine: it was deleted, or the scheduler has not reported it."));
      details.replaceChildren();
      change.replaceChildren();
      manage.replaceChildren();
      form = null;
    } else {
      const st = slave.currentState;
      patch(head, h("div", { class: "title machine" }, h("h1", {}, slave.host || slave.id), badge(st.state), exp && pending(exp)));
      patch(details,
        h("h2", { id: "details-h" }, "Details"),
        h("dl", { class: "facts" },
          fact("Id", h("code", {}, slave.id)), fact("Host", slave.host), fact("Rack", slave.rackId),
          fact("State", [badge(st.state), " since ", time(st.timestamp)]),
          st.user && fact("By", st.user), st.message && fact("Message", linkTasks(st.message)),
          // The API carries the count only while the machine drains.
          typeof slave.runningTasks === "number" && fact("Running tasks", number(slave.runningTasks)),
          fact("First seen", [time(slave.firstSeenAt), " (", exact(slave.firstSeenAt), ")"])),
        map("Attributes", slave.attributes), map("Resources", slave.resources));
      if (!form) { form = actionForm(() => current, () => { forget(); return refresh(true); }); change.replaceChildren(form); }
      drawManage(slave, exp);
    }
    patch(historyList, h("h2", { id: "history-h" }, "History"),
      hist.length ? h("ol", { class: "timeline", "aria-label": "State history, newest first" }, hist.map((e) => h("li", {},
        h("div", { class: "when" }, time(e.timestamp)), badge(e.state),
        e.user && h("span", { class: "who" }, "by ", e.user), e.message && h("p", { class: "msg" }, linkTasks(e.message)))))
        : info("No history."));
  }

  // drawManage's buttons outlive the draw that made them when a later one
  // shows the same (see patch): what they say of the machine's state, and
  // the sequence they send, is read when pressed.
  function drawManage(slave, exp) {
    const out = h("div", { class: "result", "aria-live": "polite" });
    // refused shows why a change was not made; a machine that changed
    // meanwhile shows as it is now first (a draw that changes the panel
    // puts a new result area in it: the words go there).
    const refused = async (e, seen) => {
      if (e instanceof api.ApiError && e.moved) {
        await refresh(true);
        (manage.querySelector(".result") || out).replaceChildren(moved(e, seen.host || seen.id));
      } else out.replaceChildren(problem(e));
    };
    const items = [h("h2", { id: "manage-h" }, "Manage")];
    if (exp) {
      const btn = h("button", { type: "button", onclick: async () => {
        const seen = current;
        const ok = await confirm({ title: "Make this change permanent?", action: "Make permanent",
          body: h("p", {}, `${slave.id} stays ${seen.currentState.state}: the pending return to ${exp.revertToState} is cancelled.`) });
        if (!ok) return;
        btn.disabled = true;
        try { await permanent.send(`permanent ${slave.id} ${seen.sequence}`, (key) => api.makePermanent(slave.id, key, seen.sequence)); forget(); refresh(true); }
        catch (e) { await refused(e, seen); btn.disabled = false; }
      } }, "Make permanent");
      items.push(h("p", {}, "Pending: ", pending(exp), exp.user ? ` (asked by ${exp.user})` : ""), h("div", { class: "buttons" }, btn));
    }
    const del = h("button", { type: "button", class: "danger", onclick: async () => {
      const seen = current;
      const ok = await confirm({ title: `Delete ${slave.id}?`, action: "Delete", danger: true,
        body: [h("p", {}, "This removes the machine, its whole history and its expiring change. It cannot be undone."),
          h("p", {}, "If the scheduler reports it again, it comes back as a new ACTIVE machine.")] });
      if (!ok) return;
      del.disabled = true;
      try { await removal.send(`delete ${slave.id} ${seen.sequence}`, (key) => api.remove(slave.id, key, seen.sequence)); forget(); location.hash = href("fleet"); }
      catch (e) { await refused(e, seen); del.disabled = false; }
    } }, "Delete machine…");
    items.push(h("div", { class: "buttons" }, del, out));
    patch(manage, ...items);
  }

  refresh(true);
  return () => { stopped = true; clearTimeout(timer); };
}

const fact = (term, value) => [h("dt", {}, term), h("dd", {}, value)];

function map(title, obj) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return null;
  return h("div", {}, h("h3", {}, title), h("dl", { class: "facts" },
    entries.map(([k, v]) => fact(k, typeof v === "object" ? JSON.stringify(v) : String(v)))));
}

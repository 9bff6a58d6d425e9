// The machine page: details, the pending expiring change, the state history
// as a timeline (newest first), the change form, "make permanent" and
// delete. It reads the machine once and then follows the change feed for
// that machine alone (id=, docs/behaviour.md "The change feed"; follow.js):
// a state change, a new description, an expiring change set, cancelled or
// reverted, and a deletion show as they happen, the history growing at the
// top; a machine deleted meanwhile is said to be so and its actions are
// turned off. Each change is conditioned on the machine as the page last
// read it (its sequence in If-Match, which every change followed moves
// on): one that changed meanwhile unseen is left alone, and the page says
// so and shows it as it is now. A draw keeps every node that did not
// change, and waits while the pointer is on the form or the manage panel
// (see release), so nothing typed or aimed at is lost. From an API without
// the feed it reads the machine again every 30 s (5 s while a change is
// pending, so a revert shows up on its own).

import { h, patch, pointerOn } from "./dom.js";
import * as api from "./api.js";
import { href } from "./router.js";
import { time, exact, number } from "./format.js";
import { badge } from "./badge.js";
import { problem, info, moved } from "./notice.js";
import { confirm } from "./confirm.js";
import { actionForm } from "./actions.js";
import { pending, forget, usable } from "./fleet.js";
import { follow } from "./follow.js";
import { liveIndicator } from "./live.js";
import { linkTasks } from "./tasklinks.js";

export function render(root, route) {
  const machineID = route.parts[0] || "";
  const select = { id: machineID };
  const errors = h("div");
  const head = h("div");
  const details = h("section", { class: "panel", "aria-labelledby": "details-h" });
  const change = h("div");
  const historyList = h("section", { class: "panel", "aria-labelledby": "history-h" });
  const manage = h("section", { class: "panel", "aria-labelledby": "manage-h" });
  const live = liveIndicator({ errors, retry: () => feed?.restart(), reloading: "Reading again…",
    unfed: "Not live: this API has no change feed; read again every 30 s" });
  root.replaceChildren(
    h("div", { class: "crumbline" }, h("p", { class: "crumbs" }, h("a", { href: href("fleet") }, "Fleet"), " / ", machineID), live.el),
    errors, head, h("div", { class: "columns2" }, h("div", {}, details, change, manage), historyList));

  // machine is what the page holds, kept current by the feed: the slave
  // (the last one seen once deleted), its history, its pending change, the
  // deletion when it was deleted, the sequence of the last change applied
  // or read, and the feed's cursor ("" from an API without the feed).
  let machine = null;
  let current = null; // the machine as last read: what a confirmation says it changes from, and the sequence it sends
  let form = null;
  let feed = null;
  let timer = 0;
  let stopped = false;
  const permanent = new api.Change();
  const removal = new api.Change();

  // load reads the machine as it is now, the cursor to follow it from
  // taken first, as fleetctl wait does for one machine (docs/behaviour.md
  // "Waiting for machines"): a change after the read is after the cursor,
  // and one between the two comes again at a sequence the read holds, and
  // is passed over. The history and the pending change are read after the
  // details, so they hold all the details do (see record).
  async function load() {
    const now = await api.changes("", 0, undefined, select).catch((e) => { if (e.status === 404) return null; throw e; });
    const slave = await api.details(machineID).catch((e) => { if (e.status === 404) return null; throw e; });
    const [hist, exp] = await Promise.all([
      api.history(machineID),
      api.expiring().then((all) => all.find((x) => x.machineId === machineID) || null),
    ]);
    return {
      slave, hist, exp, gone: null,
      seq: Number.isSafeInteger(slave?.sequence) ? slave.sequence : -Infinity,
      cursor: typeof now?.cursor === "string" ? now.cursor : "",
    };
  }

  // read reads the machine again and shows it (the first visit, a cursor
  // the feed no longer keeps, a machine new under this id); it throws what
  // failed.
  async function read(mine = false) {
    const m = await load();
    if (stopped) return;
    machine = m;
    if (m.slave) current = m.slave;
    release(mine);
  }

  // open reads the machine and follows it from there; a read that fails
  // says why and is tried again in 30 s, or at once from its button.
  async function open(mine = false) {
    clearTimeout(timer);
    try {
      await read(mine);
    } catch (e) {
      if (stopped) return;
      drawn = "";
      head.replaceChildren(h("h1", {}, machineID), problem(e, () => open(true)));
      timer = setTimeout(open, 30000);
      return;
    }
    if (stopped) return;
    if (!machine.cursor) { // an API without the feed: read again, as before it
      live.show("offline", "none");
      timer = setTimeout(open, machine.exp ? 5000 : 30000);
    } else if (feed) feed.restart();
    else feed = follow({ list: () => machine, select, apply, relist: () => read(), show: live.show });
  }

  // apply applies the feed's changes to what the page holds, each once (a
  // sequence not above the last applied was applied already, or read), and
  // draws them.
  function apply(changes) {
    const m = machine;
    let again = false;
    for (const c of changes) {
      if (!usable(c) || c.slaveId !== machineID) continue;
      if (c.type === "stateChanged") m.hist = record(m.hist, c.slave.currentState);
      if (c.sequence <= m.seq) continue;
      m.seq = c.sequence;
      if (c.type === "added") again = true; // a new machine under this id (reported again, imported): read whole
      else if (c.type === "deleted") { m.gone = c; m.exp = null; }
      else {
        m.slave = current = c.slave;
        m.gone = null;
        if (c.type === "expiringSet") m.exp = c.expiring;
        else if (c.type === "expiringDeleted" || c.type === "expiringReverted") m.exp = null;
      }
    }
    if (again) open();
    else release();
  }

  // caughtUp shows the machine as it is now before the result of the
  // operator's change, or its refusal, shows: the feed's changes up to now,
  // or a read when there is no feed or it fails.
  async function caughtUp() {
    if (feed) {
      try { await feed.catchUp(); release(true); return; } catch { /* read instead */ }
    }
    await open(true);
  }

  // A draw waits while the pointer is on the change form or the manage
  // panel (see pointerOn): the details above the form grow and shrink with
  // the machine (its user, message, tasks), so it would move the button
  // aimed at and the press would land on something else, or miss the
  // choice it was for. The parts it would change say aria-busy meanwhile;
  // what is sent and confirmed is the machine as last read all the same.
  // The read after the operator's own change is drawn at once (mine): its
  // result and next actions show with it (actions.js), so nothing moves
  // after. What was drawn already is not drawn again, so a result said in
  // the manage panel stays.
  let drawn = ""; // what the last draw showed, as JSON
  let held = false; // a draw waits for the pointer to leave
  const aiming = pointerOn([change, manage], () => { if (held) release(); });
  function release(mine = false) {
    if (!machine || stopped) return;
    const { slave, hist, exp, gone } = machine;
    const shows = JSON.stringify([slave, hist, exp, gone]);
    held = !mine && aiming() && shows !== drawn;
    for (const el of [head, details, historyList]) {
      if (held) el.setAttribute("aria-busy", "true"); else el.removeAttribute("aria-busy");
    }
    if (held || (!mine && shows === drawn)) return;
    drawn = shows;
    draw(slave, hist, exp, gone);
  }

  let disabled = false; // the form's controls are off: the machine was deleted
  function draw(slave, hist, exp, gone) {
    if (!slave) {
      head.replaceChildren(h("h1", {}, machineID), info("No such machine: it was deleted, or the scheduler has not reported it."));
      details.replaceChildren();
      change.replaceChildren();
      manage.replaceChildren();
      form = null;
    } else {
      const st = slave.currentState;
      patch(head, h("div", { class: "title machine" }, h("h1", {}, slave.host || slave.id), !gone && badge(st.state), exp && pending(exp)),
        gone && deleted(slave, gone));
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
      if (!form) {
        form = actionForm(() => current, () => { forget(); return caughtUp(); });
        change.replaceChildren(form);
        disabled = false;
      }
      if (disabled !== !!gone) {
        disabled = !!gone;
        for (const el of form.elements) el.disabled = disabled;
      }
      drawManage(slave, exp, gone);
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
  function drawManage(slave, exp, gone) {
    const out = h("div", { class: "result", "aria-live": "polite" });
    // refused shows why a change was not made; a machine that changed
    // meanwhile shows as it is now first (a draw that changes the panel
    // puts a new result area in it: the words go there).
    const refused = async (e, seen) => {
      if (e instanceof api.ApiError && e.moved) {
        await caughtUp();
        (manage.querySelector(".result") || out).replaceChildren(moved(e, seen.host || seen.id));
      } else out.replaceChildren(problem(e));
    };
    const items = [h("h2", { id: "manage-h" }, "Manage")];
    if (exp) {
      const btn = h("button", { type: "button", disabled: !!gone, onclick: async () => {
        const seen = current;
        const ok = await confirm({ title: "Make this change permanent?", action: "Make permanent",
          body: h("p", {}, `${slave.id} stays ${seen.currentState.state}: the pending return to ${exp.revertToState} is cancelled.`) });
        if (!ok) return;
        btn.disabled = true;
        try { await permanent.send(`permanent ${slave.id} ${seen.sequence}`, (key) => api.makePermanent(slave.id, key, seen.sequence)); forget(); caughtUp(); }
        catch (e) { await refused(e, seen); btn.disabled = false; }
      } }, "Make permanent");
      items.push(h("p", {}, "Pending: ", pending(exp), exp.user ? ` (asked by ${exp.user})` : ""), h("div", { class: "buttons" }, btn));
    }
    const del = h("button", { type: "button", class: "danger", disabled: !!gone, onclick: async () => {
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

  open(true);
  return () => { stopped = true; clearTimeout(timer); feed?.stop(); };
}

const fact = (term, value) => [h("dt", {}, term), h("dd", {}, value)];

function map(title, obj) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return null;
  return h("div", {}, h("h3", {}, title), h("dl", { class: "facts" },
    entries.map(([k, v]) => fact(k, typeof v === "object" ? JSON.stringify(v) : String(v)))));
}

// record puts a state change's entry into the history, newest first,
// unless the history as read holds it already (it is read after the
// details, so it may hold changes the feed brings after them; read from
// a store that lags, it may miss one the details hold).
function record(hist, entry) {
  if (hist.some((e) => e.timestamp === entry.timestamp && e.state === entry.state)) return hist;
  const at = hist.findIndex((e) => e.timestamp <= entry.timestamp);
  return at < 0 ? [...hist, entry] : [...hist.slice(0, at), entry, ...hist.slice(at)];
}

// deleted says that the machine the page shows was deleted, and when: a
// deletion in the feed says no more.
function deleted(slave, c) {
  const when = Number.isFinite(c.timestamp) ? [" ", time(c.timestamp), ` (${exact(c.timestamp)})`] : "";
  return h("p", { class: "problem gone", role: "alert" }, h("strong", {}, "Deleted: "), `${slave.host || slave.id} was deleted`, when,
    ". What this page shows is how it was; nothing can be changed on it. If the scheduler reports it again, it comes back as a new ACTIVE machine.");
}

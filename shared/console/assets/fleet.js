// The fleet page: every machine, counts per state, search by id, host,
// rack, attributes, message and user, sortable columns with the capacity the
// reports carry, the pending expiring change with a live countdown, and a
// selection that bulk.js changes at once. On a narrow screen each row is a
// card. It stays fast on 100,000 machines: the list is fetched once,
// each sort order is computed once, a search is a few indexOf calls over
// one string of the rows' search text (see index), and only one page of
// rows (50 by default) is ever in the DOM, the rows a screen shows drawn
// before the rest (see draw).

import { h, field, patch, pointerOn } from "./dom.js";
import * as api from "./api.js";
import { href, replace } from "./router.js";
import { time, number, size, prepare } from "./format.js";
import { badge } from "./badge.js";
import { problem } from "./notice.js";
import { linkTasks } from "./tasklinks.js";
import { bulkPanel } from "./bulk.js";
import { follow } from "./follow.js";
import { liveIndicator } from "./live.js";

export const STATES = ["ACTIVE", "FROZEN", "STARTING_DECOMMISSION", "DECOMMISSIONING", "DECOMMISSIONED", "DEAD", "MISSING_ON_STARTUP"];

const COLUMNS = [
  { key: "id", label: "Id", value: (r) => r.s.id, cell: (r) => h("a", { href: href(["machine", r.s.id]) }, r.s.id) },
  { key: "host", label: "Host", value: (r) => r.s.host },
  { key: "rack", label: "Rack", value: (r) => r.s.rackId },
  { key: "state", label: "State", value: (r) => r.s.currentState.state, cell: (r) => badge(r.s.currentState.state) },
  { key: "since", label: "Since", value: (r) => r.s.currentState.timestamp, cell: (r) => time(r.s.currentState.timestamp) },
  { key: "by", label: "By", value: (r) => r.s.currentState.user || "" },
  { key: "message", label: "Message", value: (r) => r.s.currentState.message || "", cell: (r) => h("span", { class: "msg", title: r.s.currentState.message || null }, linkTasks(r.s.currentState.message)) },
  { key: "pending", label: "Pending change", value: (r) => (r.x ? due(r.x) : Infinity), cell: (r) => r.x && pending(r.x) },
  // Capacity is what the reports carry in resources (cpus, mem in MB), and
  // the running-task count, which the API carries only while a machine
  // drains: elsewhere the cell is empty, and a card has no Tasks line.
  { key: "cpus", label: "CPUs", value: (r) => resource(r, "cpus"), cell: (r) => (resource(r, "cpus") < 0 ? "—" : number(resource(r, "cpus"))) },
  { key: "mem", label: "Memory", value: (r) => resource(r, "mem"), cell: (r) => (resource(r, "mem") < 0 ? "—" : size(resource(r, "mem") * 1048576)) },
  { key: "tasks", label: "Tasks", value: (r) => tasks(r), cell: (r) => (tasks(r) < 0 ? null : number(tasks(r))) },
];
const DEFAULT_COLUMNS = ["id", "host", "rack", "state", "since", "by", "message", "pending", "cpus", "mem", "tasks"];
const SIZES = [50, 100, 250];
// CUT are the columns a wide table cuts with an ellipsis: the whole value is
// the cell's title (the message's is its own).
const CUT = new Set(["host", "by"]);

const resource = (r, k) => (typeof r.s.resources?.[k] === "number" ? r.s.resources[k] : -1);
const tasks = (r) => (typeof r.s.runningTasks === "number" ? r.s.runningTasks : -1);
const due = (x) => x.startMillis + x.expiringAPIRequestObject.durationMillis;
export const pending = (x) => h("span", { class: "pending" }, "→ ", x.revertToState, " ", time(due(x), "until"));

// The fleet as last fetched and since kept current from the change feed,
// shared by visits to the page: rows in id order, byId, the feed's cursor
// (absent when the API answered none: then the page reloads every minute),
// the last sequence applied per machine (the sequence a change made from
// the page is conditioned on), when each machine last changed (the rows
// marked for a moment), and whether the feed carries the pending changes
// (expiring, as an API that answers the initial state does).
let fleet = null;

// MARK is how long a changed row stays marked (style.css fades it).
const MARK = 3000;
// ROW_PX is less than any row's height (a wide table's row is about 34 px,
// a card taller), so the rows a screen can show are never more than its
// height over ROW_PX; MARGIN_ROWS are drawn beyond them, for a scroll.
const ROW_PX = 28;
const MARGIN_ROWS = 5;
// EXPIRING_EVERY bounds how often state changes read the pending changes
// again (ms), from a feed that carries none.
const EXPIRING_EVERY = 10000;

// load reads the fleet as it is now and the cursor to follow it from: in
// the feed's shape when the API answers it (initial, one request), else as
// the list and its X-Changes-Cursor, as before. The pending changes are
// read after the initial state: the feed brings every one that changes
// after its cursor, so a read after it is only more current.
async function load() {
  const asked = initialState();
  setTimeout(prepare); // once the request is out, while the fleet is on its way
  const initial = await asked;
  const [list, exp] = initial ? [initial.slaves, await api.expiring()] : await Promise.all([api.slaves(), api.expiring()]);
  const byId = new Map(exp.map((x) => [x.machineId, x]));
  const rows = list.map((s) => ({ s, x: byId.get(s.id) }));
  fleet = {
    rows, byId: new Map(rows.map((r) => [r.s.id, r])), at: Date.now(), sorted: new Map([["id:asc", rows]]), indexes: new Map(),
    cursor: initial ? initial.cursor : list.cursor, marks: new Map(), expiring: !!initial,
    seqs: new Map(list.filter((s) => Number.isSafeInteger(s.sequence)).map((s) => [s.id, s.sequence])),
  };
  // The search index is built when the browser is idle after the first
  // paint, not before it.
  (window.requestIdleCallback || setTimeout)(() => index(rows));
}

// initialState asks the feed for the fleet as it is now
// (docs/behaviour.md "The change feed", Initial state): {slaves, cursor},
// the slaves in id order, or null from an API older than that, which
// refuses initial (a 400 naming it), has no feed (404) or answers no
// bookmark ending the initial state.
async function initialState() {
  let page;
  try {
    page = await api.initial();
  } catch (e) {
    if (e instanceof api.ApiError && (e.status === 404 || (e.status === 400 && /\binitial\b/.test(e.message)))) return null;
    throw e;
  }
  const changes = Array.isArray(page?.changes) ? page.changes : [];
  const end = changes[changes.length - 1];
  if (!end || end.type !== "bookmark" || end.initialStateEnd !== true || typeof page.cursor !== "string" || !page.cursor) return null;
  const slaves = [];
  for (let i = 0; i < changes.length - 1; i++) {
    const c = changes[i];
    if (c?.type === "added" && usable(c)) slaves.push(c.slave);
  }
  return { slaves, cursor: page.cursor };
}

const TYPES = new Set(["added", "stateChanged", "descriptionChanged", "deleted", "expiringSet", "expiringDeleted", "expiringReverted"]);
const EXPIRING = new Set(["expiringSet", "expiringDeleted", "expiringReverted"]);

// usable tells a change the page can apply from one it cannot: the feed is
// read as untrusted as the list, and a slave that would break the table (or
// the machine page) is left out rather than shown.
export function usable(c) {
  if (!c || typeof c.slaveId !== "string" || !TYPES.has(c.type) || !Number.isFinite(c.sequence)) return false;
  if (c.type === "deleted") return true;
  const s = c.slave;
  if (c.type === "expiringSet" && !pendingChange(c.expiring, c.slaveId)) return false;
  return !!s && s.id === c.slaveId && typeof s.host === "string" && typeof s.rackId === "string" &&
    !!s.currentState && STATES.includes(s.currentState.state) && Number.isFinite(s.currentState.timestamp);
}

// pendingChange tells an expiring record the page can show.
const pendingChange = (x, id) => !!x && x.machineId === id && STATES.includes(x.revertToState) &&
  Number.isFinite(x.startMillis) && Number.isFinite(x.expiringAPIRequestObject?.durationMillis);

// apply applies the feed's changes to the fleet held: each replaces its
// machine's row with the slave as the change left it, adds it, or removes
// it; an expiring change also sets its pending change (expiringSet) or
// takes it off (deleted, or reverted by the expiry). A change whose
// sequence is not above the last applied to its machine was applied
// already. It returns whether a state changed (the pending changes may
// have too, when the feed does not carry them) and the ids of the machines
// deleted.
function apply(changes) {
  const now = Date.now();
  const gone = new Set();
  const moved = new Set(); // rows changed or added
  let states = false;
  for (const c of changes) {
    if (!usable(c)) continue;
    const id = c.slaveId;
    if (c.sequence <= (fleet.seqs.get(id) ?? -Infinity)) continue;
    fleet.seqs.set(id, c.sequence);
    const row = fleet.byId.get(id);
    if (c.type === "deleted") {
      if (row) { fleet.byId.delete(id); gone.add(row); fleet.marks.delete(id); }
      continue;
    }
    if (c.type === "stateChanged") states = true;
    let r = row;
    if (r) {
      r.s = c.slave;
      r.text = undefined;
    } else {
      r = { s: c.slave, x: undefined };
      fleet.byId.set(id, r);
    }
    if (EXPIRING.has(c.type)) {
      fleet.expiring = true;
      r.x = c.type === "expiringSet" ? c.expiring : undefined;
    }
    moved.add(r);
    fleet.marks.set(id, now);
  }
  resort(moved, gone);
  fleet.rows = fleet.sorted.get("id:asc");
  fleet.indexes = new Map(); // joined again from the rows' texts when next searched
  fleet.at = now;
  return { states, deleted: [...gone].map((r) => r.s.id).filter((id) => !fleet.byId.has(id)) };
}

// RESORT_MAX is the most rows a batch moves within the orders computed so
// far; a larger batch drops the orders (but the id order), computed again
// when next asked for.
const RESORT_MAX = 200;

// resort keeps the orders computed so far true to a batch of changes: the
// rows gone and the rows moved are taken out, and each moved row is put
// back where its new values sort it, a few comparisons a row instead of
// sorting the fleet again.
function resort(moved, gone) {
  for (const [name, order] of fleet.sorted) {
    if (!moved.size && !gone.size) return;
    if (moved.size > RESORT_MAX && name !== "id:asc") { fleet.sorted.delete(name); continue; }
    const [key, dir] = name.split(":");
    const col = column(key);
    const cmp = compare(dir);
    const out = order.filter((r) => !gone.has(r) && !moved.has(r));
    const back = [...moved].filter((r) => !gone.has(r));
    if (back.length > RESORT_MAX) { // the id order, after a large batch
      out.push(...back);
      out.sort((a, b) => cmp(col.value(a), a, col.value(b), b));
      fleet.sorted.set(name, out);
      continue;
    }
    for (const r of back) {
      const v = col.value(r);
      let lo = 0, hi = out.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (cmp(col.value(out[mid]), out[mid], v, r) < 0) lo = mid + 1; else hi = mid;
      }
      out.splice(lo, 0, r);
    }
    fleet.sorted.set(name, out);
  }
}

// pendingAgain reads the pending changes again and puts each on its row.
async function pendingAgain() {
  const held = fleet;
  const exp = await api.expiring();
  if (fleet !== held) return false;
  const byId = new Map(exp.map((x) => [x.machineId, x]));
  for (const r of held.rows) r.x = byId.get(r.s.id);
  held.sorted.delete("pending:asc");
  held.sorted.delete("pending:desc");
  return true;
}

const column = (key) => COLUMNS.find((c) => c.key === key) || COLUMNS[0];
// compare orders two rows by their values of a column, then by id.
const compare = (dir) => {
  const sign = dir === "desc" ? -1 : 1;
  return (x, a, y, b) => (x < y ? -sign : x > y ? sign : a.s.id < b.s.id ? -1 : 1);
};

function sorted(key, dir) {
  const name = key + ":" + dir;
  let out = fleet.sorted.get(name);
  if (out) return out;
  const col = column(key);
  const keyed = fleet.rows.map((r) => [col.value(r), r]);
  const cmp = compare(dir);
  keyed.sort((a, b) => cmp(a[0], a[1], b[0], b[1]));
  out = keyed.map((k) => k[1]);
  fleet.sorted.set(name, out);
  return out;
}

// index is the search text of every row of order (id, host, rack, each
// attribute as key=value, the state's message and user; lowercase) in one
// string, with where each row starts: a search is then a few native indexOf
// calls over the string instead of one test per row.
function index(order) {
  let ix = fleet.indexes.get(order);
  if (ix) return ix;
  const starts = new Int32Array(order.length + 1);
  const parts = new Array(order.length);
  let pos = 0;
  for (let i = 0; i < order.length; i++) {
    // Each row keeps its text until the feed changes it: a change costs
    // the join again, not the text of every row.
    const r = order[i];
    parts[i] = r.text ??= searchText(r.s);
    starts[i] = pos;
    pos += parts[i].length + 1;
  }
  starts[order.length] = pos;
  ix = { text: parts.join("\u0001"), starts };
  fleet.indexes.set(order, ix);
  return ix;
}

function searchText(s) {
  let text = s.id + "\n" + s.host + "\n" + s.rackId + "\n" + (s.currentState.message || "") + "\n" + (s.currentState.user || "");
  for (const k in s.attributes) text += "\n" + k + "=" + s.attributes[k];
  return text.toLowerCase().replaceAll("\u0001", ""); // the separator is never in a row
}

// matching returns the rows of order whose search text holds q.
function matching(order, q) {
  if (!q) return order;
  const { text, starts } = index(order);
  const out = [];
  let from = 0, at, row = 0;
  while ((at = text.indexOf(q, from)) !== -1) {
    while (starts[row + 1] <= at) row++; // matches come in order: walk forward
    out.push(order[row]);
    from = starts[++row];
  }
  return out;
}

const store = {
  get: (k, d) => { try { return JSON.parse(localStorage.getItem(k)) ?? d; } catch { return d; } },
  set: (k, v) => { try { localStorage.setItem(k, JSON.stringify(v)); } catch { /* private mode */ } },
};

// view reads the filters from the URL, or from the last visit when the URL
// has none, so that #/fleet opens the fleet as it was left.
function view(params) {
  const keys = ["state", "q", "sort", "dir", "p", "size"];
  const fromURL = keys.some((k) => params.has(k));
  const saved = fromURL ? {} : store.get("fleet.view", {});
  const get = (k) => (fromURL ? params.get(k) : saved[k]) ?? "";
  const size = Number(get("size"));
  return {
    state: STATES.includes(get("state")) ? get("state") : "",
    q: get("q"),
    sort: COLUMNS.some((c) => c.key === get("sort")) ? get("sort") : "id",
    dir: get("dir") === "desc" ? "desc" : "asc",
    p: Math.max(1, Number(get("p")) || 1),
    size: SIZES.includes(size) ? size : 50,
  };
}

export function render(root, route) {
  const v = view(route.params);
  // A fleet that follows the feed catches up (at the end); one without a
  // feed is listed again once a minute old. The list is asked for before
  // the page is built, which takes the browser a while.
  const held = fleet && (fleet.cursor || Date.now() - fleet.at < 60000);
  let loading = held ? null : load();
  let columns = store.get("fleet.columns", DEFAULT_COLUMNS).filter((k) => COLUMNS.some((c) => c.key === k));
  if (!columns.length) columns = DEFAULT_COLUMNS;

  const status = h("p", { class: "muted", "aria-live": "polite" });
  const counts = h("ul", { class: "counts", "aria-label": "Machines per state" });
  const search = h("input", { type: "search", value: v.q, placeholder: "id, host, rack, key=value, message or user", autocomplete: "off", spellcheck: false });
  const table = h("table", { class: "grid fleet" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const errors = h("div");
  const refresh = h("button", { type: "button", onclick: () => reload() }, "Refresh");
  // live says whether the list follows the change feed.
  const live = liveIndicator({ errors, retry: () => feed?.restart(), reloading: "Listing again…",
    unfed: "Not live: this API has no change feed; refreshed every minute" });
  // The selection is machine ids, kept across filters and pages; bulk.js
  // changes them.
  const selected = new Set();
  let shown = [];
  const picked = h("span", { "aria-live": "polite" });
  const selectAll = h("button", { type: "button", onclick: () => { for (const r of shown) selected.add(r.s.id); draw(); } });
  const selectNone = h("button", { type: "button", onclick: () => { selected.clear(); draw(); } }, "Clear selection");
  const selectbar = h("div", { class: "selectbar" }, picked, selectAll, selectNone);
  const bulk = bulkPanel({
    ids: () => [...selected],
    select: (ids) => { selected.clear(); for (const i of ids) selected.add(i); draw(); },
    // The guard decides on the states as they are now: the feed up to now
    // is applied first (or, without a feed, the fleet is listed again).
    states: async () => {
      if (feed) { await feed.catchUp(); draw(); } else await load();
      return new Map(fleet.rows.map((r) => [r.s.id, r.s.currentState.state]));
    },
    // The changes are conditioned on the machines as the page holds them
    // when asked for (what it shows, but for a draw a second away).
    seen: (ids) => new Map(ids.map((id) => [id, fleet?.byId.get(id)?.s.sequence])),
    // The feed brings the changes a run made, applied before the next
    // change is offered; without it the fleet is listed again.
    changed: async () => {
      if (feed) { await feed.catchUp(); draw(); } else await reload();
    },
  });

  const chooser = h("details", { class: "columns" }, h("summary", {}, "Columns"),
    h("fieldset", {}, h("legend", {}, "Show columns"),
      COLUMNS.map((c) => h("label", {}, h("input", {
        type: "checkbox", checked: columns.includes(c.key), disabled: c.key === "id",
        onchange: (e) => {
          columns = COLUMNS.map((x) => x.key).filter((k) => (k === c.key ? e.target.checked : columns.includes(k)));
          store.set("fleet.columns", columns);
          draw();
        },
      }), " ", c.label))));

  const size = h("select", { onchange: (e) => { v.size = Number(e.target.value); v.p = 1; update(); } },
    SIZES.map((n) => h("option", { value: n, selected: n === v.size }, n + " rows")));

  // The table's parts live as long as the page; a draw changes what
  // changed in them (see drawnRow).
  const caption = h("caption", { class: "sr-only" });
  const thead = h("thead");
  const tbody = h("tbody");
  table.append(caption, thead, tbody);
  let onPage = []; // the rows the table shows
  let drawnRows = new Map(); // by id, each shown row with what it shows
  let drawing = 0; // the last draw's number: the rest of an older one is not put in

  root.replaceChildren(
    h("div", { class: "title" }, h("h1", {}, "Fleet"), live.el, status, refresh),
    errors, counts,
    h("div", { class: "toolbar" },
      field("Search", search),
      field("Per page", size),
      chooser),
    selectbar,
    bulk.panel,
    h("div", { class: "table-wrap" }, table),
    pager);

  search.addEventListener("input", () => { v.q = search.value; v.p = 1; update(true); });

  // update applies the view: the address and the saved view follow it,
  // while typing once the typing pauses (rewriting the address is the
  // slowest part of a keystroke).
  let pendingAddress = 0;
  function update(typing) {
    clearTimeout(pendingAddress);
    if (typing) pendingAddress = setTimeout(remember, 300);
    else remember();
    draw();
  }
  function remember() {
    const params = { state: v.state, q: v.q, sort: v.sort === "id" ? "" : v.sort, dir: v.dir === "asc" ? "" : v.dir, p: v.p > 1 ? v.p : "", size: v.size === 50 ? "" : v.size };
    replace(href("fleet", params));
    store.set("fleet.view", { state: v.state, q: v.q, sort: v.sort, dir: v.dir, size: v.size });
  }

  function draw() {
    if (!fleet) return;
    clearTimeout(redraw);
    redraw = 0;
    // Where the table starts is read before the draw writes anything, so
    // that reading it costs no layout of the draw's own changes.
    const top = tbody.getBoundingClientRect().top;
    drawn = Date.now();
    table.removeAttribute("aria-busy");
    const focus = focused();
    const q = v.q.trim().toLowerCase().replaceAll("\u0001", "");
    const perState = Object.fromEntries(STATES.map((s) => [s, 0]));
    const found = matching(sorted(v.sort, v.dir), q);
    const total = found.length;
    for (const r of found) perState[r.s.currentState.state]++;
    // Without a state filter the rows shown are the rows found, not a copy.
    shown = v.state ? found.filter((r) => r.s.currentState.state === v.state) : found;
    drawCounts(perState, total);
    const pages = Math.max(1, Math.ceil(shown.length / v.size));
    v.p = Math.min(v.p, pages);
    const first = (v.p - 1) * v.size;
    const page = shown.slice(first, first + v.size);
    const cols = COLUMNS.filter((c) => columns.includes(c.key));
    const sortName = COLUMNS.find((c) => c.key === v.sort).label;
    onPage = page;
    patch(caption, `Machines${v.state ? " in state " + v.state : ""}${q ? ` matching "${v.q}"` : ""}, sorted by ${sortName} ${v.dir === "asc" ? "ascending" : "descending"}`);
    patch(thead, h("tr", {}, h("th", { scope: "col", class: "sel" }, h("input", { type: "checkbox", "aria-label": "Select every machine on this page",
      onchange: (e) => { for (const r of onPage) { if (e.target.checked) selected.add(r.s.id); else selected.delete(r.s.id); } draw(); } })), cols.map((c) => h("th", { scope: "col", "data-col": c.key, "aria-sort": c.key === v.sort ? (v.dir === "asc" ? "ascending" : "descending") : null },
      h("button", { type: "button", class: "sort", "data-col": c.key, onclick: () => sortBy(c.key) }, c.label,
        h("span", { "aria-hidden": "true" }, c.key === v.sort ? (v.dir === "asc" ? " ▲" : " ▼") : ""))))));
    thead.querySelector("input").checked = page.length > 0 && page.every((r) => selected.has(r.s.id));
    const colsKey = cols.map((c) => c.key).join();
    // The rows the screen can show are drawn now, the rest of the page
    // once they are painted: a keystroke that brings a new page builds and
    // lays out half its rows before the paint. A row the last draw left as
    // it is costs nothing and is put in now wherever it is, and with the
    // focus in the table every row is (it must not be taken away).
    const screen = focus ? page.length : Math.ceil((innerHeight - top) / ROW_PX) + MARGIN_ROWS;
    const before = drawnRows;
    drawnRows = new Map();
    const later = [];
    let at = 0;
    page.forEach((r, i) => {
      if (i >= screen && !current(r, colsKey, before)) {
        later.push(i);
        if (before.has(r.s.id)) drawnRows.set(r.s.id, before.get(r.s.id)); // put back as it is if still current then
        return;
      }
      place(r, at++, cols, colsKey, before);
    });
    if (!page.length) tbody.replaceChildren(h("tr", {}, h("td", { colSpan: cols.length + 1, class: "empty" }, fleet.rows.length ? "No machine matches." : "No machines yet: they appear when the scheduler reports them.")));
    while (tbody.children.length > (page.length ? at : 1)) tbody.lastElementChild.remove();
    const me = ++drawing;
    // Each row left for later goes where it belongs: every row above it is
    // in by then.
    if (later.length) requestAnimationFrame(() => setTimeout(() => { if (me === drawing && !left) for (const i of later) place(page[i], i, cols, colsKey, drawnRows); }));
    picked.textContent = `${number(selected.size)} selected`;
    selectAll.textContent = `Select all ${number(shown.length)} ${v.q || v.state ? "matching" : "machines"}`;
    selectAll.disabled = !shown.length;
    selectNone.disabled = !selected.size;
    bulk.update();
    refocus(focus);
    patch(pager,
      h("span", {}, shown.length ? `${number(first + 1)}–${number(first + page.length)} of ${number(shown.length)}` : "0 machines"),
      h("button", { type: "button", disabled: v.p <= 1, onclick: () => { v.p--; update(); } }, "Previous"),
      h("span", {}, `Page ${v.p} of ${pages}`),
      h("button", { type: "button", disabled: v.p >= pages, onclick: () => { v.p++; update(); } }, "Next"));
  }

  // place puts r's row, as drawnRow gives it, at index i of the table,
  // unless it is there already: only the rows that changed, came or moved
  // are put in.
  function place(r, i, cols, colsKey, before) {
    const d = drawnRow(r, cols, colsKey, before);
    drawnRows.set(r.s.id, d);
    if (tbody.children[i] !== d.tr) tbody.insertBefore(d.tr, tbody.children[i] || null);
  }

  // drawnRow is the row of r as the last draw left it (in before) when it
  // is current, its selection brought up to date, else a new one: a draw
  // the feed causes replaces only the rows that changed, and a press on
  // any other row, or its checkbox, is not lost to it.
  function drawnRow(r, cols, colsKey, before) {
    const id = r.s.id;
    const sel = selected.has(id);
    const old = current(r, colsKey, before);
    if (old) {
      old.tr.classList.toggle("selected", sel);
      old.tr.querySelector("td[data-col=sel] input").checked = sel;
      return old;
    }
    return { tr: row(r, cols), s: r.s, x: r.x, cols: colsKey, marked: isMarked(id) };
  }
  // current is the drawn row of r in before when it shows the same
  // machine, pending change and columns. A row marked as changed is drawn
  // again until the mark is off.
  const current = (r, colsKey, before) => {
    const old = before.get(r.s.id);
    return old && old.s === r.s && old.x === r.x && old.cols === colsKey && !old.marked && !isMarked(r.s.id) ? old : null;
  };
  const isMarked = (id) => Date.now() - (fleet.marks.get(id) ?? -Infinity) < MARK;

  // row is a machine's row; one the feed changed a moment ago is marked,
  // its highlight fading from where it was at the last draw.
  function row(r, cols) {
    const id = r.s.id;
    const since = Date.now() - (fleet.marks.get(id) ?? -Infinity);
    const marked = since < MARK;
    const tr = h("tr", { class: [selected.has(id) ? "selected" : "", marked ? "changed" : ""].join(" ").trim() || null, onclick: (e) => toggle(e, id) },
      h("td", { "data-col": "sel" }, h("input", { type: "checkbox", checked: selected.has(id), "aria-label": "Select " + id })),
      cols.map((c) => h("td", { "data-col": c.key, "data-label": c.key === "id" ? null : c.label, title: CUT.has(c.key) ? c.value(r) : null },
        (c.cell ? c.cell(r) : c.value(r)) || null, c.key === "id" && marked ? h("span", { class: "sr-only" }, " (just changed)") : null)));
    tr.dataset.id = id;
    if (marked) tr.style.animationDelay = `-${since}ms`;
    return tr;
  }

  // focused names the control of the table that has the focus, so that a
  // draw the feed causes does not take it from the keyboard's user.
  function focused() {
    const el = document.activeElement;
    const tr = el && table.contains(el) ? el.closest("tr[data-id]") : null;
    if (!tr) return null;
    return { id: tr.dataset.id, col: el.closest("td")?.dataset.col, tag: el.tagName };
  }
  function refocus(f) {
    if (!f) return;
    const tr = [...table.querySelectorAll("tr[data-id]")].find((t) => t.dataset.id === f.id);
    const td = tr && [...tr.children].find((t) => t.dataset.col === f.col);
    td?.querySelector(f.tag)?.focus({ preventScroll: true });
  }

  // toggle selects or unselects a row clicked anywhere but on a link or control.
  function toggle(e, id) {
    if (e.target.closest("a, button, summary") || (e.target.matches("input") && e.target.type !== "checkbox")) return;
    if (selected.has(id)) selected.delete(id); else selected.add(id);
    draw();
  }

  function drawCounts(perState, total) {
    const item = (state, label, n) => h("li", {}, h("a", {
      href: href("fleet", { state, q: v.q }), "aria-current": v.state === state ? "true" : null, class: state ? "s-" + state.toLowerCase() : "",
      onclick: (e) => { e.preventDefault(); v.state = state; v.p = 1; update(); },
    }, h("span", { class: "n" }, number(n)), " ", label));
    patch(counts, item("", "all", total), ...STATES.filter((s) => perState[s] || s === v.state).map((s) => item(s, s, perState[s])));
  }

  function sortBy(key) {
    v.dir = v.sort === key && v.dir === "asc" ? "desc" : "asc";
    v.sort = key;
    v.p = 1;
    update();
    table.querySelector(`button[data-col="${key}"]`)?.focus();
  }

  // reload lists the fleet again and follows the feed from the new list:
  // the first visit, the Refresh button.
  async function reload() {
    try {
      await listAgain(false);
      followFleet();
    } catch { /* listAgain shows why */ }
  }

  // listAgain lists the fleet; refused says the feed refused the list's
  // cursor (the follower lists again so, and follows on by itself).
  async function listAgain(refused) {
    status.textContent = "Loading…";
    refresh.disabled = true;
    try {
      const asked = loading || load();
      loading = null;
      await asked;
      relisted = refused;
      // The page says so for a moment.
      if (refused) setTimeout(() => { relisted = false; if (fleet) updated(); }, 10000);
      errors.replaceChildren();
      updated();
      draw();
    } catch (e) {
      errors.replaceChildren(problem(e, reload));
      status.textContent = "";
      throw e;
    } finally {
      refresh.disabled = false;
    }
  }

  let relisted = false;
  function updated() {
    status.replaceChildren(relisted ? "Listed again (the change feed no longer held this list's changes); updated " : "Updated ", time(fleet.at));
  }

  // While the feed answers, the page holds the list it listed once and
  // applies the changes; a draw that changes bring waits until a second
  // after the last, so a busy feed repaints at most once a second.
  let feed = null;
  let timer = 0;
  let redraw = 0;
  let unmark = 0;
  let drawn = 0;
  let lastExpiring = 0;
  let expiringDue = 0;
  function followFleet() {
    if (left) return;
    if (feed) { feed.restart(); return; }
    if (!fleet.cursor) { // an API without the feed: list every minute, as before
      live.show("offline", "none");
      clearInterval(timer);
      timer = setInterval(() => { if (!document.hidden) reload(); }, 60000);
      return;
    }
    feed = follow({
      list: () => fleet,
      apply: (changes) => {
        const { states, deleted } = apply(changes);
        if (states && !fleet.expiring) expiringSoon();
        for (const id of deleted) selected.delete(id);
        updated();
        drawSoon();
        // and once more when the marks are over, to take them off
        clearTimeout(unmark);
        unmark = setTimeout(drawSoon, MARK);
      },
      relist: () => listAgain(true),
      show: live.show,
    });
  }

  function drawSoon() {
    if (!redraw && !left) redraw = setTimeout(liveDraw, Math.max(0, drawn + 1000 - Date.now()));
  }
  // A draw the feed causes waits while the pointer is on the selection bar
  // or the bulk form (see pointerOn): the counts above them change height
  // with the fleet (a state seen first, a narrow screen), and would move
  // the button aimed at. The table says aria-busy meanwhile.
  const aiming = pointerOn([selectbar, bulk.panel], () => { if (table.hasAttribute("aria-busy")) drawSoon(); });
  function liveDraw() {
    redraw = 0;
    if (aiming()) table.setAttribute("aria-busy", "true");
    else draw();
  }

  // expiringSoon reads the pending changes again after state changes, at
  // most once every EXPIRING_EVERY.
  function expiringSoon() {
    if (expiringDue) return;
    expiringDue = setTimeout(async () => {
      lastExpiring = Date.now();
      try { if (await pendingAgain()) drawSoon(); } catch { /* the next state change reads them again */ }
      expiringDue = 0;
    }, Math.max(0, lastExpiring + EXPIRING_EVERY - Date.now()));
  }

  update();
  let left = false;
  if (held) {
    updated();
    followFleet();
    if (fleet.stale) { fleet.stale = false; if (!fleet.expiring) expiringSoon(); }
  } else reload();
  return () => {
    left = true;
    feed?.stop();
    clearInterval(timer);
    clearTimeout(redraw);
    clearTimeout(unmark);
    clearTimeout(expiringDue);
    bulk.stop();
    if (pendingAddress) { clearTimeout(pendingAddress); }
  };
}

// forget says the fleet held is out of date after a change made on another
// page: one that follows the feed catches up from its cursor at the next
// visit (and reads the pending changes again when the feed carries none);
// one without a feed is dropped, so the next visit lists it.
export function forget() {
  if (fleet?.cursor) fleet.stale = true;
  else fleet = null;
}

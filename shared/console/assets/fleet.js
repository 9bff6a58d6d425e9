// The fleet page: every machine, counts per state, search by id, host,
// rack, attributes, message and user, sortable columns with the capacity the
// reports carry, the pending expiring change with a live countdown, and a
// selection that bulk.js changes at once. On a narrow screen each row is a
// card. It stays fast on 100,000 machines: the list is fetched once,
// each sort order is computed once, a search is a few indexOf calls over
// one string of the rows' search text (see index), and only one page of
// rows (50 by default) is ever in the DOM.

import { h, field } from "./dom.js";
import * as api from "./api.js";
import { href, replace } from "./router.js";
import { time, number, size } from "./format.js";
import { badge } from "./badge.js";
import { problem, info } from "./notice.js";
import { linkTasks } from "./tasklinks.js";
import { bulkPanel } from "./bulk.js";

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

// The fleet as last fetched, shared by visits to the page.
let fleet = null;

async function load() {
  const [list, exp] = await Promise.all([api.slaves(), api.expiring()]);
  const byId = new Map(exp.map((x) => [x.machineId, x]));
  const rows = list.map((s) => ({ s, x: byId.get(s.id) }));
  fleet = { rows, at: Date.now(), sorted: new Map([["id:asc", rows]]), indexes: new Map(), truncated: list.truncated };
  // The search index is built when the browser is idle after the first
  // paint, not before it.
  (window.requestIdleCallback || setTimeout)(() => index(rows));
}

function sorted(key, dir) {
  const name = key + ":" + dir;
  let out = fleet.sorted.get(name);
  if (out) return out;
  const col = COLUMNS.find((c) => c.key === key) || COLUMNS[0];
  const keyed = fleet.rows.map((r) => [col.value(r), r]);
  const sign = dir === "desc" ? -1 : 1;
  keyed.sort((a, b) => (a[0] < b[0] ? -sign : a[0] > b[0] ? sign : a[1].s.id < b[1].s.id ? -1 : 1));
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
    const s = order[i].s;
    let text = s.id + "\n" + s.host + "\n" + s.rackId + "\n" + (s.currentState.message || "") + "\n" + (s.currentState.user || "");
    for (const k in s.attributes) text += "\n" + k + "=" + s.attributes[k];
    parts[i] = text.toLowerCase().replaceAll("\u0001", ""); // the separator is never in a row
    starts[i] = pos;
    pos += parts[i].length + 1;
  }
  starts[order.length] = pos;
  ix = { text: parts.join("\u0001"), starts };
  fleet.indexes.set(order, ix);
  return ix;
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
  let columns = store.get("fleet.columns", DEFAULT_COLUMNS).filter((k) => COLUMNS.some((c) => c.key === k));
  if (!columns.length) columns = DEFAULT_COLUMNS;

  const status = h("p", { class: "muted", "aria-live": "polite" });
  const counts = h("ul", { class: "counts", "aria-label": "Machines per state" });
  const search = h("input", { type: "search", value: v.q, placeholder: "id, host, rack, key=value, message or user", autocomplete: "off", spellcheck: false });
  const table = h("table", { class: "grid fleet" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const errors = h("div");
  const refresh = h("button", { type: "button", onclick: () => reload() }, "Refresh");
  // The selection is machine ids, kept across filters and pages; bulk.js
  // changes them.
  const selected = new Set();
  let shown = [];
  const picked = h("span", { "aria-live": "polite" });
  const selectAll = h("button", { type: "button", onclick: () => { for (const r of shown) selected.add(r.s.id); draw(); } });
  const selectNone = h("button", { type: "button", onclick: () => { selected.clear(); draw(); } }, "Clear selection");
  const bulk = bulkPanel({
    ids: () => [...selected],
    select: (ids) => { selected.clear(); for (const i of ids) selected.add(i); draw(); },
    states: async () => { await load(); return new Map(fleet.rows.map((r) => [r.s.id, r.s.currentState.state])); },
    changed: () => reload(),
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

  root.replaceChildren(
    h("div", { class: "title" }, h("h1", {}, "Fleet"), status, refresh),
    errors, counts,
    h("div", { class: "toolbar" },
      field("Search", search),
      field("Per page", size),
      chooser),
    h("div", { class: "selectbar" }, picked, selectAll, selectNone),
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
    const q = v.q.trim().toLowerCase().replaceAll("\u0001", "");
    const perState = Object.fromEntries(STATES.map((s) => [s, 0]));
    const found = matching(sorted(v.sort, v.dir), q);
    const total = found.length;
    shown = [];
    for (const r of found) {
      const st = r.s.currentState.state;
      perState[st]++;
      if (!v.state || st === v.state) shown.push(r);
    }
    drawCounts(perState, total);
    const pages = Math.max(1, Math.ceil(shown.length / v.size));
    v.p = Math.min(v.p, pages);
    const first = (v.p - 1) * v.size;
    const page = shown.slice(first, first + v.size);
    const cols = COLUMNS.filter((c) => columns.includes(c.key));
    const sortName = COLUMNS.find((c) => c.key === v.sort).label;
    table.replaceChildren(
      h("caption", { class: "sr-only" }, `Machines${v.state ? " in state " + v.state : ""}${q ? ` matching "${v.q}"` : ""}, sorted by ${sortName} ${v.dir === "asc" ? "ascending" : "descending"}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col", class: "sel" }, h("input", { type: "checkbox", "aria-label": "Select every machine on this page",
        checked: page.length > 0 && page.every((r) => selected.has(r.s.id)),
        onchange: (e) => { for (const r of page) { if (e.target.checked) selected.add(r.s.id); else selected.delete(r.s.id); } draw(); } })), cols.map((c) => h("th", { scope: "col", "data-col": c.key, "aria-sort": c.key === v.sort ? (v.dir === "asc" ? "ascending" : "descending") : null },
        h("button", { type: "button", class: "sort", "data-col": c.key, onclick: () => sortBy(c.key) }, c.label,
          h("span", { "aria-hidden": "true" }, c.key === v.sort ? (v.dir === "asc" ? " ▲" : " ▼") : "")))))),
      h("tbody", {}, page.length
        ? page.map((r) => h("tr", { class: selected.has(r.s.id) ? "selected" : null, onclick: (e) => toggle(e, r.s.id) },
          h("td", { "data-col": "sel" }, h("input", { type: "checkbox", checked: selected.has(r.s.id), "aria-label": "Select " + r.s.id })),
          cols.map((c) => h("td", { "data-col": c.key, "data-label": c.key === "id" ? null : c.label, title: CUT.has(c.key) ? c.value(r) : null }, (c.cell ? c.cell(r) : c.value(r)) || null))))
        : h("tr", {}, h("td", { colSpan: cols.length + 1, class: "empty" }, fleet.rows.length ? "No machine matches." : "No machines yet: they appear when the scheduler reports them."))));
    picked.textContent = `${number(selected.size)} selected`;
    selectAll.textContent = `Select all ${number(shown.length)} ${v.q || v.state ? "matching" : "machines"}`;
    selectAll.disabled = !shown.length;
    selectNone.disabled = !selected.size;
    bulk.update();
    pager.replaceChildren(
      h("span", {}, shown.length ? `${number(first + 1)}–${number(first + page.length)} of ${number(shown.length)}` : "0 machines"),
      h("button", { type: "button", disabled: v.p <= 1, onclick: () => { v.p--; update(); } }, "Previous"),
      h("span", {}, `Page ${v.p} of ${pages}`),
      h("button", { type: "button", disabled: v.p >= pages, onclick: () => { v.p++; update(); } }, "Next"));
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
    counts.replaceChildren(item("", "all", total), ...STATES.filter((s) => perState[s] || s === v.state).map((s) => item(s, s, perState[s])));
  }

  function sortBy(key) {
    v.dir = v.sort === key && v.dir === "asc" ? "desc" : "asc";
    v.sort = key;
    v.p = 1;
    update();
    table.querySelector(`button[data-col="${key}"]`)?.focus();
  }

  async function reload() {
    status.textContent = "Loading…";
    refresh.disabled = true;
    try {
      await load();
      const cut = fleet.truncated;
      errors.replaceChildren(cut ? info(`The API answered the first ${number(cut.count)} of ${number(cut.total)} machines by id: the whole list did not fit in one answer.`) : "");
      status.replaceChildren("Updated ", time(fleet.at));
      draw();
    } catch (e) {
      errors.replaceChildren(problem(e, reload));
      status.textContent = "";
    } finally {
      refresh.disabled = false;
    }
  }

  update();
  if (fleet && Date.now() - fleet.at < 60000) status.replaceChildren("Updated ", time(fleet.at));
  else reload();
  const timer = setInterval(() => { if (!document.hidden) reload(); }, 60000);
  return () => { clearInterval(timer); bulk.stop(); if (pendingAddress) { clearTimeout(pendingAddress); } };
}

// forget drops the cached fleet after a change, so the next visit fetches it.
export function forget() { fleet = null; }

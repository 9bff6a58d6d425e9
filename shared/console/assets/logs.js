// The logs page: a task's, a request's or a deploy's logs in a time window,
// page by page through the search route. "Load more" sends the previous
// page's continuation tokens, so every object shows once; the window
// (timewindow.js) is fixed when the lookup starts, so later pages do not
// slide with the clock.

import { h, field, id } from "./dom.js";
import * as api from "./api.js";
import { href, replace } from "./router.js";
import { size, stamp, ago } from "./format.js";
import { problem, info } from "./notice.js";
import { windowPicker } from "./timewindow.js";

const BY = [["task", "Task"], ["request", "Request"], ["deploy", "Request and deploy"]];
const PAGE = 50;

export function render(root, route) {
  const p = route.params;
  const name = id("by");
  let by = BY.some(([k]) => k === p.get("by")) ? p.get("by") : "task";
  const task = h("input", { value: p.get("task") || "", spellcheck: false, autocomplete: "off", placeholder: "web-api-v42-1793491200000-0-node17-us_east_1a" });
  const request = h("input", { value: p.get("request") || "", spellcheck: false, autocomplete: "off", placeholder: "web-api" });
  const deploy = h("input", { value: p.get("deploy") || "", spellcheck: false, autocomplete: "off", placeholder: "v42" });
  const win = windowPicker(p);
  const taskField = field("Task id", task, "Its logs from when it started.");
  const requestField = field("Request id", request);
  const deployField = field("Deploy id", deploy);
  const results = h("section", { "aria-live": "polite", "aria-label": "Results" });

  const radios = BY.map(([k, l]) => h("label", { class: "choice" },
    h("input", { type: "radio", name, value: k, checked: k === by, onchange: () => { by = k; sync(); } }), " ", l));

  function sync() {
    taskField.hidden = by !== "task";
    requestField.hidden = deployField.hidden = by === "task";
    deployField.hidden = by !== "deploy";
  }
  sync();

  const form = h("form", { class: "panel", onsubmit: (e) => { e.preventDefault(); lookup(); }, "aria-labelledby": "logs-h" },
    h("fieldset", { class: "choices" }, h("legend", {}, "Look up by"), radios),
    h("div", { class: "row" }, taskField, requestField, deployField),
    h("div", { class: "row" }, field("Window", win.select)),
    win.custom,
    h("div", { class: "buttons" }, h("button", { class: "primary" }, "Find logs")));
  root.replaceChildren(h("h1", { id: "logs-h" }, "Task logs"), form, results);

  function query() {
    const q = { by, ...win.query() };
    if (by === "task") q.task = task.value.trim(); else q.request = request.value.trim();
    if (by === "deploy") q.deploy = deploy.value.trim();
    return q;
  }

  function lookup() {
    const q = query();
    const missing = by === "task" ? !q.task : !q.request || (by === "deploy" && !q.deploy);
    if (missing) {
      results.replaceChildren(problem(new Error("say which " + (by === "task" ? "task" : by === "deploy" ? "request and deploy" : "request") + " to look up")));
      return;
    }
    let range;
    try {
      range = win.range(Date.now());
    } catch (e) {
      results.replaceChildren(problem(e));
      return;
    }
    replace(href("logs", q));
    const body = { maxPerPage: PAGE };
    if (by === "task") body.taskIds = [q.task];
    else body.requestsAndDeploys = { [q.request]: by === "deploy" ? [q.deploy] : [] };
    if (range.start != null) body.start = range.start;
    if (range.end != null) body.end = range.end;
    page(body, new Set(), []);
  }

  async function page(body, seen, shown) {
    const more = results.querySelector("button.more");
    if (more) { more.disabled = true; more.textContent = "Loading…"; }
    else results.replaceChildren(h("p", { class: "muted" }, "Searching…"));
    let res;
    try {
      res = await api.searchLogs(body);
    } catch (e) {
      if (e.status === 404 && /S3 configuration was absent/.test(e.message)) {
        results.replaceChildren(info("S3 is not configured for this deployment (no log buckets), so there are no task logs to look up."));
      } else if (shown.length) {
        results.querySelector(".more-row").replaceChildren(problem(e, () => page(body, seen, shown)));
      } else {
        results.replaceChildren(problem(e, () => page(body, seen, shown)));
      }
      return;
    }
    for (const log of res.results) {
      const k = log.getUrl ? log.getUrl.split("?")[0] : log.key;
      if (!seen.has(k)) { seen.add(k); shown.push(log); }
    }
    const window = `${body.start ? stamp(body.start) : "the lookback"} to ${body.end ? stamp(body.end) : "now"}`;
    if (!shown.length && res.lastPage) {
      results.replaceChildren(info(`No logs in this window (${window}).`));
      return;
    }
    const next = { ...body, continuationTokens: res.continuationTokens };
    results.replaceChildren(
      h("h2", {}, `${shown.length} log${shown.length === 1 ? "" : "s"}${res.lastPage ? "" : " so far"}`),
      h("p", { class: "muted" }, window),
      h("div", { class: "table-wrap" }, h("table", { class: "grid logs" },
        h("caption", { class: "sr-only" }, "Log files"),
        h("thead", {}, h("tr", {}, ["File", "Size", "Last modified", "Start", "End", "Links"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, shown.map(row)))),
      h("div", { class: "more-row" }, res.lastPage
        ? h("p", { class: "muted" }, "That is all.")
        : h("button", { type: "button", class: "more", onclick: () => page(next, seen, shown) }, "Load more")));
  }

  if (p.get("task") || p.get("request")) lookup();
}

// row is one log: its short name, with the full key a click away, and its
// times with their zone (stamp).
function row(log) {
  const file = short(log.key);
  return h("tr", {},
    h("td", { class: "key" }, h("details", {}, h("summary", { title: log.key }, h("span", { class: "file" }, file)),
      h("code", { class: "full" }, log.key))),
    h("td", { "data-label": "Size" }, size(log.size)),
    h("td", { "data-label": "Last modified" }, when(log.lastModified)),
    h("td", { "data-label": "Start" }, log.startTime ? when(log.startTime) : "—"),
    h("td", { "data-label": "End" }, log.endTime ? when(log.endTime) : "—"),
    h("td", { class: "links" }, log.getUrl
      ? [h("a", { href: log.getUrl, target: "_blank", rel: "noopener noreferrer", class: "view", "aria-label": "View " + file }, "View"), " ",
        h("a", { href: log.downloadUrl, rel: "noopener noreferrer", class: "download", "aria-label": "Download " + file }, "Download")]
      : "—"));
}

// short is a key's file name: its last part, without the
// "<taskId>_<index>-<epoch ms>-" the default key layout puts before the
// uploaded file's own name (any other layout shows the whole last part).
function short(key) {
  const last = key.split("/").pop();
  const m = /^.+_\d+-\d{13}-(.+)$/.exec(last);
  return m ? m[1] : last;
}

const when = (t) => h("time", { dateTime: new Date(t).toISOString(), title: ago(t) }, stamp(t));

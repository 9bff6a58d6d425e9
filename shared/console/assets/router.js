// Every page and filter is a URL: #/<page>/<segment>?<params>. Hash routes
// keep the console one page at one path, which is all API Gateway serves
// (GET / and its assets), under any stage name.

export function current() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "fleet", parts: parts.slice(1), params: new URLSearchParams(query) };
}

// href builds a route, leaving out empty parameters.
export function href(parts, params) {
  const path = "#/" + [].concat(parts).map(encodeURIComponent).join("/");
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v != null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? path + "?" + s : path;
}

// replace rewrites the address without a new history entry or a re-render,
// as a filter does on every keystroke.
export function replace(url) {
  history.replaceState(history.state, "", url);
}

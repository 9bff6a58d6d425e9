// Tiny DOM helpers: h() builds an element from attributes and children, so
// the components read as the markup they produce, without a framework.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k in el && k !== "list" && k !== "form") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// id returns a fresh element id, for label/for and aria-describedby pairs.
let seq = 0;
export const id = (prefix) => `${prefix}-${++seq}`;

// field is a labelled form control with an optional hint.
export function field(label, control, hint) {
  control.id ||= id("f");
  const hintEl = hint && h("span", { class: "hint", id: id("hint") }, hint);
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { htmlFor: control.id }, label), control, hintEl);
}

// patch gives el the children given unless it shows them already, so a
// page that refreshes itself keeps every node that did not change: the
// focus, a press under way and the layout stay where they were.
export function patch(el, ...children) {
  const next = document.createDocumentFragment();
  append(next, children);
  if (sameNodes(el.childNodes, next.childNodes)) return;
  el.replaceChildren(next);
}

function sameNodes(a, b) {
  return a.length === b.length && [...a].every((n, i) => same(n, b[i]));
}

// same says whether two nodes show the same. A <time> is its time: the
// page's clock rewrites its words every second.
function same(a, b) {
  if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) return false;
  if (a.nodeType !== Node.ELEMENT_NODE) return a.isEqualNode(b);
  if (a.attributes.length !== b.attributes.length || [...a.attributes].some((x) => b.getAttribute(x.name) !== x.value)) return false;
  return a.nodeName === "TIME" || sameNodes(a.childNodes, b.childNodes);
}

// pointerOn follows the pointer over a page's action areas (a form, a bar
// of buttons): it returns whether the pointer is on one, and calls left
// when it leaves the last. A pointer resting on a button is a press on its
// way, so a page holds a draw that would move or replace what is under it
// until left (a keyboard acts on the focus, which no draw moves).
export function pointerOn(areas, left) {
  let on = 0;
  for (const area of areas) {
    area.addEventListener("pointerenter", () => { on++; });
    area.addEventListener("pointerleave", () => { on = Math.max(0, on - 1); if (!on) left(); });
  }
  return () => on > 0;
}

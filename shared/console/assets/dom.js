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

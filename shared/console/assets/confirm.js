// confirm asks before a change, in a modal <dialog> that says what will
// happen; it resolves true only on the confirming button. The dialog traps
// focus and closes on Escape, as a native dialog does.

import { h } from "./dom.js";

export function confirm({ title, body, action, danger = false }) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title" },
      h("form", { method: "dialog" },
        h("h2", { id: "confirm-title" }, title),
        h("div", { class: "confirm-body" }, body),
        h("div", { class: "buttons" },
          h("button", { value: "cancel", type: "submit" }, "Cancel"),
          h("button", { value: "ok", type: "submit", class: danger ? "danger" : "primary" }, action))));
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue === "ok");
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("button[value=cancel]").focus();
  });
}

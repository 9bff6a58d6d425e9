// badge shows a machine state in its colour, spelled as the API spells it.

import { h } from "./dom.js";

export const badge = (state) => h("span", { class: "badge s-" + state.toLowerCase() }, state);

// linkTasks shows free text (a state change's message) with every task id
// in it as a link to that task's logs: one click from anywhere a task is
// named. A task id is <requestId>-<deployId>-<startedAt ms>-<instance>-<host>-<rack>.

import { h } from "./dom.js";
import { href } from "./router.js";

const TASK = /^[\w.]+(?:-[\w.]+)*-\d{13}-\d+-[\w.]+-[\w.]+$/;

export function linkTasks(text) {
  if (!text || !/\d{13}/.test(text)) return text || "";
  return text.split(/(\s+)/).map((word) => {
    const id = word.replace(/^[("'[]+|[)"'\].,;:!?]+$/g, "");
    if (!TASK.test(id)) return word;
    const at = word.indexOf(id);
    return [word.slice(0, at), h("a", { href: href("logs", { by: "task", task: id, window: "7d" }), title: "Logs of " + id }, id), word.slice(at + id.length)];
  });
}

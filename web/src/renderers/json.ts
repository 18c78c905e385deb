/**
 * Any other game: the snapshot and the last messages as JSON, and a text
 * box that sends what is typed as the action's JSON. Nothing is assumed
 * about the game, so this works for every module (and for Hold'em).
 */

import { el, type GameContext, type Renderer } from "./kit.js";

const KEEP = 20;

export function jsonRenderer(root: HTMLElement, ctx: GameContext): Renderer {
  const snap = el("pre", "—", "json");
  snap.id = "json-snapshot";
  const log = el("pre", "", "json");
  log.id = "json-log";
  log.dataset.count = "0";
  const input = el("textarea");
  input.id = "json-action";
  input.rows = 3;
  input.placeholder = '{"t":"…"}';
  input.setAttribute("aria-label", "action as JSON");
  const send = el("button", "Send action");
  send.type = "submit";
  send.id = "json-send";
  const form = el("form");
  form.id = "json-form";
  form.autocomplete = "off";
  form.append(input, send);
  form.hidden = ctx.seat === null;
  const problem = el("span", "", "status error");
  form.append(problem);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    let data: unknown;
    try {
      data = JSON.parse(input.value);
    } catch (e) {
      problem.textContent = `not JSON: ${(e as Error).message}`;
      return;
    }
    problem.textContent = "";
    void ctx.act(data);
  });
  root.append(el("h3", "Snapshot"), snap, el("h3", `Last ${KEEP} messages`), log, form);

  const messages: string[] = [];
  return {
    snapshot(s) {
      snap.textContent = JSON.stringify(s, null, 2);
    },
    message(m) {
      messages.push(JSON.stringify(m));
      if (messages.length > KEEP) messages.shift();
      log.textContent = messages.join("\n");
      log.dataset.count = String(Number(log.dataset.count) + 1);
    },
    destroy() {},
  };
}

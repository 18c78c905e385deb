/**
 * What a game renderer of the games page (games.ts) is given and must
 * provide. The page owns the connection, the lobby, sitting and standing,
 * and the order of messages (the snapshot first, then each `game` push);
 * a renderer only draws one table of one kind of game into its root element
 * and turns clicks and keys into actions. A leaf module: it imports nothing
 * of the page.
 */

import type { SeatPush } from "herald-client";

/** The page's side, as a renderer sees it. */
export interface GameContext {
  /** Our seat, or null when watching. */
  readonly seat: number | null;
  /** Sends an action; resolves true once the game accepted it, false when it
   * was refused (the page shows the refusal, e.g. error 118, itself). */
  act(data: unknown): Promise<boolean>;
}

/** One table drawn by one renderer. */
export interface Renderer {
  /** The game's snapshot (`sit`'s or `watch`'s reply), applied first, once. */
  snapshot(s: unknown): void;
  /** Each `game` push after the snapshot, in order. */
  message(m: unknown): void;
  /** A seat taken, left, dropped or back (the engine's `seat` push). */
  seat?(p: SeatPush): void;
  /** The table is left: remove listeners and timers. */
  destroy(): void;
}

export type RendererFactory = (root: HTMLElement, ctx: GameContext) => Renderer;

export type Obj = { [key: string]: unknown };

export const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export const el = <K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls !== undefined) e.className = cls;
  return e;
};

export const button = (id: string, text: string, onClick: () => void): HTMLButtonElement => {
  const b = el("button", text);
  b.type = "button";
  b.id = id;
  b.addEventListener("click", onClick);
  return b;
};

/** "seat 1 (you)", "seat 2 (~17)". */
export function seatLabel(seat: number, me: number | null, user?: string | null): string {
  const who = seat === me ? "you" : user ?? "";
  return who ? `seat ${seat} (${who})` : `seat ${seat}`;
}

/**
 * What the poker and games pages share for `play` (docs/protocol.md §5f):
 * taking a seat at a table whose id only the reply names, and a private
 * table's share link.
 *
 * Why `playCatching` holds on to game pushes: the reply names the table,
 * and the pushes the table sends right after it can reach the page's `game`
 * listener before the page's `await` resumes (one long-poll response carries
 * them all); the page, not yet knowing its table, would drop them. So they
 * are caught here while `play` is in flight and handed back with the reply,
 * to be applied after the snapshot as the pages do for `sit`.
 */

import type { Client, GamePush, Played, PlayOptions } from "herald-client";

/** `client.play(options)`, and the game pushes of the table it gave that
 * arrived before this resolved, in order. */
export async function playCatching(client: Client, options: PlayOptions): Promise<{ played: Played; early: GamePush[] }> {
  const caught: GamePush[] = [];
  const off = client.on("game", (g) => caught.push(g));
  try {
    const played = await client.play(options);
    return { played, early: caught.filter((g) => g.table === played.table) };
  } finally {
    off();
  }
}

/** A private table's code as typed by a person: trimmed, upper case. */
export function normalizeCode(text: string): string {
  return text.trim().toUpperCase();
}

/** The link that opens this page and joins the private table of `code`. */
export function shareLink(code: string): string {
  const url = new URL(location.href);
  url.search = "";
  url.hash = "";
  url.searchParams.set("code", code);
  return url.href;
}

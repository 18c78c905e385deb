/**
 * The lobby's tables as the client knows them: a snapshot (the `lobby`
 * reply) amended by `lobby_update` pushes, with no I/O.
 *
 * Why a class of its own: the rule that makes the deltas safe — apply an
 * update only if its `seq` is above the last one applied (docs/protocol.md
 * §5e) — is easy to get subtly wrong in every application; here it is written
 * once, and the result equals a fresh snapshot.
 */

import type { LobbyUpdatePush, TableEntry } from "./messages.js";

export class Lobby {
  /** The tables, keyed by table id. */
  readonly tables = new Map<number, TableEntry>();
  /** The seq of the snapshot or update last applied (-1 before any snapshot). */
  seq = -1;

  /** The branch this lobby follows ("" = all); updates for other paths are ignored. */
  constructor(readonly path = "") {}

  /** Replaces everything with a snapshot (a `lobby` reply). */
  reset(snapshot: { seq: number; tables: readonly TableEntry[] }): void {
    this.tables.clear();
    for (const t of snapshot.tables) this.tables.set(t.table, t);
    this.seq = snapshot.seq;
  }

  /** Applies one update; returns whether it changed anything (false when it
   * is for another path, arrives before a snapshot, or is not newer). */
  apply(update: LobbyUpdatePush): boolean {
    if (update.path !== this.path || this.seq < 0 || update.seq <= this.seq) return false;
    for (const t of update.tables) this.tables.set(t.table, t);
    for (const id of update.removed) this.tables.delete(id);
    this.seq = update.seq;
    return true;
  }
}

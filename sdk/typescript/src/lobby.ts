/**
 * The lobby's tables as the client knows them: a snapshot (the `lobby`
 * reply, possibly preceded by `lobby_page` pushes) amended by `lobby_update`
 * pushes, with no I/O.
 *
 * Why a class of its own: the rules that make the deltas safe
 * (docs/protocol.md §5e) are easy to get subtly wrong in every application;
 * here they are written once, and the result equals a fresh snapshot:
 *
 * - after the snapshot, apply an update only if its `seq` is above the last
 *   one applied;
 * - a large snapshot comes in parts: `lobby_page` pushes, possibly with
 *   `lobby_update` pushes between them (whose `seq` is above the reply's),
 *   then the reply with the last part. Between {@link Lobby.begin} and
 *   {@link Lobby.finish}, pages and updates are applied in the order
 *   received, then the reply's entries; the lobby's `seq` is then the
 *   highest of the reply's and the updates'.
 *
 * {@link Client.lobby} does the second part itself and resolves with the
 * whole snapshot, for {@link Lobby.reset}; `begin`/`page`/`finish` are for
 * code that reads the messages itself.
 */

import type { LobbyPagePush, LobbyUpdatePush, TableEntry } from "./messages.js";

export class Lobby {
  /** The tables, keyed by table id. */
  readonly tables = new Map<number, TableEntry>();
  /** The seq of the snapshot or update last applied (-1 before any snapshot;
   * while loading, the seq of the last update applied, or -1). */
  seq = -1;
  /** A snapshot is being received: between {@link begin} and {@link finish}. */
  loading = false;

  /** The branch this lobby follows ("" = all); messages for other paths are ignored. */
  constructor(readonly path = "") {}

  /** Whether a whole snapshot has been applied (and no new one begun since). */
  get ready(): boolean {
    return !this.loading && this.seq >= 0;
  }

  /** Replaces everything with a whole snapshot (a `lobby` reply that came
   * without pages, or what {@link Client.lobby} resolves with). */
  reset(snapshot: { seq: number; tables: readonly TableEntry[] }): void {
    this.tables.clear();
    for (const t of snapshot.tables) this.tables.set(t.table, t);
    this.seq = snapshot.seq;
    this.loading = false;
  }

  /** Starts receiving a snapshot (call it when sending `lobby`): forgets
   * everything; pages and updates then accumulate until {@link finish}. */
  begin(): void {
    this.tables.clear();
    this.seq = -1;
    this.loading = true;
  }

  /** Applies one page of the snapshot being received; returns whether it
   * did (false when it is for another path or no snapshot was begun). */
  page(page: LobbyPagePush): boolean {
    if (page.path !== this.path || !this.loading) return false;
    for (const t of page.tables) this.tables.set(t.table, t);
    return true;
  }

  /** Ends the snapshot begun with {@link begin} with the `lobby` reply:
   * its entries are applied over the pages and updates received so far.
   * Without a `begin`, the same as {@link reset}. */
  finish(reply: { seq: number; tables: readonly TableEntry[] }): void {
    if (!this.loading) {
      this.reset(reply);
      return;
    }
    for (const t of reply.tables) this.tables.set(t.table, t);
    this.seq = Math.max(this.seq, reply.seq);
    this.loading = false;
  }

  /** Applies one update; returns whether it changed anything (false when it
   * is for another path, arrives before any snapshot was begun, or is not
   * newer than the last one applied). While loading, updates for the path
   * apply in the order received. */
  apply(update: LobbyUpdatePush): boolean {
    if (update.path !== this.path || update.seq <= this.seq) return false;
    if (!this.loading && this.seq < 0) return false;
    for (const t of update.tables) this.tables.set(t.table, t);
    for (const id of update.removed) this.tables.delete(id);
    this.seq = update.seq;
    return true;
  }
}

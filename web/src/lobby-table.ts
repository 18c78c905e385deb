/**
 * The lobby's table rows, shared by the poker page (table.ts) and the game
 * modules' page (games.ts): one row per table, kept in table-id order,
 * created once and updated in place (so a row's buttons keep their focus
 * and listeners across lobby updates), removed when the table goes.
 */

import type { Lobby, TableEntry } from "herald-client";

/** What a page says about its rows. */
export interface RowKind {
  /** A new row for table `t` (its cells and buttons). */
  make(t: TableEntry): HTMLTableRowElement;
  /** The texts of the row's first cells, in order. */
  texts(t: TableEntry): string[];
  /** The table the page sits at or watches, and its seat if seated. */
  current(): { table: number; seat: number | null } | null;
}

/** The texts of the first three cells every page shows: id, path, players. */
export function baseTexts(t: TableEntry): string[] {
  const watchers = t.watchers > 0 ? ` +${t.watchers} watching` : "";
  return [String(t.table), t.path, `${t.players}/${t.seats}${watchers}`];
}

/**
 * Appends to `td` the buttons to sit at and to watch table `table`, each
 * calling `join`; none when the lobby cannot seat anyone there: a table made
 * by `play` (attrs `"play": true`) seats only through `play`, and a private
 * one (`"private": true`) is not watched either (docs/protocol.md §5f).
 * Returns how many it added.
 */
export function joinButtons(
  td: HTMLElement,
  table: number,
  attrs: Record<string, unknown>,
  join: (table: number, mode: "sit" | "watch") => void,
): number {
  const modes = attrs.private === true ? [] : attrs.play === true ? (["watch"] as const) : (["sit", "watch"] as const);
  for (const mode of modes) {
    const b = document.createElement("button");
    b.textContent = mode === "sit" ? "Sit" : "Watch";
    b.className = mode;
    b.type = "button";
    b.setAttribute("aria-label", `${mode === "sit" ? "Sit at" : "Watch"} table ${table}`);
    b.addEventListener("click", () => join(table, mode));
    td.append(b, " ");
  }
  return modes.length;
}

/**
 * Brings `tbody` in line with `lobby`: `rows` maps table ids to their rows
 * (kept by the caller between calls); `status` shows the count and seq.
 */
export function renderLobbyRows(
  lobby: Lobby,
  tbody: HTMLTableSectionElement,
  rows: Map<number, HTMLTableRowElement>,
  kind: RowKind,
  status: HTMLElement,
): void {
  for (const [id, tr] of rows) {
    if (!lobby.tables.has(id)) {
      tr.remove();
      rows.delete(id);
    }
  }
  const tables = [...lobby.tables.values()].sort((a, b) => a.table - b.table);
  const at = kind.current();
  let previous: HTMLTableRowElement | null = null;
  for (const t of tables) {
    let tr = rows.get(t.table);
    if (tr === undefined) {
      tr = kind.make(t);
      rows.set(t.table, tr);
      if (previous === null) tbody.prepend(tr);
      else previous.after(tr);
    }
    previous = tr;
    tr.dataset.players = String(t.players);
    tr.classList.toggle("current", at?.table === t.table);
    kind.texts(t).forEach((text, i) => {
      const td = tr.cells[i];
      if (td !== undefined && td.textContent !== text) td.textContent = text;
    });
    const sit = tr.querySelector<HTMLButtonElement>("button.sit");
    if (sit !== null) sit.disabled = t.players >= t.seats || (at?.table === t.table && at.seat !== null);
    const watch = tr.querySelector<HTMLButtonElement>("button.watch");
    if (watch !== null) watch.disabled = at?.table === t.table;
  }
  status.textContent = `${tables.length} table${tables.length === 1 ? "" : "s"} · seq ${lobby.seq}`;
  status.dataset.seq = String(lobby.seq);
}

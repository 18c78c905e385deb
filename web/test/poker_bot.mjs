// A Hold'em opponent for the end-to-end test, using the TypeScript SDK over
// WebSocket: it sits at a table, checks when it can and calls otherwise (it
// never folds or raises), and reads and writes the table's chat channel
// `table:{id}`. Every game event it hears is kept in `events`, every chat
// message in `chat`, every refused action in `errors`.
import WebSocket from "ws";
import { Client } from "herald-client";

const decoder = new TextDecoder();

export class PokerBot {
  constructor(url) {
    this.client = new Client(url, { WebSocket, transports: ["websocket"], name: "poker bot" });
    this.table = null;
    this.seat = null;
    /** The last `turn` not yet followed by an `action` (to act on once the seat is known). */
    this.pendingTurn = null;
    this.events = [];
    this.seatPushes = [];
    this.chat = [];
    this.errors = [];
    this.client.on("game", (g) => {
      if (g.table !== this.table) return;
      const e = JSON.parse(decoder.decode(g.data));
      this.events.push(e);
      if (e.t === "turn") {
        this.pendingTurn = e;
        this.maybeAct();
      } else if (e.t === "action" || e.t === "result") {
        this.pendingTurn = null;
      }
    });
    this.client.on("seat", (s) => this.seatPushes.push(s));
  }

  async connect() {
    await this.client.connect();
  }

  /** Sits at `table` (any free seat) and joins its chat. */
  async sit(table) {
    this.table = table;
    const reply = await this.client.sit(table);
    this.seat = reply.seat;
    const state = JSON.parse(decoder.decode(reply.data));
    if (state.turn === this.seat) this.pendingTurn = { seat: this.seat, to_call: state.to_call };
    this.maybeAct();
    await this.client.subscribe(`table:${table}`, { onPublication: (p) => this.chat.push(p.json()) });
  }

  say(text) {
    return this.client.publish(`table:${this.table}`, { user: "bot", text });
  }

  maybeAct() {
    const turn = this.pendingTurn;
    if (turn === null || this.seat === null || turn.seat !== this.seat) return;
    this.pendingTurn = null;
    const a = turn.to_call > 0 ? "call" : "check";
    this.client.act(this.table, { a }).catch((e) => this.errors.push(`${a}: ${e.message}`));
  }

  /** The events of type `t` heard so far. */
  heard(t) {
    return this.events.filter((e) => e.t === t);
  }

  close() {
    this.client.close();
  }
}

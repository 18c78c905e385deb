// A Node player for a scripted game, using the TypeScript SDK over
// WebSocket and the module's own `bot` (docs/games.md) to decide: it sits at
// a table, feeds the bot its snapshot and then every `game` push (as the
// engine feeds bench bots), and sends whatever the bot returns as `act`.
// Every message it hears is kept in `events`, every refused action in
// `errors`.
import WebSocket from "ws";
import { Client } from "herald-client";

const decoder = new TextDecoder();

export class ModulePeer {
  /** `bot`: a module's `bot` export ({init(seat), on(memory, kind, msg)}). */
  constructor(url, bot, name = "module peer") {
    this.client = new Client(url, { WebSocket, transports: ["websocket"], name });
    this.bot = bot;
    this.table = null;
    this.seat = null;
    this.memory = null;
    this.snapshot = null;
    /** Pushes that came before the snapshot was fed, fed right after it. */
    this.early = [];
    this.events = [];
    this.errors = [];
    this.client.on("game", (g) => {
      if (g.table !== this.table) return;
      const msg = JSON.parse(decoder.decode(g.data));
      this.events.push(msg);
      if (this.memory === null) this.early.push(msg);
      else this.feed("game", msg);
    });
  }

  async connect() {
    await this.client.connect();
  }

  /** Sits at `table` (any free seat) and starts playing. */
  async sit(table) {
    this.table = table;
    this.start(await this.client.sit(table));
  }

  /** Takes a seat with `play` (docs/protocol.md §5f) and starts playing;
   * returns the reply (its table, seat, code). Over WebSocket every push
   * is an event of its own, handled after this resumes: none is missed
   * for not knowing the table yet. */
  async play(options) {
    const reply = await this.client.play(options);
    this.table = reply.table;
    this.start(reply);
    return reply;
  }

  /** Starts playing from the reply of `sit` or `play`. */
  start(reply) {
    this.seat = reply.seat;
    this.snapshot = JSON.parse(decoder.decode(reply.data));
    this.memory = this.bot.init(this.seat);
    this.feed("snapshot", this.snapshot);
    for (const msg of this.early.splice(0)) this.feed("game", msg);
  }

  feed(kind, msg) {
    const action = this.bot.on(this.memory, kind, msg);
    if (action === undefined) return;
    this.client.act(this.table, action).catch((e) => this.errors.push(`${JSON.stringify(action)}: ${e.message}`));
  }

  /** The messages of type `t` heard so far. */
  heard(t) {
    return this.events.filter((e) => e.t === t);
  }

  close() {
    this.client.close();
  }
}

// Herald's glue between the game engine and a game module (docs/games.md).
// Evaluated once per shard, before the module. It keeps every table's state
// in one Map (Rust holds only a handle), gives the module one `ctx` that
// records effects as a flat array [kind, a, b, ...] read by crates/script,
// checks what the module returns, and never lets a module's exception be
// mistaken for a refusal or the reverse.
(function () {
  "use strict";
  const tables = new Map();
  let fx = null;
  let game = null;
  let bot = null;
  const bots = new Map();
  const random = globalThis.__herald_random;
  delete globalThis.__herald_random;
  const stringify = JSON.stringify;
  const parse = JSON.parse;

  // Nondeterminism the rules must not see (docs/games.md): a table restored
  // on another node must draw and decide exactly what this one would have.
  Math.random = function () {
    throw new Error("Math.random is not available in a game module: use ctx.random()");
  };
  globalThis.Date = function () {
    throw new Error("Date is not available in a game module: time is the table's timers");
  };

  function live(what) {
    if (fx === null) throw new Error(`ctx.${what} used outside the call that received it`);
  }
  function json(what, msg) {
    const s = stringify(msg);
    if (typeof s !== "string") throw new TypeError(`ctx.${what}: the message is not JSON`);
    return s;
  }
  function seatOf(what, seat) {
    if (!Number.isInteger(seat) || seat < 0 || seat > 0xffffffff) {
      throw new TypeError(`ctx.${what}: a seat is a non-negative integer (got ${String(seat)})`);
    }
    return seat;
  }
  function keyOf(what, key) {
    if (typeof key !== "string" || key.length === 0 || key.length > 200) {
      throw new TypeError(`ctx.${what}: a timer key is a non-empty string`);
    }
    return key;
  }
  function msOf(what, ms) {
    if (typeof ms !== "number" || !(ms >= 0) || ms > 2147483647) {
      throw new TypeError(`ctx.${what}: a delay is a number of milliseconds, 0 to 2^31-1`);
    }
    return Math.floor(ms);
  }
  function refusal(refuse, message) {
    return Object.freeze({ refuse, message: String(message) });
  }
  function isRefusal(r) {
    return r !== null && typeof r === "object" &&
      (r.refuse === "out_of_turn" || r.refuse === "illegal" || r.refuse === "malformed") &&
      typeof r.message === "string";
  }

  const ctx = Object.freeze({
    send(seat, msg) { live("send"); fx.push(0, seatOf("send", seat), json("send", msg)); },
    broadcast(msg) { live("broadcast"); fx.push(1, 0, json("broadcast", msg)); },
    players(msg) { live("players"); fx.push(2, 0, json("players", msg)); },
    watchers(msg) { live("watchers"); fx.push(3, 0, json("watchers", msg)); },
    setTimer(key, ms) { live("setTimer"); fx.push(4, msOf("setTimer", ms), keyOf("setTimer", key)); },
    cancelTimer(key) { live("cancelTimer"); fx.push(5, 0, keyOf("cancelTimer", key)); },
    every(ms) {
      live("every");
      ms = msOf("every", ms);
      // At least 10 ms (a shorter period is raised to it); 0 stops.
      fx.push(6, ms === 0 ? 0 : Math.max(ms, 10), "");
    },
    lobby(attrs) {
      live("lobby");
      if (attrs === null || typeof attrs !== "object" || Array.isArray(attrs)) {
        throw new TypeError("ctx.lobby: attributes are an object");
      }
      for (const k of Object.keys(attrs)) {
        const v = attrs[k];
        fx.push(7, k, json("lobby", v === undefined ? null : v));
      }
    },
    handEnded() { live("handEnded"); fx.push(8, 0, ""); },
    unseat(seat, reason) { live("unseat"); fx.push(9, seatOf("unseat", seat), String(reason)); },
    random() { live("random"); return random(); },
    randomInt(n) {
      live("randomInt");
      if (!Number.isSafeInteger(n) || n <= 0) throw new RangeError("ctx.randomInt: n is a positive safe integer");
      return Math.floor(random() * n);
    },
    outOfTurn(message) { return refusal("out_of_turn", message); },
    illegal(message) { return refusal("illegal", message); },
    malformed(message) { return refusal("malformed", message); },
  });

  function table(h) {
    const t = tables.get(h);
    if (t === undefined) throw new Error(`no table ${h} in this shard`);
    return t;
  }
  function data(s) {
    return s === "" ? null : parse(s);
  }
  // Runs `f` with a fresh effects array; a state returned replaces the old.
  function effects(t, f) {
    fx = [];
    try {
      const r = f();
      if (r !== undefined && t !== null) t.state = r;
      return fx;
    } finally {
      fx = null;
    }
  }
  const REQUIRED = ["created", "sat", "left", "act", "snapshot"];
  const OPTIONAL = ["canSit", "dropped", "returned", "timer", "tick"];

  globalThis.__herald = Object.freeze({
    // Checks the module's exports: "" if fine, else what is wrong.
    install(g, b) {
      if (g === null || typeof g !== "object") return "the module exports no `game` object";
      for (const f of REQUIRED) {
        if (typeof g[f] !== "function") return `game.${f} is ${typeof g[f]}, not a function`;
      }
      for (const f of OPTIONAL) {
        if (g[f] !== undefined && typeof g[f] !== "function") return `game.${f} is ${typeof g[f]}, not a function`;
      }
      if (b !== undefined) {
        if (b === null || typeof b !== "object" || typeof b.init !== "function" || typeof b.on !== "function") {
          return "`bot` is exported but is not { init(seat), on(memory, kind, msg) }";
        }
      }
      game = g;
      bot = b === undefined ? null : b;
      return "";
    },
    hasBot() { return bot !== null; },
    hasTick() { return typeof game.tick === "function"; },
    create(h, info) {
      fx = [];
      try {
        const s = game.created(ctx, Object.freeze(info));
        if (s === undefined) throw new TypeError("game.created returned nothing: it must return the table's state");
        tables.set(h, { state: s });
        return fx;
      } finally {
        fx = null;
      }
    },
    restore(h, state) { tables.set(h, { state: parse(state) }); },
    drop(h) { tables.delete(h); },
    canSit(h, seat, user, d) {
      let arg;
      try { arg = data(d); } catch (_) { return "the sit data is not JSON"; }
      if (game.canSit === undefined) return "";
      const r = game.canSit(table(h).state, seat, user, arg);
      if (r === undefined) return "";
      if (typeof r === "string") return r === "" ? "refused" : r;
      throw new TypeError(`game.canSit returned ${typeof r}: nothing to allow, a string to refuse`);
    },
    sat(h, seat, user, d) {
      const t = table(h);
      let arg;
      try { arg = data(d); } catch (_) { arg = null; }
      return effects(t, () => game.sat(t.state, ctx, seat, user, arg));
    },
    left(h, seat) { const t = table(h); return effects(t, () => game.left(t.state, ctx, seat)); },
    dropped(h, seat) {
      const t = table(h);
      return game.dropped === undefined ? [] : effects(t, () => game.dropped(t.state, ctx, seat));
    },
    returned(h, seat) {
      const t = table(h);
      return game.returned === undefined ? [] : effects(t, () => game.returned(t.state, ctx, seat));
    },
    timer(h, key) {
      const t = table(h);
      return game.timer === undefined ? [] : effects(t, () => game.timer(t.state, ctx, key));
    },
    tick(h) {
      const t = table(h);
      return game.tick === undefined ? [] : effects(t, () => game.tick(t.state, ctx));
    },
    // An array of effects, or a refusal { refuse, message }.
    act(h, seat, d) {
      const t = table(h);
      let arg;
      try { arg = data(d); } catch (_) { return refusal("malformed", "the action is not JSON"); }
      fx = [];
      try {
        let r;
        try {
          r = game.act(t.state, ctx, seat, arg);
        } catch (e) {
          if (!isRefusal(e)) throw e;
          r = e;
        }
        if (r === undefined) return fx;
        if (isRefusal(r)) return { refuse: r.refuse, message: r.message };
        throw new TypeError(`game.act returned ${stringify(r) ?? typeof r}: nothing to accept, a refusal to refuse`);
      } finally {
        fx = null;
      }
    },
    snapshot(h, seat) {
      const v = game.snapshot(table(h).state, seat < 0 ? null : seat);
      return json("snapshot", v);
    },
    save(h) {
      const s = stringify(table(h).state);
      if (typeof s !== "string") throw new TypeError("the table's state is not JSON");
      return s;
    },
    botInit(h, seat) {
      const m = bot.init(seat);
      bots.set(h, { m: m === undefined ? null : m });
    },
    botOn(h, kind, msg) {
      const b = bots.get(h);
      if (b === undefined) throw new Error(`no bot ${h}`);
      const r = bot.on(b.m, kind, parse(msg));
      if (r === undefined || r === null) return "";
      const s = stringify(r);
      if (typeof s !== "string") throw new TypeError("bot.on returned something that is not JSON");
      return s;
    },
    botDrop(h) { bots.delete(h); },
  });
})();

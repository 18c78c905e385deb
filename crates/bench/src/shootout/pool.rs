//! The connection side of `broadcast` and `echo`: a pool of shootout clients
//! in one process, driven by commands from the [`Driver`](super::driver)
//! and answering with events.
//!
//! The split mirrors the reference tool's local and remote client pools: the
//! driver decides (how many clients, which one sends, when a step ends) and
//! pools act, in the same process or in worker processes over pipes (above
//! ~19,000 connections one process runs out of file descriptors). Commands
//! and events are plain serde enums so both paths are the same code.
//!
//! Per received message the pool does constant work and allocates nothing:
//! the message is scanned in place for its type and send time, the
//! receiving client's count and checksum are bumped, and the broadcast's
//! delivery tally is found by a short backwards search (the broadcast is
//! nearly always among the last few sent).
//!
//! Exactly-once verification: every client keeps how many counted
//! broadcasts it received and the wrapping sum of a 64-bit hash of each
//! one's send time. At the end the driver sends the authoritative list of
//! broadcasts and each client's count and sum are compared with those of the
//! broadcasts sent since it joined. A lost delivery, a duplicate, or a loss
//! hidden by a duplicate all change the sum (the chance that they cancel out
//! is about 2^-64).

use std::net::IpAddr;
use std::time::Instant;

use herald_proto::shootout::ShootoutKind;
use herald_ws::{Message, OpCode};
use serde::{Deserialize, Serialize};

use super::wire::{self, ServerType};
use crate::clock;
use crate::engine::{CloseReason, ConnId, Io};
use crate::target::Target;
use crate::BenchError;

/// What a pool needs to know, sent once to each worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PoolConfig {
    /// The server's URL.
    pub url: String,
    /// JSON or binary messages.
    pub mode: ServerType,
    /// Broadcast (true) or echo (false).
    pub broadcast: bool,
    /// Padding bytes per message.
    pub padding: usize,
    /// Source addresses, used round-robin.
    pub local_addrs: Vec<IpAddr>,
    /// Connects in progress at once.
    pub connect_concurrency: usize,
    /// This pool's index among all pools.
    pub worker: u32,
    /// How many pools there are.
    pub workers: u32,
}

/// Driver → pool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum PoolCmd {
    /// Open `n` more clients, who join during step `step`.
    Connect {
        /// How many.
        n: usize,
        /// The step they will first be measured in.
        step: u32,
    },
    /// Have local client `client` send one echo or broadcast.
    Send {
        /// Local index.
        client: usize,
        /// A membership probe, not part of the sample.
        warmup: bool,
    },
    /// Check every client against the broadcasts sent (send time, step).
    Verify {
        /// Every counted broadcast of the run.
        broadcasts: Vec<(i64, u32)>,
    },
}

/// Pool → driver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum PoolEvent {
    /// The clients of the last `Connect` are all open.
    Connected {
        /// Which pool.
        worker: u32,
        /// How many clients it now has.
        clients: usize,
    },
    /// A client got the answer to its own request (`echo` back, or
    /// `broadcastResult`).
    Rtt {
        /// The request's send time, which identifies it.
        send_ns: i64,
        /// Now minus the send time.
        rtt_ns: i64,
        /// It was a membership probe.
        warmup: bool,
    },
    /// Every client of this pool has received the broadcast.
    Complete {
        /// Which broadcast.
        send_ns: i64,
        /// When the last of them got it.
        last_ns: i64,
    },
    /// The answer to `Verify`.
    Verified {
        /// Which pool.
        worker: u32,
        /// What it found.
        report: VerifyReport,
    },
    /// Something fatal happened (a connection failed or closed, the server
    /// sent something unreadable).
    Failed {
        /// Which pool.
        worker: u32,
        /// What happened.
        message: String,
    },
}

/// One pool's verification result; reports from all pools are summed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Clients checked.
    pub clients: u64,
    /// Broadcast deliveries that should have happened.
    pub expected: u64,
    /// Broadcast deliveries counted.
    pub received: u64,
    /// Sum over clients of deliveries missing.
    pub missing: u64,
    /// Sum over clients of deliveries beyond those expected.
    pub extra: u64,
    /// Clients that missed at least one broadcast.
    pub clients_missing: u64,
    /// Clients that got at least one broadcast too many.
    pub clients_extra: u64,
    /// Clients with the right count but the wrong set of broadcasts (a loss
    /// hidden by a duplicate, or a broadcast nobody sent).
    pub clients_wrong_set: u64,
    /// Answers (`echo`, `broadcastResult`) that matched no request in
    /// flight: duplicates or inventions.
    pub unmatched_answers: u64,
    /// Messages of a type that should not arrive in this scenario.
    pub unexpected_messages: u64,
    /// Requests still waiting for their answer.
    pub unanswered: u64,
}

impl VerifyReport {
    /// Adds another pool's report to this one.
    pub fn merge(&mut self, o: &VerifyReport) {
        self.clients += o.clients;
        self.expected += o.expected;
        self.received += o.received;
        self.missing += o.missing;
        self.extra += o.extra;
        self.clients_missing += o.clients_missing;
        self.clients_extra += o.clients_extra;
        self.clients_wrong_set += o.clients_wrong_set;
        self.unmatched_answers += o.unmatched_answers;
        self.unexpected_messages += o.unexpected_messages;
        self.unanswered += o.unanswered;
    }

    /// True when every client got every broadcast exactly once and every
    /// request exactly one answer.
    pub fn passed(&self) -> bool {
        self.missing == 0
            && self.extra == 0
            && self.clients_wrong_set == 0
            && self.unmatched_answers == 0
            && self.unexpected_messages == 0
            && self.unanswered == 0
    }
}

/// One client.
struct Client {
    conn: ConnId,
    /// The step from which it must receive every broadcast.
    joined_step: u32,
    /// Counted broadcasts received.
    count: u32,
    /// Wrapping sum of `bcast_hash` of each received broadcast.
    hash: u64,
}

/// Delivery tally of one broadcast in this pool.
struct Track {
    send_ns: i64,
    count: u32,
    last_ns: i64,
    done: bool,
}

/// How many tallies to keep before dropping the oldest half.
const MAX_TRACKS: usize = 8192;

/// The pool.
pub(crate) struct Pool {
    cfg: PoolConfig,
    target: Target,
    padding: Vec<u8>,
    clients: Vec<Client>,
    /// Clients not yet asked to connect, and connects in progress.
    to_start: usize,
    connecting: usize,
    joining_step: u32,
    open: usize,
    tracks: Vec<Track>,
    /// Send times of requests waiting for their answer.
    outstanding: Vec<i64>,
    last_stamp: i64,
    unmatched: u64,
    unexpected: u64,
    scratch: Vec<u8>,
    /// Events for the driver, drained by the caller.
    pub events: Vec<PoolEvent>,
}

impl Pool {
    /// A pool with no clients yet.
    pub fn new(cfg: PoolConfig) -> Result<Pool, BenchError> {
        let target = Target::parse(&cfg.url)?;
        Ok(Pool {
            padding: wire::padding(cfg.padding),
            target,
            cfg,
            clients: Vec::new(),
            to_start: 0,
            connecting: 0,
            joining_step: 0,
            open: 0,
            tracks: Vec::new(),
            outstanding: Vec::new(),
            last_stamp: 0,
            unmatched: 0,
            unexpected: 0,
            scratch: Vec::with_capacity(256),
            events: Vec::new(),
        })
    }

    /// Carries out a driver command.
    pub fn command(&mut self, io: &mut Io, cmd: PoolCmd) {
        match cmd {
            PoolCmd::Connect { n, step } => {
                self.to_start += n;
                self.joining_step = step;
                self.start_connects(io);
                self.check_connected();
            }
            PoolCmd::Send { client, warmup } => self.send(io, client, warmup),
            PoolCmd::Verify { broadcasts } => {
                let report = self.verify(&broadcasts);
                self.events.push(PoolEvent::Verified {
                    worker: self.cfg.worker,
                    report,
                });
            }
        }
    }

    /// Starts connects up to the concurrency limit.
    fn start_connects(&mut self, io: &mut Io) {
        while self.to_start > 0 && self.connecting < self.cfg.connect_concurrency.max(1) {
            let index = self.clients.len();
            let local = match self.cfg.local_addrs.len() {
                0 => None,
                n => self.cfg.local_addrs.get(index % n).copied(),
            };
            match io.connect(&self.target, local, index as u64) {
                Ok(conn) => {
                    self.clients.push(Client {
                        conn,
                        joined_step: self.joining_step,
                        count: 0,
                        hash: 0,
                    });
                    self.to_start -= 1;
                    self.connecting += 1;
                }
                Err(e) => {
                    self.fail(format!(
                        "cannot open client {} (of {} so far): {e}",
                        index + 1,
                        self.clients.len()
                    ));
                    self.to_start = 0;
                    return;
                }
            }
        }
    }

    fn check_connected(&mut self) {
        if self.to_start == 0 && self.connecting == 0 {
            self.events.push(PoolEvent::Connected {
                worker: self.cfg.worker,
                clients: self.open,
            });
        }
    }

    fn fail(&mut self, message: String) {
        self.events.push(PoolEvent::Failed {
            worker: self.cfg.worker,
            message,
        });
    }

    /// The connection `tag` finished its upgrade.
    pub fn on_open(&mut self, io: &mut Io) {
        self.connecting = self.connecting.saturating_sub(1);
        self.open += 1;
        if self.to_start > 0 {
            self.start_connects(io);
        }
        if self.to_start == 0 && self.connecting == 0 {
            self.check_connected();
        }
    }

    /// Connection `tag` ended: always fatal for the shootout.
    pub fn on_close(&mut self, tag: u64, why: CloseReason) {
        self.fail(format!(
            "client {} (of {}): {why}",
            tag + 1,
            self.clients.len()
        ));
    }

    /// A send time unique across pools: congruent to `2 * worker + warmup`
    /// modulo `2 * workers`, so any pool can tell whose it is and whether it
    /// is a probe, and strictly increasing within the pool. It moves the
    /// clock reading by less than `2 * workers` nanoseconds.
    fn send_stamp(&mut self, warmup: bool) -> i64 {
        let m = 2 * i64::from(self.cfg.workers.max(1));
        let code = 2 * i64::from(self.cfg.worker) + i64::from(warmup);
        let now = clock::now_ns();
        let mut stamp = now - now.rem_euclid(m) + code;
        while stamp <= self.last_stamp {
            stamp += m;
        }
        self.last_stamp = stamp;
        stamp
    }

    fn is_warmup(&self, send_ns: i64) -> bool {
        send_ns.rem_euclid(2 * i64::from(self.cfg.workers.max(1))) & 1 == 1
    }

    fn send(&mut self, io: &mut Io, client: usize, warmup: bool) {
        let Some(conn) = self.clients.get(client).map(|c| c.conn) else {
            self.fail(format!(
                "driver asked client {client}, which does not exist"
            ));
            return;
        };
        let kind = if self.cfg.broadcast {
            ShootoutKind::Broadcast
        } else {
            ShootoutKind::Echo
        };
        let stamp = self.send_stamp(warmup);
        self.scratch.clear();
        wire::encode(self.cfg.mode, kind, stamp, &self.padding, &mut self.scratch);
        let opcode = match self.cfg.mode {
            ServerType::Json => OpCode::Text,
            ServerType::Binary => OpCode::Binary,
        };
        if io.send(conn, opcode, &self.scratch) {
            self.outstanding.push(stamp);
        }
    }

    /// A message for client `tag`.
    pub fn on_message(&mut self, tag: u64, msg: Message<'_>, now_ns: i64) {
        let data = match msg {
            Message::Text(d) | Message::Binary(d) => d,
            _ => return,
        };
        let (kind, send_ns) = match wire::scan(self.cfg.mode, data) {
            Ok(found) => found,
            Err(e) => {
                self.fail(format!("client {}: unreadable message: {}", tag + 1, e.0));
                return;
            }
        };
        match (kind, self.cfg.broadcast) {
            (ShootoutKind::Broadcast, true) => self.on_delivery(tag, send_ns, now_ns),
            (ShootoutKind::BroadcastResult, true) | (ShootoutKind::Echo, false) => {
                match self.outstanding.iter().position(|&s| s == send_ns) {
                    Some(i) => {
                        self.outstanding.swap_remove(i);
                        self.events.push(PoolEvent::Rtt {
                            send_ns,
                            rtt_ns: now_ns - send_ns,
                            warmup: self.is_warmup(send_ns),
                        });
                    }
                    None => self.unmatched += 1,
                }
            }
            _ => self.unexpected += 1,
        }
    }

    fn on_delivery(&mut self, tag: u64, send_ns: i64, now_ns: i64) {
        let warmup = self.is_warmup(send_ns);
        if !warmup {
            let Some(client) = usize::try_from(tag)
                .ok()
                .and_then(|i| self.clients.get_mut(i))
            else {
                return;
            };
            client.count += 1;
            client.hash = client.hash.wrapping_add(bcast_hash(send_ns));
        }
        let open = self.open;
        let track = match self.tracks.iter().rposition(|t| t.send_ns == send_ns) {
            Some(i) => &mut self.tracks[i],
            None => {
                if self.tracks.len() >= MAX_TRACKS {
                    self.tracks.drain(..MAX_TRACKS / 2);
                }
                self.tracks.push(Track {
                    send_ns,
                    count: 0,
                    last_ns: now_ns,
                    done: false,
                });
                let last = self.tracks.len() - 1;
                &mut self.tracks[last]
            }
        };
        track.count += 1;
        track.last_ns = now_ns;
        if !track.done && track.count as usize >= open {
            track.done = true;
            self.events.push(PoolEvent::Complete {
                send_ns,
                last_ns: now_ns,
            });
        }
    }

    /// Compares every client with the broadcasts sent since it joined.
    fn verify(&self, broadcasts: &[(i64, u32)]) -> VerifyReport {
        let steps = broadcasts.iter().map(|&(_, s)| s).max().unwrap_or(0) as usize;
        // Per step, then suffix sums: what a client joining at step s must get.
        let mut count = vec![0u64; steps + 2];
        let mut hash = vec![0u64; steps + 2];
        for &(send_ns, step) in broadcasts {
            count[step as usize] += 1;
            hash[step as usize] = hash[step as usize].wrapping_add(bcast_hash(send_ns));
        }
        for s in (0..=steps).rev() {
            count[s] += count[s + 1];
            hash[s] = hash[s].wrapping_add(hash[s + 1]);
        }
        let mut r = VerifyReport {
            clients: self.clients.len() as u64,
            unmatched_answers: self.unmatched,
            unexpected_messages: self.unexpected,
            unanswered: self.outstanding.len() as u64,
            ..VerifyReport::default()
        };
        for c in &self.clients {
            let s = (c.joined_step as usize).min(steps + 1);
            let (want, want_hash) = (count[s], hash[s]);
            let got = u64::from(c.count);
            r.expected += want;
            r.received += got;
            if got < want {
                r.missing += want - got;
                r.clients_missing += 1;
            } else if got > want {
                r.extra += got - want;
                r.clients_extra += 1;
            } else if c.hash != want_hash {
                r.clients_wrong_set += 1;
            }
        }
        r
    }

    /// Moves pending connects along (called every loop turn).
    pub fn tick(&mut self, io: &mut Io, _now: Instant) {
        if self.to_start > 0 && self.connecting < self.cfg.connect_concurrency {
            self.start_connects(io);
        }
    }
}

/// A 64-bit mix of a broadcast's send time (splitmix64's finalizer), so
/// that sums over different sets of broadcasts differ.
fn bcast_hash(send_ns: i64) -> u64 {
    let mut z = (send_ns as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

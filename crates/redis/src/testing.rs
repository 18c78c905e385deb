//! A real `redis-server` for tests (Debian's `redis-server` package): started
//! on a free 127.0.0.1 port with no persistence, killed when dropped, and
//! restartable on the same port to test outages.
//!
//! When `redis-server` is not installed, [`RedisServer::start`] returns `None`
//! so a developer without it sees the cluster tests skip with a message;
//! under CI (`CI` set) it panics instead, because `scripts/test.sh` installs
//! it there and a skip would hide a broken install.
//!
//! [`Sentinels`] starts a master, a replica and three `redis-server
//! --sentinel` (same package) for the fail-over tests (decision 0020),
//! the sentinels optionally with a password of their own
//! ([`Sentinels::start_with_password`]).
//! [`RedisCluster`] starts a Redis Cluster (masters with replicas, joined by
//! `redis-cli --cluster create`) for the cluster tests (decision 0021).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// With persistence: its append-only file's directory (kept across
    /// restarts, removed on drop).
    aof_dir: Option<std::path::PathBuf>,
    /// More arguments (`--replicaof`).
    extra: Vec<String>,
}

/// Runs one command on 127.0.0.1:`port` and returns its reply (`None` if
/// nothing answered, or not readably, within 2 s).
pub fn command(port: u16, args: &[&str]) -> Option<crate::resp::Value> {
    command_as(port, None, args)
}

/// [`command`] after `AUTH password` on the same connection when a
/// password is given (a sentinel or Redis with `requirepass`); the reply
/// is the command's (an `AUTH` refusal makes it `NOAUTH`, which says why).
pub fn command_as(port: u16, password: Option<&str>, args: &[&str]) -> Option<crate::resp::Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut out = bytes::BytesMut::new();
    if let Some(p) = password {
        crate::resp::encode(&["AUTH", p], &mut out);
    }
    crate::resp::encode(args, &mut out);
    s.write_all(&out).ok()?;
    let mut buf = bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    let mut skip = usize::from(password.is_some());
    loop {
        if let Some(v) = crate::resp::decode(&mut buf).ok()? {
            if skip == 0 {
                return Some(v);
            }
            skip -= 1;
            continue;
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl RedisServer {
    /// Starts one, or `None` (outside CI) when `redis-server` is missing.
    pub fn start() -> Option<RedisServer> {
        RedisServer::start_with(false)
    }

    /// Starts one that keeps its data across [`RedisServer::restart`] (an
    /// append-only file, fsynced on every write).
    pub fn start_persistent() -> Option<RedisServer> {
        RedisServer::start_with(true)
    }

    /// Starts a replica of the Redis on 127.0.0.1:`master`.
    pub fn start_replica_of(master: u16) -> Option<RedisServer> {
        RedisServer::start_full(
            false,
            vec!["--replicaof".into(), "127.0.0.1".into(), master.to_string()],
        )
    }

    fn start_with(persistent: bool) -> Option<RedisServer> {
        RedisServer::start_full(persistent, Vec::new())
    }

    fn start_full(persistent: bool, extra: Vec<String>) -> Option<RedisServer> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is not installed (scripts/test.sh installs it with apt)"
            );
            eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        let port = free_port();
        let aof_dir = persistent.then(|| {
            let d =
                std::env::temp_dir().join(format!("herald-redis-{}-{port}", std::process::id()));
            let _ = std::fs::create_dir_all(&d);
            d
        });
        let mut s = RedisServer {
            child: None,
            port,
            aof_dir,
            extra,
        };
        s.restart();
        Some(s)
    }

    /// Makes Redis unresponsive for `seconds` (`DEBUG SLEEP`): a slow Redis.
    /// Returns once the command is sent.
    pub fn stall(&self, seconds: f64) {
        use std::io::Write;
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = write!(s, "DEBUG SLEEP {seconds}\r\n");
            // Keep the connection open while it sleeps; Redis answers later.
            std::thread::spawn(move || {
                use std::io::Read;
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
            });
        }
    }

    /// Runs one command and returns its reply (`None` if Redis could not be
    /// reached or answered nothing readable).
    pub fn command(&self, args: &[&str]) -> Option<crate::resp::Value> {
        command(self.port, args)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops (SIGSTOP, `true`) or resumes (SIGCONT) the process: a replica
    /// stopped acknowledges nothing, its connections stay open.
    pub fn freeze(&self, stopped: bool) {
        if let Some(c) = &self.child {
            let sig = if stopped { "-STOP" } else { "-CONT" };
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
        }
    }

    /// Kills it (SIGKILL: no goodbye to its clients; with no persistence,
    /// everything it held is gone).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Without persistence: the directory it runs in (removed on drop).
    fn scratch_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "herald-redis-{}-{}-scratch",
            std::process::id(),
            self.port
        ))
    }

    /// Starts it (again) on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--enable-debug-command", "local"])
            .args(&self.extra);
        match &self.aof_dir {
            Some(d) => cmd
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .args(["--dir", &d.to_string_lossy()]),
            None => {
                // A directory of its own, emptied on every start: a replica
                // writes the master's data there (dump.rdb) on a full sync,
                // and any Redis started in a directory holding one would load
                // it, so a shared directory would leak data between tests.
                let d = self.scratch_dir();
                let _ = std::fs::remove_dir_all(&d);
                let _ = std::fs::create_dir_all(&d);
                cmd.args(["--appendonly", "no"])
                    .args(["--dir", &d.to_string_lossy()])
            }
        };
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        let Ok(child) = child else {
            panic!("cannot start redis-server");
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(d) = &self.aof_dir {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_dir_all(self.scratch_dir());
    }
}

/// A Sentinel deployment for tests: a master, one replica and three
/// sentinels (quorum 2) watching master `herald`, with a short
/// `down-after-milliseconds` (1 s) and `failover-timeout` (3 s), all on free
/// 127.0.0.1 ports and killed when dropped. The two Redis swap roles in a
/// fail-over: [`Sentinels::master_port`] says which is master now.
#[derive(Debug)]
pub struct Sentinels {
    /// The two Redis: index 0 starts as master, 1 as its replica.
    pub redis: Vec<RedisServer>,
    sentinels: Vec<(u16, Option<Child>)>,
    dir: std::path::PathBuf,
    /// The sentinels' `requirepass`, if they have one.
    password: Option<String>,
}

/// The master name the sentinels watch.
pub const MASTER_NAME: &str = "herald";

impl Sentinels {
    /// Starts them and waits until the sentinels know the replica and each
    /// other (so a fail-over can be agreed); `None` (outside CI) when
    /// `redis-server` is missing.
    pub fn start() -> Option<Sentinels> {
        Sentinels::start_with(None)
    }

    /// As [`Sentinels::start`], the sentinels requiring `password`
    /// (`requirepass`, and `sentinel sentinel-pass` so they still talk to
    /// each other); the two Redis have none.
    pub fn start_with_password(password: &str) -> Option<Sentinels> {
        Sentinels::start_with(Some(password.to_string()))
    }

    fn start_with(password: Option<String>) -> Option<Sentinels> {
        let master = RedisServer::start()?;
        let replica = RedisServer::start_replica_of(master.port)?;
        let dir = std::env::temp_dir().join(format!(
            "herald-sentinel-{}-{}",
            std::process::id(),
            master.port
        ));
        let _ = std::fs::create_dir_all(&dir);
        let mut s = Sentinels {
            sentinels: (0..3).map(|_| (free_port(), None)).collect(),
            redis: vec![master, replica],
            dir,
            password,
        };
        for i in 0..3 {
            s.start_sentinel(i);
        }
        s.wait_settled();
        Some(s)
    }

    fn start_sentinel(&mut self, i: usize) {
        let master = self.redis[0].port;
        let Some((port, child)) = self.sentinels.get_mut(i) else {
            return;
        };
        let conf = self.dir.join(format!("sentinel-{port}.conf"));
        // A sentinel rewrites its file; a restarted one keeps what it learned.
        if !conf.exists() {
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 3000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = self.dir.display()
            );
            if let Some(p) = &self.password {
                text.push_str(&format!(
                    "requirepass \"{p}\"\nsentinel sentinel-pass \"{p}\"\n"
                ));
            }
            if std::fs::write(&conf, text).is_err() {
                panic!("cannot write {}", conf.display());
            }
        }
        let spawned = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(c) = spawned else {
            panic!("cannot start redis-server --sentinel");
        };
        *child = Some(c);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", *port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sentinel did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most 20 s) until every running sentinel sees one replica
    /// and the two other sentinels.
    pub fn wait_settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let settled = self
                .sentinels
                .iter()
                .filter(|s| s.1.is_some())
                .all(|(p, _)| {
                    let v = self.ask(*p, &["SENTINEL", "MASTER", MASTER_NAME]);
                    let fields: Vec<String> = v
                        .as_ref()
                        .map(|v| {
                            v.items()
                                .iter()
                                .map(|i| {
                                    i.bytes()
                                        .map(|b| String::from_utf8_lossy(b).into_owned())
                                        .unwrap_or_default()
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let get = |k: &str| {
                        fields
                            .chunks(2)
                            .find(|kv| kv.first().map(String::as_str) == Some(k))
                            .and_then(|kv| kv.get(1).cloned())
                    };
                    get("num-slaves").as_deref() == Some("1")
                        && get("num-other-sentinels").as_deref() == Some("2")
                        && get("flags").as_deref() == Some("master")
                });
            if settled {
                return;
            }
            assert!(Instant::now() < deadline, "the sentinels never settled");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One command to the sentinel on `port` (with its password, if any).
    fn ask(&self, port: u16, args: &[&str]) -> Option<crate::resp::Value> {
        command_as(port, self.password.as_deref(), args)
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.0).collect()
    }

    /// `redis-sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/herald`,
    /// with `?sentinel_password=…` when the sentinels have a password.
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => self.url_with_password(p),
            None => self.url_without_password(),
        }
    }

    /// [`Sentinels::url`] without the sentinels' password.
    pub fn url_without_password(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(p, _)| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis-sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// [`Sentinels::url`] with `password` (percent-encoded) as the
    /// sentinels' password, right or wrong.
    pub fn url_with_password(&self, password: &str) -> String {
        let mut encoded = String::new();
        for b in password.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                encoded.push(char::from(b));
            } else {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
        format!(
            "{}?sentinel_password={encoded}",
            self.url_without_password()
        )
    }

    /// The port of the master as the first sentinel that answers says.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|(p, _)| {
            let v = self.ask(*p, &["SENTINEL", "get-master-addr-by-name", MASTER_NAME])?;
            v.items().get(1)?.int().and_then(|p| u16::try_from(p).ok())
        })
    }

    /// The port of the Redis that says (`ROLE`) it is master, asking the
    /// Redis themselves rather than the sentinels (0 if none does).
    pub fn master_port_direct(&self) -> u16 {
        self.redis
            .iter()
            .find(|r| {
                r.command(&["ROLE"])
                    .and_then(|v| v.items().first().and_then(|x| x.bytes().cloned()))
                    .is_some_and(|b| &b[..] == b"master")
            })
            .map_or(0, |r| r.port)
    }

    /// SIGKILLs the Redis that is master now; returns its port.
    pub fn kill_master(&mut self) -> Option<u16> {
        let port = self.master_port()?;
        let r = self.redis.iter_mut().find(|r| r.port == port)?;
        r.kill();
        Some(port)
    }

    /// Waits (at most `within`) until the sentinels name a master other
    /// than `old` and it says it is one; returns its port.
    pub fn wait_failover(&self, old: u16, within: Duration) -> Option<u16> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(p) = self.master_port().filter(|p| *p != old) {
                let role = command(p, &["ROLE"]);
                let is_master = role
                    .as_ref()
                    .and_then(|r| r.items().first().and_then(|v| v.bytes().cloned()));
                if is_master.as_deref() == Some(b"master".as_slice()) {
                    return Some(p);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// SIGKILLs every sentinel.
    pub fn kill_sentinels(&mut self) {
        for (_, c) in &mut self.sentinels {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Starts the sentinels again (same ports, same files).
    pub fn restart_sentinels(&mut self) {
        for i in 0..self.sentinels.len() {
            if self.sentinels.get(i).is_some_and(|s| s.1.is_none()) {
                self.start_sentinel(i);
            }
        }
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        self.kill_sentinels();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster for tests (decision 0021): `masters` masters with one
/// replica each, every `redis-server` started with `--cluster-enabled yes`
/// in its own directory on free 127.0.0.1 ports (bus port chosen apart
/// with `--cluster-port`), `cluster-node-timeout` 1000 ms so a fail-over
/// takes a few seconds, and joined with `redis-cli --cluster create` (from
/// `redis-tools`, which Debian's `redis-server` package depends on).
#[derive(Debug)]
pub struct RedisCluster {
    /// Every node; the first `masters` start as masters.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` masters and as many replicas and waits until the
    /// cluster says `cluster_state:ok` everywhere; `None` (outside CI) when
    /// `redis-server` is missing.
    pub fn start(masters: usize) -> Option<RedisCluster> {
        RedisCluster::start_with(masters, 1)
    }

    /// As [`RedisCluster::start`] with `replicas` replicas per master.
    pub fn start_with(masters: usize, replicas: usize) -> Option<RedisCluster> {
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            let bus = free_port();
            nodes.push(RedisServer::start_full(
                false,
                vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-port".into(),
                    bus.to_string(),
                    "--cluster-config-file".into(),
                    "nodes.conf".into(),
                    "--cluster-node-timeout".into(),
                    "1000".into(),
                    "--cluster-require-full-coverage".into(),
                    "no".into(),
                    "--cluster-replica-validity-factor".into(),
                    "0".into(),
                ],
            )?);
        }
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        args.extend([
            "--cluster-replicas".into(),
            replicas.to_string(),
            "--cluster-yes".into(),
        ]);
        let out = Command::new("redis-cli").args(&args).output();
        let ok = out.as_ref().is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "redis-cli --cluster create failed: {:?}",
            out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        );
        let c = RedisCluster { nodes };
        c.wait_ok(Duration::from_secs(30));
        Some(c)
    }

    /// `redis-cluster://127.0.0.1:P1,127.0.0.1:P2` (two seeds: a seed's
    /// death does not stop a node that starts later).
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .take(2)
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis-cluster://{}", seeds.join(","))
    }

    /// Waits (at most `within`) until every running node says
    /// `cluster_state:ok` and knows as many nodes as there are, and every
    /// running replica has finished its sync with its master.
    pub fn wait_ok(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let running: Vec<&RedisServer> =
                self.nodes.iter().filter(|n| n.child.is_some()).collect();
            let ok = running.iter().all(|n| {
                let info = n
                    .command(&["CLUSTER", "INFO"])
                    .and_then(|v| v.bytes().cloned())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let replication = n
                    .command(&["INFO", "replication"])
                    .and_then(|v| v.bytes().cloned())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                // A replica still in its first sync has nothing: a master
                // killed then loses everything, not just its last writes.
                let synced = replication.contains("role:master")
                    || (replication.contains("master_link_status:up")
                        && replication.contains("master_sync_in_progress:0"));
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
                    && info.contains("cluster_slots_ok:16384")
                    && synced
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the redis cluster never settled");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `CLUSTER NODES` as node `i` sees it.
    pub fn cluster_nodes(&self, i: usize) -> String {
        self.nodes
            .get(i)
            .and_then(|n| n.command(&["CLUSTER", "NODES"]))
            .and_then(|v| v.bytes().cloned())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The port of the master owning `slot`, as a running node says.
    pub fn owner_of(&self, slot: u16) -> Option<u16> {
        for (i, n) in self.nodes.iter().enumerate() {
            if n.child.is_none() {
                continue;
            }
            for line in self.cluster_nodes(i).lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if !f.get(2).is_some_and(|x| x.contains("master")) {
                    continue;
                }
                if f.get(2).is_some_and(|x| x.contains("fail")) {
                    continue;
                }
                let owns = f.iter().skip(8).any(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
                });
                if owns {
                    let port = f.get(1)?.split(['@', ',']).next()?.rsplit(':').next()?;
                    return port.parse().ok();
                }
            }
            return None;
        }
        None
    }

    /// SIGKILLs the master owning `slot`; returns its port.
    pub fn kill_owner(&mut self, slot: u16) -> Option<u16> {
        let port = self.owner_of(slot)?;
        self.node(port)?.kill();
        Some(port)
    }

    /// Waits (at most `within`) until a running node names a master other
    /// than `old` for `slot`, and that master says (`ROLE`) it is one;
    /// returns its port.
    pub fn wait_owner_change(&self, slot: u16, old: u16, within: Duration) -> Option<u16> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(p) = self.owner_of(slot).filter(|p| *p != old) {
                let role = command(p, &["ROLE"]);
                let first = role
                    .as_ref()
                    .and_then(|r| r.items().first().and_then(|v| v.bytes().cloned()));
                if first.as_deref() == Some(b"master".as_slice()) {
                    return Some(p);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The node id of the node on `port`.
    pub fn id_of(&self, port: u16) -> Option<String> {
        let v = command(port, &["CLUSTER", "MYID"])?;
        v.bytes().map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// The node on `port`.
    pub fn node(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.nodes.iter_mut().find(|n| n.port == port)
    }

    /// Moves `slot` (and its keys) from its owner to the master on `to`
    /// ([`move_slot_between`]).
    pub fn move_slot(&self, slot: u16, to: u16, pause: impl FnMut()) {
        let Some(from) = self.owner_of(slot) else {
            panic!("slot {slot} has no owner");
        };
        let ports: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect();
        move_slot_between(&ports, slot, from, to, pause);
    }

    /// Whether the node on `port` says (`ROLE`) it is a master.
    pub fn owner_of_port_is_master(&self, port: u16) -> bool {
        command(port, &["ROLE"])
            .and_then(|r| r.items().first().and_then(|v| v.bytes().cloned()))
            .is_some_and(|b| &b[..] == b"master")
    }
}

/// The node id of the node on `port`.
fn node_id(port: u16) -> Option<String> {
    let v = command(port, &["CLUSTER", "MYID"])?;
    v.bytes().map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Moves `slot` (and its keys) from the master on `from` to the master on
/// `to` (`ports`: every running node),
/// the way `redis-cli --cluster reshard` does: `SETSLOT IMPORTING` /
/// `MIGRATING`, `MIGRATE` the keys in batches, `SETSLOT NODE` on both.
/// Between the steps `pause` runs (to let traffic flow mid-migration).
pub fn move_slot_between(ports: &[u16], slot: u16, from: u16, to: u16, mut pause: impl FnMut()) {
    if from == to {
        return;
    }
    let (Some(from_id), Some(to_id)) = (node_id(from), node_id(to)) else {
        panic!("cannot read node ids");
    };
    let s = slot.to_string();
    command(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
    command(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
    pause();
    loop {
        let keys = command(from, &["CLUSTER", "GETKEYSINSLOT", &s, "10"]);
        let keys: Vec<String> = keys
            .as_ref()
            .map(|v| {
                v.items()
                    .iter()
                    .filter_map(|k| k.bytes().map(|b| String::from_utf8_lossy(b).into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        if keys.is_empty() {
            break;
        }
        let port = to.to_string();
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "REPLACE",
            "KEYS",
        ];
        args.extend(keys.iter().map(String::as_str));
        command(from, &args);
        pause();
    }
    for p in [to, from] {
        command(p, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
    }
    for p in ports {
        if *p != to && *p != from {
            command(*p, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        }
    }
}

/// A link to `url` with Herald's scripts loaded and a 2 s timeout, as the
/// broker makes it. Panics on a URL it cannot parse (tests give good ones).
pub fn link(url: &str) -> std::sync::Arc<crate::conn::Link> {
    let target = crate::conn::Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    crate::conn::Link::start(target, crate::lua::setup(), Duration::from_secs(2))
}

/// Waits until `link` is connected, or panics after `within`.
pub async fn wait_up(link: &crate::conn::Link, within: Duration) {
    let deadline = Instant::now() + within;
    while !link.is_up() {
        assert!(Instant::now() < deadline, "the link never came up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

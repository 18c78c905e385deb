//! A real `redis-server` for tests (Debian's `redis-server` package): started
//! on a free 127.0.0.1 port with no persistence, killed when dropped, and
//! restartable on the same port to test outages.
//!
//! When `redis-server` is not installed, [`RedisServer::start`] returns `None`
//! so a developer without it sees the cluster tests skip with a message;
//! under CI (`CI` set) it panics instead, because `scripts/test.sh` installs
//! it there and a skip would hide a broken install.

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

    fn start_with(persistent: bool) -> Option<RedisServer> {
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
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let mut out = bytes::BytesMut::new();
        crate::resp::encode(args, &mut out);
        s.write_all(&out).ok()?;
        let mut buf = bytes::BytesMut::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(v) = crate::resp::decode(&mut buf).ok()? {
                return Some(v);
            }
            let n = s.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it (SIGKILL: no goodbye to its clients; with no persistence,
    /// everything it held is gone).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it (again) on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--enable-debug-command", "local"]);
        match &self.aof_dir {
            Some(d) => cmd
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .args(["--dir", &d.to_string_lossy()]),
            None => cmd
                .args(["--appendonly", "no"])
                .args(["--dir", &std::env::temp_dir().to_string_lossy()]),
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
    }
}

//! The `herald` binary's security-relevant command lines: `herald token`
//! mints tokens the server accepts, and `herald serve` refuses to listen
//! beyond loopback without secrets unless told `--insecure`, and says at
//! start-up whether anonymous clients are allowed.
#![allow(clippy::unwrap_used, missing_docs)]

use herald_server::auth::jwt::Verifier;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECRET: &str = "cli-secret-cli-secret-cli-secret-cli";

fn herald() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_herald"));
    // Keep the environment from changing the options under test.
    for (k, _) in std::env::vars() {
        if k.starts_with("HERALD_") {
            c.env_remove(k);
        }
    }
    c
}

#[test]
fn token_mints_what_the_server_verifies() {
    let out = herald()
        .args([
            "token",
            "--user",
            "u1",
            "--channel",
            "chat:1",
            "--ttl",
            "1h",
            "--secret",
            SECRET,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = Verifier::new(Some(SECRET.as_bytes()), Vec::new())
        .verify(token.trim(), now)
        .unwrap();
    assert_eq!(claims.sub, "u1");
    assert_eq!(claims.channels, vec!["chat:1".to_string()]);
    let exp = claims.exp.unwrap();
    assert!((now + 3590..=now + 3610).contains(&exp), "{exp} vs {now}");

    let bad = herald()
        .args(["token", "--user", "u1", "--secret", "short"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("32 bytes"));
}

#[test]
fn serve_refuses_non_loopback_without_secrets() {
    let out = herald()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen") && err.contains("--insecure"),
        "{err}"
    );
}

/// Starts `herald serve` with `args`, returns the first log lines and stops it.
fn start_up_lines(args: &[&str]) -> String {
    let mut child = herald()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("auth") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn serve_says_whether_anonymous_clients_are_allowed() {
    let open = start_up_lines(&["--listen", "127.0.0.1:0"]);
    assert!(open.contains("anonymous clients ALLOWED"), "{open}");
    let closed = start_up_lines(&[
        "--listen",
        "127.0.0.1:0",
        "--token-hmac-secret",
        SECRET,
        "--log-format",
        "json",
    ]);
    assert!(closed.contains("anonymous clients refused"), "{closed}");
    let line = closed.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON log line");
    assert!(
        v["fields"]["message"].as_str().unwrap().starts_with("auth"),
        "{v}"
    );
    // An explicit --insecure listens beyond loopback.
    let insecure = start_up_lines(&["--listen", "0.0.0.0:0", "--insecure"]);
    assert!(insecure.contains("anonymous clients ALLOWED"), "{insecure}");
}

/// `herald admin-hash` with `input` on standard input and `args`.
fn admin_hash(args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = herald()
        .arg("admin-hash")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn admin_hash_prints_a_hash_of_stdins_first_line() {
    use herald_server::admin::password::PasswordHash;
    let out = admin_hash(&["--iterations", "1000"], "s3cret pass\nignored\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with("$pbkdf2-sha256$i=1000$"), "{line}");
    let hash = PasswordHash::parse(line.trim()).unwrap();
    assert!(hash.verify("s3cret pass"));
    assert!(!hash.verify("s3cret pass\n"));
    for (args, input) in [
        (&["--iterations", "1000"][..], "\n"),
        (&["--iterations", "1000"][..], ""),
        (&["--iterations", "10"][..], "pw\n"),
        (&["--iterations", "x"][..], "pw\n"),
    ] {
        let out = admin_hash(args, input);
        assert!(!out.status.success(), "{args:?} {input:?}");
        assert!(out.stdout.is_empty());
    }
}

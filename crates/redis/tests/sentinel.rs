//! Redis Sentinel (decision 0020) with real processes: a master, a replica
//! and three sentinels (`herald_redis::testing::Sentinels`). The links find
//! the master through the sentinels, follow a fail-over after the master is
//! SIGKILLed, and fencing tokens issued after it are above every token
//! issued before, even when the new master lost the counter's last
//! increments. Bad input: sentinels that do not answer, a master name they
//! do not know, all sentinels down and back.

#![allow(clippy::unwrap_used, missing_docs)]

use herald_core::BrokerError;
use herald_redis::conn::Link;
use herald_redis::lua;
use herald_redis::tables::{Claim, TableStore};
use herald_redis::testing::{self, Sentinels};
use std::time::{Duration, Instant};

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Retries `SET k v` until it succeeds (at most 30 s); returns how long it took.
async fn set_until_ok(link: &Link, k: &str, v: &str) -> Duration {
    let start = Instant::now();
    loop {
        if link.call(&["SET", k, v]).await.is_ok() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no master within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn claim(store: &TableStore, table: u64, floor: u64) -> u64 {
    match store
        .claim(table, floor, Duration::from_secs(30))
        .await
        .unwrap()
    {
        Claim::Won { lease, .. } => lease.token,
        other => panic!("not won: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_links_follow_a_failover_and_tokens_never_repeat() {
    let Some(mut s) = blocking(Sentinels::start) else {
        return;
    };
    let first = s.redis[0].port;
    let link = testing::link(&s.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    assert_eq!(link.target().master(), Some(format!("127.0.0.1:{first}")));
    let store = TableStore::new(link.clone(), "herald", "node-a");
    let before = claim(&store, 7, 0).await;
    let sentinel = link.target().sentinel().unwrap().clone();
    assert_eq!(sentinel.failovers(), 0);

    let old = blocking(|| s.kill_master()).unwrap();
    assert_eq!(old, first);
    // Writes fail while there is no master, then succeed on the new one.
    set_until_ok(&link, "after", "1").await;
    let new = blocking(|| s.wait_failover(old, Duration::from_secs(30))).unwrap();
    assert_ne!(new, old);
    assert_eq!(link.target().master(), Some(format!("127.0.0.1:{new}")));
    let got = link.call(&["GET", "after"]).await.unwrap();
    assert_eq!(got.bytes().map(|b| b.to_vec()), Some(b"1".to_vec()));
    assert_eq!(sentinel.failovers(), 1, "one fail-over seen");
    assert!(sentinel.epoch() >= 1);
    let epoch = testing::command(new, &["GET", herald_redis::sentinel::EPOCH_KEY])
        .and_then(|v| v.int())
        .unwrap();
    assert_eq!(u64::try_from(epoch).unwrap(), sentinel.epoch());

    // Simulate what asynchronous replication can lose: the last increments
    // of the table's counter and its lease never reached the replica. A
    // node that never saw the old token (floor 0) must still get a new one.
    link.call(&["SET", "herald:t:{7}:fence", "0"])
        .await
        .unwrap();
    link.call(&["DEL", "herald:t:{7}:lease"]).await.unwrap();
    let other = TableStore::new(link.clone(), "herald", "node-b");
    let after = claim(&other, 7, 0).await;
    assert!(after > before, "token {after} reissued (before: {before})");
    assert!(
        after > u64::from(u32::MAX),
        "{after} has no fail-over epoch"
    );
    // And tokens keep rising within the epoch.
    link.call(&["DEL", "herald:t:{7}:lease"]).await.unwrap();
    assert_eq!(claim(&store, 7, 0).await, after + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_that_do_not_answer_are_a_clear_error() {
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let link = testing::link(&format!("redis-sentinel://127.0.0.1:{port}/herald"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!link.is_up());
    let err = link.call(&["PING"]).await.unwrap_err();
    assert!(matches!(err, BrokerError::Unavailable(_)), "{err}");
    assert_eq!(link.target().master(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_master_name_and_all_sentinels_down() {
    let Some(mut s) = blocking(Sentinels::start) else {
        return;
    };
    // The sentinels answer, but know no master by that name.
    let hosts: Vec<String> = s
        .sentinel_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let wrong = testing::link(&format!("redis-sentinel://{}/nosuch", hosts.join(",")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!wrong.is_up());
    assert!(wrong.call(&["PING"]).await.is_err());

    // All sentinels down: a link that is connected keeps its master...
    let link = testing::link(&s.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    blocking(|| s.kill_sentinels());
    link.call(&["SET", "k", "1"]).await.unwrap();
    // ...but cannot find it again once its connection fails: calls fail
    // at once with a clear error rather than hang.
    let master = s.master_port_direct();
    testing::command(master, &["CLIENT", "KILL", "TYPE", "normal"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while link.is_up() {
        assert!(Instant::now() < deadline, "the link never noticed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!link.is_up(), "up without a sentinel to ask");
    match link.call(&["SET", "k", "2"]).await {
        Err(BrokerError::Unavailable(_)) => {}
        other => panic!("{other:?}"),
    }
    // The sentinels return: so does the link.
    blocking(|| s.restart_sentinels());
    set_until_ok(&link, "k", "3").await;
}

/// Runs publish.lua on `channel` (as the broker does) and returns
/// (epoch, offset).
async fn publish(link: &Link, channel: &str, data: &str) -> (String, i64) {
    let m = format!("herald:{{{channel}}}:m");
    let s = format!("herald:{{{channel}}}:s");
    let epoch = format!("fresh-{data}");
    let v = link
        .call(&[
            "EVAL",
            lua::PUBLISH.text,
            "3",
            &m,
            &s,
            herald_redis::sentinel::EPOCH_KEY,
            data,
            &epoch,
            "100",
            "0",
            "herald:c:x",
        ])
        .await
        .unwrap();
    let items = v.items();
    (
        String::from_utf8_lossy(items[0].bytes().unwrap()).into_owned(),
        items[1].int().unwrap(),
    )
}

/// Channel `x` as a replica that missed everything after offset 1 has it.
async fn lose_tail(link: &Link) {
    link.call(&["HSET", "herald:{x}:m", "o", "1"])
        .await
        .unwrap();
    link.call(&["DEL", "herald:{x}:s"]).await.unwrap();
    link.call(&["XADD", "herald:{x}:s", "1-0", "t", "0", "d", "1"])
        .await
        .unwrap();
}

/// What a fail-over can leave behind, made by hand on one Redis: the new
/// master lacks the channel's last publications (its meta says offset 1
/// where the old master had reached 3), and nodes connecting to it raised
/// the fail-over epoch. The next publication must not reuse an offset of
/// the old epoch: it starts a new epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_epoch_ends_the_channel_epochs_made_before_it() {
    let Some(redis) = testing::RedisServer::start() else {
        return;
    };
    let link = testing::link(&redis.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let (e0, _) = publish(&link, "x", "1").await;
    publish(&link, "x", "2").await;
    assert_eq!(publish(&link, "x", "3").await, (e0.clone(), 3));
    // Without a fail-over epoch nothing changes.
    lose_tail(&link).await;
    link.call(&["SET", herald_redis::sentinel::EPOCH_KEY, "0"])
        .await
        .unwrap();
    assert_eq!(publish(&link, "x", "4").await, (e0.clone(), 2));
    // After one, offset 3 of e0 is never issued again.
    lose_tail(&link).await;
    link.call(&["SET", herald_redis::sentinel::EPOCH_KEY, "1"])
        .await
        .unwrap();
    let (e1, o) = publish(&link, "x", "5").await;
    assert_ne!(e1, e0, "the epoch survived a fail-over");
    assert_eq!((e1.as_str(), o), ("fresh-5", 2));
    // Once: the new epoch is kept by later publications.
    assert_eq!(publish(&link, "x", "6").await, (e1, 3));
}

/// A graceful fail-over (`SENTINEL FAILOVER`): the old master lives on as a
/// replica, so nothing closes the links' connections; they move on the
/// `+switch-master` notice (or on the `-READONLY` a write gets there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_failover_moves_the_links_off_the_demoted_master() {
    let Some(s) = blocking(Sentinels::start) else {
        return;
    };
    let old = s.redis[0].port;
    let link = testing::link(&s.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let port = s.sentinel_ports()[0];
    let ok = testing::command(port, &["SENTINEL", "FAILOVER", testing::MASTER_NAME]);
    assert!(
        matches!(ok, Some(herald_redis::resp::Value::Simple(_))),
        "{ok:?}"
    );
    let new = blocking(|| s.wait_failover(old, Duration::from_secs(30))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        n += 1;
        let wrote = link.call(&["SET", "k", &n.to_string()]).await.is_ok();
        if wrote && link.target().master() == Some(format!("127.0.0.1:{new}")) {
            break;
        }
        assert!(Instant::now() < deadline, "the link stayed on {old}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = testing::command(new, &["GET", "k"]).and_then(|v| v.int());
    assert_eq!(got, Some(n));
    assert_eq!(link.target().sentinel().unwrap().failovers(), 1);
}

/// Table 5's lobby entry `e{n}` as kept (`SEQ:5:e{n}`), once it is.
async fn entry(store: &TableStore, n: u32) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let all = store.lobby_entries().await.unwrap();
        let e = all
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .find(|e| e.ends_with(&format!(":5:e{n}")));
        if let Some(e) = e {
            return e;
        }
        assert!(Instant::now() < deadline, "entry e{n} never kept");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The lobby's sequence numbers, like tokens, start above the fail-over
/// epoch × 2³² after a fail-over: a node that has entry 2 of a table must
/// not ignore the new master's next entry because its counter rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lobby_numbers_after_a_failover_are_above_every_earlier_one() {
    let Some(redis) = testing::RedisServer::start() else {
        return;
    };
    let link = testing::link(&redis.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let store = TableStore::new(link.clone(), "herald", "node-a");
    let Claim::Won { lease, .. } = store.claim(5, 0, Duration::from_secs(30)).await.unwrap() else {
        panic!("not won");
    };
    store.publish_entry(&lease, b"e1").unwrap();
    store.publish_entry(&lease, b"e2").unwrap();
    assert_eq!(entry(&store, 2).await, "2:5:e2");
    // The new master lost the counter's last increments; nodes raised the
    // fail-over epoch on connecting.
    link.call(&["SET", "herald:lobby:seq", "1"]).await.unwrap();
    link.call(&["SET", herald_redis::sentinel::EPOCH_KEY, "1"])
        .await
        .unwrap();
    store.publish_entry(&lease, b"e3").unwrap();
    assert_eq!(entry(&store, 3).await, "4294967297:5:e3");
    store.publish_entry(&lease, b"e4").unwrap();
    assert_eq!(entry(&store, 4).await, "4294967298:5:e4");
}

/// The error a call on `link` gives while it cannot find the master,
/// once its first attempt has failed (at most 10 s).
async fn refusal_of(link: &Link) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let err = link.call(&["PING"]).await.unwrap_err().to_string();
        if err.contains("not connected:") {
            return err;
        }
        assert!(Instant::now() < deadline, "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many clients of the sentinels are subscribed (a link's
/// `+switch-master` follower: the sentinels subscribe on the Redis, not
/// on each other).
fn sentinel_subscribers(s: &Sentinels, password: &str) -> usize {
    s.sentinel_ports()
        .iter()
        .filter_map(|p| testing::command_as(*p, Some(password), &["CLIENT", "LIST"]))
        .filter_map(|v| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned()))
        .map(|list| list.lines().filter(|l| l.contains(" sub=1 ")).count())
        .sum()
}

/// Sentinels with `requirepass`: the URL's `?sentinel_password=` is sent
/// (`AUTH`) before every Sentinel command and on the `+switch-master`
/// subscription; a wrong or missing one is an error that says the
/// sentinels refused the password; a fail-over is followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_are_asked_with_it() {
    const PASSWORD: &str = "s3nt &inel@?pw";
    let Some(mut s) = blocking(|| Sentinels::start_with_password(PASSWORD)) else {
        return;
    };
    for url in [s.url_without_password(), s.url_with_password("wrong")] {
        let link = testing::link(&url);
        let err = refusal_of(&link).await;
        assert!(
            err.contains("the sentinels refused the password"),
            "{url}: {err}"
        );
        let sentinel = link.target().sentinel().unwrap().clone();
        assert!(sentinel.refused_password(), "{url}");
        assert_eq!(link.target().master(), None);
    }
    // None of them could subscribe to +switch-master either.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(blocking(|| sentinel_subscribers(&s, PASSWORD)), 0);

    let first = s.redis[0].port;
    let link = testing::link(&s.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    assert_eq!(link.target().master(), Some(format!("127.0.0.1:{first}")));
    let sentinel = link.target().sentinel().unwrap().clone();
    assert!(!sentinel.refused_password());
    // The +switch-master follower authenticated and subscribed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocking(|| sentinel_subscribers(&s, PASSWORD)) != 1 {
        assert!(Instant::now() < deadline, "no +switch-master subscription");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    link.call(&["SET", "before", "1"]).await.unwrap();

    let old = blocking(|| s.kill_master()).unwrap();
    set_until_ok(&link, "after", "1").await;
    let new = blocking(|| s.wait_failover(old, Duration::from_secs(30))).unwrap();
    assert_ne!(new, old);
    let deadline = Instant::now() + Duration::from_secs(10);
    while link.target().master() != Some(format!("127.0.0.1:{new}")) {
        assert!(Instant::now() < deadline, "{:?}", link.target().master());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sentinel.failovers(), 1, "one fail-over seen");
    let got = link.call(&["GET", "after"]).await.unwrap();
    assert_eq!(got.bytes().map(|b| b.to_vec()), Some(b"1".to_vec()));
}

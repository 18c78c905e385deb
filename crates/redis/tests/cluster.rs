//! Redis Cluster as Herald's Redis (decision 0021), with real processes:
//! three masters with one replica each (`herald_redis::testing::RedisCluster`,
//! joined by `redis-cli --cluster create`). The command link learns the
//! slot map and sends each command to its key's master; follows `-MOVED`
//! after a slot moved and `-ASK` while it moves; replaces the shard-epoch
//! marker by the owner's config epoch; refuses a script whose keys span
//! slots; follows a fail-over after a master is SIGKILLed (a higher
//! epoch after it, and a new channel epoch, while a channel whose slot
//! was moved keeps its own). Bad input: an address where no cluster answers, and
//! slots left without a master.

#![allow(clippy::unwrap_used, missing_docs)]

use herald_redis::cluster::{SHARD_EPOCH, SHARD_LINEAGE};
use herald_redis::slot;
use herald_redis::testing::{self, RedisCluster};
use std::time::{Duration, Instant};

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn text(v: &herald_redis::resp::Value) -> String {
    v.bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// Runs `publish.lua` on channel `{tag}` as the broker does (sharded
/// topic, markers for the router) and returns its (epoch, offset); a
/// channel without an epoch, or whose epoch a fail-over may have cut,
/// takes `fresh`.
async fn publish(link: &herald_redis::conn::Link, tag: &str, fresh: &str) -> (String, i64) {
    let (m, s, topic) = (
        format!("herald:{{{tag}}}:m"),
        format!("herald:{{{tag}}}:s"),
        format!("herald:c:{{{tag}}}"),
    );
    let v = link
        .call(&[
            b"EVALSHA".as_slice(),
            herald_redis::lua::PUBLISH.sha().as_bytes(),
            b"2",
            m.as_bytes(),
            s.as_bytes(),
            b"data",
            fresh.as_bytes(),
            b"100",
            b"0",
            topic.as_bytes(),
            SHARD_EPOCH,
            b"s",
            b"",
            SHARD_LINEAGE,
        ])
        .await
        .unwrap();
    (text(&v.items()[0]), v.items()[1].int().unwrap())
}

/// The config epoch of the master on `port`, as it says.
fn config_epoch(c: &RedisCluster, port: u16) -> u64 {
    let nodes = testing::command(port, &["CLUSTER", "NODES"]).unwrap();
    let nodes = text(&nodes);
    let line = nodes.lines().find(|l| l.contains("myself")).unwrap();
    let _ = c;
    line.split_whitespace().nth(6).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_go_to_their_slots_master_and_follow_moves() {
    let Some(c) = blocking(|| RedisCluster::start(3)) else {
        return;
    };
    let link = testing::link(&c.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let map = link.target().cluster().unwrap().map().unwrap();
    assert_eq!(map.masters().len(), 3);
    assert_eq!(map.uncovered(), 0);

    // Each key lands on the master owning its slot (asked directly).
    for i in 0..60 {
        let k = format!("key{i}");
        link.call(&["SET", k.as_str(), "v"]).await.unwrap();
        let owner = blocking(|| c.owner_of(slot::slot(k.as_bytes()))).unwrap();
        let v = testing::command(owner, &["GET", &k]).unwrap();
        assert_eq!(text(&v), "v", "{k} not on its owner {owner}");
    }

    // Scripts go by their keys; the marker becomes the owner's epoch.
    let v = link
        .call(&[
            b"EVAL".as_slice(),
            b"return {redis.call('GET', KEYS[1]), ARGV[1]}",
            b"1",
            b"key7",
            SHARD_EPOCH,
        ])
        .await
        .unwrap();
    let owner = blocking(|| c.owner_of(slot::slot(b"key7"))).unwrap();
    assert_eq!(text(&v.items()[0]), "v");
    assert_eq!(
        text(&v.items()[1]),
        config_epoch(&c, owner).to_string(),
        "the marker is the owner's config epoch"
    );

    // A script whose keys span slots is refused before it is sent.
    let e = link
        .call(&["EVAL", "return 1", "2", "foo", "bar"])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("span slots"), "{e}");

    // Keys of one hash tag, moved to another master while being read:
    // ASK for the keys already moved, MOVED once the slot has moved.
    let s = slot::slot(b"{moving}");
    for i in 0..30 {
        let k = format!("{{moving}}:{i}");
        link.call(&["SET", k.as_str(), &i.to_string()])
            .await
            .unwrap();
    }
    assert_eq!(publish(&link, "moving", "e1").await, ("e1".into(), 1));
    let from = blocking(|| c.owner_of(s)).unwrap();
    let to = map
        .masters()
        .iter()
        .map(|m| m.addr.rsplit(':').next().unwrap().parse::<u16>().unwrap())
        .find(|p| *p != from)
        .unwrap();
    let rt = tokio::runtime::Handle::current();
    let reader = link.clone();
    let mut reads = 0;
    blocking(|| {
        c.move_slot(s, to, || {
            rt.block_on(async {
                for i in 0..30 {
                    let k = format!("{{moving}}:{i}");
                    let v = reader.call(&["GET", k.as_str()]).await.unwrap();
                    assert_eq!(text(&v), i.to_string(), "{k} mid-migration");
                    reads += 1;
                }
            })
        })
    });
    assert!(reads >= 60, "the reads ran mid-migration ({reads})");
    assert_eq!(blocking(|| c.owner_of(s)), Some(to));
    for i in 0..30 {
        let k = format!("{{moving}}:{i}");
        let v = link.call(&["GET", k.as_str()]).await.unwrap();
        assert_eq!(text(&v), i.to_string(), "{k} after the move");
    }
    let now = link.target().cluster().unwrap().map().unwrap();
    assert_eq!(
        now.owner(s).map(|m| m.addr.clone()),
        Some(format!("127.0.0.1:{to}")),
        "MOVED corrected the map"
    );
    // The channel's keys came whole from a live master: its epoch goes
    // on, though the importer's config epoch may have risen (decision
    // 0021, lineages).
    assert_eq!(publish(&link, "moving", "e2").await, ("e1".into(), 2));
}

/// Waits until the master on `port` has a replica that acknowledged all
/// it wrote.
fn replicated(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = text(&testing::command(port, &["INFO", "replication"]).unwrap());
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_string())
        };
        let master = field("master_repl_offset:").unwrap_or_default();
        let replica = field("slave0:")
            .and_then(|s| {
                s.split(',')
                    .find_map(|kv| kv.strip_prefix("offset=").map(str::to_string))
            })
            .unwrap_or_default();
        if !master.is_empty() && master == replica {
            return;
        }
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_replaced_and_its_epoch_rises() {
    let Some(mut c) = blocking(|| RedisCluster::start(3)) else {
        return;
    };
    let link = testing::link(&c.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let s = slot::slot(b"foo");
    link.call(&["SET", "foo", "1"]).await.unwrap();
    assert_eq!(publish(&link, "foo", "e1").await, ("e1".into(), 1));
    let old = blocking(|| c.owner_of(s)).unwrap();
    let old_epoch = config_epoch(&c, old);
    // Wait for the write to reach the replica, so this test is about
    // following the fail-over, not about losing a write.
    blocking(|| replicated(old));
    blocking(|| c.node(old).unwrap().kill());
    let start = Instant::now();
    loop {
        if let Ok(v) = link
            .call(&[
                b"EVAL".as_slice(),
                b"return {redis.call('GET', KEYS[1]), ARGV[1]}",
                b"1",
                b"foo",
                SHARD_EPOCH,
            ])
            .await
        {
            assert_eq!(text(&v.items()[0]), "1");
            let epoch: u64 = text(&v.items()[1]).parse().unwrap();
            assert!(epoch > old_epoch, "epoch {epoch} after {old_epoch}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no master for foo within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The promoted replica has every write (waited for above), but a
    // fail-over may lose some: the channel starts a new epoch.
    assert_eq!(publish(&link, "foo", "e2").await.0, "e2");
    let topology = link.target().cluster().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while topology.failovers() == 0 {
        assert!(Instant::now() < deadline, "the fail-over was not counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let new = topology.map().unwrap();
    assert!(new
        .masters()
        .iter()
        .all(|m| m.addr != format!("127.0.0.1:{old}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_addresses_and_uncovered_slots_are_clear_errors() {
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = testing::link(&format!("redis-cluster://127.0.0.1:{port}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    let e = loop {
        let e = nowhere.call(&["GET", "foo"]).await.unwrap_err().to_string();
        if e.contains("no cluster node answered") || Instant::now() > deadline {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(e.contains("no cluster node answered"), "{e}");
    assert!(!nowhere.is_up());

    // A plain Redis is not a cluster.
    let Some(plain) = blocking(testing::RedisServer::start) else {
        return;
    };
    let not_cluster = testing::link(&format!("redis-cluster://127.0.0.1:{}", plain.port));
    let deadline = Instant::now() + Duration::from_secs(5);
    let e = loop {
        let e = not_cluster
            .call(&["GET", "foo"])
            .await
            .unwrap_err()
            .to_string();
        if e.contains("cluster support disabled") || Instant::now() > deadline {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(e.contains("cluster support disabled"), "{e}");

    // Three masters without replicas: kill one, its slots have no master;
    // the others' keys are still served, and its keys fail clearly.
    let Some(mut c) = blocking(|| RedisCluster::start_with(3, 0)) else {
        return;
    };
    let link = testing::link(&c.url());
    testing::wait_up(&link, Duration::from_secs(10)).await;
    let dead = blocking(|| c.owner_of(slot::slot(b"foo"))).unwrap();
    let alive_key = (0..100)
        .map(|i| format!("k{i}"))
        .find(|k| blocking(|| c.owner_of(slot::slot(k.as_bytes()))) != Some(dead))
        .unwrap();
    blocking(|| c.node(dead).unwrap().kill());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let e = link.call(&["GET", "foo"]).await.unwrap_err().to_string();
        let uncovered = link
            .target()
            .cluster()
            .unwrap()
            .map()
            .is_some_and(|m| m.uncovered() > 0);
        if uncovered && e.contains("has no master") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slots never showed as uncovered: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    link.call(&["SET", alive_key.as_str(), "x"]).await.unwrap();
    assert!(!link.is_up(), "not up with slots uncovered");
}

//! Cluster II: partitions replicated over hosts with Kafka's ISR protocol. Real `weir
//! serve` hosts on loopback addresses, real clients (kcat, confluent-kafka): replicas
//! on distinct hosts, acks=all answered once the ISR holds a batch, a leader's host
//! killed with -9 and its partitions led elsewhere with nothing acknowledged lost, the
//! host's return (truncating, catching up, rejoining the ISR), min.insync.replicas.

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::{
    cluster::{coordinator_node, create_topic as create, run_weir, Cluster},
    interop::{python, run_script_logged, script, spawn_script_logged},
    jvm::kafka_tool,
    kafka_client::produce_request,
    kcat,
    loop_mount::mount_small_ext4,
    netns::Network,
    partitions::{describe, wait_for, wait_led_elsewhere, Row},
};
use kafka_protocol::ResponseError;
use weir_client::{blocking::Connection, record_batch::build_batch};

fn produce(bootstrap: &str, topic: &str, from: usize, n: usize) {
    let lines: String = (from..from + n).map(|i| format!("k{i}:v{i}\n")).collect();
    kcat(
        &["-b", bootstrap, "-t", topic, "-P", "-K:", "-X", "acks=all"],
        Some(&lines),
    );
}

fn values(bootstrap: &str, topic: &str) -> Vec<String> {
    let mut v: Vec<String> = kcat(&["-b", bootstrap, "-t", topic, "-C", "-e", "-q"], None)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// The topic's values once `expected` are all readable, or what is readable after
/// 15 s: a new leader's high watermark may start behind what its predecessor
/// acknowledged (it learnt it from that predecessor's last answer) and passes it once
/// its in-sync followers fetch from it — as in Kafka, acknowledged records become
/// visible again a moment after a leader change, and a lost one never does.
fn values_once_visible(bootstrap: &str, topic: &str, expected: &[String]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let got = values(bootstrap, topic);
        if got == expected || Instant::now() >= deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A second into a load on `topic`: its partitions as host 1 describes them, the host
/// leading partition 0, and another host's address.
fn leader_under_load(cluster: &mut Cluster, topic: &str) -> (Vec<Row>, u32, String) {
    let b1 = cluster.host(1).bootstrap();
    std::thread::sleep(Duration::from_secs(1));
    let rows = describe(&b1, topic);
    let victim = (rows[0].leader / 1024) as u32;
    let other = cluster.host((victim % 3) + 1).bootstrap();
    (rows, victim, other)
}

/// Three one-shard hosts agreeing on their metadata, with `topic` created (`partitions`
/// partitions of 3 replicas) and wholly in sync: the cluster, host 1's address and the
/// topic's partitions.
fn three_hosts_with(topic: &str, partitions: u32) -> (Cluster, String, Vec<Row>) {
    let mut cluster = Cluster::start(3, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create(&b1, topic, partitions, 3);
    let rows = wait_for(&b1, topic, Duration::from_secs(10), "created", |r| {
        r.isr.len() == 3
    });
    (cluster, b1, rows)
}

#[test]
fn a_replicated_topic_outlives_its_leaders_host() {
    let (mut cluster, b1, rows) = three_hosts_with("orders", 3);
    for r in &rows {
        let mut hosts: Vec<i64> = r.replicas.iter().map(|n| n / 1024).collect();
        hosts.sort();
        assert_eq!(hosts, [1, 2, 3], "one replica per host: {rows:?}");
    }
    // RF above the hosts there are is refused.
    let (ok, out) = run_weir(&[
        "topics",
        "--bootstrap",
        &b1,
        "create",
        "wide",
        "--replication-factor",
        "4",
    ]);
    assert!(!ok && out.contains("InvalidReplicationFactor"), "{out}");

    produce(&b1, "orders", 0, 300);
    let expected: Vec<String> = {
        let mut v: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(values(&b1, "orders"), expected);

    // Kill the host leading partition 0: an in-sync replica elsewhere takes over with a
    // newer epoch, and every acknowledged message is still there.
    let victim = (rows[0].leader / 1024) as u32;
    let survivor = (1..=3).find(|h| *h != victim).expect("another host");
    let bs = cluster.host(survivor).bootstrap();
    cluster.host(victim).kill();
    // (The dead host leaves every ISR in the same metadata change.)
    let after = wait_for(&bs, "orders", Duration::from_secs(15), "failover", |r| {
        r.leader >= 0
            && r.leader / 1024 != i64::from(victim)
            && !r.isr.iter().any(|n| n / 1024 == i64::from(victim))
    });
    assert!(after[0].epoch > rows[0].epoch, "{after:?}");
    assert_eq!(
        values_once_visible(&bs, "orders", &expected),
        expected,
        "nothing acknowledged lost"
    );
    produce(&bs, "orders", 300, 300);

    // The host returns, catches up from the new leaders and rejoins every ISR; then
    // it alone must hold everything, so the other two go down one after the other.
    cluster.host(victim).spawn();
    cluster.host(victim).wait_serving();
    wait_for(&bs, "orders", Duration::from_secs(30), "rejoined", |r| {
        r.isr.len() == 3
    });
    let all: Vec<String> = {
        let mut v: Vec<String> = (0..600).map(|i| format!("v{i}")).collect();
        v.sort();
        v
    };
    let bv = cluster.host(victim).bootstrap();
    for other in (1..=3).filter(|h| *h != victim) {
        cluster.host(other).kill();
        let rows = wait_for(&bv, "orders", Duration::from_secs(15), "failover", |r| {
            r.leader >= 0 && r.leader / 1024 != i64::from(other)
        });
        assert_eq!(
            values_once_visible(&bv, "orders", &all),
            all,
            "after losing host {other}: {rows:?}"
        );
        cluster.host(other).spawn();
        cluster.host(other).wait_serving();
        wait_for(&bv, "orders", Duration::from_secs(30), "rejoined", |r| {
            r.isr.len() == 3
        });
    }
}

#[test]
fn min_insync_replicas_refuses_acks_all_writes_it_cannot_hold() {
    let (mut cluster, b1, _) = three_hosts_with("strict", 1);
    let (ok, out) = run_weir(&[
        "topics",
        "--bootstrap",
        &b1,
        "alter-config",
        "strict",
        "min.insync.replicas=3",
    ]);
    assert!(ok, "{out}");
    let rows = wait_for(&b1, "strict", Duration::from_secs(10), "created", |r| {
        r.isr.len() == 3
    });
    produce(&b1, "strict", 0, 10);
    // A follower's host goes: the ISR shrinks to two, below the minimum of three.
    let leader_host = (rows[0].leader / 1024) as u32;
    let follower = (1..=3).find(|h| *h != leader_host).expect("follower");
    cluster.host(follower).kill();
    let bl = cluster.host(leader_host).bootstrap();
    wait_for(&bl, "strict", Duration::from_secs(15), "shrunk", |r| {
        r.isr.len() == 2
    });
    let produce_acks = |acks: i16| {
        let mut conn = Connection::open(&bl, "replication-test").expect("connect");
        let batch = build_batch(1, b"x", 0);
        let r = conn
            .call(&produce_request("strict", 0, batch, acks), 9)
            .expect("produce");
        r.responses[0].partition_responses[0].error_code
    };
    assert_eq!(
        produce_acks(-1),
        ResponseError::NotEnoughReplicas.code(),
        "acks=all with 2 of 3 in sync"
    );
    assert_eq!(produce_acks(1), 0, "acks=1 needs only the leader");
    // The follower returns and rejoins: acks=all is taken again.
    cluster.host(follower).spawn();
    cluster.host(follower).wait_serving();
    wait_for(&bl, "strict", Duration::from_secs(30), "rejoined", |r| {
        r.isr.len() == 3
    });
    assert_eq!(produce_acks(-1), 0);
    assert_eq!(
        describe(&bl, "strict")[0].high_watermark,
        12,
        "ten by kcat, one acks=1, one acks=all"
    );
}

/// Produces one message with acks=all to partition `p` of `topic` on whichever host
/// `describe` names its leader; true once acknowledged.
fn acknowledged_on_leader(cluster: &mut Cluster, via: &str, topic: &str, p: i32) -> bool {
    let Some(row) = describe(via, topic).into_iter().nth(p as usize) else {
        return false;
    };
    if row.leader < 0 {
        return false;
    }
    let host = cluster.host((row.leader / 1024) as u32).bootstrap();
    let Ok(mut conn) = Connection::open(&host, "failover-probe") else {
        return false;
    };
    let batch = build_batch(1, b"probe", 0);
    conn.call(&produce_request(topic, p, batch, -1), 9)
        .is_ok_and(|r| r.responses[0].partition_responses[0].error_code == 0)
}

/// Runs `fault` on a three-host cluster while an idempotent acks=all producer and a
/// committing consumer group (`kill_loop.py`) work on `topic` (3 partitions, RF 3);
/// then stops them and checks that every acknowledged message is in the log exactly
/// once at its offset, that consumed offsets were never taken back, and that the
/// group's acknowledged commits were kept.
fn under_load(cluster: &mut Cluster, topic: &str, fault: impl FnOnce(&mut Cluster)) {
    let b1 = cluster.host(1).bootstrap();
    create(&b1, topic, 3, 3);
    wait_for(&b1, topic, Duration::from_secs(10), "created", |r| {
        r.isr.len() == 3
    });
    let dir = cluster.dir.path().to_path_buf();
    let file = |name: &str| dir.join(format!("{topic}-{name}")).display().to_string();
    let (stop, acked, commits, seen) = (
        file("stop"),
        file("acked.txt"),
        file("commits.txt"),
        file("seen.txt"),
    );
    let bootstrap: String = (1..=3)
        .map(|h| cluster.host(h).bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    // Their stderr (the last lines of it) is shown if they fail.
    let (producer_log, consumer_log) = (dir.join("producer.log"), dir.join("consumer.log"));
    let spawn = |args: &[&str], log: &std::path::Path| {
        spawn_script_logged("kill_loop.py", args, 600, Some(log))
    };
    let mut producer = spawn(
        &["produce", &bootstrap, topic, &stop, &acked],
        &producer_log,
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut consumer = spawn(
        &["consume", &bootstrap, topic, &stop, &commits, &seen],
        &consumer_log,
    );
    fault(cluster);
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&stop, b"").expect("stop");
    let tail = |path: &std::path::Path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    let logs = |cluster: &mut Cluster| -> String {
        let hosts: String = (1..=3)
            .map(|h| format!("--- host {h}\n{}", cluster.host(h).log()))
            .collect();
        format!(
            "--- producer\n{}\n--- consumer\n{}\n{hosts}",
            tail(&producer_log),
            tail(&consumer_log)
        )
    };
    assert!(
        producer.wait().expect("producer").success(),
        "producer failed\n{}",
        logs(cluster)
    );
    assert!(
        consumer.wait().expect("consumer").success(),
        "consumer failed\n{}",
        logs(cluster)
    );
    wait_for(&b1, topic, Duration::from_secs(30), "all in sync", |r| {
        r.isr.len() == 3
    });
    let text = logs(cluster);
    run_script_logged(
        "kill_loop.py",
        &[
            "check".into(),
            bootstrap.clone(),
            topic.into(),
            acked.clone(),
            commits.clone(),
            seen.clone(),
        ],
        || text,
    );
}

#[test]
fn leaders_killed_again_and_again_lose_nothing_acknowledged() {
    // Ten kills (five of the controller's host, five of another) keep the test command
    // under its half-hour on a fresh machine; WEIR_KILLS=20 or more for a longer look.
    let kills: usize = std::env::var("WEIR_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    // Failover time is measured with weir's default session timeout.
    let mut cluster =
        Cluster::start_configured(3, 1, |_| vec!["--session-timeout".into(), "3s".into()]);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    // One probe partition per host (preferred leaders spread), so each kill can pick
    // its victim: every other kill the controller leader's host.
    create(&b1, "probe", 3, 3);
    let mut failovers: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    under_load(&mut cluster, "ledger", |cluster| {
        for kill in 0..kills {
            let via = cluster.host(((kill % 3) + 1) as u32).bootstrap();
            let rows = wait_for(&via, "probe", Duration::from_secs(30), "in sync", |r| {
                r.leader >= 0 && r.isr.len() == 3
            });
            wait_for(&via, "ledger", Duration::from_secs(30), "in sync", |r| {
                r.leader >= 0 && r.isr.len() == 3
            });
            let controller = cluster.leader();
            let host_of = |r: &Row| (r.leader / 1024) as u32;
            // The probe partition led by the host to kill (any, if it leads none yet).
            let p = rows
                .iter()
                .position(|r| (host_of(r) == controller) == (kill % 2 == 0))
                .unwrap_or(0);
            let victim = host_of(&rows[p]);
            let with_controller = victim == controller;
            let other = cluster.host((victim % 3) + 1).bootstrap();
            let killed = Instant::now();
            cluster.host(victim).kill();
            while !acknowledged_on_leader(cluster, &other, "probe", p as i32) {
                assert!(
                    killed.elapsed() < Duration::from_secs(60),
                    "no leader took over after kill {kill}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            failovers[usize::from(with_controller)].push(killed.elapsed());
            let role = if with_controller {
                " (the controller leader's)"
            } else {
                ""
            };
            eprintln!(
                "kill {kill}: host {victim}{role}, partition {p} acknowledged again after {:?}",
                killed.elapsed()
            );
            cluster.host(victim).spawn();
            cluster.host(victim).wait_serving();
        }
    });
    let percentiles = |mut v: Vec<Duration>| {
        v.sort();
        let at = |q: usize| {
            v.get((v.len() * q).div_ceil(100).max(1) - 1)
                .map_or("-".to_string(), |d| format!("{d:.2?}"))
        };
        format!("{} kills, p50 {}, p99 {}", v.len(), at(50), at(99))
    };
    let [alone, with_controller] = failovers;
    let all = alone.iter().chain(&with_controller).copied().collect();
    eprintln!(
        "kill -9 to the next acknowledged produce (default timeouts): all {}; hosts leading \
         the controller too {}; others {}",
        percentiles(all),
        percentiles(with_controller),
        percentiles(alone)
    );
}

#[test]
fn a_paused_leader_is_fenced_and_truncates_when_it_wakes() {
    let mut cluster = Cluster::start(3, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    under_load(&mut cluster, "paused", |cluster| {
        let (rows, victim, other) = leader_under_load(cluster, "paused");
        // Stopped for twice the session timeout: fenced, its partitions led elsewhere,
        // while its clients' requests wait on it.
        cluster.host(victim).signal("STOP");
        wait_led_elsewhere(&other, "paused", victim, "no failover from a paused leader");
        std::thread::sleep(Duration::from_secs(2));
        cluster.host(victim).signal("CONT");
        // It learns it no longer leads, fails what it held, cuts any divergent tail and
        // catches up: every ISR is whole again, at newer epochs.
        let back = wait_for(&other, "paused", Duration::from_secs(30), "rejoined", |r| {
            r.isr.len() == 3
        });
        assert!(back[0].epoch > rows[0].epoch, "{back:?}");
        assert!(cluster.host(victim).log().contains("no longer leading"));
    });
}

/// KIP-320's check after a leader change: a consumer asks the leader where the epoch of
/// its last record ends, and takes an answer below its position for a truncation of the
/// log, going back to read again. The leader answers the log end for its current epoch,
/// as Kafka does, even while its high watermark is behind it — as a new leader's is,
/// until its followers fetch again. Answering the high watermark sent Kafka Streams'
/// consumers back over records they had processed, and processed them twice in one
/// exactly-once transaction.
#[test]
fn a_consumer_is_told_the_current_epoch_ends_at_the_log_end_while_the_high_watermark_lags() {
    use kafka_protocol::messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic},
        BrokerId, ListOffsetsRequest, OffsetForLeaderEpochRequest, TopicName,
    };
    let (mut cluster, _, rows) = three_hosts_with("epoch-end", 1);
    let leader_host = (rows[0].leader / 1024) as u32;
    let leader = cluster.host(leader_host).bootstrap();
    let mut conn = Connection::open(&leader, "epoch-end").expect("connect to the leader");
    let mut produce = |n: u32, acks: i16| {
        let r = conn
            .call(
                &produce_request("epoch-end", 0, build_batch(n, b"e", 0), acks),
                9,
            )
            .expect("produce");
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    };
    produce(4, -1);
    // A follower that stops fetching stays in the ISR for --replica-lag-time-max (10 s):
    // until then the high watermark stays where it is while the leader appends.
    let follower = (1..=3).find(|h| *h != leader_host).expect("a follower");
    cluster.host(follower).signal("STOP");
    produce(3, 1);
    let topic = || {
        TopicName(kafka_protocol::protocol::StrBytes::from_static_str(
            "epoch-end",
        ))
    };
    let mut conn = Connection::open(&leader, "epoch-end").expect("connect to the leader");
    let mut latest = ListOffsetsRequest::default();
    latest.replica_id = BrokerId(-1);
    latest.topics = vec![ListOffsetsTopic::default()
        .with_name(topic())
        .with_partitions(vec![ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_timestamp(-1)])];
    let high_watermark =
        conn.call(&latest, 6).expect("list offsets").topics[0].partitions[0].offset;
    let mut ask = OffsetForLeaderEpochRequest::default();
    ask.replica_id = BrokerId(-1);
    ask.topics = vec![OffsetForLeaderTopic::default()
        .with_topic(topic())
        .with_partitions(vec![OffsetForLeaderPartition::default()
            .with_partition(0)
            .with_current_leader_epoch(rows[0].epoch as i32)
            .with_leader_epoch(rows[0].epoch as i32)])];
    let answer = conn.call(&ask, 4).expect("offset for leader epoch");
    cluster.host(follower).signal("CONT");
    let end = &answer.topics[0].partitions[0];
    assert_eq!(
        high_watermark, 4,
        "the paused follower holds the high watermark back"
    );
    assert_eq!(
        (end.error_code, end.leader_epoch, end.end_offset),
        (0, rows[0].epoch as i32, 7),
        "the current epoch ends at the log end, not at the high watermark"
    );
}

#[test]
fn committed_offsets_survive_the_loss_of_the_coordinators_host() {
    let (mut cluster, b1, _) = three_hosts_with("work", 3);
    produce(&b1, "work", 0, 300);
    let group_offsets = |bootstrap: &str, to: Option<&str>| -> (bool, String) {
        let mut args = vec!["groups", "--bootstrap", bootstrap];
        match to {
            Some(offset) => args.extend([
                "reset-offsets",
                "survivors",
                "--topic",
                "work",
                "--to-offset",
                offset,
            ]),
            None => args.extend(["describe", "survivors"]),
        }
        run_weir(&args)
    };
    let (ok, out) = group_offsets(&b1, Some("7"));
    assert!(ok, "{out}\n{}", hosts_log(&mut cluster));
    let (ok, out) = group_offsets(&b1, None);
    assert!(ok, "{out}\n{}", hosts_log(&mut cluster));
    let node = coordinator_node(&out);
    // The coordinator's host is lost for good: its journal partition leads elsewhere,
    // where the commits were applied too, and the group is coordinated there.
    let victim = (node / 1024) as u32;
    cluster.host(victim).kill();
    let other = cluster.host((victim % 3) + 1).bootstrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, out) = group_offsets(&other, None);
        let committed: Vec<&str> = out.lines().filter(|l| l.starts_with("work\t")).collect();
        if ok && committed.len() == 3 && !out.contains(&format!("coordinator {node} ")) {
            assert!(
                committed.iter().all(|l| l.split('\t').nth(2) == Some("7")),
                "{out}"
            );
            break;
        }
        if Instant::now() > deadline {
            panic!(
                "offsets lost with host {victim}: {out}\n{}",
                hosts_log(&mut cluster)
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // The new coordinator takes commits, and they survive its own host's return.
    let (ok, out) = group_offsets(&other, Some("9"));
    assert!(ok, "{out}\n{}", hosts_log(&mut cluster));
    cluster.host(victim).spawn();
    cluster.host(victim).wait_serving();
    let (ok, out) = group_offsets(&other, None);
    assert!(
        ok && out
            .lines()
            .filter(|l| l.starts_with("work\t"))
            .all(|l| l.split('\t').nth(2) == Some("9")),
        "{out}"
    );
    // A deleted group stays deleted when its coordinator moves again: the deletion is
    // journaled like a commit.
    run_script_logged(
        "group_delete.py",
        &[other.clone(), "survivors".into()],
        String::new,
    );
    let (_, out) = group_offsets(&other, None);
    let node = coordinator_node(&out);
    let host = (node / 1024) as u32;
    cluster.host(host).kill();
    let last = cluster.host((host % 3) + 1).bootstrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, out) = group_offsets(&last, None);
        if ok && !out.contains(&format!("coordinator {node} ")) {
            assert!(!out.lines().any(|l| l.starts_with("work\t")), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `weir cluster drain --node HOST` through host 1's controller; waits until no
/// partition of `topic` is led there and all `replicas` are in sync, and returns them.
fn drain(cluster: &mut Cluster, host: u32, topic: &str, replicas: usize) -> Vec<Row> {
    let controller = cluster.host(1).controller();
    let node = host.to_string();
    let (ok, out) = run_weir(&[
        "cluster",
        "drain",
        "--node",
        &node,
        "--controller",
        &controller,
    ]);
    assert!(ok, "{out}");
    let b1 = cluster.host(1).bootstrap();
    wait_for(&b1, topic, Duration::from_secs(10), "drained", |r| {
        r.leader >= 0 && r.leader / 1024 != i64::from(host) && r.isr.len() == replicas
    })
}

#[test]
fn a_drained_host_leads_nothing_until_the_drain_is_undone() {
    let (mut cluster, b1, _) = three_hosts_with("drained", 3);
    let controller = cluster.host(1).controller();
    // Its leadership moved; its replicas still follow, in sync; clients go on.
    let rows = drain(&mut cluster, 2, "drained", 3);
    produce(&b1, "drained", 0, 100);
    assert_eq!(values(&b1, "drained").len(), 100);
    let (ok, out) = run_weir(&["cluster", "rebalance-leaders", "--controller", &controller]);
    assert!(ok, "{out}");
    assert_eq!(
        describe(&b1, "drained")
            .iter()
            .map(|r| r.leader)
            .collect::<Vec<_>>(),
        rows.iter().map(|r| r.leader).collect::<Vec<_>>(),
        "a drained host takes nothing back"
    );
    let status = cluster.status();
    let host2 = status["hosts"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["host"] == 2))
        .expect("host 2");
    assert_eq!(host2["record"]["draining"], true, "{status}");
    // Undone: the preferred leader takes its partition back.
    let (ok, out) = run_weir(&[
        "cluster",
        "drain",
        "--node",
        "2",
        "--undo",
        "--controller",
        &controller,
    ]);
    assert!(ok, "{out}");
    let (ok, out) = run_weir(&["cluster", "rebalance-leaders", "--controller", &controller]);
    assert!(ok, "{out}");
    wait_for(&b1, "drained", Duration::from_secs(10), "back", |r| {
        r.leader == r.replicas[0]
    });
}

#[test]
fn a_rolling_restart_under_load_loses_nothing_acknowledged() {
    let mut cluster = Cluster::start(3, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    under_load(&mut cluster, "rolling", |cluster| {
        for id in 1..=3u32 {
            // One host at a time, each once every partition is whole again.
            let via = cluster.host((id % 3) + 1).bootstrap();
            wait_for(&via, "rolling", Duration::from_secs(30), "in sync", |r| {
                r.leader >= 0 && r.isr.len() == 3
            });
            cluster.host(id).stop();
            // A controlled shutdown: its leadership moved before it went, so clients
            // are redirected at once, not after a session timeout.
            let rows = describe(&via, "rolling");
            assert!(
                rows.iter()
                    .all(|r| r.leader >= 0 && r.leader / 1024 != i64::from(id)),
                "host {id} stopped still leading: {rows:?}"
            );
            assert!(cluster
                .host(id)
                .log()
                .contains("controlled shutdown: leadership moved"));
            std::thread::sleep(Duration::from_millis(500));
            cluster.host(id).spawn();
            cluster.host(id).wait_serving();
        }
    });
}

#[test]
fn a_follower_with_a_full_disk_leaves_the_isr_without_stopping_the_partition() {
    let lag = || vec!["--replica-lag-time-max".to_string(), "1s".to_string()];
    let mut cluster = Cluster::start_configured(3, 1, |_| lag());
    // A broker-only host 4 on a small disk of its own (a voter's store there would
    // fill too: this is about a follower's log).
    let disk = common::scratch_dir();
    let mount = match mount_small_ext4(disk.path(), 48) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a loop ext4 image here ({why})");
            return;
        }
    };
    let mut small = cluster.unstarted_host(4, 1, &["--replica-lag-time-max", "1s"]);
    small.data_dir = mount.0.join("data");
    small.spawn();
    small.wait_serving();
    cluster.hosts.push(small);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    create(&b1, "full", 1, 4);
    wait_for(&b1, "full", Duration::from_secs(15), "in sync", |r| {
        r.isr.len() == 4
    });
    // Host 4 follows, never leads.
    let leader = drain(&mut cluster, 4, "full", 4)[0].leader;
    let at = cluster.host((leader / 1024) as u32).bootstrap();
    let filler = mount.0.join("filler");
    std::fs::write(&filler, vec![7u8; 30 << 20]).expect("filler");
    // acks=all goes on (min.insync.replicas is 2) once host 4's full disk drops it
    // from the ISR; every produce is acknowledged, none lost.
    let mut conn = Connection::open(&at, "disk-full").expect("connect");
    let batch = build_batch(100, &[3u8; 1000], 0);
    let mut acked = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked < 300 {
        let r = conn
            .call(&produce_request("full", 0, batch.clone(), -1), 9)
            .expect("produce");
        match r.responses[0].partition_responses[0].error_code {
            0 => acked += 1,
            code => {
                // Only while the ISR shrinks: the write is retried, as clients do.
                assert!(Instant::now() < deadline, "produce kept failing: {code}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let rows = wait_for(&b1, "full", Duration::from_secs(15), "shrunk", |r| {
        r.isr.len() == 3
    });
    assert!(!rows[0].isr.iter().any(|n| n / 1024 == 4), "{rows:?}");
    assert_eq!(rows[0].high_watermark, 300 * 100);
    // `weir cluster status` shows how far behind the follower is, as its leader sees.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = cluster.status();
        let lag = status["degraded"]
            .as_array()
            .and_then(|d| d.iter().find(|p| p["topic"] == "full"))
            .and_then(|p| p["lag"].as_u64())
            .unwrap_or(0);
        if lag > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no replica lag in {status}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // Space again: the follower reopens its log, catches up and rejoins.
    std::fs::remove_file(&filler).expect("free space");
    wait_for(&b1, "full", Duration::from_secs(30), "rejoined", |r| {
        r.isr.len() == 4
    });
    cluster.host(4).stop();
}

#[test]
fn a_partitioned_leader_acknowledges_nothing_and_is_cut_back_to_the_majority() {
    let mut cluster = Cluster::start_on(Some(Network::new(3)), 3, 1, |_| ());
    cluster.converged_metadata(Duration::from_secs(15));
    under_load(&mut cluster, "split", |cluster| {
        let (rows, victim, other) = leader_under_load(cluster, "split");
        let at_victim = cluster.host(victim).bootstrap();
        let network = cluster.network.as_ref().expect("a network");
        network.cut(victim);
        // On the cut-off side, a client next to the old leader writes to it: the leader
        // appends, but its followers never fetch, so nothing is acknowledged — neither
        // before the majority fences it nor after.
        let minority = network
            .command_in(victim, python())
            .arg(script("minority.py"))
            .args([&at_victim, "split", "0", "50", "8"])
            .output()
            .expect("minority producer");
        let acknowledged = String::from_utf8_lossy(&minority.stdout);
        assert_eq!(
            acknowledged.trim(),
            "0",
            "writes acknowledged by a cut-off leader: {}",
            String::from_utf8_lossy(&minority.stderr)
        );
        // Meanwhile the majority fenced it and elected leaders among themselves.
        wait_led_elsewhere(&other, "split", victim, "the majority elected no leader");
        let acked = cluster.dir.path().join("split-acked.txt");
        let count = || std::fs::read_to_string(&acked).map_or(0, |s| s.lines().count());
        let before = count();
        std::thread::sleep(Duration::from_secs(3));
        assert!(count() > before, "the majority side acknowledged nothing");
        network.heal(victim);
        // Healed: the old leader learns of the new epoch, cuts its divergent tail (the
        // minority's writes) and rejoins every ISR.
        let back = wait_for(&other, "split", Duration::from_secs(60), "rejoined", |r| {
            r.isr.len() == 3
        });
        assert!(back[0].epoch > rows[0].epoch, "{back:?}");
        let log = cluster.host(victim).log();
        assert!(
            log.lines()
                .any(|l| l.contains("cutting a divergent tail") && l.contains("split")),
            "the old leader kept its divergent tail\n{log}"
        );
    });
    let b1 = cluster.host(1).bootstrap();
    let stored = kcat(&["-b", &b1, "-t", "split", "-C", "-e", "-q"], None);
    assert!(
        !stored.contains("minority"),
        "a cut-off leader's unacknowledged writes survived healing"
    );
}

#[test]
fn a_host_drained_with_reassign_can_be_retired_without_losing_anything() {
    let mut cluster = Cluster::start(3, 1);
    cluster.add_broker(4, 1);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    // Three replicas over four hosts, and single-replica partitions (one per host).
    for (topic, rf) in [("moving", 3), ("single", 1)] {
        create(&b1, topic, 4, rf);
        wait_for(&b1, topic, Duration::from_secs(15), "created", |r| {
            r.isr.len() == rf as usize
        });
        // Records deleted from every partition first: new replicas must start at their
        // leader's log start, not at 0.
        produce(&b1, topic, 0, 40);
        for (p, row) in describe(&b1, topic).iter().enumerate() {
            let (ok, out) = run_weir(&[
                "topics",
                "--bootstrap",
                &b1,
                "delete-records",
                topic,
                "--partition",
                &p.to_string(),
                "--before",
                &row.high_watermark.to_string(),
            ]);
            assert!(ok, "{out}");
        }
        produce(&b1, topic, 100, 200);
    }
    let expected: Vec<String> = {
        let mut v: Vec<String> = (100..300).map(|i| format!("v{i}")).collect();
        v.sort();
        v
    };
    let on_host_2 = |r: &Row| r.replicas.iter().any(|n| n / 1024 == 2);
    assert!(describe(&b1, "moving").iter().any(on_host_2));
    let controller = cluster.host(1).controller();
    let (ok, out) = run_weir(&[
        "cluster",
        "drain",
        "--node",
        "2",
        "--reassign",
        "--controller",
        &controller,
    ]);
    assert!(ok && out.contains("moving off host 2"), "{out}");
    // Each replica on host 2 is replaced by one on a host that had none, which catches
    // up from the leader's log start and joins the ISR; then host 2's leaves.
    for (topic, rf) in [("moving", 3), ("single", 1)] {
        let rows = wait_for(&b1, topic, Duration::from_secs(30), "moved", |r| {
            r.leader >= 0 && !on_host_2(r) && r.isr.len() == rf && r.replicas.len() == rf
        });
        for r in &rows {
            let mut hosts: Vec<i64> = r.replicas.iter().map(|n| n / 1024).collect();
            hosts.sort();
            hosts.dedup();
            assert_eq!(hosts.len(), rf, "one replica per host: {rows:?}");
        }
        assert_eq!(
            values_once_visible(&b1, topic, &expected),
            expected,
            "{topic} after the move"
        );
    }
    let logs: String = (1..=4).map(|h| cluster.host(h).log()).collect();
    assert!(
        logs.contains("starting again there"),
        "no new replica started at its leader's log start"
    );
    // Host 2 deletes what it no longer holds, and can go for good.
    let data = cluster.host(2).data_dir.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&data)
        .expect("data dir")
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("moving-"))
    {
        assert!(Instant::now() < deadline, "host 2 kept moved replicas");
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.host(2).kill();
    for topic in ["moving", "single"] {
        produce(&b1, topic, 300, 10);
        let rows = describe(&b1, topic);
        assert!(rows.iter().all(|r| r.leader >= 0), "{rows:?}");
        assert_eq!(values(&b1, topic).len(), 210, "{topic} without host 2");
    }
}

#[test]
fn a_host_away_while_topics_are_deleted_drops_them_and_never_serves_old_records() {
    let (mut cluster, b1, _) = three_hosts_with("again", 1);
    produce(&b1, "again", 0, 50);
    create(&b1, "gone", 1, 3);
    // An acks=all produce to the topic just created is answered only once every
    // replica holds it (before replication took a new partition up, its leader's own
    // fsync used to be enough).
    let leader = describe(&b1, "gone")[0].leader;
    let at = cluster.host((leader / 1024) as u32).bootstrap();
    let mut conn = Connection::open(&at, "first-write").expect("connect");
    let r = conn
        .call(&produce_request("gone", 0, build_batch(1, b"x", 0), -1), 9)
        .expect("produce");
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let stray = cluster.host(3).data_dir.join("gone-0");
    assert!(stray.exists(), "acknowledged before host 3 held it");
    // Host 3 is away while "gone" is deleted, and "again" is deleted and created again
    // (two replicas, on the hosts that are there) with new records.
    cluster.host(3).kill();
    for topic in ["again", "gone"] {
        let (ok, out) = run_weir(&["topics", "--bootstrap", &b1, "delete", topic]);
        assert!(ok, "{out}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, out) = run_weir(&[
            "topics",
            "--bootstrap",
            &b1,
            "create",
            "again",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ]);
        if ok {
            break;
        }
        // (Until host 3 is fenced, three hosts count as live.)
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_for(&b1, "again", Duration::from_secs(15), "created", |r| {
        r.isr.len() == 2
    });
    produce(&b1, "again", 1000, 100);
    // Host 3 returns with the old topic's directory, and is given a replica of the new
    // one: it must start from the new topic's records, not append to the old ones.
    cluster.host(3).spawn();
    cluster.host(3).wait_serving();
    cluster.converged_metadata(Duration::from_secs(15));
    // What it held of the deleted topic goes once it is back.
    let deadline = Instant::now() + Duration::from_secs(15);
    while stray.exists() {
        assert!(
            Instant::now() < deadline,
            "host 3 kept a deleted topic's directory"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let leader = (describe(&b1, "again")[0].leader / 1024) as u32;
    let other = (1..=2).find(|h| *h != leader).expect("the other replica");
    let (ok, out) = run_weir(&[
        "cluster",
        "drain",
        "--node",
        &other.to_string(),
        "--reassign",
        "--controller",
        &cluster.host(1).controller(),
    ]);
    assert!(ok, "{out}");
    wait_for(
        &b1,
        "again",
        Duration::from_secs(30),
        "moved to host 3",
        |r| r.replicas.iter().any(|n| n / 1024 == 3) && r.isr.len() == 2 && r.replicas.len() == 2,
    );
    // Host 3 alone: everything it serves is the new topic's.
    cluster.host(leader).kill();
    let b3 = cluster.host(3).bootstrap();
    wait_for(&b3, "again", Duration::from_secs(15), "host 3 leads", |r| {
        r.leader / 1024 == 3
    });
    let got = values(&b3, "again");
    let expected: Vec<String> = {
        let mut v: Vec<String> = (1000..1100).map(|i| format!("v{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(got, expected, "{}", cluster.host(3).log());
    // (Its old directory went either in the sweep at its start or when the new
    // replica opened there, whichever came first.)
    let log = cluster.host(3).log();
    assert!(
        log.contains("deleted the records of an earlier topic of the same name")
            || log
                .lines()
                .any(|l| l.contains("nobody holds") && l.contains("topic=again")),
        "host 3 never dealt with its old directory"
    );
}

/// Three one-shard hosts (3 s session timeout) with `topics` created, 3 partitions of 3
/// replicas each and wholly in sync: the cluster and every host's address.
fn three_hosts_for_a_copy(topics: &[&str]) -> (Cluster, String) {
    let mut cluster =
        Cluster::start_configured(3, 1, |_| vec!["--session-timeout".into(), "3s".into()]);
    cluster.converged_metadata(Duration::from_secs(15));
    let b1 = cluster.host(1).bootstrap();
    for topic in topics {
        create(&b1, topic, 3, 3);
        wait_for(&b1, topic, Duration::from_secs(10), "created", |r| {
            r.isr.len() == 3
        });
    }
    let bootstrap: String = (1..=3)
        .map(|h| cluster.host(h).bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    (cluster, bootstrap)
}

/// Every host's log, for a failure message.
fn hosts_log(cluster: &mut Cluster) -> String {
    (1..=3)
        .map(|h| format!("--- host {h}\n{}", cluster.host(h).log()))
        .collect()
}

/// Kills -9 the leader of partition 0, 1 and 2 of `topic` in turn, `pause` apart, each
/// once the partition is wholly in sync again, restarting it two seconds later.
fn kill_each_leader_in_turn(cluster: &mut Cluster, topic: &str, pause: Duration) {
    for kill in 0..3u32 {
        std::thread::sleep(pause);
        let via = cluster.host((kill % 3) + 1).bootstrap();
        let rows = wait_for(&via, topic, Duration::from_secs(30), "in sync", |r| {
            r.leader >= 0 && r.isr.len() == 3
        });
        let victim = (rows[kill as usize].leader / 1024) as u32;
        eprintln!("kill {kill}: host {victim}, leader of {topic}-{kill}");
        cluster.host(victim).kill();
        std::thread::sleep(Duration::from_secs(2));
        cluster.host(victim).spawn();
        cluster.host(victim).wait_serving();
    }
}

#[test]
fn a_transactional_copy_is_exactly_once_while_leaders_are_killed() {
    const RECORDS: &str = "3000";
    let (mut cluster, bootstrap) = three_hosts_for_a_copy(&["tx-in", "tx-out"]);
    let seed = ["seed", &bootstrap, "tx-in", RECORDS].map(String::from);
    run_script_logged("txn_copy.py", &seed, || hosts_log(&mut cluster));
    let copier_log = cluster.dir.path().join("copier.log");
    let mut copier = spawn_script_logged(
        "txn_copy.py",
        &["copy", &bootstrap, "tx-in", "tx-out", RECORDS],
        450,
        Some(&copier_log),
    );
    kill_each_leader_in_turn(&mut cluster, "tx-out", Duration::from_secs(3));
    let status = copier.wait().expect("copier");
    let copied = std::fs::read_to_string(&copier_log).unwrap_or_default();
    assert!(
        status.success(),
        "the copier failed\n{copied}\n{}",
        hosts_log(&mut cluster)
    );
    eprintln!("{copied}");
    let check = ["check", &bootstrap, "tx-out", RECORDS].map(String::from);
    run_script_logged("txn_copy.py", &check, || hosts_log(&mut cluster));
}

#[test]
fn kafkas_own_transactional_copier_is_exactly_once_while_leaders_are_killed() {
    const RECORDS: &str = "6000";
    let (mut cluster, bootstrap) = three_hosts_for_a_copy(&["eos-in", "eos-out"]);
    // The input, written by Kafka's VerifiableProducer (values 0..RECORDS).
    let seeded = kafka_tool("org.apache.kafka.tools.VerifiableProducer")
        .args(["--bootstrap-server", &bootstrap, "--topic", "eos-in"])
        .args(["--max-messages", RECORDS, "--acks", "-1"])
        .output()
        .expect("run VerifiableProducer");
    let said = String::from_utf8_lossy(&seeded.stdout).into_owned();
    assert!(
        seeded.status.success() && said.contains(&format!("\"acked\":{RECORDS}")),
        "VerifiableProducer: {said}{}",
        String::from_utf8_lossy(&seeded.stderr)
    );
    // One copier per input partition, with random aborts, as Kafka's transactions
    // system test runs them.
    let logs = cluster.dir.path().to_path_buf();
    let mut copiers: Vec<std::process::Child> = (0..3)
        .map(|p| {
            let log = std::fs::File::create(logs.join(format!("copier-{p}.log"))).expect("log");
            kafka_tool("org.apache.kafka.tools.TransactionalMessageCopier")
                .args(["--broker-list", &bootstrap, "--input-topic", "eos-in"])
                .args([
                    "--input-partition",
                    &p.to_string(),
                    "--output-topic",
                    "eos-out",
                ])
                .args(["--transactional-id", &format!("copier-{p}")])
                .args([
                    "--consumer-group",
                    "eos-copiers",
                    "--transaction-size",
                    "100",
                ])
                .args(["--enable-random-aborts", "--use-group-metadata"])
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("start TransactionalMessageCopier")
        })
        .collect();
    kill_each_leader_in_turn(&mut cluster, "eos-out", Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(300);
    for (p, copier) in copiers.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = copier.try_wait().expect("copier") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = copier.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let log = std::fs::read_to_string(logs.join(format!("copier-{p}.log"))).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        let reports = log.lines().filter(|l| l.starts_with('{')).count();
        eprintln!("copier {p} ended {status:?} after {reports} progress reports");
        assert!(
            status.is_some_and(|s| s.success()),
            "copier {p} ended {status:?}:\n{}\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            hosts_log(&mut cluster)
        );
    }
    let check = [
        bootstrap.clone(),
        "eos-out".into(),
        "3".into(),
        RECORDS.into(),
    ];
    run_script_logged("eos_check.py", &check, || hosts_log(&mut cluster));
}

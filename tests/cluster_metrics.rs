//! The metrics operators alert on, read from three real hosts' `/metrics` while the
//! cluster goes through what they alert on: exactly one active controller; followers'
//! lag on their leader; a partition under-replicated while a follower is down, with the
//! ISR shrink and the expansion when it returns counted; partitions with no leader
//! counted offline by the active controller.

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::{
    broker::free_ports_on,
    cluster::{create_topic, scrape_sum, Cluster},
    kcat,
    partitions::wait_for,
};

/// Waits until host `addr`'s sum of `name` over samples with `labels` satisfies `ok`;
/// panics with the last value after 20 s.
fn wait_metric(addr: &str, name: &str, labels: &[&str], ok: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let value = scrape_sum(addr, name, labels);
        if let Some(v) = value.filter(|v| ok(*v)) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} on {addr}: {value:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn operators_see_the_controller_lag_under_replication_and_offline_partitions() {
    let ips = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
    let port = free_ports_on(&ips, 1);
    let metrics = |id: u32| format!("127.0.0.{id}:{port}");
    let mut cluster = Cluster::start_configured(3, 1, |id| {
        [
            "--metrics-listen",
            &metrics(id),
            "--replica-lag-time-max",
            "1s",
        ]
        .map(String::from)
        .to_vec()
    });
    cluster.converged_metadata(Duration::from_secs(15));
    // One active controller, the one `weir cluster status` names; every voter saw it
    // elected.
    let leader = cluster.leader();
    for id in 1..=3 {
        let active = wait_metric(&metrics(id), "weir_controller_active", &[], |_| true);
        assert_eq!(active, f64::from(u8::from(id == leader)), "host {id}");
        wait_metric(
            &metrics(id),
            "weir_controller_leader_changes_total",
            &[],
            |v| v >= 1.0,
        );
    }
    let b1 = cluster.host(1).bootstrap();
    create_topic(&b1, "watched", 1, 3);
    let rows = wait_for(&b1, "watched", Duration::from_secs(15), "in sync", |r| {
        r.isr.len() == 3
    });
    let input: String = (0..100).map(|n| format!("m{n}\n")).collect();
    kcat(&["-b", &b1, "-P", "-t", "watched", "-p", "0"], Some(&input));
    let led_by = (rows[0].leader / 1024) as u32;
    let at_leader = metrics(led_by);
    let topic = ["topic=\"watched\""];
    // Both followers' lag is published on the leader, caught up.
    wait_metric(&at_leader, "weir_partition_follower_lag", &topic, |v| {
        v == 0.0
    });
    wait_metric(&at_leader, "weir_under_replicated_partitions", &[], |v| {
        v == 0.0
    });
    // A follower goes: the ISR shrinks, the partition is under-replicated.
    let follower = (1..=3).find(|h| *h != led_by).expect("a follower");
    cluster.host(follower).kill();
    wait_for(
        &b1_or(&mut cluster, follower),
        "watched",
        Duration::from_secs(15),
        "shrunk",
        |r| r.isr.len() == 2,
    );
    wait_metric(&at_leader, "weir_under_replicated_partitions", &[], |v| {
        v == 1.0
    });
    wait_metric(&at_leader, "weir_isr_shrinks_total", &[], |v| v >= 1.0);
    // It returns: caught up, in the ISR again, counted as an expansion.
    cluster.host(follower).spawn();
    cluster.host(follower).wait_serving();
    wait_for(
        &b1_or(&mut cluster, 0),
        "watched",
        Duration::from_secs(30),
        "back",
        |r| r.isr.len() == 3,
    );
    wait_metric(&at_leader, "weir_under_replicated_partitions", &[], |v| {
        v == 0.0
    });
    wait_metric(&at_leader, "weir_isr_expands_total", &[], |v| v >= 1.0);
    // A host that alone holds partitions goes: they have no leader, and the active
    // controller counts them offline.
    create_topic(&b1, "lonely", 3, 1);
    let lonely = wait_for(&b1, "lonely", Duration::from_secs(15), "led", |r| {
        r.leader >= 0
    });
    let victim = (1..=3)
        .find(|h| *h != leader && lonely.iter().any(|r| r.leader / 1024 == i64::from(*h)))
        .expect("a host other than the controller's leading a lonely partition");
    let alone = lonely
        .iter()
        .filter(|r| r.leader / 1024 == i64::from(victim))
        .count();
    // Counted by whichever voter is active when it is read (only that one reports; an
    // election under this machine's load may have moved it since the start).
    let offline = |hosts: &[u32], want: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let counts: Vec<Option<f64>> = hosts
                .iter()
                .map(|h| scrape_sum(&metrics(*h), "weir_offline_partitions", &[]))
                .collect();
            if counts.iter().flatten().sum::<f64>() == want as f64 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "weir_offline_partitions on hosts {hosts:?}: {counts:?}, want {want} in all"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let survivors: Vec<u32> = (1..=3).filter(|h| *h != victim).collect();
    offline(&[1, 2, 3], 0);
    cluster.host(victim).kill();
    offline(&survivors, alone);
    cluster.host(victim).spawn();
    cluster.host(victim).wait_serving();
    offline(&[1, 2, 3], 0);
}

/// A running host's client address, not `but`'s.
fn b1_or(cluster: &mut Cluster, but: u32) -> String {
    let id = (1..=3)
        .find(|&id| id != but && cluster.host(id).pid().is_some())
        .expect("a running host");
    cluster.host(id).bootstrap()
}

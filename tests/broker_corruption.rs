//! Torn and corrupt files under the real broker: between restarts after a kill -9, the
//! last segment gets an unacknowledged tail that is torn, zeroed, garbage or cut at a
//! random point, and its index files are truncated, bit-flipped or replaced with
//! garbage. Every restart must come up, keep every acknowledged batch intact at its
//! offset, drop only the unacknowledged tail, say in its log what it repaired, and take
//! new writes at the next dense offset. Seeded; the seed is printed.

#[allow(dead_code)]
mod common;

use std::{fs::OpenOptions, io::Write, path::Path};

use common::{
    broker::Broker,
    kafka_client::{create, fetch, produce},
    rng::Rng,
    scratch_dir, split_batches, StoredBatch,
};
use weir_client::record_batch::build_batch;

/// The newest file with `extension` in `dir`.
fn last_file(dir: &Path, extension: &str) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files.pop().expect("a segment file")
}

/// What was done to the files, for the failure message.
fn damage(dir: &Path, rng: &mut Rng, acked_batch: &[u8]) -> String {
    let log = last_file(dir, "log");
    let len = std::fs::metadata(&log).expect("log").len();
    let mut tail: Vec<u8> = match rng.below(4) {
        0 => acked_batch[..1 + rng.below(acked_batch.len() as u64 - 1) as usize].to_vec(),
        1 => vec![0u8; 1 + rng.below(8192) as usize],
        2 => (0..1 + rng.below(8192)).map(|_| rng.next() as u8).collect(),
        _ => {
            // A whole valid-looking batch whose CRC no longer matches.
            let mut b = acked_batch.to_vec();
            let at = 21 + rng.below(b.len() as u64 - 21) as usize;
            b[at] ^= 1 << rng.below(8);
            b
        }
    };
    // Cut the unacknowledged tail at a random point (possibly all of it).
    tail.truncate(rng.below(tail.len() as u64 + 1) as usize);
    let mut file = OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open log");
    file.write_all(&tail).expect("append tail");
    let mut done = format!("log {len}+{} bytes", tail.len());
    for extension in ["index", "timeindex"] {
        let path = last_file(dir, extension);
        let mut bytes = std::fs::read(&path).expect("index");
        match rng.below(4) {
            0 => bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize),
            1 if !bytes.is_empty() => {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            2 => bytes = (0..rng.below(4096)).map(|_| rng.next() as u8).collect(),
            _ => {}
        }
        std::fs::write(&path, &bytes).expect("write index");
        done += &format!(", {extension} {} bytes", bytes.len());
    }
    done
}

fn read_everything(port: u16) -> (i64, Vec<StoredBatch>) {
    let mut batches = Vec::new();
    let mut offset = 0i64;
    loop {
        let (code, high_watermark, records) = fetch(port, "t", 0, offset);
        assert_eq!(code, 0, "fetch at {offset}");
        if records.is_empty() {
            return (high_watermark, batches);
        }
        for b in split_batches(&records) {
            offset = b.last_offset as i64 + 1;
            batches.push(b);
        }
    }
}

#[test]
fn torn_and_corrupt_tails_lose_nothing_acknowledged_across_restarts() {
    let mut rng = Rng::from_env("torn and corrupt tails");
    let seed = rng.state();
    let dir = scratch_dir();
    let mut broker = Broker::start(&dir.path().join("data"), 1, &["--segment-bytes", "262144"]);
    assert_eq!(create(broker.port, "t", 1), 0);
    let partition_dir = broker.data_dir.join("t-0");

    let mut acked: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut next_offset = 0i64;
    let mut repairs = 0;
    // Record timestamps of now: older ones would let time retention (7 days) delete a
    // sealed segment whenever a seed's batches fill one.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    for round in 0..12 {
        for i in 0..1 + rng.below(40) {
            let records = 1 + rng.below(5) as u32;
            let value = format!("round {round} batch {i} ").repeat(1 + rng.below(30) as usize);
            let batch = build_batch(records, value.as_bytes(), now_ms + round);
            let (code, base) = produce(broker.port, "t", 0, batch.clone());
            assert_eq!(code, 0, "produce in round {round}");
            assert_eq!(base, next_offset, "offsets stay dense across repairs");
            next_offset += i64::from(records);
            acked.push((base, batch));
        }
        broker.kill();
        let done = damage(&partition_dir, &mut rng, &acked.last().expect("acked").1);
        broker.restart();

        let (high_watermark, stored) = read_everything(broker.port);
        let context = format!(
            "seed {seed}, round {round}, damage: {done}\nlog:\n{}",
            broker.log()
        );
        assert_eq!(high_watermark, next_offset, "{context}");
        assert_eq!(stored.len(), acked.len(), "{context}");
        for ((base, sent), got) in acked.iter().zip(&stored) {
            assert_eq!(got.base_offset as i64, *base, "{context}");
            assert_eq!(
                got.suffix[..],
                sent[16..],
                "batch at {base} intact; {context}"
            );
        }
        repairs = broker.log().matches("repaired partition on open").count();
    }
    assert!(
        repairs > 0,
        "the broker logs what it repaired:\n{}",
        broker.log()
    );
}

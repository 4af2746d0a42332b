use std::time::{Duration, Instant};
fn main() {
    let spin: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0))
        .spin_before_park(Duration::from_micros(spin))
        .spawn(|| async move {
            for round in 0..3 {
                let mut max = Duration::ZERO;
                let mut over = Vec::new();
                for _ in 0..20000 {
                    let t = Instant::now();
                    glommio::timer::sleep(Duration::from_micros(50)).await;
                    let e = t.elapsed().saturating_sub(Duration::from_micros(50));
                    over.push(e);
                    max = max.max(e);
                }
                over.sort();
                println!(
                    "round {round}: p50 {:?} p99 {:?} p99.9 {:?} max {:?}",
                    over[10000], over[19800], over[19980], max
                );
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

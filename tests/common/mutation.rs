//! Random mutation of valid inputs for the fuzz targets: bit flips, random bytes,
//! insertions, deletions, truncation, extreme lengths and counts, duplicated runs.

use super::rng::Rng;

/// How long each fuzz target runs: `WEIR_FUZZ_SECONDS`, default 3.
pub fn fuzz_seconds() -> u64 {
    super::env_or("WEIR_FUZZ_SECONDS", 3)
}

/// Values that break length and count fields.
const EXTREMES: [i32; 8] = [0, -1, 1, i32::MAX, i32::MIN, 0x7fff, 0xffff, 1 << 20];

/// Applies one to four random mutations to `seed`.
pub fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..1 + rng.index(4) {
        let len = out.len();
        match rng.index(7) {
            0 if len > 0 => {
                let at = rng.index(len);
                out[at] ^= 1 << rng.index(8);
            }
            1 if len > 0 => {
                let at = rng.index(len);
                out[at] = rng.next() as u8;
            }
            2 => {
                let at = rng.index(len + 1);
                let bytes: Vec<u8> = (0..1 + rng.index(16)).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
            3 if len > 0 => {
                let at = rng.index(len);
                let end = (at + 1 + rng.index(32)).min(len);
                out.drain(at..end);
            }
            4 => out.truncate(rng.index(len + 1)),
            5 if len >= 4 => {
                let at = rng.index(len - 3);
                let value = EXTREMES[rng.index(EXTREMES.len())];
                if rng.index(2) == 0 {
                    out[at..at + 4].copy_from_slice(&value.to_be_bytes());
                } else {
                    out[at..at + 2].copy_from_slice(&(value as i16).to_be_bytes());
                }
            }
            _ if len > 0 => {
                let at = rng.index(len);
                let end = (at + 1 + rng.index(64)).min(len);
                let copy = out[at..end].to_vec();
                let to = rng.index(len + 1);
                out.splice(to..to, copy);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out
}

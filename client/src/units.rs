//! The one parser for durations and core lists: the broker's flags and TOML file, the
//! admin commands and loadgen all read them the same way.

use std::time::Duration;

/// A value that is not a duration or a core list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not {expected}")]
pub struct UnitError {
    /// What was given.
    pub text: String,
    /// What was expected, with an example.
    pub expected: &'static str,
}

const DURATION: &str = "a duration like 250us, 5ms, 1.5s, 2m, 12h or 7d (a bare number is milliseconds, as in Kafka's *.ms settings)";
const CORES: &str = "a list of cores like 0,2 or 1-3";

/// Parses `"250us"`, `"1ms"`, `"1.5s"`, `"2m"`, `"12h"`, `"7d"`; a bare number is
/// milliseconds, as Kafka's `*.ms` settings are. Negative, non-finite and unknown units
/// are refused.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let bad = || UnitError {
        text: text.to_string(),
        expected: DURATION,
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let seconds_per_unit = match unit {
        "" | "ms" => 1e-3,
        "us" => 1e-6,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(bad()),
    };
    // Whole numbers stay exact (a float of 7d in microseconds would round).
    if number.fract() == 0.0 && number < u64::MAX as f64 {
        let n = number as u64;
        return Ok(match unit {
            "us" => Duration::from_micros(n),
            "" | "ms" => Duration::from_millis(n),
            _ => Duration::from_secs(n.saturating_mul(seconds_per_unit as u64)),
        });
    }
    Duration::try_from_secs_f64(number * seconds_per_unit).map_err(|_| bad())
}

/// Parses `"1,3"`, `"0-2"`, `"3,0-1"` into cores in the order written (a shard list is
/// placed in that order); empty items are skipped, so `""` is no cores.
pub fn parse_cores(text: &str) -> Result<Vec<usize>, UnitError> {
    let bad = || UnitError {
        text: text.to_string(),
        expected: CORES,
    };
    let mut cores = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                cores.extend(a..=b);
            }
            None => cores.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_millis(5)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5w").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn cores_parse_lists_and_ranges_in_order() {
        assert_eq!(parse_cores("0"), Ok(vec![0]));
        assert_eq!(parse_cores("3,0-1"), Ok(vec![3, 0, 1]));
        assert_eq!(parse_cores(" 1, ,3 "), Ok(vec![1, 3]));
        assert_eq!(parse_cores(""), Ok(vec![]));
        assert!(parse_cores("2-1").is_err());
        assert!(parse_cores("a").is_err());
    }
}

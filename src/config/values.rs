//! The typed values an option takes, each parsed once where it is read (a flag by
//! clap, a TOML key by serde) through the same `FromStr`, so both refuse the same
//! text with the same reason.

use std::{fmt::Display, str::FromStr, time::Duration};

use serde::{Deserialize, Deserializer};
use weir_client::units::{parse_cores, parse_duration, UnitError};

use crate::storage::FlushMode;

/// A duration as written: `250us`, `5ms`, `1.5s`, `2m`, `12h`, `7d`, or a bare number
/// of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Span, UnitError> {
        parse_duration(text).map(Span)
    }
}

/// Cores as written: `0,2` or `1-3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cores(pub Vec<usize>);

impl FromStr for Cores {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Cores, UnitError> {
        parse_cores(text).map(Cores)
    }
}

/// A setting that `off` (or `none`) switches off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrOff<T> {
    /// `off` or `none`.
    Off,
    /// A value.
    On(T),
}

impl<T> OrOff<T> {
    /// The value, `None` when off.
    pub fn on(self) -> Option<T> {
        match self {
            OrOff::Off => None,
            OrOff::On(v) => Some(v),
        }
    }
}

impl<T: FromStr> FromStr for OrOff<T>
where
    T::Err: Display,
{
    type Err = ValueError;

    fn from_str(text: &str) -> Result<OrOff<T>, ValueError> {
        match text {
            "off" | "none" => Ok(OrOff::Off),
            text => text
                .parse()
                .map(OrOff::On)
                .map_err(|e| ValueError(format!("{e} (or off)"))),
        }
    }
}

/// Text that is none of the values an option takes; says which ones it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

impl FromStr for FlushMode {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<FlushMode, ValueError> {
        match text {
            "fsync" => Ok(FlushMode::Fsync),
            "write-only" => Ok(FlushMode::WriteOnly),
            other => Err(ValueError(format!(
                "{other:?} is neither fsync nor write-only"
            ))),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; coloured only when written to a terminal.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl FromStr for LogFormat {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<LogFormat, ValueError> {
        match text {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(ValueError(format!("{other:?} is neither text nor json"))),
        }
    }
}

/// Reads a TOML string through the value's `FromStr`, as clap reads the flag: for
/// `#[serde(default, deserialize_with = "parsed")]` on an `Option` field.
pub(super) fn parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = String::deserialize(d)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_switches_off_and_anything_else_parses_as_the_value() {
        assert_eq!("off".parse::<OrOff<Span>>(), Ok(OrOff::Off));
        assert_eq!(
            "5ms".parse::<OrOff<Span>>(),
            Ok(OrOff::On(Span(Duration::from_millis(5))))
        );
        let err = "soon".parse::<OrOff<Span>>().expect_err("not a duration");
        assert!(err.0.ends_with("(or off)"), "{err}");
        assert!("sometimes".parse::<FlushMode>().is_err());
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
    }
}

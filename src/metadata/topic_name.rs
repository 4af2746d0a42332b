//! Kafka's rules for topic names.

/// Longest topic name Kafka accepts.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Which of Kafka's topic-name rules a name breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    /// The name is empty.
    #[error("topic name is empty")]
    Empty,
    /// The name is longer than [`TOPIC_NAME_BYTES_MAX`].
    #[error("topic name is longer than {TOPIC_NAME_BYTES_MAX} characters")]
    TooLong,
    /// The name is `.` or `..`.
    #[error("topic name cannot be {0:?}")]
    Dots(String),
    /// The name holds a character outside `[a-zA-Z0-9._-]`.
    #[error("topic name contains {0:?}; only a-z, A-Z, 0-9, '.', '_' and '-' are allowed")]
    Character(char),
}

/// Checks `name` against Kafka's rules: 1 to 249 characters from `[a-zA-Z0-9._-]`,
/// and neither `.` nor `..`. The error says which rule failed.
pub fn validate(name: &str) -> Result<(), TopicNameError> {
    if name.is_empty() {
        return Err(TopicNameError::Empty);
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(TopicNameError::TooLong);
    }
    if name == "." || name == ".." {
        return Err(TopicNameError::Dots(name.to_string()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(TopicNameError::Character(c));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_rules() {
        assert!(validate("orders.v2_eu-1").is_ok());
        for bad in ["", ".", "..", "a b", "a/b", "ü"] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
        assert!(validate(&"x".repeat(250)).is_err());
        assert!(validate(&"x".repeat(249)).is_ok());
    }
}

//! Kafka's rules for topic names.

/// Longest topic name Kafka accepts.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Checks `name` against Kafka's rules: 1 to 249 characters from `[a-zA-Z0-9._-]`,
/// and neither `.` nor `..`. The error says which rule failed.
pub fn validate(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(format!(
            "topic name is longer than {TOPIC_NAME_BYTES_MAX} characters"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be {name:?}"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name contains {c:?}; only a-z, A-Z, 0-9, '.', '_' and '-' are allowed"
        ));
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

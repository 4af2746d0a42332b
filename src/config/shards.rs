//! The shards section: how many shards, on which cores, how an idle one waits, and how
//! they log.

use std::time::Duration;

use super::{invalid, options::ServeOptions, BrokerConfig, ConfigError};

/// Sets the shard count, their cores, their idle polling and logging.
pub(super) fn apply(c: &mut BrokerConfig, o: &ServeOptions) {
    if let Some(n) = o.shards {
        c.shards = n;
    }
    if let Some(cores) = &o.cores {
        c.cores.clone_from(&cores.0);
    }
    if let Some(s) = o.spin_before_park {
        c.spin_before_park = s.0;
    }
    if let Some(l) = &o.log_level {
        c.log_level.clone_from(l);
    }
    if let Some(f) = o.log_format {
        c.log_format = f;
    }
}

/// Checks the shards fit the machine's cores and the log filter parses.
pub(super) fn validate(c: &BrokerConfig) -> Result<(), ConfigError> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if c.shards == 0 || c.shards > 1024 {
        return Err(invalid(
            "--shards",
            format!("{} is not within 1..=1024", c.shards),
        ));
    }
    if !c.cores.is_empty() && c.cores.len() != c.shards {
        return Err(invalid(
            "--cores",
            format!("{} cores listed for {} shards", c.cores.len(), c.shards),
        ));
    }
    if let Some(core) = c.cores.iter().find(|&&core| core >= cpus) {
        return Err(invalid(
            "--cores",
            format!("core {core} does not exist (this machine has {cpus})"),
        ));
    }
    if c.cores.is_empty() && c.shards > cpus {
        return Err(invalid(
            "--shards",
            format!("{} shards but only {cpus} cores", c.shards),
        ));
    }
    if c.spin_before_park > Duration::from_secs(1) {
        return Err(invalid("--spin-before-park", "at most 1s"));
    }
    tracing_subscriber::EnvFilter::try_new(&c.log_level)
        .map_err(|e| invalid("--log-level", e.to_string()))?;
    Ok(())
}

//! Settings as a TOML file or the command line give them: every field optional, a
//! layer over the one beneath.

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;

/// Settings as written in a TOML file or given as flags; unset fields keep the value
/// underneath. Durations are strings such as `"1ms"` or `"5s"`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigOverrides {
    /// `--listen HOST:PORT`
    pub listen: Option<String>,
    /// `--advertise HOST`
    pub advertise: Option<String>,
    /// `--data-dir DIR`
    pub data_dir: Option<PathBuf>,
    /// `--shards N`
    pub shards: Option<usize>,
    /// `--cores LIST`, e.g. `"1,3"`
    pub cores: Option<String>,
    /// `--flush-interval DURATION`
    pub flush_interval: Option<String>,
    /// `--flush-target-p99 DURATION|off`
    pub flush_target_p99: Option<String>,
    /// `--flush-mode fsync|write-only`
    pub flush_mode: Option<String>,
    /// `--flush-bytes N`
    pub flush_bytes: Option<u64>,
    /// `--spin-before-park DURATION`
    pub spin_before_park: Option<String>,
    /// `--auto-create-topics BOOL`
    pub auto_create_topics: Option<bool>,
    /// `--default-partitions N`
    pub default_partitions: Option<u32>,
    /// `--log-level LEVEL`
    pub log_level: Option<String>,
    /// `--log-format text|json`
    pub log_format: Option<String>,
    /// `--metrics-listen HOST:PORT|off`
    pub metrics_listen: Option<String>,
    /// `--max-request-bytes N`
    pub max_request_bytes: Option<usize>,
    /// `--message-max-bytes N`
    pub message_max_bytes: Option<usize>,
    /// `--cache-bytes N`
    pub cache_bytes: Option<usize>,
    /// `--segment-bytes N`
    pub segment_bytes: Option<u64>,
    /// `--inflight-bytes N`
    pub inflight_bytes: Option<usize>,
    /// `--idle-timeout DURATION`
    pub idle_timeout: Option<String>,
    /// `--retention DURATION`
    pub retention: Option<String>,
    /// `--retention-bytes N`
    pub retention_bytes: Option<u64>,
    /// `--compaction-rate BYTES`
    pub compaction_rate: Option<u64>,
    /// `--recycle-bytes BYTES`
    pub recycle_bytes: Option<u64>,
    /// `--delete-rate BYTES`
    pub delete_rate: Option<u64>,
    /// `--node-id N`
    pub node_id: Option<u32>,
    /// `--controller-quorum-voters ID@HOST:PORT,...`
    pub controller_quorum_voters: Option<String>,
    /// `--controller-listen HOST:PORT`
    pub controller_listen: Option<String>,
    /// `--process-roles broker,controller`
    pub process_roles: Option<String>,
    /// `--session-timeout DURATION`
    pub session_timeout: Option<String>,
    /// `--default-replication-factor N`
    pub default_replication_factor: Option<u32>,
    /// `--replica-lag-time-max DURATION`
    pub replica_lag_time_max: Option<String>,
    /// `--tls-listen HOST:PORT`
    pub tls_listen: Option<String>,
    /// `--tls-cert FILE`
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key FILE`
    pub tls_key: Option<PathBuf>,
    /// `--tls-client-ca FILE`
    pub tls_client_ca: Option<PathBuf>,
    /// `--sasl-mechanisms LIST`, e.g. `"SCRAM-SHA-512,PLAIN"`
    pub sasl_mechanisms: Option<String>,
    /// `--sasl-user NAME:PASSWORD`, repeatable (a TOML array)
    pub sasl_user: Option<Vec<String>>,
    /// `--authorizer acl|none`
    pub authorizer: Option<String>,
    /// `--super-users "User:a;User:b"`
    pub super_users: Option<String>,
}

impl ConfigOverrides {
    /// Reads overrides from a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<ConfigOverrides, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::File {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// Overrides set in `self` win over those in `below`.
    pub fn over(self, below: ConfigOverrides) -> ConfigOverrides {
        ConfigOverrides {
            listen: self.listen.or(below.listen),
            advertise: self.advertise.or(below.advertise),
            data_dir: self.data_dir.or(below.data_dir),
            shards: self.shards.or(below.shards),
            cores: self.cores.or(below.cores),
            flush_interval: self.flush_interval.or(below.flush_interval),
            flush_target_p99: self.flush_target_p99.or(below.flush_target_p99),
            flush_mode: self.flush_mode.or(below.flush_mode),
            flush_bytes: self.flush_bytes.or(below.flush_bytes),
            spin_before_park: self.spin_before_park.or(below.spin_before_park),
            auto_create_topics: self.auto_create_topics.or(below.auto_create_topics),
            default_partitions: self.default_partitions.or(below.default_partitions),
            log_level: self.log_level.or(below.log_level),
            log_format: self.log_format.or(below.log_format),
            metrics_listen: self.metrics_listen.or(below.metrics_listen),
            max_request_bytes: self.max_request_bytes.or(below.max_request_bytes),
            message_max_bytes: self.message_max_bytes.or(below.message_max_bytes),
            cache_bytes: self.cache_bytes.or(below.cache_bytes),
            segment_bytes: self.segment_bytes.or(below.segment_bytes),
            inflight_bytes: self.inflight_bytes.or(below.inflight_bytes),
            idle_timeout: self.idle_timeout.or(below.idle_timeout),
            retention: self.retention.or(below.retention),
            retention_bytes: self.retention_bytes.or(below.retention_bytes),
            compaction_rate: self.compaction_rate.or(below.compaction_rate),
            recycle_bytes: self.recycle_bytes.or(below.recycle_bytes),
            delete_rate: self.delete_rate.or(below.delete_rate),
            node_id: self.node_id.or(below.node_id),
            controller_quorum_voters: self
                .controller_quorum_voters
                .or(below.controller_quorum_voters),
            controller_listen: self.controller_listen.or(below.controller_listen),
            process_roles: self.process_roles.or(below.process_roles),
            session_timeout: self.session_timeout.or(below.session_timeout),
            default_replication_factor: self
                .default_replication_factor
                .or(below.default_replication_factor),
            replica_lag_time_max: self.replica_lag_time_max.or(below.replica_lag_time_max),
            tls_listen: self.tls_listen.or(below.tls_listen),
            tls_cert: self.tls_cert.or(below.tls_cert),
            tls_key: self.tls_key.or(below.tls_key),
            tls_client_ca: self.tls_client_ca.or(below.tls_client_ca),
            sasl_mechanisms: self.sasl_mechanisms.or(below.sasl_mechanisms),
            sasl_user: self.sasl_user.or(below.sasl_user),
            authorizer: self.authorizer.or(below.authorizer),
            super_users: self.super_users.or(below.super_users),
        }
    }
}

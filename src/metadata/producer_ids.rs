//! Producer ids for idempotent producers: unique across the broker's shards and across
//! restarts, and across the hosts of a cluster: host `h` hands out
//! `h << 40 | n` (host 0, a single host, hands out what it always did). Ids are handed
//! out from blocks; the end of the current block is written
//! durably (`producer_ids` in the data directory) before any id in it is used, so a
//! restart continues after every id ever handed out.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
};

/// File holding the end of the reserved block.
pub const PRODUCER_IDS_FILE: &str = "producer_ids";

/// Ids reserved per durable write.
const BLOCK: i64 = 1000;

/// Why an id could not be handed out.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    /// The block file could not be read or written.
    #[error("producer id file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The block file does not hold a number.
    #[error("producer id file {0} is corrupt")]
    Corrupt(PathBuf),
}

struct Ids {
    next: i64,
    reserved_end: i64,
}

/// Bits of a producer id counted by one host; the host node id sits above them.
const HOST_SHIFT: u32 = 40;

/// The broker's producer id allocator. `Send + Sync`: one per broker.
pub struct ProducerIds {
    path: PathBuf,
    host_base: i64,
    ids: Mutex<Ids>,
}

impl ProducerIds {
    /// Loads host `host`'s allocator from `data_dir`. Blocking: call at start-up.
    pub fn load(data_dir: &Path, host: u32) -> Result<ProducerIds, ProducerIdError> {
        let path = data_dir.join(PRODUCER_IDS_FILE);
        let next = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| ProducerIdError::Corrupt(path.clone()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Io { path, source }),
        };
        Ok(ProducerIds {
            path,
            host_base: i64::from(host) << HOST_SHIFT,
            ids: Mutex::new(Ids {
                next,
                reserved_end: next,
            }),
        })
    }

    /// A fresh producer id. Every [`BLOCK`] ids this waits for one durable write on
    /// the blocking pool.
    pub async fn allocate(self: &std::sync::Arc<Self>) -> Result<i64, ProducerIdError> {
        loop {
            {
                let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
                if ids.next < ids.reserved_end {
                    ids.next += 1;
                    return Ok(self.host_base | (ids.next - 1));
                }
            }
            let me = std::sync::Arc::clone(self);
            glommio::executor()
                .spawn_blocking(move || me.reserve_block())
                .await?;
        }
    }

    fn reserve_block(&self) -> Result<(), ProducerIdError> {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.next < ids.reserved_end {
            return Ok(());
        }
        let end = ids.reserved_end + BLOCK;
        let io = |source| ProducerIdError::Io {
            path: self.path.clone(),
            source,
        };
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, end.to_string()).map_err(io)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        ids.reserved_end = end;
        Ok(())
    }
}

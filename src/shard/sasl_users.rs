//! The users of `--sasl-user`, created or updated at start so a new broker is not
//! locked out: each gets SCRAM-SHA-256 and SCRAM-SHA-512 credentials for its password,
//! unless the stored ones already match it (a restart changes nothing). Shard 0 does
//! this before it serves; a cluster host whose controllers cannot take the change yet
//! keeps trying in the background.

use std::{rc::Weak, time::Duration};

use crate::security::{
    credentials::{ScramChange, ScramCredential, ScramHash},
    state::SecurityChange,
};

use super::context::ShardContext;

/// PBKDF2 iterations of the credentials made here (Kafka's default for new ones).
const ITERATIONS: u32 = 4096;

/// How long shard 0 waits for the users before it serves anyway.
pub const FIRST_TRY_MAX: Duration = Duration::from_secs(5);

/// Between attempts while the controller cannot take the change.
const RETRY: Duration = Duration::from_secs(1);

/// Makes sure every `--sasl-user` has credentials for its password, retrying until it
/// is done or the shard is gone.
pub async fn ensure(ctx: Weak<ShardContext>) {
    loop {
        let Some(strong) = ctx.upgrade() else {
            return;
        };
        match ensure_once(&strong).await {
            Ok(0) => return,
            Ok(n) => {
                tracing::info!(users = n, "SASL users created or updated");
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot store SASL users yet; retrying"),
        }
        drop(strong);
        glommio::timer::sleep(RETRY).await;
    }
}

/// One attempt; how many users changed.
async fn ensure_once(ctx: &ShardContext) -> Result<usize, String> {
    let Some(sasl) = ctx.config.sasl.clone() else {
        return Ok(0);
    };
    let mut changes = Vec::new();
    let mut users = 0;
    for (user, password) in sasl.users {
        let stored: Vec<(ScramHash, Option<ScramCredential>)> =
            [ScramHash::Sha256, ScramHash::Sha512]
                .into_iter()
                .map(|h| (h, ctx.registry.scram_credential(&user, h)))
                .collect();
        let (name, secret) = (user.clone(), password.clone());
        let made = glommio::executor()
            .spawn_blocking(move || {
                stored
                    .into_iter()
                    .filter(|(h, held)| !held.as_ref().is_some_and(|c| c.matches(*h, &secret)))
                    .map(|(hash, _)| {
                        let credential = ScramCredential::from_password(hash, &secret, ITERATIONS)?;
                        Ok(ScramChange::Upsert {
                            user: name.clone(),
                            hash,
                            credential,
                        })
                    })
                    .collect::<Result<Vec<_>, crate::security::credentials::CredentialError>>()
            })
            .await
            .map_err(|e| e.to_string())?;
        users += usize::from(!made.is_empty());
        changes.extend(made);
    }
    if changes.is_empty() {
        return Ok(0);
    }
    ctx.registry
        .alter_security(SecurityChange::Scram(changes))
        .await
        .map_err(|e| e.to_string())?;
    Ok(users)
}

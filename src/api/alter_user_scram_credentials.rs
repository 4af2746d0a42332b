//! AlterUserScramCredentials: creates, replaces and deletes users' SCRAM credentials.
//! The client sends the password already salted (with its salt and iteration count), so
//! the password never reaches the broker; the broker keeps only the stored and server
//! keys. Each user's changes apply together or not at all; every user is answered on
//! its own.

use std::{collections::BTreeMap, rc::Rc};

use kafka_protocol::{
    messages::{
        alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    },
    ResponseError,
};
use weir_client::scram::Mechanism;

use crate::{
    security::acl::Operation,
    security::{
        credentials::{ScramChange, ScramCredential, ScramHash},
        state::SecurityChange,
    },
    shard::context::ShardContext,
};

use super::{authorize::Access, error_code::KafkaError, str_bytes, Call, Handler, Reply};

/// Changes users' SCRAM credentials.
pub struct AlterUserScramCredentials;

/// A user's changes, or why they are refused.
type Checked = Result<Vec<ScramChange>, (ResponseError, String)>;

impl Handler for AlterUserScramCredentials {
    type Request = AlterUserScramCredentialsRequest;
    type Response = AlterUserScramCredentialsResponse;

    fn errors(r: &AlterUserScramCredentialsResponse, error: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|u| error(u.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: AlterUserScramCredentialsRequest,
    ) -> Reply<AlterUserScramCredentialsResponse> {
        let allowed = Access::of(&ctx, &call).await.cluster(Operation::Alter);
        let users = ctx.registry.users();
        let mut per_user: BTreeMap<String, Checked> = BTreeMap::new();
        let mut touched: BTreeMap<(String, i8), usize> = BTreeMap::new();
        let deletions = request
            .deletions
            .iter()
            .map(|d| (d.name.as_str(), d.mechanism, None));
        let upsertions = request
            .upsertions
            .iter()
            .map(|u| (u.name.as_str(), u.mechanism, Some(u)));
        for (name, mechanism, upsert) in deletions.chain(upsertions) {
            *touched.entry((name.to_string(), mechanism)).or_default() += 1;
            let entry = per_user.entry(name.to_string()).or_insert(Ok(Vec::new()));
            if !allowed {
                *entry = Err((
                    ResponseError::ClusterAuthorizationFailed,
                    "ALTER on the cluster is needed".into(),
                ));
            }
            let Ok(changes) = entry else { continue };
            let checked = check(
                name,
                mechanism,
                upsert.map(|u| (u.iterations, &u.salt[..], &u.salted_password[..])),
                |h| users.get(name, h).is_some(),
            );
            match checked {
                Ok(change) => changes.push(change),
                Err(refusal) => *entry = Err(refusal),
            }
        }
        // A mechanism named twice for one user is refused for that user.
        for ((name, _), n) in touched {
            if n > 1 {
                per_user.insert(
                    name.clone(),
                    Err((
                        ResponseError::DuplicateResource,
                        format!("a mechanism of user {name} is changed twice"),
                    )),
                );
            }
        }
        let accepted: Vec<ScramChange> = per_user
            .values()
            .filter_map(|c| c.as_ref().ok())
            .flatten()
            .cloned()
            .collect();
        let applied = if accepted.is_empty() {
            Ok(())
        } else {
            ctx.registry
                .alter_security(SecurityChange::Scram(accepted))
                .await
        };
        let mut response = AlterUserScramCredentialsResponse::default();
        for (name, checked) in per_user {
            let mut result = AlterUserScramCredentialsResult::default();
            result.user = str_bytes(&name);
            let refusal = match (checked, &applied) {
                (Err(refusal), _) => Some(refusal),
                (Ok(_), Err(e)) => Some((e.kafka_error(), e.to_string())),
                (Ok(_), Ok(())) => None,
            };
            if let Some((error, message)) = refusal {
                result.error_code = error.code();
                result.error_message = Some(str_bytes(&message));
            }
            response.results.push(result);
        }
        Reply::Respond(response)
    }
}

/// Checks one deletion (`upsert` absent) or upsertion (iterations, salt, salted
/// password) of `name`'s credential for Kafka's `mechanism`; `held` says whether the
/// user has a credential for a mechanism now.
fn check(
    name: &str,
    mechanism: i8,
    upsert: Option<(i32, &[u8], &[u8])>,
    held: impl Fn(ScramHash) -> bool,
) -> Result<ScramChange, (ResponseError, String)> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "the user name is empty".into(),
        ));
    }
    let hash: ScramHash = Mechanism::from_kafka_type(mechanism)
        .ok_or_else(|| {
            (
                ResponseError::UnsupportedSaslMechanism,
                format!("unknown SCRAM mechanism {mechanism}"),
            )
        })?
        .into();
    let user = name.to_string();
    match upsert {
        None if !held(hash) => Err((
            ResponseError::ResourceNotFound,
            format!("user {name} has no {} credential", hash.mechanism().name()),
        )),
        None => Ok(ScramChange::Delete { user, hash }),
        Some((iterations, salt, salted)) => {
            let credential = ScramCredential::from_salted(hash, salt, salted, iterations)
                .map_err(|e| (ResponseError::UnacceptableCredential, e.to_string()))?;
            Ok(ScramChange::Upsert {
                user,
                hash,
                credential,
            })
        }
    }
}

//! `weir users`: SCRAM users over the wire (AlterUserScramCredentials and
//! DescribeUserScramCredentials), so it works against any host of a cluster. The
//! password is salted here; only the salted form crosses the network.

use std::num::NonZeroU32;

use kafka_protocol::messages::{
    alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion},
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use weir_client::scram::{self, Mechanism, ITERATIONS_MAX, ITERATIONS_MIN};

use super::commands::{check, Admin, AdminError, Result};

impl Admin {
    /// Every user with its SCRAM mechanisms and iteration counts.
    pub fn users_list(&mut self) -> Result<String> {
        let request = DescribeUserScramCredentialsRequest::default();
        let answer = self.bootstrap().call(&request, 0)?;
        check(answer.error_code, "listing users")?;
        let mut out = format!("{:<24} {}\n", "USER", "MECHANISMS");
        for user in &answer.results {
            check(user.error_code, format!("user {}", user.user.as_str()))?;
            let mechanisms: Vec<String> = user
                .credential_infos
                .iter()
                .map(|c| {
                    let name = Mechanism::from_kafka_type(c.mechanism).map_or("?", |m| m.name());
                    format!("{name} ({} iterations)", c.iterations)
                })
                .collect();
            out.push_str(&format!(
                "{:<24} {}\n",
                user.user.as_str(),
                mechanisms.join(", ")
            ));
        }
        Ok(out)
    }

    /// Creates `user` (or sets its password) with SCRAM-SHA-256 and SCRAM-SHA-512
    /// credentials of `iterations`.
    pub fn users_create(&mut self, user: &str, password: &str, iterations: u32) -> Result<String> {
        let counted = NonZeroU32::new(iterations)
            .filter(|_| (ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations))
            .ok_or_else(|| {
                AdminError::Refused(format!(
                    "--iterations must be within {ITERATIONS_MIN}..={ITERATIONS_MAX}"
                ))
            })?;
        let mut request = AlterUserScramCredentialsRequest::default();
        for m in Mechanism::ALL {
            let salt = scram::random_bytes(32).map_err(|e| AdminError::Refused(e.to_string()))?;
            let mut upsert = ScramCredentialUpsertion::default();
            upsert.name = user.to_string().into();
            upsert.mechanism = m.kafka_type();
            upsert.iterations = iterations as i32;
            upsert.salted_password = m
                .salted_password(password.as_bytes(), &salt, counted)
                .into();
            upsert.salt = salt.into();
            request.upsertions.push(upsert);
        }
        self.alter_users(&request, user)?;
        Ok(format!(
            "user {user}: SCRAM-SHA-256 and SCRAM-SHA-512 credentials set\n"
        ))
    }

    /// Deletes every SCRAM credential of `user`.
    pub fn users_delete(&mut self, user: &str) -> Result<String> {
        let mut describe = DescribeUserScramCredentialsRequest::default();
        let mut name =
            kafka_protocol::messages::describe_user_scram_credentials_request::UserName::default();
        name.name = user.to_string().into();
        describe.users = Some(vec![name]);
        let held = self.bootstrap().call(&describe, 0)?;
        let mut request = AlterUserScramCredentialsRequest::default();
        for result in &held.results {
            check(result.error_code, format!("user {user}"))?;
            for c in &result.credential_infos {
                let mut deletion = ScramCredentialDeletion::default();
                deletion.name = user.to_string().into();
                deletion.mechanism = c.mechanism;
                request.deletions.push(deletion);
            }
        }
        self.alter_users(&request, user)?;
        Ok(format!("user {user} deleted\n"))
    }

    fn alter_users(
        &mut self,
        request: &AlterUserScramCredentialsRequest,
        user: &str,
    ) -> Result<()> {
        let answer = self.bootstrap().call(request, 0)?;
        for result in &answer.results {
            let why = result.error_message.as_ref().map_or("", |m| m.as_str());
            check(result.error_code, format!("user {user} ({why})"))?;
        }
        Ok(())
    }
}

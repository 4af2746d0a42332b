//! DescribeUserScramCredentials: which SCRAM mechanisms each user has a credential for,
//! with its iteration count — never a salt or key. No names (or null) lists every user.

use std::{collections::BTreeSet, rc::Rc};

use kafka_protocol::{
    messages::{
        describe_user_scram_credentials_response::{
            CredentialInfo, DescribeUserScramCredentialsResult,
        },
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    },
    ResponseError,
};

use crate::{security::acl::Operation, shard::context::ShardContext};

use super::{authorize::Access, str_bytes, Call, Handler, Reply};

/// Lists users' SCRAM credentials.
pub struct DescribeUserScramCredentials;

impl Handler for DescribeUserScramCredentials {
    type Request = DescribeUserScramCredentialsRequest;
    type Response = DescribeUserScramCredentialsResponse;

    fn errors(r: &DescribeUserScramCredentialsResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
        r.results.iter().for_each(|u| error(u.error_code));
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: DescribeUserScramCredentialsRequest,
    ) -> Reply<DescribeUserScramCredentialsResponse> {
        if !Access::of(&ctx, &call).await.cluster(Operation::Describe) {
            let mut refused = DescribeUserScramCredentialsResponse::default();
            refused.error_code = ResponseError::ClusterAuthorizationFailed.code();
            refused.error_message = Some(str_bytes("DESCRIBE on the cluster is needed"));
            return Reply::Respond(refused);
        }
        let users = ctx.registry.users();
        let asked: Vec<String> = match &request.users {
            Some(names) if !names.is_empty() => {
                names.iter().map(|n| n.name.as_str().to_string()).collect()
            }
            _ => users.0.keys().cloned().collect(),
        };
        let mut seen = BTreeSet::new();
        let duplicated: BTreeSet<&String> = asked.iter().filter(|n| !seen.insert(*n)).collect();
        let mut response = DescribeUserScramCredentialsResponse::default();
        let mut answered = BTreeSet::new();
        for name in &asked {
            if !answered.insert(name) {
                continue;
            }
            let mut result = DescribeUserScramCredentialsResult::default();
            result.user = str_bytes(name);
            let refuse =
                |result: &mut DescribeUserScramCredentialsResult, e: ResponseError, m: String| {
                    result.error_code = e.code();
                    result.error_message = Some(str_bytes(&m));
                };
            if duplicated.contains(name) {
                refuse(
                    &mut result,
                    ResponseError::DuplicateResource,
                    format!("user {name} asked for twice"),
                );
            } else if let Some(held) = users.0.get(name) {
                result.credential_infos = held
                    .iter()
                    .map(|(hash, c)| {
                        let mut info = CredentialInfo::default();
                        info.mechanism = hash.mechanism().kafka_type();
                        info.iterations = c.iterations as i32;
                        info
                    })
                    .collect();
            } else {
                refuse(
                    &mut result,
                    ResponseError::ResourceNotFound,
                    format!("user {name} has no SCRAM credential"),
                );
            }
            response.results.push(result);
        }
        Reply::Respond(response)
    }
}

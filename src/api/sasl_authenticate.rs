//! SaslAuthenticate (v0–v2): one step of the login the handshake chose. PLAIN checks the
//! password against the user's stored SCRAM credential (PBKDF2 on the blocking pool,
//! never on the shard's thread); SCRAM takes two steps (client-first, client-final). A
//! failed step answers SASL_AUTHENTICATION_FAILED — the same for an unknown user as for
//! a wrong password — logs who tried from where (never the secret), and closes.

use std::{future::Future, rc::Rc};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse},
    ResponseError,
};
use weir_client::sasl::SaslMechanism;

use crate::{
    security::{
        credentials::ScramHash,
        plain,
        scram_server::{ExchangeError, ServerExchange},
    },
    shard::context::ShardContext,
};

use super::{
    frame_codec::Started,
    session::{LoginState, Session},
    str_bytes, Call, Decoded, Handler, Phase, Reply,
};

/// One step of a SASL login.
pub struct SaslAuthenticate;

/// A step's outcome: the bytes to answer with and the login's next state, or a refusal.
type Step = Result<(Vec<u8>, LoginState), Refusal>;

/// Why a step failed: the code, the message the client gets, and the user it named.
struct Refusal {
    error: ResponseError,
    message: &'static str,
    user: Option<String>,
    /// What was wrong, for the broker's log (never a secret).
    reason: String,
}

fn failed(user: Option<String>) -> Refusal {
    Refusal {
        error: ResponseError::SaslAuthenticationFailed,
        message: "Authentication failed: invalid user name or password",
        user,
        reason: "invalid credentials".into(),
    }
}

impl Handler for SaslAuthenticate {
    type Request = SaslAuthenticateRequest;
    type Response = SaslAuthenticateResponse;

    fn errors(r: &SaslAuthenticateResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    // The login's state moves before the next request is decoded.
    async fn start(
        ctx: Rc<ShardContext>,
        call: Call,
        request: SaslAuthenticateRequest,
    ) -> Phase<
        SaslAuthenticateResponse,
        impl Future<Output = Reply<SaslAuthenticateResponse>> + 'static,
    > {
        Phase::done(Self::answer(ctx, call, request).await)
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: SaslAuthenticateRequest,
    ) -> Reply<SaslAuthenticateResponse> {
        {
            let session = &call.session;
            let step = step(&ctx, session.take(), request.auth_bytes).await;
            let mut response = SaslAuthenticateResponse::default();
            match step {
                Ok((bytes, next)) => {
                    if let LoginState::LoggedIn(user) = &next {
                        tracing::debug!(user, peer = ?session.peer(), "SASL login");
                    }
                    response.auth_bytes = Bytes::from(bytes);
                    session.set(next);
                }
                Err(refusal) => {
                    tracing::info!(user = refusal.user.as_deref().unwrap_or("-"), peer = ?session.peer(), reason = refusal.reason, "SASL login refused; closing");
                    response.error_code = refusal.error.code();
                    response.error_message = Some(str_bytes(refusal.message));
                    // The session stays refused: the connection closes after this.
                }
            }
            Reply::Respond(response)
        }
    }
}

/// A bare SASL token (after SaslHandshake v0) as a request: the same step as a
/// SaslAuthenticate, answered with a bare length-prefixed token; a failed step sends
/// nothing and closes the connection, as Kafka does.
pub(super) fn raw_token(token: Bytes, session: Rc<Session>) -> Decoded {
    Decoded {
        key: ApiKey::SaslAuthenticate,
        answer_bytes_max: 0,
        client_id: None,
        client_software: None,
        start: Box::new(move |ctx| {
            Box::pin(async move {
                let step = step(&ctx, session.take(), token).await;
                let framed = match step {
                    Ok((bytes, next)) => {
                        session.set(next);
                        let mut out = BytesMut::with_capacity(4 + bytes.len());
                        out.put_u32(bytes.len() as u32);
                        out.extend_from_slice(&bytes);
                        Some(out.freeze())
                    }
                    Err(refusal) => {
                        tracing::info!(user = refusal.user.as_deref().unwrap_or("-"), peer = ?session.peer(), reason = refusal.reason, "SASL login refused; closing");
                        None
                    }
                };
                Started::Framed(framed)
            })
        }),
    }
}

/// Runs one step of the login in `state` on the client's `bytes`.
async fn step(ctx: &Rc<ShardContext>, state: LoginState, bytes: Bytes) -> Step {
    match state {
        LoginState::Chosen(SaslMechanism::Plain) => plain_login(ctx, &bytes).await,
        LoginState::Chosen(SaslMechanism::Scram(m)) => {
            let registry = &ctx.registry;
            let (exchange, server_first) =
                ServerExchange::start(m, &bytes, |user| registry.scram_credential(user, m.into()))
                    .map_err(|e| exchange_refusal(e, None))?;
            Ok((server_first, LoginState::Exchanging(exchange)))
        }
        LoginState::Exchanging(exchange) => {
            let named = Some(exchange.user().to_string());
            let (user, server_final) = exchange
                .finish(&bytes)
                .map_err(|e| exchange_refusal(e, named))?;
            Ok((server_final, LoginState::LoggedIn(user)))
        }
        _ => Err(Refusal {
            error: ResponseError::IllegalSaslState,
            message: "no SASL login in progress",
            user: None,
            reason: "no SASL login in progress".into(),
        }),
    }
}

fn exchange_refusal(e: ExchangeError, user: Option<String>) -> Refusal {
    match e {
        ExchangeError::Credentials => failed(user),
        ExchangeError::Malformed(_) | ExchangeError::Random => Refusal {
            error: ResponseError::SaslAuthenticationFailed,
            message: "Authentication failed: malformed SCRAM message",
            user,
            reason: e.to_string(),
        },
    }
}

/// PLAIN: the password is checked against the user's SCRAM-SHA-512 credential, or its
/// SCRAM-SHA-256 one, on the blocking pool.
async fn plain_login(ctx: &Rc<ShardContext>, bytes: &[u8]) -> Step {
    let login = plain::parse(bytes).map_err(|_| Refusal {
        error: ResponseError::SaslAuthenticationFailed,
        message: "Authentication failed: malformed PLAIN message",
        user: None,
        reason: "malformed PLAIN message".into(),
    })?;
    let stored = [ScramHash::Sha512, ScramHash::Sha256]
        .into_iter()
        .find_map(|h| Some((h, ctx.registry.scram_credential(&login.user, h)?)));
    let Some((hash, credential)) = stored else {
        return Err(failed(Some(login.user)));
    };
    let user = login.user;
    let password = login.password;
    let matched = glommio::executor()
        .spawn_blocking(move || credential.matches(hash, &password))
        .await;
    if matched {
        Ok((Vec::new(), LoginState::LoggedIn(user)))
    } else {
        Err(failed(Some(user)))
    }
}

//! SaslHandshake: the client names the mechanism it will log in with; the answer lists
//! the mechanisms offered. After v1 the login's messages come in SaslAuthenticate
//! requests; after v0 (older clients) as bare length-prefixed tokens. An unoffered mechanism is refused and the connection
//! closed, as Kafka does; on a listener without SASL the handshake is refused and the
//! connection stays open.

use std::{future::Future, rc::Rc};

use kafka_protocol::{
    messages::{SaslHandshakeRequest, SaslHandshakeResponse},
    ResponseError,
};
use weir_client::sasl::SaslMechanism;

use crate::shard::context::ShardContext;

use super::{
    session::{LoginState, Session},
    str_bytes, Call, Handler, Phase, Reply,
};

/// Chooses the connection's SASL mechanism.
pub struct SaslHandshake;

impl Handler for SaslHandshake {
    type Request = SaslHandshakeRequest;
    type Response = SaslHandshakeResponse;

    fn errors(r: &SaslHandshakeResponse, error: &mut dyn FnMut(i16)) {
        error(r.error_code);
    }

    // The login's state moves before the next request is decoded: an in-order phase
    // with nothing after it.
    async fn start(
        ctx: Rc<ShardContext>,
        call: Call,
        request: SaslHandshakeRequest,
    ) -> Phase<SaslHandshakeResponse, impl Future<Output = Reply<SaslHandshakeResponse>> + 'static>
    {
        Phase::done(Self::answer(ctx, call, request).await)
    }

    async fn answer(
        ctx: Rc<ShardContext>,
        call: Call,
        request: SaslHandshakeRequest,
    ) -> Reply<SaslHandshakeResponse> {
        let offered = ctx
            .config
            .sasl
            .as_ref()
            .map_or(&[][..], |s| &s.mechanisms[..]);
        let response = choose(&call.session, offered, request.mechanism.as_str());
        if call.version() == 0 && response.error_code == 0 {
            call.session.use_raw_tokens();
        }
        Reply::Respond(response)
    }
}

/// The answer to a handshake asking for `asked` where `offered` are offered, moving the
/// session's login on.
fn choose(session: &Session, offered: &[SaslMechanism], asked: &str) -> SaslHandshakeResponse {
    let mut response = SaslHandshakeResponse::default();
    response.mechanisms = offered.iter().map(|m| str_bytes(m.name())).collect();
    let state = session.take();
    let (error, next) = match state {
        LoginState::Open => (
            Some(ResponseError::UnsupportedSaslMechanism),
            LoginState::Open,
        ),
        LoginState::AwaitingHandshake => {
            match SaslMechanism::from_name(asked).filter(|m| offered.contains(m)) {
                Some(m) => (None, LoginState::Chosen(m)),
                None => {
                    tracing::info!(peer = ?session.peer(), mechanism = asked, "SASL mechanism not offered; closing");
                    (
                        Some(ResponseError::UnsupportedSaslMechanism),
                        LoginState::Refused,
                    )
                }
            }
        }
        // Logged in already (no re-authentication), or mid-login.
        LoginState::LoggedIn(user) => (
            Some(ResponseError::IllegalSaslState),
            LoginState::LoggedIn(user),
        ),
        _ => (Some(ResponseError::IllegalSaslState), LoginState::Refused),
    };
    session.set(next);
    response.error_code = error.map_or(0, |e| e.code());
    response
}

#[cfg(test)]
mod tests {
    use weir_client::scram::Mechanism;

    use super::*;
    use crate::api::SecurityProtocol;

    #[test]
    fn a_handshake_chooses_an_offered_mechanism_or_closes() {
        let offered = [SaslMechanism::Scram(Mechanism::Sha512)];
        let s = Session::new(SecurityProtocol::Plaintext, None, true);
        let r = choose(&s, &offered, "SCRAM-SHA-512");
        assert_eq!((r.error_code, r.mechanisms.len()), (0, 1));
        let again = choose(&s, &offered, "SCRAM-SHA-512");
        assert_eq!(again.error_code, ResponseError::IllegalSaslState.code());
        assert!(s.closing());
        let s = Session::new(SecurityProtocol::Plaintext, None, true);
        let r = choose(&s, &offered, "PLAIN");
        assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
        assert!(s.closing());
        let open = Session::new(SecurityProtocol::Plaintext, None, false);
        let r = choose(&open, &[], "PLAIN");
        assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
        assert!(!open.closing());
    }
}

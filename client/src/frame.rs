//! One request as a client puts it on the wire, one response as it comes back: the
//! 4-byte length prefix, the header the API and version call for, the body.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::{
    messages::{RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes},
};

/// Largest response a client accepts: a fetch answer is bounded by the request's
/// `max_bytes` (the broker caps it at 55 MiB plus one batch), everything else is small.
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;

/// What was wrong with a request or a response.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The request could not be encoded.
    #[error("encoding {api}: {reason}")]
    Encode {
        /// The request type.
        api: &'static str,
        /// kafka-protocol's reason.
        reason: String,
    },
    /// The response's length prefix is negative or past [`RESPONSE_BYTES_MAX`].
    #[error("response length {0}")]
    Length(i64),
    /// The response header could not be decoded.
    #[error("response header: {0}")]
    Header(String),
    /// The response answers another request.
    #[error("correlation id {got} answers request {expected}")]
    Correlation {
        /// The response's correlation id.
        got: i32,
        /// The request's.
        expected: i32,
    },
    /// The response body could not be decoded.
    #[error("decoding {api}: {reason}")]
    Body {
        /// The request type.
        api: &'static str,
        /// kafka-protocol's reason.
        reason: String,
    },
    /// Bytes were left after the response body.
    #[error("{0} bytes left after the response")]
    Trailing(usize),
}

/// Appends `request` at `version` to `out` as it goes on the wire: length prefix,
/// header (with `correlation_id` and `client_id`), body.
pub fn encode_request<R: Request>(
    out: &mut BytesMut,
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &'static str,
) -> Result<(), FrameError> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str(client_id));
    let start = out.len();
    out.put_i32(0);
    header
        .encode(out, R::header_version(version))
        .and_then(|()| request.encode(out, version))
        .map_err(|e| FrameError::Encode {
            api: std::any::type_name::<R>(),
            reason: e.to_string(),
        })?;
    let length = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

/// The body length a response's 4-byte prefix announces, refused when negative or past
/// [`RESPONSE_BYTES_MAX`] (checked before anything is allocated for it).
pub fn response_length(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let length = i32::from_be_bytes(prefix);
    usize::try_from(length)
        .ok()
        .filter(|&l| l <= RESPONSE_BYTES_MAX)
        .ok_or(FrameError::Length(i64::from(length)))
}

/// Decodes a response body (the bytes after the length prefix) that must answer request
/// `correlation_id` of type `R` sent at `version`.
pub fn decode_response<R: Request>(
    mut body: Bytes,
    correlation_id: i32,
    version: i16,
) -> Result<R::Response, FrameError> {
    let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| FrameError::Header(e.to_string()))?;
    if header.correlation_id != correlation_id {
        return Err(FrameError::Correlation {
            got: header.correlation_id,
            expected: correlation_id,
        });
    }
    let response = R::Response::decode(&mut body, version).map_err(|e| FrameError::Body {
        api: std::any::type_name::<R>(),
        reason: e.to_string(),
    })?;
    if body.has_remaining() {
        return Err(FrameError::Trailing(body.remaining()));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};

    use super::*;

    #[test]
    fn a_request_frame_carries_its_length_and_header() {
        let mut out = BytesMut::from(&b"xx"[..]);
        encode_request(&mut out, &ApiVersionsRequest::default(), 3, 9, "t").unwrap();
        let length = i32::from_be_bytes(out[2..6].try_into().unwrap()) as usize;
        assert_eq!(length, out.len() - 6);
        assert_eq!(i16::from_be_bytes([out[6], out[7]]), 18);
        assert_eq!(i32::from_be_bytes(out[10..14].try_into().unwrap()), 9);
    }

    #[test]
    fn responses_are_checked_for_correlation_and_leftovers() {
        let mut body = BytesMut::new();
        let mut header = ResponseHeader::default();
        header.correlation_id = 5;
        header.encode(&mut body, 0).unwrap();
        ApiVersionsResponse::default().encode(&mut body, 2).unwrap();
        let ok = decode_response::<ApiVersionsRequest>(body.clone().freeze(), 5, 2);
        assert!(ok.is_ok());
        assert!(matches!(
            decode_response::<ApiVersionsRequest>(body.clone().freeze(), 6, 2),
            Err(FrameError::Correlation {
                got: 5,
                expected: 6
            })
        ));
        body.put_u8(0);
        assert!(matches!(
            decode_response::<ApiVersionsRequest>(body.freeze(), 5, 2),
            Err(FrameError::Trailing(1))
        ));
        assert!(response_length((-1i32).to_be_bytes()).is_err());
        assert!(response_length(((RESPONSE_BYTES_MAX + 1) as i32).to_be_bytes()).is_err());
    }
}

//! A minimal blocking Kafka client for tests: encodes a request with kafka-protocol,
//! sends it on a plain TCP stream and decodes the response.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use bytes::{Buf, BytesMut};
use kafka_protocol::{
    messages::{RequestHeader, ResponseHeader},
    protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes},
};

/// Connects with a read timeout so a broker that never answers fails the test.
pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s
}

/// One request as it goes on the wire (length prefix included), correlation id 42.
pub fn frame<R: Request>(request: &R, version: i16) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = 42;
    header.client_id = Some(StrBytes::from_static_str("weir-test"));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .expect("encode header");
    request.encode(&mut body, version).expect("encode request");
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Sends `request` at `version` and returns its response.
pub fn call<R: Request>(stream: &mut TcpStream, request: &R, version: i16) -> R::Response {
    stream.write_all(&frame(request, version)).expect("send");
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).expect("response length");
    let mut response = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut response).expect("response");
    let mut buf = bytes::Bytes::from(response);
    let header = ResponseHeader::decode(&mut buf, R::Response::header_version(version))
        .expect("response header");
    assert_eq!(header.correlation_id, 42);
    let decoded = R::Response::decode(&mut buf, version).expect("decode response");
    assert_eq!(buf.remaining(), 0, "response fully decoded");
    decoded
}

/// True once the broker has closed `stream` (reads return end of file or an error).
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(stream.read(&mut b), Ok(0) | Err(_))
}

//! The input shape of the signature and extraction targets: an HTTP delivery as text.
//!
//! ```text
//! stripe-signature: t=1732870000,v1=...
//! content-type: application/json
//!
//! {"id":"evt_1",...}
//! ```
//!
//! Header lines up to the first empty line (`\n\n`), then the body, byte for byte. Each line is
//! `name: value` (split at the first `:`; one space after it is dropped; a trailing `\r` is
//! kept in the value, so header injection reaches the parsers); a line whose name or value
//! `http` refuses is skipped, as a server would never hand it over. Repeated names are kept
//! (appended), so the "present more than once" rules are exercised. Without an empty line the
//! whole input is the body and there are no headers.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Splits `data` into headers and body (see the module docs). Never fails.
pub fn parse_delivery(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let Some(split) = data.windows(2).position(|w| w == b"\n\n") else {
        return (headers, data);
    };
    let (head, body) = (&data[..split], &data[split + 2..]);
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            headers.append(name, value);
        }
    }
    (headers, body)
}

/// The text form of a delivery: the inverse of [`parse_delivery`] for headers it accepts.
pub fn format_delivery(headers: &[(String, String)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

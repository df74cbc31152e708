//! Verify and sign one delivery of a model source: read the signature (header or body field,
//! in its format), read and check the timestamp, build the signed content from the template,
//! and match the signatures against the keys.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, STANDARD, URL_SAFE_NO_PAD};
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use http::{HeaderMap, HeaderName};
use serde_json::Value;

use super::config::{Encoding, GenericHmac, Prepared, SignatureAt, SignatureFormat, TimestampAt};
use super::template::{sorted_form, value_text, Segment};
use super::timestamp;
use crate::algorithm::Algorithm;
use crate::asymmetric::PrivateKey;
use crate::header::{check_tolerance, single_value, Malformed};
use crate::key::{first_matching_key, SigningKey};
use crate::limits::MAX_SIGNATURES;
use crate::outcome::{Verified, VerifyError};
use crate::request::Request;

/// Base64 engines for signatures: padding optional, canonical trailing bits (a signature has
/// exactly one encoding per padding choice).
const SIGNATURE_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const SIGNATURE_BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decode one signature written as `encoding` for `algorithm`: exactly the MAC length for an
/// HMAC, 1 to [`Algorithm::max_signature_len`] bytes for a public-key signature. `None` if it
/// does not decode or has another length (hex in either case; base64 with or without padding;
/// with `strict`, only lowercase hex and padded base64: `strict_encoding`).
pub(crate) fn decode_signature(
    text: &str,
    algorithm: Algorithm,
    encoding: Encoding,
    strict: bool,
) -> Option<Vec<u8>> {
    if strict && !is_canonical_text(text, encoding) {
        return None;
    }
    let max = algorithm.max_signature_len();
    // A token is compared as sent: no encoding.
    if algorithm == Algorithm::Token {
        return (!text.is_empty() && text.len() <= max).then(|| text.as_bytes().to_vec());
    }
    // Bound the work before decoding: hex is 2 characters a byte, base64 4 per 3.
    let longest = match encoding {
        Encoding::Hex => 2 * max,
        Encoding::Base64 | Encoding::Base64url => max.div_ceil(3) * 4,
    };
    if text.is_empty() || text.len() > longest {
        return None;
    }
    let bytes = match encoding {
        Encoding::Hex => hex::decode(text).ok()?,
        Encoding::Base64 => SIGNATURE_BASE64.decode(text).ok()?,
        Encoding::Base64url => SIGNATURE_BASE64URL.decode(text).ok()?,
    };
    match algorithm.digest_len() {
        Some(len) if bytes.len() != len => None,
        _ if bytes.is_empty() || bytes.len() > max => None,
        _ => Some(bytes),
    }
}

/// Whether `text` is written as the provider writes it (`strict_encoding`): hex in lowercase,
/// standard base64 with its padding (a length that is a multiple of 4). URL-safe base64 has
/// no rule here: providers write it either way.
fn is_canonical_text(text: &str, encoding: Encoding) -> bool {
    match encoding {
        Encoding::Hex => !text.bytes().any(|b| b.is_ascii_uppercase()),
        Encoding::Base64 => text.len().is_multiple_of(4),
        Encoding::Base64url => true,
    }
}

/// Encode a signature as `encoding`: lowercase hex, padded standard base64, unpadded URL-safe
/// base64.
pub(crate) fn encode_signature(bytes: &[u8], encoding: Encoding) -> String {
    match encoding {
        Encoding::Hex => hex::encode(bytes),
        Encoding::Base64 => STANDARD.encode(bytes),
        Encoding::Base64url => URL_SAFE_NO_PAD.encode(bytes),
    }
}

/// The signatures found in a value, and the timestamp entry of a `pairs` value.
struct Candidates<'v> {
    /// Decoded signatures, at most [`MAX_SIGNATURES`].
    signatures: Vec<Vec<u8>>,
    /// A `pairs` value's timestamp entry, as received.
    timestamp: Option<&'v str>,
}

/// Parse a signature value in `config`'s format. `None` when malformed: a `plain` value without
/// the prefix or that does not decode; a `pairs` value with an entry without `assign`, an empty
/// key, or the timestamp key twice. Undecodable entries of a `pairs` or `list` value are dropped
/// (they could never match), as Stripe's libraries do.
fn candidates<'v>(value: &'v str, config: &GenericHmac) -> Option<Candidates<'v>> {
    let decode = |text: &str| {
        decode_signature(
            text,
            config.algorithm,
            config.encoding,
            config.strict_encoding,
        )
    };
    match &config.signature_format {
        SignatureFormat::Plain => {
            let text = match &config.prefix {
                Some(prefix) => value.strip_prefix(prefix.as_str())?,
                None => value,
            };
            Some(Candidates {
                signatures: vec![decode(text)?],
                timestamp: None,
            })
        }
        SignatureFormat::Pairs {
            separator,
            assign,
            signature_key,
            timestamp_key,
        } => {
            let mut found = Candidates {
                signatures: Vec::new(),
                timestamp: None,
            };
            let mut seen = 0_usize;
            for entry in value.split(separator.as_str()) {
                let (key, text) = entry.split_once(assign.as_str())?;
                if key.is_empty() {
                    return None;
                }
                if Some(key) == timestamp_key.as_deref() {
                    if found.timestamp.is_some() {
                        return None;
                    }
                    found.timestamp = Some(text);
                } else if key == signature_key {
                    seen = seen.saturating_add(1);
                    if seen <= MAX_SIGNATURES {
                        found.signatures.extend(decode(text));
                    }
                }
            }
            if timestamp_key.is_some() && found.timestamp.is_none() {
                return None;
            }
            Some(found)
        }
        SignatureFormat::List { separator, version } => {
            // Every entry is `<name><delimiter><signature>`, the delimiter being `version`'s
            // last character (`v1,` -> `,`), as the Standard Webhooks list is written: an entry
            // without it or with an empty name, or a list with no entry, is malformed. Empty
            // entries (runs of separators) are skipped; other versions are ignored.
            let delimiter = version.chars().next_back()?;
            let mut signatures = Vec::new();
            let mut entries = 0_usize;
            let mut seen = 0_usize;
            for entry in value.split(separator.as_str()).filter(|e| !e.is_empty()) {
                entries += 1;
                let (name, _) = entry.split_once(delimiter)?;
                if name.is_empty() {
                    return None;
                }
                if let Some(text) = entry.strip_prefix(version.as_str()) {
                    seen = seen.saturating_add(1);
                    if seen <= MAX_SIGNATURES {
                        signatures.extend(decode(text));
                    }
                }
            }
            (entries > 0).then_some(Candidates {
                signatures,
                timestamp: None,
            })
        }
    }
}

/// The single value of the configured header `name`, errors naming it.
fn configured_header<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
) -> Result<&'h str, VerifyError> {
    single_value(headers, name)
        .map_err(|Malformed| malformed(name.as_str()))?
        .ok_or_else(|| VerifyError::MissingHeader(Cow::Owned(name.as_str().to_owned())))
}

/// [`VerifyError::MalformedHeader`] naming `name`.
fn malformed(name: &str) -> VerifyError {
    VerifyError::MalformedHeader(Cow::Owned(name.to_owned()))
}

/// The JSON body, parsed once when a signature, timestamp or signed field is read from it.
struct Body<'b> {
    raw: &'b [u8],
    parsed: Option<Option<Value>>,
}

impl Body<'_> {
    /// The text at `pointer` (a string as is, a number or boolean as written), or `None` when
    /// the body is no JSON or has no such scalar.
    fn field(&mut self, pointer: &str) -> Option<String> {
        let raw = self.raw;
        let value = self
            .parsed
            .get_or_insert_with(|| serde_json::from_slice(raw).ok());
        value
            .as_ref()?
            .pointer(pointer)
            .and_then(value_text)
            .map(Cow::into_owned)
    }
}

/// Verify a delivery of a model source: `request` is the exact request received; `keys` were
/// prepared for the configured algorithm (by [`crate::Verifier::new`]).
///
/// Steps: read the signature (header exactly once, or the body field) and parse it in its
/// format; read the timestamp (header, body field or signature entry) and check it against
/// `now` (unix seconds) within `tolerance_secs` seconds in both directions, before any
/// cryptography; build the signed content from the template; then match every candidate
/// signature against every key (MACs in constant time).
///
/// # Errors
///
/// - [`VerifyError::NoKeys`]: `keys` is empty;
/// - [`VerifyError::MissingHeader`] with the (lowercase) name of the first absent header, or
///   `body <pointer>` for an absent body signature;
/// - [`VerifyError::MalformedHeader`] naming the header (or body field): repeated, over
///   [`crate::MAX_HEADER_LEN`] bytes, not visible ASCII, not in the configured format, a
///   timestamp that is not in its unit;
/// - [`VerifyError::TimestampOutsideTolerance`]: `|now - timestamp| > tolerance_secs`;
/// - [`VerifyError::MissingSignedField`]: a header or body field the signed content names is
///   absent;
/// - [`VerifyError::MissingConfig`]: the template signs `{url}` and the request has none;
/// - [`VerifyError::NoSignatureMatched`]: no signature matches any key.
pub(crate) fn verify(
    prepared: &Prepared,
    keys: &[SigningKey],
    request: &Request<'_>,
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let config = &prepared.config;
    let parsed = &prepared.parsed;
    // A signature over chosen fields (not the whole body) holds only if every reader sees the
    // same fields: a repeated member name is refused before anything else.
    if reads_signed_fields(prepared) && !super::unique_keys::unique_keys(request.body) {
        return Err(malformed("body"));
    }
    if let Some(batch) = config.batch.as_ref().filter(|batch| batch.signed_per_item) {
        return verify_items(prepared, batch, keys, request.body);
    }
    let aliased = aliased(prepared, request.headers)?;
    let request = &Request {
        headers: aliased.as_ref(),
        ..*request
    };
    let mut body = Body {
        raw: request.body,
        parsed: None,
    };
    let signature_name = prepared.signature_header();
    let signature_value: Cow<'_, str> = match &parsed.signature {
        SignatureAt::Header(name) => configured_header(request.headers, name)?.into(),
        SignatureAt::Field(pointer) => body
            .field(pointer)
            .ok_or_else(|| VerifyError::MissingHeader(Cow::Owned(signature_name.to_owned())))?
            .into(),
    };
    if signature_value.len() > crate::MAX_HEADER_LEN {
        return Err(malformed(signature_name));
    }
    let found = candidates(&signature_value, config).ok_or_else(|| malformed(signature_name))?;
    let timestamp_text: Option<Cow<'_, str>> = match &parsed.timestamp {
        None => None,
        Some(TimestampAt::Header(name)) => Some(configured_header(request.headers, name)?.into()),
        Some(TimestampAt::Pair(_)) => found.timestamp.map(Cow::Borrowed),
        Some(TimestampAt::Field(pointer)) => Some(
            body.field(pointer)
                .ok_or_else(|| VerifyError::MissingSignedField(format!("body {pointer}")))?
                .into(),
        ),
    };
    if let (Some(at), Some(text)) = (&parsed.timestamp, &timestamp_text) {
        let canonical = parsed.timestamp_canonical;
        let seconds =
            timestamp::parse(text, config.timestamp_unit, canonical).ok_or_else(|| match at {
                TimestampAt::Header(name) => malformed(name.as_str()),
                TimestampAt::Pair(_) => malformed(signature_name),
                TimestampAt::Field(pointer) => malformed(&format!("body {pointer}")),
            })?;
        check_tolerance(seconds, now, tolerance_secs)?;
    }
    let mut parts: Vec<Cow<'_, [u8]>> = Vec::with_capacity(parsed.template.len());
    for segment in &parsed.template {
        parts.push(match segment {
            Segment::Literal(text) => Cow::Borrowed(text.as_bytes()),
            Segment::Body => Cow::Borrowed(request.body),
            Segment::Timestamp => Cow::Owned(
                timestamp_text
                    .as_deref()
                    .unwrap_or_default()
                    .as_bytes()
                    .to_vec(),
            ),
            Segment::Url => {
                if request.url.is_empty() {
                    return Err(VerifyError::MissingConfig);
                }
                Cow::Borrowed(request.url.as_bytes())
            }
            Segment::Method => Cow::Borrowed(request.method.as_bytes()),
            Segment::Form => Cow::Owned(sorted_form(request.body).into_bytes()),
            // A signed header is required and non-empty (Standard Webhooks' `webhook-id`).
            Segment::Header(name) => match single_value(request.headers, name) {
                Ok(Some(value)) if !value.is_empty() => Cow::Borrowed(value.as_bytes()),
                Ok(None) => {
                    return Err(VerifyError::MissingHeader(Cow::Owned(
                        name.as_str().to_owned(),
                    )))
                }
                Ok(Some(_)) | Err(Malformed) => return Err(malformed(name.as_str())),
            },
            Segment::Field(pointer) => match body.field(pointer) {
                Some(text) => Cow::Owned(text.into_bytes()),
                None if config.absent_fields_empty => Cow::Borrowed(&[][..]),
                None => return Err(VerifyError::MissingSignedField(format!("body {pointer}"))),
            },
            Segment::FormField(_) | Segment::Digest => Cow::Borrowed(&[][..]),
        });
    }
    let first = {
        let parts: Vec<&[u8]> = parts.iter().map(AsRef::as_ref).collect();
        first_matching_key(keys, &parts, &found.signatures)
    };
    // The URL with and without its default port is one address, and providers sign either
    // (twilio-python's validator tries both: "sig generation on back end is inconsistent").
    let Err(VerifyError::NoSignatureMatched) = first else {
        return first;
    };
    let Some(other) = other_port_form(request.url) else {
        return first;
    };
    for (part, segment) in parts.iter_mut().zip(&parsed.template) {
        if *segment == Segment::Url {
            *part = Cow::Owned(other.clone().into_bytes());
        }
    }
    let parts: Vec<&[u8]> = parts.iter().map(AsRef::as_ref).collect();
    first_matching_key(keys, &parts, &found.signatures)
}

/// `headers` as the model reads them: each `header_aliases` header that is present stands in
/// for its target when the target is absent (Svix's `svix-*` for `webhook-*`). Borrowed, with
/// no copy, when no alias applies (every delivery of a source without aliases).
///
/// # Errors
///
/// [`VerifyError::MalformedHeader`] naming the alias as received (`svix-signature`) when it
/// is repeated, too long or not visible ASCII.
pub(crate) fn aliased<'h>(
    prepared: &Prepared,
    headers: &'h HeaderMap,
) -> Result<Cow<'h, HeaderMap>, VerifyError> {
    let applies = |(from, to): &&(HeaderName, HeaderName)| {
        !headers.contains_key(to) && headers.contains_key(from)
    };
    if !prepared.aliases.iter().any(|alias| applies(&alias)) {
        return Ok(Cow::Borrowed(headers));
    }
    let mut copy = headers.clone();
    for (from, to) in prepared.aliases.iter().filter(applies) {
        if single_value(headers, from).is_err() {
            return Err(malformed(from.as_str()));
        }
        for value in headers.get_all(from) {
            copy.append(to.clone(), value.clone());
        }
    }
    Ok(Cow::Owned(copy))
}

/// `url` with its default port made explicit (`https://host/x` -> `https://host:443/x`) or
/// removed (`http://host:80/x` -> `http://host/x`); `None` for another port, another scheme or
/// a URL without a host.
fn other_port_form(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme {
        "https" => "443",
        "http" => "80",
        _ => return None,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    match authority.rsplit_once(':') {
        // An IPv6 literal's colons are inside brackets.
        Some((host, port)) if !port.contains(']') => {
            (port == default).then(|| format!("{scheme}://{host}{path}"))
        }
        _ => Some(format!("{scheme}://{authority}:{default}{path}")),
    }
}

#[cfg(test)]
mod port_tests {
    use super::other_port_form;

    #[test]
    fn the_default_port_is_added_or_removed_and_other_ports_are_left() {
        assert_eq!(
            other_port_form("https://example.com/twilio/sms?x=1").as_deref(),
            Some("https://example.com:443/twilio/sms?x=1")
        );
        assert_eq!(
            other_port_form("https://example.com:443/twilio").as_deref(),
            Some("https://example.com/twilio")
        );
        assert_eq!(
            other_port_form("http://example.com:80").as_deref(),
            Some("http://example.com")
        );
        assert_eq!(
            other_port_form("https://[::1]/x").as_deref(),
            Some("https://[::1]:443/x")
        );
        for unchanged in [
            "https://example.com:8443/x",
            "ftp://example.com/x",
            "",
            "https:///x",
        ] {
            assert_eq!(other_port_form(unchanged), None, "{unchanged}");
        }
    }
}

/// Whether the model reads signed values out of the JSON body without signing the whole body:
/// a signature or timestamp in a body field, or `{field:...}` without `{body}`.
fn reads_signed_fields(prepared: &Prepared) -> bool {
    let parsed = &prepared.parsed;
    let whole_body = parsed.template.contains(&Segment::Body);
    !whole_body
        && (matches!(parsed.signature, SignatureAt::Field(_))
            || matches!(parsed.timestamp, Some(TimestampAt::Field(_)))
            || parsed
                .template
                .iter()
                .any(|s| matches!(s, Segment::Field(_))))
}

/// A batch whose every event object carries its own signature (Adyen): each must verify,
/// against any of the keys, over the template read inside it. Returns the key that verified
/// the last item.
///
/// # Errors
/// [`VerifyError::MalformedHeader`] naming `body` when the body cannot be split into its items;
/// per item, as [`verify`] for a signature in a body field: [`VerifyError::MissingHeader`] (no
/// signature), [`VerifyError::MalformedHeader`], [`VerifyError::MissingSignedField`] or
/// [`VerifyError::NoSignatureMatched`].
fn verify_items(
    prepared: &Prepared,
    batch: &super::config::Batch,
    keys: &[SigningKey],
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let config = &prepared.config;
    let parsed = &prepared.parsed;
    let signature_name = prepared.signature_header();
    let events = super::batch::events(body, batch).map_err(|_| malformed("body"))?;
    let mut verified = Verified { key_index: 0 };
    for event in events {
        let value: Value = serde_json::from_str(event.get()).map_err(|_| malformed("body"))?;
        let SignatureAt::Field(pointer) = &parsed.signature else {
            return Err(VerifyError::MissingConfig);
        };
        let signature = value
            .pointer(pointer)
            .and_then(Value::as_str)
            .ok_or_else(|| VerifyError::MissingHeader(Cow::Owned(signature_name.to_owned())))?;
        let found = candidates(signature, config).ok_or_else(|| malformed(signature_name))?;
        let mut parts: Vec<Cow<'_, [u8]>> = Vec::with_capacity(parsed.template.len());
        for segment in &parsed.template {
            parts.push(match segment {
                Segment::Literal(text) => Cow::Borrowed(text.as_bytes()),
                Segment::Field(field) => match value.pointer(field).and_then(value_text) {
                    Some(text) => Cow::Owned(text.into_owned().into_bytes()),
                    None if config.absent_fields_empty => Cow::Borrowed(&[][..]),
                    None => return Err(VerifyError::MissingSignedField(format!("item {field}"))),
                },
                _ => return Err(VerifyError::MissingConfig),
            });
        }
        let parts: Vec<&[u8]> = parts.iter().map(AsRef::as_ref).collect();
        verified = first_matching_key(keys, &parts, &found.signatures)?;
    }
    Ok(verified)
}

/// What signs a delivery of a model source: a shared secret ([`SigningKey`]) or a provider's
/// private key ([`PrivateKey`]).
#[derive(Debug, Clone, Copy)]
pub enum Signer<'k> {
    /// An HMAC key of the source.
    Secret(&'k SigningKey),
    /// A private key of the source's public-key algorithm.
    Private(&'k PrivateKey),
}

/// Sign a delivery as a provider configured so would, at `timestamp` (unix seconds).
///
/// `request.headers` are the headers the delivery already carries (those the template signs,
/// such as an id header); the timestamp (written in its unit, if a header carries it) and the
/// signature are returned as `(lowercase name, value)` pairs, timestamp first, to add to them.
/// A `pairs` format gets `timestamp_key=...` then the signature entry; a `list` format its
/// version then the signature. A signature or timestamp in the body cannot be added to
/// headers: the returned pairs then hold `("body <pointer>", value)` for the caller to place.
///
/// # Errors
/// A sentence when the signer does not fit the algorithm, a signed header is absent, or a
/// signed body field is missing.
pub fn sign(
    config: &GenericHmac,
    signer: Signer<'_>,
    request: &Request<'_>,
    timestamp: i64,
) -> Result<Vec<(String, String)>, String> {
    // Signing reads no event id or type: a model without naming rules (the first six presets')
    // signs as well as a configured source's.
    let prepared = Prepared::for_preset(config.clone())?;
    sign_prepared(&prepared, signer, request, timestamp, None)
}

/// [`sign`] with a prepared model (a preset's, or a [`crate::Verifier`]'s). With `header_text`,
/// every `{header:...}` of the signed content signs that text instead of the request's header
/// (the dev tool and the tests sign ids no header value can carry, to see them refused).
///
/// # Errors
///
/// As [`sign`].
pub(crate) fn sign_prepared(
    prepared: &Prepared,
    signer: Signer<'_>,
    request: &Request<'_>,
    timestamp: i64,
    header_text: Option<&str>,
) -> Result<Vec<(String, String)>, String> {
    let config = &prepared.config;
    let parsed = &prepared.parsed;
    let text = timestamp::format(timestamp, config.timestamp_unit);
    let mut body = Body {
        raw: request.body,
        parsed: None,
    };
    let timestamp_text = match &parsed.timestamp {
        Some(TimestampAt::Field(pointer)) => body
            .field(pointer)
            .ok_or_else(|| format!("the body has no timestamp at {pointer}"))?,
        _ => text.clone(),
    };
    let mut message = Vec::with_capacity(request.body.len() + 64);
    for segment in &parsed.template {
        match segment {
            Segment::Literal(literal) => message.extend_from_slice(literal.as_bytes()),
            Segment::Body => message.extend_from_slice(request.body),
            Segment::Timestamp => message.extend_from_slice(timestamp_text.as_bytes()),
            Segment::Url => message.extend_from_slice(request.url.as_bytes()),
            Segment::Method => message.extend_from_slice(request.method.as_bytes()),
            Segment::Form => message.extend_from_slice(sorted_form(request.body).as_bytes()),
            Segment::Header(name) => {
                let value = match header_text {
                    Some(text) => text,
                    None => request
                        .headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .ok_or_else(|| format!("the signed header {name} is not set"))?,
                };
                message.extend_from_slice(value.as_bytes());
            }
            Segment::Field(pointer) => match body.field(pointer) {
                Some(text) => message.extend_from_slice(text.as_bytes()),
                None if config.absent_fields_empty => {}
                None => return Err(format!("the body has no field {pointer}")),
            },
            Segment::FormField(_) | Segment::Digest => {}
        }
    }
    let signature = match signer {
        Signer::Secret(key) if config.algorithm.is_hmac() && key.is_secret() => {
            key.tag(&[&message]).as_ref().to_vec()
        }
        Signer::Private(key) if key.algorithm() == config.algorithm => key.sign(&message),
        _ => {
            return Err(format!(
                "this signer cannot sign {} deliveries",
                config.algorithm.label()
            ))
        }
    };
    let encoded = encode_signature(&signature, config.encoding);
    let mut out = Vec::with_capacity(2);
    if let Some(TimestampAt::Header(name)) = &parsed.timestamp {
        out.push((name.as_str().to_owned(), text.clone()));
    }
    let value = match &config.signature_format {
        SignatureFormat::Plain => format!("{}{encoded}", config.prefix.as_deref().unwrap_or("")),
        SignatureFormat::Pairs {
            separator,
            assign,
            signature_key,
            timestamp_key,
        } => match timestamp_key {
            Some(key) => format!("{key}{assign}{text}{separator}{signature_key}{assign}{encoded}"),
            None => format!("{signature_key}{assign}{encoded}"),
        },
        SignatureFormat::List { version, .. } => format!("{version}{encoded}"),
    };
    match &parsed.signature {
        SignatureAt::Header(name) => out.push((name.as_str().to_owned(), value)),
        SignatureAt::Field(pointer) => out.push((format!("body {pointer}"), value)),
    }
    Ok(out)
}

/// The signature of a `plain` value after `prefix`, decoded (tests of the decoding rules).
#[cfg(test)]
pub(super) fn parse_signature(
    value: &str,
    prefix: Option<&str>,
    algorithm: Algorithm,
    encoding: Encoding,
) -> Option<Vec<u8>> {
    let text = match prefix {
        Some(prefix) => value.strip_prefix(prefix)?,
        None => value,
    };
    decode_signature(text, algorithm, encoding, false)
}

/// Sign a delivery of `body` at `timestamp` (unix seconds) with `key`, as the provider of
/// `prepared` would, for tests, the local dev tool and replay: every header the signed content
/// or the event id names carries `msg_id` (signed as given, even when no header value could
/// carry it). Returns the headers to set, `(lowercase name,
/// value)`, the named ones first, then the timestamp's, then the signature's; empty when the
/// model signs the request's URL (which only the request knows: use [`sign`]) or cannot sign
/// this body (a signed body field it lacks).
pub(crate) fn sign_with_id(
    prepared: &Prepared,
    key: &SigningKey,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    // A signed URL is not known here: such a delivery is signed with the request (`sign`),
    // never over an empty URL that no receiver would see.
    if prepared.parsed.template.contains(&Segment::Url) {
        return Vec::new();
    }
    let mut named: Vec<HeaderName> = prepared
        .parsed
        .template
        .iter()
        .filter_map(|segment| match segment {
            Segment::Header(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    if let Some(name) = prepared
        .config
        .event_id_header
        .as_deref()
        .and_then(|name| HeaderName::from_bytes(name.as_bytes()).ok())
    {
        named.push(name);
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for name in named {
        if !out.iter().any(|(each, _)| each == name.as_str()) {
            out.push((name.as_str().to_owned(), msg_id.to_owned()));
        }
    }
    let headers = HeaderMap::new();
    let request = Request::post(&headers, body);
    match sign_prepared(
        prepared,
        Signer::Secret(key),
        &request,
        timestamp,
        Some(msg_id),
    ) {
        Ok(signed) => out.extend(signed),
        Err(_) => return Vec::new(),
    }
    out
}

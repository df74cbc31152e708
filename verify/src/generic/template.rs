//! The `signed_payload` template of a generic source: its placeholders, its parser (run once,
//! at start-up) and the signed payload it gives for one delivery.

/// The signed-payload template used when `signed_payload` is absent: the raw body alone.
pub const DEFAULT_SIGNED_PAYLOAD: &str = "{body}";

/// The template placeholder for the raw body bytes (required, exactly once).
pub const BODY_PLACEHOLDER: &str = "{body}";

/// The template placeholder for the timestamp header's value, as received (at most once;
/// requires `timestamp_header`).
pub const TIMESTAMP_PLACEHOLDER: &str = "{timestamp}";

/// One piece of a parsed `signed_payload` template, fed to the HMAC in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    /// Literal text, as UTF-8 bytes.
    Literal(String),
    /// The timestamp header's value, as received.
    Timestamp,
    /// The raw body.
    Body,
}

/// Parse a `signed_payload` template into segments (adjacent literal text merged).
///
/// # Errors
///
/// A sentence if a `{` is not closed, a `}` closes nothing, a placeholder is not `{body}` or
/// `{timestamp}`, `{body}` is absent or repeated, or `{timestamp}` is repeated.
pub(super) fn parse_template(template: &str) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        literal.push_str(&rest[..open]);
        let after = &rest[open..];
        if after.starts_with('}') {
            return Err(format!(
                "signed_payload {template:?} has a '}}' that closes no placeholder"
            ));
        }
        let Some(close) = after.find('}') else {
            return Err(format!("signed_payload {template:?} has an unclosed '{{'"));
        };
        let placeholder = &after[..=close];
        let segment = match placeholder {
            BODY_PLACEHOLDER => Segment::Body,
            TIMESTAMP_PLACEHOLDER => Segment::Timestamp,
            _ => {
                return Err(format!(
                    "signed_payload {template:?} has an unknown placeholder {placeholder:?} \
                     (known: {BODY_PLACEHOLDER}, {TIMESTAMP_PLACEHOLDER})"
                ))
            }
        };
        if segments.contains(&segment) {
            return Err(format!(
                "signed_payload {template:?} uses {placeholder} more than once"
            ));
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(std::mem::take(&mut literal)));
        }
        segments.push(segment);
        rest = &after[close + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    if !segments.contains(&Segment::Body) {
        return Err(format!(
            "signed_payload {template:?} must contain {BODY_PLACEHOLDER}"
        ));
    }
    Ok(segments)
}

/// The signed payload as parts fed to the HMAC in order: `template` with `{timestamp}` replaced
/// by `timestamp` and `{body}` by `body`.
pub(super) fn payload<'a>(
    template: &'a [Segment],
    timestamp: &'a str,
    body: &'a [u8],
) -> Vec<&'a [u8]> {
    template
        .iter()
        .map(|segment| match segment {
            Segment::Literal(text) => text.as_bytes(),
            Segment::Timestamp => timestamp.as_bytes(),
            Segment::Body => body,
        })
        .collect()
}

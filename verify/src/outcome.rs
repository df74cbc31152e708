//! What verifying a delivery tells: [`Verified`] (which key matched), or [`VerifyError`] (why it
//! failed, and the reason sent to the provider).

use std::borrow::Cow;

/// Why a delivery failed verification.
///
/// Every variant is answered with 401 and [`VerifyError::reason`] as the body; the `Display`
/// text (which may name a header) is for our log. None is retryable by us: the provider retries
/// on its own schedule.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A required header is absent. Carries the header's lowercase name (for Standard Webhooks
    /// the `webhook-*` name, even though `svix-*` is accepted too; for a generic source the
    /// configured name). Borrowed for the fixed schemes, owned for a generic source.
    #[error("missing header {0}")]
    MissingHeader(Cow<'static, str>),
    /// A header is present but cannot be parsed: duplicated, longer than [`MAX_HEADER_LEN`](crate::MAX_HEADER_LEN), not
    /// visible ASCII, empty, missing a separator or prefix, a non-numeric timestamp, a value
    /// that is not the expected hex or base64... Carries the lowercase name of the header as
    /// received.
    #[error("malformed header {0}")]
    MalformedHeader(Cow<'static, str>),
    /// The signed timestamp is more than the tolerance away from `now`, in either direction
    /// (too old, or too far in the future).
    #[error("timestamp outside tolerance")]
    TimestampOutsideTolerance,
    /// The headers are well-formed, but no signature matched any key (also: no signature of the
    /// expected version was present).
    #[error("no signature matched any key")]
    NoSignatureMatched,
    /// A header or body field the signed content names is absent (the name, never a value).
    #[error("missing signed field {0}")]
    MissingSignedField(String),
    /// The keys slice is empty. A configuration bug (configuration fails closed at start-up),
    /// answered like a mismatch.
    #[error("no signing keys configured for this source")]
    NoKeys,
    /// The scheme needs per-source configuration the free [`verify`](crate::verify) function does not have
    /// ([`Scheme::GenericHmac`](crate::Scheme::GenericHmac): verify through a [`Verifier`](crate::Verifier)). A configuration bug, answered
    /// like a mismatch.
    #[error("scheme needs its per-source configuration: verify through a Verifier")]
    MissingConfig,
}

impl VerifyError {
    /// Short fixed reason, safe to send to the provider in the 401 body: `"missing signature
    /// header"`, `"malformed signature header"`, `"timestamp outside tolerance"` or
    /// `"signature mismatch"` ([`VerifyError::NoKeys`] and [`VerifyError::MissingConfig`] too,
    /// so the response does not reveal our configuration).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing signature header",
            Self::MalformedHeader(_) => "malformed signature header",
            Self::MissingSignedField(_) => "missing signed field",
            Self::TimestampOutsideTolerance => "timestamp outside tolerance",
            Self::NoSignatureMatched | Self::NoKeys | Self::MissingConfig => "signature mismatch",
        }
    }
}

/// What a successful verification tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Which of the source's secrets matched: 0-based index into the `keys` slice (config
    /// order), the first that matched. Logged during a rotation to see when the old secret
    /// stops being used.
    pub key_index: usize,
}

//! MAC outputs (tags): their lengths and decoding them from headers.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Length of an HMAC-SHA256 output in bytes.
pub(crate) const TAG_LEN: usize = 32;

/// Length of an HMAC-SHA512 output in bytes.
pub(crate) const TAG512_LEN: usize = 64;

/// An HMAC-SHA256 output: computed by us or decoded from a header.
pub(crate) type Tag = [u8; TAG_LEN];

/// Length of a padded standard base64 encoding of a [`Tag`] (32 bytes -> 44 characters).
pub(crate) const TAG_BASE64_LEN: usize = TAG_LEN.div_ceil(3) * 4;

/// An HMAC output of either algorithm: what a [`SigningKey`] computes, and what the generic
/// scheme decodes from its header. Compared as byte slices, so outputs of different lengths
/// never match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnyTag {
    /// No MAC: what a public key "computes". Empty, so it matches no decoded signature.
    None,
    /// HMAC-SHA1: 20 bytes.
    Sha1([u8; 20]),
    /// HMAC-SHA256: 32 bytes.
    Sha256(Tag),
    /// HMAC-SHA512: 64 bytes.
    Sha512([u8; TAG512_LEN]),
}

impl AsRef<[u8]> for AnyTag {
    fn as_ref(&self) -> &[u8] {
        match self {
            Self::None => &[],
            Self::Sha1(tag) => tag,
            Self::Sha256(tag) => tag,
            Self::Sha512(tag) => tag,
        }
    }
}

/// Decode exactly 64 lowercase hex digits (the form Stripe, GitHub, Slack and Paddle send) into
/// a tag. `None` for any other length, uppercase or non-hex digits.
pub(crate) fn decode_lower_hex(value: &str) -> Option<Tag> {
    if value.len() != 2 * TAG_LEN
        || !value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut tag = [0_u8; TAG_LEN];
    hex::decode_to_slice(value, &mut tag).ok()?;
    Some(tag)
}

/// Decode a padded standard base64 tag (exactly 44 characters, the form Standard Webhooks and
/// Shopify send). `None` for anything else.
pub(crate) fn decode_base64_tag(value: &str) -> Option<Tag> {
    if value.len() != TAG_BASE64_LEN {
        return None;
    }
    let decoded = STANDARD.decode(value).ok()?;
    decoded.try_into().ok()
}

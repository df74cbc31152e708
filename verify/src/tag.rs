//! MAC outputs (tags) and their lengths.

/// Length of an HMAC-SHA256 output in bytes.
pub(crate) const TAG_LEN: usize = 32;

/// Length of an HMAC-SHA512 output in bytes.
pub(crate) const TAG512_LEN: usize = 64;

/// An HMAC-SHA256 output: computed by us or decoded from a header.
pub(crate) type Tag = [u8; TAG_LEN];

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

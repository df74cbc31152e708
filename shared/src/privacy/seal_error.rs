//! [`SealError`]: why a value could not be sealed or opened (`super::seal`), or a data key made
//! or unwrapped (`super::wrap`), and the [`WrapperKind`] it may name. A leaf of
//! `crate::privacy`: both use it.

use std::fmt;

/// Why a value could not be sealed or opened. None carries key material or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Not a version-1 envelope: truncated, garbled or not sealed at all (fatal for the
    /// value: retrying cannot help). Says which part is wrong.
    #[error("malformed sealed value: {0}")]
    Malformed(&'static str),
    /// Authentication failed: the ciphertext, the tag, the header or the wrapped data key was
    /// altered, or the associated data is not the one it was sealed with (a ciphertext moved to
    /// another row). On the KMS path KMS's `InvalidCiphertextException` and
    /// `IncorrectKeyException` for the wrapped data key are this too. No plaintext is
    /// returned. Fatal, never retry.
    #[error("sealed value failed authentication (altered, or sealed for another row)")]
    Tampered,
    /// The envelope names a local master key this keyring does not have (fatal until the key
    /// is configured again: a key must stay in the keys until no row uses it).
    #[error("master key {0} is not in the keyring")]
    UnknownMasterKey(String),
    /// The envelope was sealed under a master key of another kind than this keyring's (fatal
    /// for this keyring).
    #[error("sealed by the {sealed} wrapper, but this keyring uses the {keyring} one")]
    WrongWrapper {
        /// The envelope's kind.
        sealed: WrapperKind,
        /// The keyring's kind.
        keyring: WrapperKind,
    },
    /// AWS KMS refused or could not be reached: the operation, the key id, and the service's
    /// code and message or the SDK's error chain. Retryable: throttling and the network clear
    /// up (the SDK has already retried a few times); a refusal (access denied, a missing or
    /// disabled key) repeats until an operator fixes the key or the role.
    #[error("AWS KMS: {0}")]
    Kms(String),
    /// OpenSSL failed to make random bytes or to encrypt (retryable, though unlikely to
    /// change).
    #[error("crypto: {0}")]
    Crypto(String),
}

impl SealError {
    /// Whether the same call may succeed later: [`SealError::Kms`] and [`SealError::Crypto`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Kms(_) | Self::Crypto(_))
    }
}

/// Which kind of master key wrapped a data key: the envelope's byte 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrapperKind {
    /// A local master key ([`LocalKeys`](super::wrap::LocalKeys)): byte 0.
    Local,
    /// An AWS KMS key ([`KmsWrapper`](super::wrap::KmsWrapper)): byte 1.
    Kms,
}

impl WrapperKind {
    /// The envelope's byte for this kind: 0 local, 1 KMS.
    pub fn byte(self) -> u8 {
        match self {
            Self::Local => 0,
            Self::Kms => 1,
        }
    }

    /// The kind of an envelope's byte, `None` for a byte no version-1 envelope has.
    pub fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::Local),
            1 => Some(Self::Kms),
            _ => None,
        }
    }
}

impl fmt::Display for WrapperKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Kms => "AWS KMS",
        })
    }
}

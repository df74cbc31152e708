//! Payload encryption's keys as configured: the master key (an AWS KMS key, or local keys from
//! the environment or a file), the data-key rotation period, and the [`Keyring`] made from
//! them, shared by everything one execution environment seals or opens. Read from the
//! environment by `crate::config::env`; the KMS client is made on first use, so a function
//! that never seals pays nothing at cold start.

use std::time::Duration;

use tokio::sync::OnceCell;

use super::seal::{Keyring, SealError, Wrapper};
use super::wrap::{KmsWrapper, LocalKeys, KMS_PURPOSE_PAYLOAD, KMS_PURPOSE_RESPONSE};

/// The data-key rotation period unless `HOOKLEDGER_DATA_KEY_ROTATION_SECS` says otherwise:
/// an hour. One `kms:GenerateDataKey` per execution environment and period.
pub const DEFAULT_ROTATION: Duration = Duration::from_secs(3600);

/// What the stored bytes of a row are: the associated data binds a ciphertext to its row and
/// column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `webhook_event.payload`.
    Payload,
    /// `webhook_event.response_body`.
    Response,
}

/// The associated data of a row's sealed value: `source`, NUL, `event_id`, NUL, the column's
/// name. A ciphertext moved to another row or column fails to open
/// ([`SealError::Tampered`]).
pub fn row_aad(source: &str, event_id: &str, column: Column) -> Vec<u8> {
    let column = match column {
        Column::Payload => "payload",
        Column::Response => "response_body",
    };
    let mut aad = Vec::with_capacity(source.len() + event_id.len() + column.len() + 2);
    aad.extend_from_slice(source.as_bytes());
    aad.push(0);
    aad.extend_from_slice(event_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(column.as_bytes());
    aad
}

/// The configured master key and the keyring made from it.
pub struct PayloadKeys {
    inner: Inner,
}

enum Inner {
    /// Local keys: the keyring is made at start-up.
    Ready(Box<Keyring>),
    /// A KMS key: the keyrings (and their SDK client) are made on first use, one per column,
    /// since each has its own encryption context (`super::wrap::KMS_PURPOSE_PAYLOAD`,
    /// `KMS_PURPOSE_RESPONSE`): IAM can let a role open responses and not payloads.
    Kms(Box<Kms>),
}

/// [`Inner::Kms`]'s key and its lazily made client and keyrings.
struct Kms {
    key_id: String,
    rotation: Duration,
    client: OnceCell<aws_sdk_kms::Client>,
    payload: OnceCell<Keyring>,
    response: OnceCell<Keyring>,
}

impl std::fmt::Debug for PayloadKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Ready(keyring) => f.debug_tuple("PayloadKeys").field(keyring).finish(),
            Inner::Kms(kms) => f
                .debug_struct("PayloadKeys")
                .field("kms_key_id", &kms.key_id)
                .finish(),
        }
    }
}

impl PayloadKeys {
    /// Local master keys (`HOOKLEDGER_PAYLOAD_KEYS` or `HOOKLEDGER_PAYLOAD_KEYS_FILE`).
    pub fn local(keys: LocalKeys, rotation: Duration) -> Self {
        Self {
            inner: Inner::Ready(Box::new(Keyring::new(Wrapper::Local(keys), rotation))),
        }
    }

    /// An AWS KMS key (`HOOKLEDGER_KMS_KEY_ID`: a key id, key ARN, alias name or alias ARN).
    pub fn kms(key_id: String, rotation: Duration) -> Self {
        Self {
            inner: Inner::Kms(Box::new(Kms {
                key_id,
                rotation,
                client: OnceCell::new(),
                payload: OnceCell::new(),
                response: OnceCell::new(),
            })),
        }
    }

    /// The master key new values are sealed under, as envelopes record it.
    pub fn current_master_key(&self) -> &str {
        match &self.inner {
            Inner::Ready(keyring) => keyring.current_master_key(),
            Inner::Kms(kms) => &kms.key_id,
        }
    }

    /// The keyring of `column`'s values: made on the first call on the KMS path (the SDK's
    /// configuration from the environment, as the other AWS clients).
    ///
    /// # Errors
    /// [`SealError::Kms`] when the KMS client cannot be made (retryable).
    pub async fn keyring(&self, column: Column) -> Result<&Keyring, SealError> {
        match &self.inner {
            Inner::Ready(keyring) => Ok(keyring),
            Inner::Kms(kms) => {
                let Kms {
                    key_id,
                    rotation,
                    client,
                    payload,
                    response,
                } = &**kms;
                let (cell, purpose) = match column {
                    Column::Payload => (payload, KMS_PURPOSE_PAYLOAD),
                    Column::Response => (response, KMS_PURPOSE_RESPONSE),
                };
                cell.get_or_try_init(|| async {
                    let client = client
                        .get_or_init(|| async {
                            let config = crate::aws::load().await;
                            aws_sdk_kms::Client::new(&config)
                        })
                        .await;
                    let wrapper = KmsWrapper::new(client.clone(), key_id.clone())
                        .map_err(|error| SealError::Kms(error.to_string()))?
                        .with_purpose(purpose);
                    Ok(Keyring::new(Wrapper::Kms(wrapper), *rotation))
                })
                .await
            }
        }
    }

    /// Seals `plaintext` as `(source, event_id)`'s `column`.
    ///
    /// # Errors
    /// As [`Keyring::seal`]: [`SealError::Kms`] (retryable) when a data key cannot be made.
    pub async fn seal(
        &self,
        source: &str,
        event_id: &str,
        column: Column,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        self.keyring(column)
            .await?
            .seal(plaintext, &row_aad(source, event_id, column))
            .await
    }

    /// Opens `(source, event_id)`'s `column`.
    ///
    /// # Errors
    /// As [`Keyring::open`]: [`SealError::Tampered`] for a value sealed for another row or
    /// altered, [`SealError::Kms`] (retryable) when KMS cannot unwrap its data key.
    pub async fn open(
        &self,
        source: &str,
        event_id: &str,
        column: Column,
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        self.keyring(column)
            .await?
            .open(sealed, &row_aad(source, event_id, column))
            .await
    }
}

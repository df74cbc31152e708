//! The key wrappers of payload encryption at rest ([`super::seal`]): they make a data key and
//! unwrap it again, under local master keys (`HOOKLEDGER_PAYLOAD_KEYS` or
//! `HOOKLEDGER_PAYLOAD_KEYS_FILE`: locally and in tests) or under an AWS KMS key
//! (`kms:GenerateDataKey` and `kms:Decrypt`, encryption context `purpose=hookledger-payload`).
//!
//! A master key is named by an id that every envelope records ([`super::seal::master_key_of`]),
//! so rows sealed under an older master key stay readable after the current one changes: a
//! local key stays in `keys` until a re-encryption job has moved its rows, and a KMS key stays
//! enabled (and decryptable by the function's role) as long.
//!
//! Errors name ids, lengths and positions, never key material.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use aws_sdk_kms::config::http::HttpResponse;
use aws_sdk_kms::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use base64::Engine as _;
use openssl::symm::{decrypt_aead, encrypt_aead, Cipher};
use serde_json::Value;
use zeroize::Zeroizing;

use super::seal_error::SealError;
pub use super::seal_error::WrapperKind;

/// Bytes of a data key and of a local master key (AES-256).
pub const KEY_LEN: usize = 32;

/// A plaintext AES-256 key (a data key or a local master key), wiped when dropped.
pub type Key = Zeroizing<[u8; KEY_LEN]>;

/// The longest master-key id, in bytes of UTF-8: the envelope gives its length one byte.
pub const MAX_MASTER_KEY_ID_LEN: usize = 255;

/// The associated data of a data key wrapped under a local master key.
pub const LOCAL_WRAP_AAD: &[u8] = b"hookledger data key";

/// The encryption context's key of every KMS call: a `kms:Decrypt` of a data key needs the
/// same context it was generated with, and a key policy or grant can require it
/// (`kms:EncryptionContext:purpose`); CloudTrail logs it. Its value says what the data key
/// seals: [`KMS_PURPOSE_PAYLOAD`] or [`KMS_PURPOSE_RESPONSE`], so a role can be allowed to open
/// stored responses (the receiver, to answer retries) and not payloads.
pub const KMS_CONTEXT_KEY: &str = "purpose";

/// The encryption context's value for the data keys of stored payloads.
pub const KMS_PURPOSE_PAYLOAD: &str = "hookledger-payload";

/// The encryption context's value for the data keys of stored responses.
pub const KMS_PURPOSE_RESPONSE: &str = "hookledger-response";

/// Bytes of an AES-GCM nonce (random, 96 bits).
pub(super) const NONCE_LEN: usize = 12;
/// Bytes of an AES-GCM tag.
pub(super) const TAG_LEN: usize = 16;
/// Bytes of a data key wrapped under a local master key: nonce, ciphertext, tag.
const LOCAL_WRAPPED_LEN: usize = NONCE_LEN + KEY_LEN + TAG_LEN;

/// Why master keys cannot be used: the local keys' JSON or file, or a master-key id. The
/// messages name the problem (a field, an id, a length, a position), never a key. All are
/// fatal until the configuration is fixed.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The keys file cannot be read (`HOOKLEDGER_PAYLOAD_KEYS_FILE`).
    #[error("cannot read payload keys file {path}")]
    Read {
        /// The file's path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The keys are not JSON; the position of the syntax error, 1-based.
    #[error("payload keys are not JSON (line {line}, column {column})")]
    NotJson {
        /// Line of the syntax error.
        line: usize,
        /// Column of the syntax error.
        column: usize,
    },
    /// The JSON is not `{"current": "<id>", "keys": {"<id>": "<base64>", ...}}`.
    #[error("payload keys: {0}")]
    Shape(&'static str),
    /// `keys` has no key.
    #[error("payload keys: `keys` is empty")]
    Empty,
    /// A key's value is not standard base64 (with padding).
    #[error("payload key {id}: not standard base64")]
    BadBase64 {
        /// The key's id.
        id: String,
    },
    /// A key's value does not decode to 32 bytes.
    #[error("payload key {id}: {len} bytes, not 32")]
    WrongLength {
        /// The key's id.
        id: String,
        /// Bytes it decodes to.
        len: usize,
    },
    /// `current` names no key of `keys`.
    #[error("payload keys: current key {0} is not in `keys`")]
    CurrentMissing(String),
    /// A master-key id (local, or the KMS key id) is empty or longer than 255 bytes.
    #[error("master key id of {0} bytes: it must be 1 to 255")]
    BadId(usize),
}

/// A fresh data key: the plaintext (32 bytes, wiped when dropped) and the bytes an envelope
/// stores, `wrapped` (1 to 65,535 bytes) under the wrapper's current master key.
pub(super) struct NewDataKey {
    /// The plaintext data key.
    pub(super) key: Key,
    /// The data key wrapped under the current master key.
    pub(super) wrapped: Vec<u8>,
}

impl fmt::Debug for NewDataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewDataKey")
            .field("key", &"<redacted>")
            .field("wrapped_len", &self.wrapped.len())
            .finish()
    }
}

/// What wraps a keyring's data keys: local master keys or an AWS KMS key.
#[derive(Debug)]
pub enum Wrapper {
    /// Local master keys (`HOOKLEDGER_PAYLOAD_KEYS` or `HOOKLEDGER_PAYLOAD_KEYS_FILE`).
    Local(LocalKeys),
    /// An AWS KMS key.
    Kms(KmsWrapper),
}

impl Wrapper {
    /// The kind of master key, as envelopes record it.
    pub fn kind(&self) -> WrapperKind {
        match self {
            Self::Local(_) => WrapperKind::Local,
            Self::Kms(_) => WrapperKind::Kms,
        }
    }

    /// The id of the master key new data keys are wrapped under: the local `current` id, or
    /// the KMS key id, ARN or alias as configured (1 to 255 bytes of UTF-8).
    pub fn current_master_key(&self) -> &str {
        match self {
            Self::Local(keys) => keys.current(),
            Self::Kms(kms) => kms.key_id(),
        }
    }

    /// A fresh data key wrapped under the current master key (one `kms:GenerateDataKey` on
    /// the KMS path).
    ///
    /// # Errors
    /// [`SealError::Kms`] when KMS refuses or cannot be reached (retryable);
    /// [`SealError::Crypto`] when OpenSSL fails.
    pub(super) async fn generate(&self) -> Result<NewDataKey, SealError> {
        match self {
            Self::Local(keys) => keys.generate(),
            Self::Kms(kms) => kms.generate().await,
        }
    }

    /// The plaintext of `wrapped`, a data key wrapped under the master key `master_key` (as
    /// the envelope records it; one `kms:Decrypt` on the KMS path).
    ///
    /// # Errors
    /// [`SealError::UnknownMasterKey`] for a local id not in the keys; [`SealError::Tampered`]
    /// when the wrapped key does not authenticate under it; [`SealError::Malformed`] for a
    /// wrapped key of the wrong length; [`SealError::Kms`] when KMS refuses otherwise or cannot
    /// be reached.
    pub(super) async fn unwrap_key(
        &self,
        master_key: &str,
        wrapped: &[u8],
    ) -> Result<Key, SealError> {
        match self {
            Self::Local(keys) => keys.unwrap_key(master_key, wrapped),
            Self::Kms(kms) => kms.unwrap_key(master_key, wrapped).await,
        }
    }
}

/// Local master keys: the JSON `{"current": "k2", "keys": {"k1": "<base64 of 32 bytes>",
/// "k2": "..."}}` of `HOOKLEDGER_PAYLOAD_KEYS`, or of the file `HOOKLEDGER_PAYLOAD_KEYS_FILE`
/// names. New data keys are wrapped under `current`; a data key is unwrapped under the key its
/// envelope names, so rotating is adding a key and pointing `current` at it (a new key:
/// `openssl rand -base64 32`).
///
/// A data key is wrapped with AES-256-GCM under the master key, a random nonce and the
/// associated data [`LOCAL_WRAP_AAD`]: the wrapped bytes are nonce (12) || ciphertext (32) ||
/// tag (16). `Debug` prints the ids only.
pub struct LocalKeys {
    current: String,
    keys: HashMap<String, Key>,
}

impl fmt::Debug for LocalKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKeys")
            .field("current", &self.current)
            .field("ids", &self.ids())
            .finish()
    }
}

impl LocalKeys {
    /// Keys from their bytes: `current` must be one of `keys`' ids.
    ///
    /// # Errors
    /// [`KeysError::Empty`], [`KeysError::BadId`] (an id empty or over 255 bytes),
    /// [`KeysError::CurrentMissing`].
    pub fn new(
        current: &str,
        keys: impl IntoIterator<Item = (String, Key)>,
    ) -> Result<Self, KeysError> {
        let keys: HashMap<String, Key> = keys.into_iter().collect();
        if keys.is_empty() {
            return Err(KeysError::Empty);
        }
        for id in keys.keys() {
            check_id(id)?;
        }
        if !keys.contains_key(current) {
            return Err(KeysError::CurrentMissing(current.to_owned()));
        }
        Ok(Self {
            current: current.to_owned(),
            keys,
        })
    }

    /// Keys from the JSON of `HOOKLEDGER_PAYLOAD_KEYS`:
    /// `{"current": "<id>", "keys": {"<id>": "<standard base64 of 32 bytes>", ...}}`.
    ///
    /// # Errors
    /// [`KeysError::NotJson`], [`KeysError::Shape`], [`KeysError::Empty`],
    /// [`KeysError::BadBase64`], [`KeysError::WrongLength`], [`KeysError::BadId`],
    /// [`KeysError::CurrentMissing`]; none carries a key.
    pub fn from_json(json: &str) -> Result<Self, KeysError> {
        // Walked by hand rather than deserialized: serde's type errors quote the value.
        let value: Value = serde_json::from_str(json).map_err(|e| KeysError::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
        let Value::Object(object) = &value else {
            return Err(KeysError::Shape("not a JSON object"));
        };
        let Some(Value::String(current)) = object.get("current") else {
            return Err(KeysError::Shape("`current` is missing or not a string"));
        };
        let Some(Value::Object(encoded)) = object.get("keys") else {
            return Err(KeysError::Shape("`keys` is missing or not an object"));
        };
        let mut keys = Vec::with_capacity(encoded.len());
        for (id, encoded) in encoded {
            let Value::String(encoded) = encoded else {
                return Err(KeysError::Shape("a key of `keys` is not a base64 string"));
            };
            let bytes = Zeroizing::new(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| KeysError::BadBase64 { id: id.clone() })?,
            );
            let key: [u8; KEY_LEN] =
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| KeysError::WrongLength {
                        id: id.clone(),
                        len: bytes.len(),
                    })?;
            keys.push((id.clone(), Zeroizing::new(key)));
        }
        Self::new(current, keys)
    }

    /// Keys from the file `HOOKLEDGER_PAYLOAD_KEYS_FILE` names, holding the JSON of
    /// [`LocalKeys::from_json`].
    ///
    /// # Errors
    /// [`KeysError::Read`] when the file cannot be read, else as [`LocalKeys::from_json`].
    pub fn from_file(path: &Path) -> Result<Self, KeysError> {
        let json =
            Zeroizing::new(
                std::fs::read_to_string(path).map_err(|source| KeysError::Read {
                    path: path.to_owned(),
                    source,
                })?,
            );
        Self::from_json(&json)
    }

    /// The id new data keys are wrapped under.
    pub fn current(&self) -> &str {
        &self.current
    }

    /// Every key's id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// A random data key wrapped under the current master key.
    fn generate(&self) -> Result<NewDataKey, SealError> {
        let master = self
            .keys
            .get(&self.current)
            .ok_or_else(|| SealError::UnknownMasterKey(self.current.clone()))?;
        let mut key: Key = Zeroizing::new([0; KEY_LEN]);
        openssl::rand::rand_bytes(&mut key[..]).map_err(crypto("random data key"))?;
        let mut nonce = [0; NONCE_LEN];
        openssl::rand::rand_bytes(&mut nonce).map_err(crypto("random nonce"))?;
        let mut tag = [0; TAG_LEN];
        let ciphertext = encrypt_aead(
            Cipher::aes_256_gcm(),
            &master[..],
            Some(&nonce),
            LOCAL_WRAP_AAD,
            &key[..],
            &mut tag,
        )
        .map_err(crypto("wrapping a data key"))?;
        let mut wrapped = Vec::with_capacity(LOCAL_WRAPPED_LEN);
        wrapped.extend_from_slice(&nonce);
        wrapped.extend_from_slice(&ciphertext);
        wrapped.extend_from_slice(&tag);
        Ok(NewDataKey { key, wrapped })
    }

    /// The data key `wrapped` under the master key `master_key`.
    fn unwrap_key(&self, master_key: &str, wrapped: &[u8]) -> Result<Key, SealError> {
        let master = self
            .keys
            .get(master_key)
            .ok_or_else(|| SealError::UnknownMasterKey(master_key.to_owned()))?;
        if wrapped.len() != LOCAL_WRAPPED_LEN {
            return Err(SealError::Malformed("a local wrapped data key is 60 bytes"));
        }
        let (nonce, rest) = wrapped.split_at(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at(KEY_LEN);
        let plaintext = Zeroizing::new(
            decrypt_aead(
                Cipher::aes_256_gcm(),
                &master[..],
                Some(nonce),
                LOCAL_WRAP_AAD,
                ciphertext,
                tag,
            )
            .map_err(|_| SealError::Tampered)?,
        );
        to_key(&plaintext).ok_or(SealError::Tampered)
    }
}

/// An AWS KMS key wrapping the data keys: `kms:GenerateDataKey` (AES-256) makes one, and
/// `kms:Decrypt` unwraps one, both with the encryption context [`KMS_CONTEXT_KEY`] = its
/// purpose.
///
/// The key id is a key id, key ARN, alias name (`alias/...`) or alias ARN, as configured; the
/// envelopes record it as it is. A `Decrypt` names the key the envelope records (so rows wrapped
/// under a previous key stay readable after the configuration names a new one), except for an
/// alias, which names no key (an alias may since point at another key; KMS finds the key in the
/// ciphertext blob). Re-pointing an alias therefore leaves [`super::seal::master_key_of`]
/// unchanged: to re-encrypt by master key, configure key ids or ARNs. Which keys the function
/// may decrypt under is the role's policy (`kms:Decrypt` on the current and previous keys).
#[derive(Clone)]
pub struct KmsWrapper {
    client: aws_sdk_kms::Client,
    key_id: String,
    purpose: &'static str,
}

impl fmt::Debug for KmsWrapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KmsWrapper")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl KmsWrapper {
    /// A wrapper calling `client` with the KMS key `key_id` (key id, key ARN, alias name or
    /// alias ARN).
    ///
    /// # Errors
    /// [`KeysError::BadId`] when `key_id` is empty or longer than 255 bytes.
    pub fn new(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Result<Self, KeysError> {
        let key_id = key_id.into();
        check_id(&key_id)?;
        Ok(Self {
            client,
            key_id,
            purpose: KMS_PURPOSE_PAYLOAD,
        })
    }

    /// The same wrapper with another purpose in its encryption context
    /// ([`KMS_PURPOSE_PAYLOAD`] by default, [`KMS_PURPOSE_RESPONSE`]).
    pub fn with_purpose(mut self, purpose: &'static str) -> Self {
        self.purpose = purpose;
        self
    }

    /// A wrapper with a client configured from the environment (region, credentials,
    /// `AWS_ENDPOINT_URL_KMS`/`AWS_ENDPOINT_URL` overrides), built once per execution
    /// environment.
    ///
    /// # Errors
    /// As [`KmsWrapper::new`].
    pub async fn from_env(key_id: impl Into<String>) -> Result<Self, KeysError> {
        let config = crate::aws::load().await;
        Self::new(aws_sdk_kms::Client::new(&config), key_id)
    }

    /// The configured KMS key id, as new envelopes record it.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// One `kms:GenerateDataKey` (AES-256) under the configured key.
    async fn generate(&self) -> Result<NewDataKey, SealError> {
        let (context_key, context_value) = (KMS_CONTEXT_KEY, self.purpose);
        let mut output = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(context_key, context_value)
            .send()
            .await
            .map_err(|e| SealError::Kms(kms_error("GenerateDataKey", &self.key_id, &e)))?;
        let plaintext = Zeroizing::new(
            output
                .plaintext
                .take()
                .map(Blob::into_inner)
                .ok_or_else(|| {
                    SealError::Kms("GenerateDataKey returned no Plaintext".to_owned())
                })?,
        );
        let key = to_key(&plaintext).ok_or_else(|| {
            SealError::Kms(format!(
                "GenerateDataKey returned a {}-byte key, not 32",
                plaintext.len()
            ))
        })?;
        let wrapped = output
            .ciphertext_blob
            .take()
            .map(Blob::into_inner)
            .ok_or_else(|| {
                SealError::Kms("GenerateDataKey returned no CiphertextBlob".to_owned())
            })?;
        if wrapped.is_empty() || wrapped.len() > usize::from(u16::MAX) {
            return Err(SealError::Kms(format!(
                "GenerateDataKey returned a {}-byte CiphertextBlob",
                wrapped.len()
            )));
        }
        Ok(NewDataKey { key, wrapped })
    }

    /// One `kms:Decrypt` of `wrapped`, naming `master_key` unless it is an alias.
    async fn unwrap_key(&self, master_key: &str, wrapped: &[u8]) -> Result<Key, SealError> {
        let (context_key, context_value) = (KMS_CONTEXT_KEY, self.purpose);
        let mut request = self
            .client
            .decrypt()
            .ciphertext_blob(Blob::new(wrapped))
            .encryption_context(context_key, context_value);
        if !is_alias(master_key) {
            request = request.key_id(master_key);
        }
        let mut output = request.send().await.map_err(|e| {
            // The blob does not authenticate (altered), or it is not under the key the
            // envelope names (relabelled): the row's problem, not KMS's.
            if e.as_service_error().is_some_and(|e| {
                e.is_invalid_ciphertext_exception() || e.is_incorrect_key_exception()
            }) {
                SealError::Tampered
            } else {
                SealError::Kms(kms_error("Decrypt", master_key, &e))
            }
        })?;
        let plaintext = Zeroizing::new(
            output
                .plaintext
                .take()
                .map(Blob::into_inner)
                .ok_or_else(|| SealError::Kms("Decrypt returned no Plaintext".to_owned()))?,
        );
        to_key(&plaintext).ok_or_else(|| {
            SealError::Kms(format!(
                "Decrypt returned a {}-byte data key, not 32",
                plaintext.len()
            ))
        })
    }
}

/// One line for a failed KMS call: `{operation} under {key_id}: {code}: {message}` for the
/// service's refusal, else the SDK's error chain (a timeout, the network, an unreadable
/// answer). Neither carries key material: KMS returns a plaintext only in a success.
fn kms_error<E>(operation: &str, key_id: &str, error: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match error {
        SdkError::ServiceError(service) => {
            let error = service.err();
            format!(
                "{operation} under {key_id}: {}: {}",
                error.code().unwrap_or("unknown"),
                error.message().unwrap_or("")
            )
        }
        _ => format!("{operation} under {key_id}: {}", DisplayErrorContext(error)),
    }
}

/// Whether a KMS key id is an alias name (`alias/...`) or alias ARN (`...:alias/...`).
fn is_alias(key_id: &str) -> bool {
    key_id.starts_with("alias/") || key_id.contains(":alias/")
}

/// A master-key id fits the envelope: 1 to 255 bytes.
fn check_id(id: &str) -> Result<(), KeysError> {
    if id.is_empty() || id.len() > MAX_MASTER_KEY_ID_LEN {
        return Err(KeysError::BadId(id.len()));
    }
    Ok(())
}

/// `bytes` as a key, when it is 32 bytes.
fn to_key(bytes: &[u8]) -> Option<Key> {
    let key: [u8; KEY_LEN] = bytes.try_into().ok()?;
    Some(Zeroizing::new(key))
}

/// Maps an OpenSSL failure to [`SealError::Crypto`], saying what failed.
pub(super) fn crypto(what: &'static str) -> impl Fn(openssl::error::ErrorStack) -> SealError {
    move |e| SealError::Crypto(format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    const K2: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";

    fn json(current: &str, keys: &[(&str, &str)]) -> String {
        let keys: serde_json::Map<String, Value> = keys
            .iter()
            .map(|(id, key)| ((*id).to_owned(), Value::String((*key).to_owned())))
            .collect();
        serde_json::json!({"current": current, "keys": keys}).to_string()
    }

    #[test]
    fn keys_parse_from_json_and_a_file_with_current_and_every_id() {
        let text = json("k2", &[("k1", K1), ("k2", K2)]);
        let keys = LocalKeys::from_json(&text).unwrap();
        assert_eq!(keys.current(), "k2");
        assert_eq!(keys.ids(), ["k1", "k2"]);
        assert_eq!(*keys.keys["k1"], [1; 32]);

        let dir = std::env::temp_dir().join(format!("seal-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.json");
        std::fs::write(&path, &text).unwrap();
        let from_file = LocalKeys::from_file(&path).unwrap();
        assert_eq!(from_file.ids(), ["k1", "k2"]);
        std::fs::remove_dir_all(&dir).unwrap();

        let missing = LocalKeys::from_file(&dir.join("nope.json")).unwrap_err();
        assert!(matches!(missing, KeysError::Read { .. }), "{missing}");
    }

    #[test]
    fn bad_keys_name_the_problem_and_never_the_key() {
        let short = "c2VjcmV0LXNob3J0"; // "secret-short"
        let cases = [
            ("{nope".to_owned(), "not JSON (line 1, column 2)"),
            ("[]".to_owned(), "not a JSON object"),
            (r#"{"keys": {}}"#.to_owned(), "`current` is missing"),
            (
                r#"{"current": "k1", "keys": "AQEB"}"#.to_owned(),
                "`keys` is missing or not an object",
            ),
            (
                r#"{"current": "k1", "keys": {"k1": 7}}"#.to_owned(),
                "not a base64 string",
            ),
            (json("k1", &[]), "`keys` is empty"),
            (
                json("k1", &[("k1", "%%%secret%%%")]),
                "payload key k1: not standard base64",
            ),
            (
                json("k1", &[("k1", short)]),
                "payload key k1: 12 bytes, not 32",
            ),
            (
                json("k3", &[("k1", K1), ("k2", K2)]),
                "current key k3 is not in `keys`",
            ),
            (json("", &[("", K1)]), "master key id of 0 bytes"),
        ];
        for (text, expected) in cases {
            let error = LocalKeys::from_json(&text).unwrap_err().to_string();
            assert!(error.contains(expected), "{error} / {expected}");
            for secret in [K1, K2, short, "secret", "AQEB"] {
                assert!(!error.contains(secret), "{error}");
            }
        }
        let long = "k".repeat(256);
        let error = LocalKeys::from_json(&json(&long, &[(&long, K1)])).unwrap_err();
        assert!(matches!(error, KeysError::BadId(256)), "{error}");
    }

    #[test]
    fn debug_of_local_keys_prints_ids_not_keys() {
        let keys = LocalKeys::from_json(&json("k2", &[("k1", K1), ("k2", K2)])).unwrap();
        let debug = format!("{keys:?}");
        assert_eq!(debug, r#"LocalKeys { current: "k2", ids: ["k1", "k2"] }"#);
    }

    #[test]
    fn a_locally_wrapped_key_unwraps_under_its_own_master_key_only() {
        let keys = LocalKeys::from_json(&json("k2", &[("k1", K1), ("k2", K2)])).unwrap();
        let new = keys.generate().unwrap();
        assert_eq!(new.wrapped.len(), 60);
        assert_ne!(&new.wrapped[NONCE_LEN..NONCE_LEN + KEY_LEN], &new.key[..]);
        assert_eq!(*keys.unwrap_key("k2", &new.wrapped).unwrap(), *new.key);
        assert!(matches!(
            keys.unwrap_key("k1", &new.wrapped),
            Err(SealError::Tampered)
        ));
        assert!(matches!(
            keys.unwrap_key("k9", &new.wrapped),
            Err(SealError::UnknownMasterKey(id)) if id == "k9"
        ));
        assert!(matches!(
            keys.unwrap_key("k2", &new.wrapped[1..]),
            Err(SealError::Malformed(_))
        ));
        let mut flipped = new.wrapped.clone();
        flipped[30] ^= 1;
        assert!(matches!(
            keys.unwrap_key("k2", &flipped),
            Err(SealError::Tampered)
        ));
        assert!(!format!("{new:?}").contains(&format!("{:?}", &new.key[..4])));
    }

    #[test]
    fn aliases_are_recognised_and_key_ids_are_bounded() {
        assert!(is_alias("alias/hookledger"));
        assert!(is_alias(
            "arn:aws:kms:us-east-1:123456789012:alias/hookledger"
        ));
        assert!(!is_alias("1234abcd-12ab-34cd-56ef-1234567890ab"));
        assert!(!is_alias(
            "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
        ));
        assert!(check_id(&"a".repeat(255)).is_ok());
        assert!(matches!(
            check_id(&"a".repeat(256)),
            Err(KeysError::BadId(256))
        ));
        assert!(matches!(check_id(""), Err(KeysError::BadId(0))));
    }

    #[test]
    fn wrapper_kinds_round_trip_through_their_byte() {
        for kind in [WrapperKind::Local, WrapperKind::Kms] {
            assert_eq!(WrapperKind::from_byte(kind.byte()), Some(kind));
        }
        assert_eq!(WrapperKind::from_byte(2), None);
        assert_eq!(WrapperKind::Kms.to_string(), "AWS KMS");
    }
}

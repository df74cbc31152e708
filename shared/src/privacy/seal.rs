//! Envelope encryption at rest of stored payloads and response bodies: the envelope's format,
//! [`Keyring::seal`] and [`Keyring::open`], and the keyring's data keys (one current data key
//! per execution environment and rotation period, wrapped by a [`Wrapper`]; the data keys of
//! the envelopes opened, cached unwrapped).
//!
//! A value is sealed with AES-256-GCM under a random data key and a random nonce; the data key
//! is stored in the envelope wrapped under a master key (a local key or an AWS KMS key,
//! `super::wrap`). The associated data is the envelope's header followed by the caller's `aad`,
//! the row's key: a ciphertext copied to another row does not open there
//! ([`SealError::Tampered`]), nor does one whose header (wrapper kind, master-key id, wrapped
//! data key) was altered.
//!
//! # The envelope, version 1
//!
//! ```text
//! offset      bytes  field
//! 0           4      magic "HLS1" (its last byte is the version)
//! 4           1      wrapper kind: 0 a local master key, 1 an AWS KMS key
//! 5           1      n, the master-key id's length: 1 to 255
//! 6           n      the master-key id, UTF-8: the local key's id, or the KMS key id, ARN or
//!                    alias as configured when sealed
//! 6+n         2      m, the wrapped data key's length, big-endian: 1 to 65,535
//! 8+n         m      the wrapped data key (local: nonce 12 || ciphertext 32 || tag 16;
//!                    KMS: GenerateDataKey's CiphertextBlob)
//! 8+n+m       12     nonce, random per seal
//! 20+n+m      c      ciphertext, as long as the plaintext
//! 20+n+m+c    16     GCM tag
//! ```
//!
//! The header is bytes 0 to 8+n+m; a sealed value is at least 36+n+m bytes. AES-GCM with
//! random nonces stays within its bounds up to 2^32 seals per key; a data key seals at most
//! [`MAX_SEALS_PER_DATA_KEY`] (2^30) values.
//!
//! Data keys: the first seal of an execution environment makes one (one `kms:GenerateDataKey`
//! on the KMS path, however many seals wait for it), and so does the first seal after the
//! rotation period or after 2^30 seals. Opening unwraps an envelope's data key once (one
//! `kms:Decrypt`) and caches it, up to [`UNWRAPPED_CACHE_CAPACITY`] data keys (the cache is
//! emptied when full); the keyring's own data keys are in the cache from the start.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use openssl::symm::{decrypt_aead, encrypt_aead, Cipher};
use tokio::sync::OnceCell;

pub use super::seal_error::SealError;
use super::seal_error::WrapperKind;
pub use super::wrap::Wrapper;
use super::wrap::{crypto, Key, NONCE_LEN, TAG_LEN};

/// The first bytes of every envelope, version 1.
pub const MAGIC: &[u8; 4] = b"HLS1";

/// Values one data key seals at most (2^30): AES-GCM with random 96-bit nonces keeps the
/// chance of a repeated nonce negligible well past it.
pub const MAX_SEALS_PER_DATA_KEY: u64 = 1 << 30;

/// Unwrapped data keys a keyring caches at most; the cache is emptied when full.
pub const UNWRAPPED_CACHE_CAPACITY: usize = 4096;

/// Calls a keyring made to its wrapper, failed ones included (on the KMS path, KMS calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WrapperCalls {
    /// Data keys made (`kms:GenerateDataKey`).
    pub generate: u64,
    /// Data keys unwrapped (`kms:Decrypt`).
    pub unwrap: u64,
}

/// Whether `bytes` begins with the envelope's magic `HLS1` (a sealed value, possibly damaged;
/// a stored plaintext could begin so too, so a column's own flag is the surer sign).
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The id of the master key that wrapped `sealed`'s data key: a local key's id, or the KMS key
/// id, ARN or alias as configured when it was sealed. A re-encryption job picks the rows whose
/// id is not [`Keyring::current_master_key`]. Reads the header only: nothing authenticates it
/// until the value is opened.
///
/// # Errors
/// [`SealError::Malformed`] when `sealed` is not a whole version-1 envelope.
pub fn master_key_of(sealed: &[u8]) -> Result<&str, SealError> {
    Envelope::parse(sealed).map(|envelope| envelope.master_key)
}

/// The keys of one execution environment: seals under its current data key and opens any
/// envelope its wrapper can unwrap. `Send + Sync`, shared as `Arc<Keyring>`; `Debug` prints no
/// key.
pub struct Keyring {
    wrapper: Wrapper,
    rotation: Duration,
    max_seals: u64,
    /// The current data key, `None` until the first seal.
    current: RwLock<Option<Arc<DataKey>>>,
    /// Held while a data key is made, so that waiting seals make no second one.
    generating: tokio::sync::Mutex<()>,
    /// Unwrapped data keys by the envelope's bytes 4 to 8+n+m (kind, id, wrapped key). A slot
    /// is filled by one unwrap while other opens of the same data key wait for it.
    unwrapped: Mutex<HashMap<Vec<u8>, Slot>>,
    generates: AtomicU64,
    unwraps: AtomicU64,
}

/// A cache entry: empty while its data key is being unwrapped.
type Slot = Arc<OnceCell<Arc<Key>>>;

/// A data key this keyring made and seals under.
struct DataKey {
    key: Arc<Key>,
    /// The envelope's header for it: magic to wrapped key.
    header: Vec<u8>,
    made: Instant,
    /// Seals so far, counted before each.
    seals: AtomicU64,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cached = self
            .unwrapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Keyring")
            .field("wrapper", &self.wrapper)
            .field("rotation", &self.rotation)
            .field("calls", &self.calls())
            .field("cached_data_keys", &cached)
            .finish_non_exhaustive()
    }
}

impl Keyring {
    /// A keyring wrapping its data keys with `wrapper`, making a new one when `rotation` has
    /// passed since the current one was made (`Duration::ZERO`: a data key per seal). No
    /// wrapper call is made until the first seal or open.
    pub fn new(wrapper: Wrapper, rotation: Duration) -> Self {
        Self {
            wrapper,
            rotation,
            max_seals: MAX_SEALS_PER_DATA_KEY,
            current: RwLock::new(None),
            generating: tokio::sync::Mutex::new(()),
            unwrapped: Mutex::new(HashMap::new()),
            generates: AtomicU64::new(0),
            unwraps: AtomicU64::new(0),
        }
    }

    /// The id of the master key new seals are under (see [`master_key_of`]).
    pub fn current_master_key(&self) -> &str {
        self.wrapper.current_master_key()
    }

    /// The rotation period given to [`Keyring::new`].
    pub fn rotation(&self) -> Duration {
        self.rotation
    }

    /// Calls made to the wrapper so far (on the KMS path, KMS calls): for tests and metrics.
    pub fn calls(&self) -> WrapperCalls {
        WrapperCalls {
            generate: self.generates.load(Ordering::Relaxed),
            unwrap: self.unwraps.load(Ordering::Relaxed),
        }
    }

    /// `plaintext` (any length, empty included) sealed for the row `aad` (its key, any bytes):
    /// an envelope 36+n+m bytes longer than `plaintext` (see the module's docs), under the
    /// current data key and a random 12-byte nonce. Makes a data key first when there is none,
    /// the rotation period has passed, or the current one has sealed 2^30 values; concurrent
    /// seals wait for that one wrapper call (when it fails, each waiting seal tries once in
    /// turn).
    ///
    /// # Errors
    /// [`SealError::Kms`] when a data key is needed and KMS fails (retryable);
    /// [`SealError::Crypto`] when OpenSSL fails.
    pub async fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let data_key = self.current().await?;
        let mut nonce = [0; NONCE_LEN];
        openssl::rand::rand_bytes(&mut nonce).map_err(crypto("random nonce"))?;
        let mut tag = [0; TAG_LEN];
        let ciphertext = encrypt_aead(
            Cipher::aes_256_gcm(),
            &data_key.key[..],
            Some(&nonce),
            &associated_data(&data_key.header, aad),
            plaintext,
            &mut tag,
        )
        .map_err(crypto("sealing"))?;
        let mut sealed =
            Vec::with_capacity(data_key.header.len() + NONCE_LEN + ciphertext.len() + TAG_LEN);
        sealed.extend_from_slice(&data_key.header);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        sealed.extend_from_slice(&tag);
        Ok(sealed)
    }

    /// The plaintext of `sealed`, an envelope sealed for the row `aad`. Unwraps its data key
    /// unless cached (the keyring's own are): one wrapper call per data key, however many
    /// opens wait for it.
    ///
    /// # Errors
    /// [`SealError::Malformed`] when `sealed` is not a whole envelope; [`SealError::Tampered`]
    /// when it does not authenticate with `aad` (altered, or another row's);
    /// [`SealError::WrongWrapper`] for an envelope of the other wrapper kind;
    /// [`SealError::UnknownMasterKey`] for a local master key not in the keyring;
    /// [`SealError::Kms`] when KMS fails (retryable).
    pub async fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let envelope = Envelope::parse(sealed)?;
        if envelope.kind != self.wrapper.kind() {
            return Err(SealError::WrongWrapper {
                sealed: envelope.kind,
                keyring: self.wrapper.kind(),
            });
        }
        let key = self.unwrapped(&envelope).await?;
        decrypt_aead(
            Cipher::aes_256_gcm(),
            &key[..],
            Some(envelope.nonce),
            &associated_data(envelope.header, aad),
            envelope.ciphertext,
            envelope.tag,
        )
        .map_err(|_| SealError::Tampered)
    }

    /// The current data key, with one seal counted against it; made when there is none or it
    /// is spent.
    async fn current(&self) -> Result<Arc<DataKey>, SealError> {
        if let Some(data_key) = self.usable() {
            return Ok(data_key);
        }
        let _generating = self.generating.lock().await;
        // Another seal may have made one while this one waited.
        if let Some(data_key) = self.usable() {
            return Ok(data_key);
        }
        self.generates.fetch_add(1, Ordering::Relaxed);
        let new = self.wrapper.generate().await?;
        let header = header(
            self.wrapper.kind(),
            self.wrapper.current_master_key(),
            &new.wrapped,
        )?;
        let data_key = Arc::new(DataKey {
            key: Arc::new(new.key),
            header,
            made: Instant::now(),
            seals: AtomicU64::new(1),
        });
        self.remember(
            data_key.header[MAGIC.len()..].to_vec(),
            Arc::new(OnceCell::new_with(Some(data_key.key.clone()))),
        );
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Some(data_key.clone());
        tracing::debug!(
            master_key = self.wrapper.current_master_key(),
            wrapper = %self.wrapper.kind(),
            "new payload data key"
        );
        Ok(data_key)
    }

    /// The current data key when it is younger than the rotation period and has sealed fewer
    /// than the limit (counting this seal).
    fn usable(&self) -> Option<Arc<DataKey>> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        let data_key = current.as_ref()?;
        if data_key.made.elapsed() >= self.rotation
            || data_key.seals.fetch_add(1, Ordering::Relaxed) >= self.max_seals
        {
            return None;
        }
        Some(data_key.clone())
    }

    /// The envelope's data key, from the cache or unwrapped (once, however many wait).
    async fn unwrapped(&self, envelope: &Envelope<'_>) -> Result<Arc<Key>, SealError> {
        let cache_key = &envelope.header[MAGIC.len()..];
        let slot = {
            let mut cache = self
                .unwrapped
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match cache.get(cache_key) {
                Some(slot) => slot.clone(),
                None => {
                    if cache.len() >= UNWRAPPED_CACHE_CAPACITY {
                        cache.clear();
                    }
                    let slot = Slot::default();
                    cache.insert(cache_key.to_vec(), slot.clone());
                    slot
                }
            }
        };
        let unwrapped = slot
            .get_or_try_init(|| async {
                self.unwraps.fetch_add(1, Ordering::Relaxed);
                self.wrapper
                    .unwrap_key(envelope.master_key, envelope.wrapped)
                    .await
                    .map(Arc::new)
            })
            .await;
        match unwrapped {
            Ok(key) => Ok(key.clone()),
            Err(error) => {
                // Forget the failed slot, so garbage does not fill the cache and a retry calls
                // the wrapper again.
                let mut cache = self
                    .unwrapped
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if cache
                    .get(cache_key)
                    .is_some_and(|cached| Arc::ptr_eq(cached, &slot) && !slot.initialized())
                {
                    cache.remove(cache_key);
                }
                Err(error)
            }
        }
    }

    /// Caches an unwrapped data key, emptying the cache first when it is full.
    fn remember(&self, cache_key: Vec<u8>, slot: Slot) {
        let mut cache = self
            .unwrapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= UNWRAPPED_CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(cache_key, slot);
    }
}

/// The header of an envelope: magic, kind, id, wrapped key.
fn header(kind: WrapperKind, master_key: &str, wrapped: &[u8]) -> Result<Vec<u8>, SealError> {
    let id_len = u8::try_from(master_key.len())
        .ok()
        .filter(|len| *len > 0)
        .ok_or_else(|| {
            SealError::Crypto(format!(
                "a master key id of {} bytes does not fit the envelope",
                master_key.len()
            ))
        })?;
    let wrapped_len = u16::try_from(wrapped.len())
        .ok()
        .filter(|len| *len > 0)
        .ok_or_else(|| {
            SealError::Crypto(format!(
                "a wrapped data key of {} bytes does not fit the envelope",
                wrapped.len()
            ))
        })?;
    let mut header = Vec::with_capacity(MAGIC.len() + 4 + master_key.len() + wrapped.len());
    header.extend_from_slice(MAGIC);
    header.push(kind.byte());
    header.push(id_len);
    header.extend_from_slice(master_key.as_bytes());
    header.extend_from_slice(&wrapped_len.to_be_bytes());
    header.extend_from_slice(wrapped);
    Ok(header)
}

/// The associated data of a seal: the header (self-delimiting), then the row's `aad`.
fn associated_data(header: &[u8], aad: &[u8]) -> Vec<u8> {
    let mut associated = Vec::with_capacity(header.len() + aad.len());
    associated.extend_from_slice(header);
    associated.extend_from_slice(aad);
    associated
}

/// A version-1 envelope's parts, borrowed from the sealed bytes.
#[derive(Debug)]
struct Envelope<'a> {
    kind: WrapperKind,
    master_key: &'a str,
    wrapped: &'a [u8],
    /// Bytes 0 to 8+n+m.
    header: &'a [u8],
    nonce: &'a [u8],
    ciphertext: &'a [u8],
    tag: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// Splits `sealed` into its parts; total: any input gives an envelope or `Malformed`.
    fn parse(sealed: &'a [u8]) -> Result<Self, SealError> {
        use SealError::Malformed;
        let rest = sealed
            .strip_prefix(MAGIC.as_slice())
            .ok_or(Malformed("no HLS1 magic"))?;
        let (&kind, rest) = rest.split_first().ok_or(Malformed("truncated header"))?;
        let kind = WrapperKind::from_byte(kind).ok_or(Malformed("unknown wrapper kind"))?;
        let (&id_len, rest) = rest.split_first().ok_or(Malformed("truncated header"))?;
        if id_len == 0 {
            return Err(Malformed("empty master key id"));
        }
        let (id, rest) = rest
            .split_at_checked(usize::from(id_len))
            .ok_or(Malformed("truncated master key id"))?;
        let master_key =
            std::str::from_utf8(id).map_err(|_| Malformed("master key id is not UTF-8"))?;
        let (wrapped_len, rest) = rest
            .split_first_chunk::<2>()
            .ok_or(Malformed("truncated header"))?;
        let wrapped_len = usize::from(u16::from_be_bytes(*wrapped_len));
        if wrapped_len == 0 {
            return Err(Malformed("empty wrapped data key"));
        }
        let (wrapped, rest) = rest
            .split_at_checked(wrapped_len)
            .ok_or(Malformed("truncated wrapped data key"))?;
        let header = &sealed[..sealed.len() - rest.len()];
        let (nonce, rest) = rest
            .split_at_checked(NONCE_LEN)
            .ok_or(Malformed("truncated nonce"))?;
        let tag_at = rest
            .len()
            .checked_sub(TAG_LEN)
            .ok_or(Malformed("truncated tag"))?;
        let (ciphertext, tag) = rest.split_at(tag_at);
        Ok(Self {
            kind,
            master_key,
            wrapped,
            header,
            nonce,
            ciphertext,
            tag,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::wrap::LocalKeys;
    use proptest::prelude::*;
    use zeroize::Zeroizing;

    const HOUR: Duration = Duration::from_secs(3600);

    fn local(current: &str, ids: &[(&str, u8)]) -> Wrapper {
        let keys = ids
            .iter()
            .map(|(id, byte)| ((*id).to_owned(), Zeroizing::new([*byte; 32])));
        Wrapper::Local(LocalKeys::new(current, keys).unwrap())
    }

    fn keyring(rotation: Duration) -> Keyring {
        Keyring::new(local("k1", &[("k1", 1)]), rotation)
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[tokio::test]
    async fn a_sealed_value_opens_for_its_row_and_has_the_documented_layout() {
        let keyring = keyring(HOUR);
        for plaintext in [&b""[..], b"{\"id\":\"evt_1\"}", &[7; 100_000]] {
            let sealed = keyring.seal(plaintext, b"stripe:evt_1").await.unwrap();
            assert!(is_sealed(&sealed));
            assert_eq!(master_key_of(&sealed).unwrap(), "k1");
            assert_eq!(
                keyring.open(&sealed, b"stripe:evt_1").await.unwrap(),
                plaintext
            );
            // magic, kind 0, id "k1", wrapped 60, nonce, ciphertext, tag.
            assert_eq!(&sealed[..4], b"HLS1");
            assert_eq!(sealed[4], 0);
            assert_eq!(&sealed[5..8], b"\x02k1");
            assert_eq!(&sealed[8..10], &60u16.to_be_bytes());
            assert_eq!(sealed.len(), 10 + 60 + 12 + plaintext.len() + 16);
            if !plaintext.is_empty() {
                assert_ne!(&sealed[82..82 + plaintext.len()], plaintext);
            }
        }
        assert!(!is_sealed(b"{\"id\":1}"));
        assert_eq!(
            keyring.calls(),
            WrapperCalls {
                generate: 1,
                unwrap: 0
            }
        );
    }

    #[tokio::test]
    async fn two_seals_of_one_value_differ_in_nonce_and_ciphertext() {
        let keyring = keyring(HOUR);
        let a = keyring.seal(b"same", b"row").await.unwrap();
        let b = keyring.seal(b"same", b"row").await.unwrap();
        assert_eq!(a[..70], b[..70], "same data key, same header");
        assert_ne!(a[70..], b[70..]);
    }

    #[tokio::test]
    async fn a_ciphertext_moved_to_another_row_is_tampered_and_yields_nothing() {
        let keyring = keyring(HOUR);
        let sealed = keyring.seal(b"secret body", b"shop:evt_1").await.unwrap();
        for other in [&b"shop:evt_2"[..], b"", b"shop:evt_1 ", b"shop:evt_"] {
            assert!(matches!(
                keyring.open(&sealed, other).await,
                Err(SealError::Tampered)
            ));
        }
        assert!(!SealError::Tampered.is_retryable());
    }

    #[tokio::test]
    async fn every_truncation_is_malformed_or_tampered() {
        let keyring = keyring(HOUR);
        let sealed = keyring.seal(b"a payload", b"row").await.unwrap();
        let header = sealed.len() - 9 - 12 - 16;
        for len in 0..sealed.len() {
            let error = keyring.open(&sealed[..len], b"row").await.unwrap_err();
            match error {
                SealError::Malformed(_) => assert!(len < header + 12 + 16, "{len}"),
                SealError::Tampered => assert!(len >= header + 12 + 16, "{len}"),
                other => panic!("{len}: {other}"),
            }
            if len < header {
                assert!(master_key_of(&sealed[..len]).is_err());
            }
        }
    }

    #[tokio::test]
    async fn every_bit_flip_fails_to_open() {
        let keyring = keyring(HOUR);
        let sealed = keyring.seal(b"pay", b"row").await.unwrap();
        for byte in 0..sealed.len() {
            for bit in 0..8 {
                let mut flipped = sealed.clone();
                flipped[byte] ^= 1 << bit;
                let result = keyring.open(&flipped, b"row").await;
                assert!(result.is_err(), "byte {byte} bit {bit} opened");
            }
        }
        // Flips in the payload's nonce, ciphertext and tag are authentication failures.
        for byte in 70..sealed.len() {
            let mut flipped = sealed.clone();
            flipped[byte] ^= 0x80;
            assert!(matches!(
                keyring.open(&flipped, b"row").await,
                Err(SealError::Tampered)
            ));
        }
        // A relabelled kind byte is the other wrapper's.
        let mut relabelled = sealed.clone();
        relabelled[4] = 1;
        assert!(matches!(
            keyring.open(&relabelled, b"row").await,
            Err(SealError::WrongWrapper {
                sealed: WrapperKind::Kms,
                keyring: WrapperKind::Local
            })
        ));
        // Failed unwraps (flips in the id or the wrapped key) left nothing in the cache.
        assert_eq!(keyring.unwrapped.lock().unwrap().len(), 1);
        assert_eq!(keyring.open(&sealed, b"row").await.unwrap(), b"pay");
    }

    #[tokio::test]
    async fn a_relabelled_master_key_id_does_not_open_even_when_that_key_exists() {
        // Both keys are equal: only the header in the associated data tells them apart.
        let keyring = Keyring::new(local("k1", &[("k1", 1), ("k2", 1)]), HOUR);
        let sealed = keyring.seal(b"pay", b"row").await.unwrap();
        let mut relabelled = sealed.clone();
        relabelled[7] = b'2';
        assert_eq!(master_key_of(&relabelled).unwrap(), "k2");
        assert!(matches!(
            keyring.open(&relabelled, b"row").await,
            Err(SealError::Tampered)
        ));
    }

    #[test]
    fn garbage_parses_to_malformed_without_panicking() {
        for bytes in [
            &b""[..],
            b"HLS",
            b"HLS1",
            b"HLS2\x00\x01k\x00\x01x",
            b"HLS1\x07\x01k\x00\x01x",
            b"HLS1\x00\x00",
            b"HLS1\x00\x01\xff\x00\x01x",
            b"HLS1\x00\x01k\x00\x00",
            b"HLS1\x00\xffk",
            b"HLS1\x00\x01k\xff\xffx",
        ] {
            assert!(
                matches!(master_key_of(bytes), Err(SealError::Malformed(_))),
                "{bytes:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_malformed(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = master_key_of(&bytes);
            let mut prefixed = MAGIC.to_vec();
            prefixed.extend_from_slice(&bytes);
            match Envelope::parse(&prefixed) {
                Ok(envelope) => {
                    prop_assert_eq!(
                        envelope.header.len() + envelope.nonce.len() + envelope.ciphertext.len()
                            + envelope.tag.len(),
                        prefixed.len()
                    );
                    prop_assert_eq!(envelope.nonce.len(), 12);
                    prop_assert_eq!(envelope.tag.len(), 16);
                }
                Err(error) => prop_assert!(matches!(error, SealError::Malformed(_))),
            }
        }

        #[test]
        fn a_valid_header_with_any_tail_never_opens(tail in proptest::collection::vec(any::<u8>(), 0..100)) {
            block_on(async {
                let keyring = keyring(HOUR);
                let sealed = keyring.seal(b"x", b"row").await.unwrap();
                let mut forged = sealed[..70].to_vec();
                forged.extend_from_slice(&tail);
                prop_assert!(keyring.open(&forged, b"row").await.is_err());
                Ok(())
            })?;
        }
    }

    #[tokio::test]
    async fn after_rotating_the_local_master_key_new_seals_use_it_and_old_ones_open() {
        let before = Keyring::new(local("k1", &[("k1", 1)]), HOUR);
        let old = before.seal(b"old", b"row-1").await.unwrap();
        assert_eq!(master_key_of(&old).unwrap(), "k1");

        // The deployment adds k2 and makes it current: a new execution environment.
        let after = Keyring::new(local("k2", &[("k1", 1), ("k2", 2)]), HOUR);
        assert_eq!(after.current_master_key(), "k2");
        let new = after.seal(b"new", b"row-2").await.unwrap();
        assert_eq!(master_key_of(&new).unwrap(), "k2");
        assert_eq!(after.open(&old, b"row-1").await.unwrap(), b"old");
        assert_eq!(after.open(&new, b"row-2").await.unwrap(), b"new");
        assert_ne!(master_key_of(&old).unwrap(), after.current_master_key());

        // Once k1 is dropped, its rows no longer open.
        let dropped = Keyring::new(local("k2", &[("k2", 2)]), HOUR);
        let error = dropped.open(&old, b"row-1").await.unwrap_err();
        assert!(
            matches!(&error, SealError::UnknownMasterKey(id) if id == "k1"),
            "{error}"
        );
        assert_eq!(error.to_string(), "master key k1 is not in the keyring");
        assert!(!error.is_retryable());
        assert_eq!(dropped.open(&new, b"row-2").await.unwrap(), b"new");
    }

    #[tokio::test]
    async fn a_master_key_of_the_same_id_but_other_bytes_is_tampered() {
        let one = Keyring::new(local("k1", &[("k1", 1)]), HOUR);
        let sealed = one.seal(b"x", b"row").await.unwrap();
        let other = Keyring::new(local("k1", &[("k1", 9)]), HOUR);
        assert!(matches!(
            other.open(&sealed, b"row").await,
            Err(SealError::Tampered)
        ));
    }

    #[tokio::test]
    async fn a_zero_rotation_period_makes_a_data_key_per_seal() {
        let keyring = keyring(Duration::ZERO);
        let mut sealed = Vec::new();
        for i in 0..5u8 {
            sealed.push(keyring.seal(&[i], b"row").await.unwrap());
        }
        assert_eq!(keyring.calls().generate, 5);
        let wrapped: std::collections::HashSet<&[u8]> = sealed.iter().map(|s| &s[10..70]).collect();
        assert_eq!(wrapped.len(), 5);
        for (i, sealed) in sealed.iter().enumerate() {
            assert_eq!(keyring.open(sealed, b"row").await.unwrap(), [i as u8]);
        }
        assert_eq!(keyring.calls().unwrap, 0);
    }

    #[tokio::test]
    async fn a_data_key_is_made_again_after_the_rotation_period() {
        let keyring = keyring(Duration::from_millis(300));
        let first = keyring.seal(b"a", b"row").await.unwrap();
        keyring.seal(b"b", b"row").await.unwrap();
        assert_eq!(keyring.calls().generate, 1);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let later = keyring.seal(b"c", b"row").await.unwrap();
        assert_eq!(keyring.calls().generate, 2);
        assert_ne!(first[10..70], later[10..70]);
        assert_eq!(keyring.open(&first, b"row").await.unwrap(), b"a");
        assert_eq!(keyring.calls().unwrap, 0);
    }

    #[tokio::test]
    async fn a_data_key_is_made_again_after_its_seal_limit() {
        let mut keyring = keyring(HOUR);
        keyring.max_seals = 3;
        for _ in 0..3 {
            keyring.seal(b"x", b"row").await.unwrap();
        }
        assert_eq!(keyring.calls().generate, 1);
        keyring.seal(b"x", b"row").await.unwrap();
        assert_eq!(keyring.calls().generate, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_concurrent_first_seals_make_one_data_key() {
        let keyring = Arc::new(keyring(HOUR));
        // Hold the generation lock until all 50 seals found no data key and wait for it: the
        // local wrapper never yields, so this is how they come to race.
        let generating = keyring.generating.lock().await;
        let seals: Vec<_> = (0..50u32)
            .map(|i| {
                let keyring = keyring.clone();
                tokio::spawn(async move {
                    let row = format!("row-{i}");
                    let sealed = keyring
                        .seal(&i.to_be_bytes(), row.as_bytes())
                        .await
                        .unwrap();
                    (row, sealed)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(keyring.calls().generate, 0);
        drop(generating);
        let mut sealed = Vec::new();
        for seal in seals {
            sealed.push(seal.await.unwrap());
        }
        assert_eq!(
            keyring.calls(),
            WrapperCalls {
                generate: 1,
                unwrap: 0
            }
        );
        for (i, (row, sealed)) in sealed.iter().enumerate() {
            let opened = keyring.open(sealed, row.as_bytes()).await.unwrap();
            assert_eq!(opened, (i as u32).to_be_bytes());
        }
        assert_eq!(
            keyring.calls(),
            WrapperCalls {
                generate: 1,
                unwrap: 0
            }
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_environment_unwraps_a_data_key_once_for_many_values() {
        let sealer = keyring(HOUR);
        let mut sealed = Vec::new();
        for i in 0..100u32 {
            sealed.push(sealer.seal(&i.to_be_bytes(), b"row").await.unwrap());
        }
        // In turn.
        let reader = keyring(HOUR);
        for (i, sealed) in sealed.iter().enumerate() {
            assert_eq!(
                reader.open(sealed, b"row").await.unwrap(),
                (i as u32).to_be_bytes()
            );
        }
        assert_eq!(
            reader.calls(),
            WrapperCalls {
                generate: 0,
                unwrap: 1
            }
        );
        // At once.
        let reader = Arc::new(keyring(HOUR));
        let opens: Vec<_> = sealed
            .into_iter()
            .map(|sealed| {
                let reader = reader.clone();
                tokio::spawn(async move { reader.open(&sealed, b"row").await.map(|_| ()) })
            })
            .collect();
        for open in opens {
            open.await.unwrap().unwrap();
        }
        assert_eq!(
            reader.calls(),
            WrapperCalls {
                generate: 0,
                unwrap: 1
            }
        );
    }

    #[tokio::test]
    async fn a_failed_unwrap_is_not_cached_and_is_retried() {
        let sealer = keyring(HOUR);
        let sealed = sealer.seal(b"x", b"row").await.unwrap();
        let mut bad = sealed.clone();
        bad[20] ^= 1; // inside the wrapped data key
        let reader = keyring(HOUR);
        for _ in 0..2 {
            assert!(matches!(
                reader.open(&bad, b"row").await,
                Err(SealError::Tampered)
            ));
        }
        assert_eq!(reader.calls().unwrap, 2);
        assert!(reader.unwrapped.lock().unwrap().is_empty());
        assert_eq!(reader.open(&sealed, b"row").await.unwrap(), b"x");
        assert_eq!(reader.calls().unwrap, 3);
    }

    #[tokio::test]
    async fn the_unwrapped_cache_is_bounded() {
        let sealer = keyring(Duration::ZERO);
        let reader = keyring(HOUR);
        for _ in 0..UNWRAPPED_CACHE_CAPACITY + 1 {
            let sealed = sealer.seal(b"x", b"row").await.unwrap();
            reader.open(&sealed, b"row").await.unwrap();
        }
        assert_eq!(reader.unwrapped.lock().unwrap().len(), 1);
        assert!(sealer.unwrapped.lock().unwrap().len() <= UNWRAPPED_CACHE_CAPACITY);
        assert_eq!(reader.calls().unwrap, UNWRAPPED_CACHE_CAPACITY as u64 + 1);
    }

    #[tokio::test]
    async fn debug_prints_no_key() {
        let keyring = keyring(HOUR);
        let sealed = keyring.seal(b"x", b"row").await.unwrap();
        let debug = format!("{keyring:?}");
        assert!(debug.contains("current: \"k1\""), "{debug}");
        assert!(debug.contains("generate: 1"), "{debug}");
        let data_key = keyring
            .current
            .read()
            .unwrap()
            .as_ref()
            .unwrap()
            .key
            .clone();
        for shown in [format!("{:?}", &data_key[..8]), "[1, 1, 1, 1".to_owned()] {
            assert!(!debug.contains(&shown[1..shown.len() - 1]), "{debug}");
        }
        assert!(!debug.contains(&format!("{:?}", &sealed[10..20])));
    }

    #[test]
    fn keyrings_are_send_and_sync() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<Keyring>();
        shareable::<Arc<Keyring>>();
    }

    #[tokio::test]
    async fn a_local_keyring_refuses_a_kms_envelope_by_kind() {
        let sealed = header(WrapperKind::Kms, "alias/x", &[1; 100])
            .map(|mut h| {
                h.extend_from_slice(&[0; 28]);
                h
            })
            .unwrap();
        assert_eq!(master_key_of(&sealed).unwrap(), "alias/x");
        let error = keyring(HOUR).open(&sealed, b"row").await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "sealed by the AWS KMS wrapper, but this keyring uses the local one"
        );
    }
}

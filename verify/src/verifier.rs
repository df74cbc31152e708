//! [`Verifier`]: a source's verification, prepared once at start-up ([`VerifierError`]), and
//! what a successful verification tells ([`Verified`]).

use http::HeaderMap;

use crate::generic::{self, GenericHmac};
use crate::key::{KeyError, SigningKey};
use crate::outcome::{Verified, VerifyError};
use crate::request::Request;
use crate::scheme::Scheme;

/// A source's verification, prepared once at start-up and used for every delivery: the scheme,
/// the keys (in configuration order), the tolerance and, for [`Scheme::GenericHmac`], the
/// validated [`GenericHmac`] configuration.
///
/// `Debug` shows the scheme, tolerance and configuration, and prints every key as
/// `SigningKey([redacted])`.
#[derive(Debug, Clone)]
pub struct Verifier {
    /// The scheme; [`Scheme::GenericHmac`] exactly when `generic` is `Some`.
    scheme: Scheme,
    /// One prepared key per configured secret, in configuration order; never empty.
    keys: Vec<SigningKey>,
    /// Timestamp tolerance in seconds, both directions, where a timestamp is signed.
    tolerance_secs: u64,
    /// The scheme's handshake ([`crate::presets::Preset::handshake`]), read once.
    handshake: Option<crate::presets::Handshake>,
    /// The validated model (header names parsed, templates split): the source's
    /// `generic-hmac` configuration, or the scheme's preset; `None` for a fixed scheme.
    model: generic::Prepared,
}

impl Verifier {
    /// Prepare a source's verification: `secrets` in configuration order (each used verbatim,
    /// see [`SigningKey::new`]; for [`Scheme::GenericHmac`] the UTF-8 bytes keyed for the
    /// configured algorithm), `tolerance_secs` in seconds (both directions; applies where a
    /// timestamp is signed; [`DEFAULT_TOLERANCE_SECS`](crate::DEFAULT_TOLERANCE_SECS) is the usual value), and `generic`, which
    /// must be `Some` exactly for [`Scheme::GenericHmac`].
    ///
    /// # Errors
    ///
    /// Configuration errors, not retryable, whose messages never include a secret:
    ///
    /// - [`VerifierError::UnexpectedGeneric`]: a generic configuration for another scheme;
    /// - [`VerifierError::MissingGeneric`]: [`Scheme::GenericHmac`] without one;
    /// - [`VerifierError::Generic`]: the generic configuration does not validate
    ///   ([`GenericHmac::validate`]);
    /// - [`VerifierError::NoSecrets`]: `secrets` is empty (verification fails closed);
    /// - [`VerifierError::Key`]: a secret the scheme cannot use, with its 0-based index.
    pub fn new(
        scheme: Scheme,
        secrets: &[&str],
        tolerance_secs: u64,
        generic: Option<GenericHmac>,
    ) -> Result<Verifier, VerifierError> {
        let model = match (scheme, generic) {
            (Scheme::GenericHmac, Some(config)) => {
                generic::Prepared::new(config).map_err(VerifierError::Generic)?
            }
            (Scheme::GenericHmac, None) => return Err(VerifierError::MissingGeneric),
            (_, Some(_)) => return Err(VerifierError::UnexpectedGeneric(scheme)),
            (_, None) => crate::presets::prepared(scheme)
                .ok_or_else(|| {
                    VerifierError::Generic(format!("preset {}: no valid model", scheme.name()))
                })?
                .clone(),
        };
        if secrets.is_empty() {
            return Err(VerifierError::NoSecrets);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| {
                let config = model.config();
                SigningKey::for_algorithm(
                    config.algorithm,
                    secret,
                    config.secret_encoding,
                    config.key_prefix.as_deref(),
                )
                .map_err(|error| VerifierError::Key { index, error })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Verifier {
            handshake: crate::presets::handshake(scheme),
            scheme,
            keys,
            tolerance_secs,
            model,
        })
    }

    /// The source's scheme.
    #[must_use]
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The model that names this source's events, for [`Scheme::GenericHmac`] (as configured,
    /// validated) and every preset whose model reads the event id and type (its
    /// [`crate::presets::Preset::model`]); `None` for the six first schemes, whose events are
    /// named by code (their models have no naming rules and verify only).
    #[must_use]
    pub fn generic(&self) -> Option<&GenericHmac> {
        (self.model.naming == generic::Naming::Model).then(|| self.model.config())
    }

    /// The timestamp tolerance, seconds, both directions.
    #[must_use]
    pub fn tolerance_secs(&self) -> u64 {
        self.tolerance_secs
    }

    /// How many keys (secrets) the source has; at least 1. [`Verified::key_index`] is below it.
    #[must_use]
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Whether a timestamp is signed, so that the tolerance applies: [`Scheme::signs_timestamp`],
    /// or for a generic source whether `timestamp_header` is configured.
    #[must_use]
    pub fn signs_timestamp(&self) -> bool {
        self.model.signs_timestamp()
    }

    /// Lowercase name of the header that carries the signature: [`Scheme::signature_header`],
    /// or for a generic source the configured `signature_header`, normalised to lowercase.
    #[must_use]
    pub fn signature_header(&self) -> &str {
        self.model.signature_header()
    }

    /// Verify `body` (the exact raw bytes received) against every key of the source.
    ///
    /// `now` is the current time in unix seconds (injected clock); the tolerance applies as in
    /// [`crate::verify`]. Every scheme is the scheme model ([`GenericHmac`]): a preset's rules
    /// are documented in its file ([`crate::presets`], e.g. [`crate::stripe`]).
    ///
    /// # Errors
    ///
    /// [`VerifyError::MissingHeader`], [`VerifyError::MalformedHeader`],
    /// [`VerifyError::TimestampOutsideTolerance`] (checked before any HMAC is computed) or
    /// [`VerifyError::NoSignatureMatched`]. ([`VerifyError::NoKeys`] and
    /// [`VerifyError::MissingConfig`] cannot happen: [`Verifier::new`] refuses both cases.)
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, VerifyError> {
        self.verify_request(&Request::post(headers, body), now)
    }

    /// [`Verifier::verify`] with the whole request: a scheme that signs the URL or the method
    /// (Twilio, Square) needs them. The rules of the model's sources are on
    /// [`GenericHmac`] and [`crate::presets`].
    ///
    /// # Errors
    ///
    /// As [`Verifier::verify`], and for a model source [`VerifyError::MissingSignedField`] (a
    /// signed header or body field is absent) or [`VerifyError::MissingConfig`] (the URL is
    /// signed and `request.url` is empty).
    pub fn verify_request(&self, request: &Request<'_>, now: i64) -> Result<Verified, VerifyError> {
        generic::verify(&self.model, &self.keys, request, now, self.tolerance_secs)
    }

    /// The event id, type and document of a verified delivery (see [`crate::extract`]), for a
    /// model source from the rules parsed once at [`Verifier::new`].
    ///
    /// # Errors
    /// As [`crate::extract::extract`].
    pub fn extract<'a>(
        &self,
        headers: &'a HeaderMap,
        body: &'a [u8],
    ) -> Result<crate::extract::Extracted<'a>, crate::extract::ExtractError> {
        match self.model.naming {
            // The event is named from the headers as verified: `header_aliases` apply here too.
            generic::Naming::Model => crate::extract::model(
                self.scheme,
                (&self.model.config, &self.model.parsed, self.handshake),
                generic::aliased(&self.model, headers)
                    .map_err(|_| crate::extract::ExtractError::MalformedHeader("event header"))?
                    .as_ref(),
                body,
            ),
            generic::Naming::Code => crate::extract::extract(self.scheme, None, headers, body),
        }
    }

    /// Whether this source's signature covers the request URL (Twilio, Square, HubSpot, a
    /// model with `{url}`), so that a `public_url` means something for it.
    #[must_use]
    pub fn signs_url(&self) -> bool {
        self.model.parsed.template.contains(&generic::Segment::Url)
    }

    /// Whether the event id and type this source reads are covered by its signature
    /// ([`crate::extract::id_and_type_signed`], from the parsed rules for a model source).
    #[must_use]
    pub fn signs_id_and_type(&self) -> bool {
        match self.model.naming {
            generic::Naming::Model => self.model.parsed.names_signed,
            generic::Naming::Code => crate::extract::id_and_type_signed(self.scheme, None),
        }
    }

    /// The key `key_index` (0-based, configuration order), for a handshake that answers with a
    /// MAC (Zoom); `None` past the end.
    #[must_use]
    pub fn key(&self, key_index: usize) -> Option<&SigningKey> {
        self.keys.get(key_index)
    }

    /// Sign `body` as the provider would, with key `key_index` (0-based, configuration order),
    /// for tests and the dev tool.
    ///
    /// Returns the headers to set, as `(lowercase name, value)` pairs, in a fixed order (see
    /// [`crate::sign`]; a model source gets the headers its template signs or names its id by, set to
    /// `msg_id`, its timestamp header, if configured, then its signature). A source that signs
    /// the URL (Twilio, Square, HubSpot) or uses a public key gets none: sign it with
    /// [`generic::sign`](crate::generic::sign) and the request. `msg_id` is used by Standard Webhooks only;
    /// `timestamp` is unix seconds, ignored where no timestamp is signed.
    ///
    /// # Panics
    ///
    /// If `key_index >= self.key_count()`.
    #[must_use]
    pub fn sign(
        &self,
        key_index: usize,
        msg_id: &str,
        timestamp: i64,
        body: &[u8],
    ) -> Vec<(String, String)> {
        generic::sign_with_id(&self.model, &self.keys[key_index], msg_id, timestamp, body)
    }
}

/// Why a source's [`Verifier`] cannot be built. A configuration error (the source fails closed
/// at start-up): not retryable; the messages never include a secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifierError {
    /// The source has no secrets.
    #[error("no signing secrets configured (verification fails closed)")]
    NoSecrets,
    /// A secret cannot be used with the scheme.
    #[error("signing secret #{index}: {error}")]
    Key {
        /// 0-based index of the secret in the source's list.
        index: usize,
        /// Why it was refused.
        error: KeyError,
    },
    /// The [`GenericHmac`] configuration does not validate; the text says which field and why.
    #[error("generic-hmac configuration: {0}")]
    Generic(String),
    /// A [`GenericHmac`] configuration was given for a scheme that is not
    /// [`Scheme::GenericHmac`] (a preset has its own).
    #[error("a generic-hmac configuration was given for scheme {0:?}")]
    UnexpectedGeneric(Scheme),
    /// [`Scheme::GenericHmac`] was given without its configuration.
    #[error("scheme generic-hmac needs a generic-hmac configuration")]
    MissingGeneric,
}

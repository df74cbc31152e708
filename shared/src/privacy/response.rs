//! The sealed form of a stored response (`webhook_event.response_body` of a source with
//! `encrypt_payload`): the JSON `{"sealed": "<base64 of the envelope>"}`, with `"status":
//! "stale"` beside it when the answer said so (the ledger's outcome label reads that member:
//! `crate::ledger::outcome`). The receiver opens it before answering a retry, so providers get
//! the same bytes as before; hookledger's own fixed answers (the recorded no-op, the dead
//! letter's) hold no payload value and are stored as they are.

use base64::Engine;

use super::keys::{Column, PayloadKeys};
use super::seal::{self, SealError};

/// The member holding the envelope.
const SEALED: &str = "sealed";

/// `body` sealed as `(source, event_id)`'s stored response, in its JSON form.
///
/// # Errors
/// As [`PayloadKeys::seal`]: [`SealError::Kms`] (retryable) when no data key can be made.
pub async fn seal_response(
    keys: &PayloadKeys,
    source: &str,
    event_id: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, SealError> {
    let text = serde_json::to_vec(body).map_err(|error| SealError::Crypto(error.to_string()))?;
    let sealed = keys.seal(source, event_id, Column::Response, &text).await?;
    let mut form = serde_json::Map::new();
    form.insert(
        SEALED.to_owned(),
        base64::engine::general_purpose::STANDARD
            .encode(sealed)
            .into(),
    );
    if body.get("status").and_then(serde_json::Value::as_str) == Some("stale") {
        form.insert("status".to_owned(), "stale".into());
    }
    Ok(serde_json::Value::Object(form))
}

/// The envelope of a stored response in the sealed form, or `None` for any other text (a
/// response stored in the clear).
pub fn envelope_of(stored: &str) -> Option<Vec<u8>> {
    // Cheap refusal first: a clear answer is sent as it is, on every retry.
    if !stored.contains("\"sealed\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(stored).ok()?;
    let object = value.as_object()?;
    if object.keys().any(|k| k != SEALED && k != "status") {
        return None;
    }
    let envelope = base64::engine::general_purpose::STANDARD
        .decode(object.get(SEALED)?.as_str()?)
        .ok()?;
    seal::is_sealed(&envelope).then_some(envelope)
}

/// The stored response as it was answered: opened when it is in the sealed form, else `None`
/// (use the text as it is).
///
/// # Errors
/// As [`PayloadKeys::open`]: [`SealError::Tampered`] for a value sealed for another row,
/// [`SealError::Kms`] (retryable) when KMS cannot unwrap its data key.
pub async fn open_response(
    keys: &PayloadKeys,
    source: &str,
    event_id: &str,
    stored: &str,
) -> Result<Option<String>, SealError> {
    let Some(envelope) = envelope_of(stored) else {
        return Ok(None);
    };
    let text = keys
        .open(source, event_id, Column::Response, &envelope)
        .await?;
    String::from_utf8(text)
        .map(Some)
        .map_err(|_| SealError::Malformed("a sealed response that is not UTF-8"))
}

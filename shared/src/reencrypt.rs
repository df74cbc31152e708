//! The re-encryption job (issue 28): after the master key of payload encryption changes, the
//! stored payloads and sealed responses of a source are sealed again under the current master
//! key, in bounded batches, so the old key can be retired; a source that turned
//! `encrypt_payload` on has its payloads stored in the clear before sealed the same way (its
//! responses stored in the clear before stay as they are).
//!
//! A batch reads up to `batch_size` stored payloads of the source in key order from where the
//! last one stopped (the primary key, no scan of what is done), opens each one that is sealed
//! under another master key (or takes a clear one when the source encrypts), seals it under the
//! current one, and writes it back guarded by the bytes it read: a row the worker or the sweep
//! changed meanwhile keeps their change. Rows already under the current key are only read.

use tokio_postgres::types::Type;

use crate::config::SourceConfig;
use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};
use crate::privacy::keys::{Column, PayloadKeys};
use crate::privacy::seal::{self, SealError};

/// What a re-encryption run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReencryptReport {
    /// Payloads read.
    pub read: u64,
    /// Payloads sealed again under the current master key (they were under another).
    pub resealed: u64,
    /// Payloads stored in the clear now sealed (the source encrypts).
    pub sealed: u64,
    /// Payloads already under the current master key, or in the clear on a source that does
    /// not encrypt: left as they are.
    pub unchanged: u64,
    /// Payloads changed by someone else between the read and the write (left to them).
    pub raced: u64,
    /// Sealed stored responses sealed again under the current master key.
    pub responses_resealed: u64,
    /// Sealed responses changed by someone else between the read and the write.
    pub responses_raced: u64,
    /// Event ids whose payload could not be opened (altered, sealed for another row, or its
    /// master key is gone): left as they are, for an operator to look at.
    pub unreadable: Vec<String>,
    /// Batches run.
    pub batches: u32,
    /// Whether the run reached the source's last payload (false: it stopped at `max_batches`;
    /// run it again from `next_after`).
    pub done: bool,
    /// The last event id read: where a next run continues.
    pub next_after: Option<String>,
}

/// Why a run stopped before it was done.
#[derive(Debug, thiserror::Error)]
pub enum ReencryptError {
    /// PostgreSQL failed (what was written before stays written).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// No data key could be made or unwrapped (KMS unavailable: retryable).
    #[error("sealing failed: {0}")]
    Seal(#[source] SealError),
}

impl From<tokio_postgres::Error> for ReencryptError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Ledger(LedgerError::from(error))
    }
}

/// One batch of a source's stored payloads and responses after `$2`, in key order.
static PAYLOADS_AFTER: Sql = Sql {
    text: "\
SELECT event_id, payload, response_body::text
FROM webhook_event
-- The primary key (source, event_id): each batch starts where the last one stopped.
WHERE source = $1
  AND event_id > $2
  AND (payload IS NOT NULL OR response_body IS NOT NULL)
ORDER BY event_id
LIMIT $3",
    types: &[Type::TEXT, Type::TEXT, Type::INT8],
};

/// Writes a batch's new payloads back in one statement, each only if it is still the bytes
/// that were read; returns the event ids written.
static REPLACE_PAYLOADS: Sql = Sql {
    text: "\
UPDATE webhook_event AS e
SET payload = v.sealed
FROM unnest($2::text[], $3::bytea[], $4::bytea[]) AS v(event_id, read, sealed)
WHERE e.source = $1
  AND e.event_id = v.event_id
  -- Guarded by what was read: a completion, a drop or an erasure since then wins.
  AND e.payload = v.read
RETURNING e.event_id",
    types: &[
        Type::TEXT,
        Type::TEXT_ARRAY,
        Type::BYTEA_ARRAY,
        Type::BYTEA_ARRAY,
    ],
};

/// Writes a batch's sealed-again responses back in one statement, each only if it is still the
/// text that was read; returns the event ids written.
static REPLACE_RESPONSES: Sql = Sql {
    text: "\
UPDATE webhook_event AS e
SET response_body = v.sealed::jsonb
FROM unnest($2::text[], $3::text[], $4::text[]) AS v(event_id, read, sealed)
WHERE e.source = $1
  AND e.event_id = v.event_id
  -- Guarded by what was read: a drop or an erasure since then wins.
  AND e.response_body::text = v.read
RETURNING e.event_id",
    types: &[
        Type::TEXT,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
    ],
};

/// A sealed response under another master key, opened and sealed again under the current one:
/// `Ok(None)` when it is not sealed or already under the current key; `Err(None)` when it
/// cannot be opened (left, reported unreadable).
async fn resealed_response(
    keys: &PayloadKeys,
    source: &str,
    event_id: &str,
    stored: &str,
    current: &str,
) -> Result<Option<String>, Option<SealError>> {
    let Some(envelope) = crate::privacy::response::envelope_of(stored) else {
        return Ok(None);
    };
    if seal::master_key_of(&envelope).ok() == Some(current) {
        return Ok(None);
    }
    let opened = match crate::privacy::response::open_response(keys, source, event_id, stored).await
    {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(None),
        Err(error) if error.is_retryable() => return Err(Some(error)),
        Err(_) => return Err(None),
    };
    let body: serde_json::Value = serde_json::from_str(&opened).map_err(|_| None)?;
    let sealed = crate::privacy::response::seal_response(keys, source, event_id, &body)
        .await
        .map_err(Some)?;
    Ok(Some(sealed.to_string()))
}

/// Seals `source`'s stored payloads under `keys`' current master key, from `after` (exclusive;
/// `""` from the start), at most `max_batches` batches of `batch_size`.
///
/// # Errors
/// [`ReencryptError::Ledger`] when PostgreSQL fails, [`ReencryptError::Seal`] when no data key
/// can be had; the batches before stay written.
pub async fn reencrypt(
    conn: &Connection,
    source: &SourceConfig,
    keys: &PayloadKeys,
    after: &str,
    batch_size: i64,
    max_batches: u32,
) -> Result<ReencryptReport, ReencryptError> {
    let read_batch = conn.prepare(&PAYLOADS_AFTER).await?;
    let replace = conn.prepare(&REPLACE_PAYLOADS).await?;
    let replace_responses = conn.prepare(&REPLACE_RESPONSES).await?;
    let current = keys.current_master_key().to_owned();
    let name = source.name.as_str();
    let mut report = ReencryptReport::default();
    let mut after = after.to_owned();
    while report.batches < max_batches {
        let rows = conn
            .query(&read_batch, &[&name, &after, &batch_size])
            .await?;
        report.batches += 1;
        // (event id, bytes read, sealed again, whether it was sealed before)
        let mut changes: Vec<(String, Vec<u8>, Vec<u8>, bool)> = Vec::new();
        // (event id, response text read, sealed again)
        let mut responses: Vec<(String, String, String)> = Vec::new();
        for row in &rows {
            let event_id: String = row.try_get(0)?;
            after.clone_from(&event_id);
            if let Some(text) = row.try_get::<_, Option<String>>(2)? {
                match resealed_response(keys, name, &event_id, &text, &current).await {
                    Ok(Some(sealed)) => responses.push((event_id.clone(), text, sealed)),
                    Ok(None) => {}
                    Err(Some(error)) => return Err(ReencryptError::Seal(error)),
                    Err(None) => report.unreadable.push(event_id.clone()),
                }
            }
            let Some(stored) = row.try_get::<_, Option<Vec<u8>>>(1)? else {
                continue;
            };
            report.read += 1;
            let was_sealed = seal::is_sealed(&stored);
            let plain = if was_sealed {
                if seal::master_key_of(&stored).ok() == Some(current.as_str()) {
                    report.unchanged += 1;
                    continue;
                }
                match keys.open(name, &event_id, Column::Payload, &stored).await {
                    Ok(plain) => plain,
                    Err(error) if error.is_retryable() => return Err(ReencryptError::Seal(error)),
                    Err(_) => {
                        report.unreadable.push(event_id);
                        continue;
                    }
                }
            } else if source.encrypt_payload {
                stored.clone()
            } else {
                report.unchanged += 1;
                continue;
            };
            let sealed = keys
                .seal(name, &event_id, Column::Payload, &plain)
                .await
                .map_err(ReencryptError::Seal)?;
            changes.push((event_id, stored, sealed, was_sealed));
        }
        if !changes.is_empty() {
            let ids: Vec<&str> = changes.iter().map(|c| c.0.as_str()).collect();
            let read: Vec<&[u8]> = changes.iter().map(|c| c.1.as_slice()).collect();
            let sealed: Vec<&[u8]> = changes.iter().map(|c| c.2.as_slice()).collect();
            let written: std::collections::HashSet<String> = conn
                .query(&replace, &[&name, &ids, &read, &sealed])
                .await?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?;
            for (event_id, _, _, was_sealed) in &changes {
                match (written.contains(event_id), was_sealed) {
                    (false, _) => report.raced += 1,
                    (true, true) => report.resealed += 1,
                    (true, false) => report.sealed += 1,
                }
            }
        }
        if !responses.is_empty() {
            let ids: Vec<&str> = responses.iter().map(|c| c.0.as_str()).collect();
            let read: Vec<&str> = responses.iter().map(|c| c.1.as_str()).collect();
            let sealed: Vec<&str> = responses.iter().map(|c| c.2.as_str()).collect();
            let written = conn
                .query(&replace_responses, &[&name, &ids, &read, &sealed])
                .await?
                .len() as u64;
            report.responses_resealed += written;
            report.responses_raced += responses.len() as u64 - written;
        }
        report.next_after = Some(after.clone());
        if (rows.len() as i64) < batch_size {
            report.done = true;
            break;
        }
    }
    Ok(report)
}

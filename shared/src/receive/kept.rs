//! What the ledger keeps of one event besides its key: the payload hashes, the stored copies of
//! its bytes, and its data subject's hash (`crate::privacy`).
//!
//! Two copies, because an unfinished event and a completed one keep different things: a row
//! the worker or re-drive will still run keeps the body as received, and a completed row keeps
//! it with the source's `redact` fields replaced. The handlers never see either: they get the
//! body as received, in the claim's transaction. A source with `encrypt_payload` stores both
//! sealed ([`Kept::sealed`]).

use std::borrow::Cow;

use hookledger_verify::identity::PayloadHashes;

use crate::config::SourceConfig;
use crate::privacy::keys::{Column, PayloadKeys};
use crate::privacy::seal::SealError;
use crate::privacy::subject::HASH_LEN;

/// One event's hashes, stored copies and subject hash, computed once per event (a batch item
/// is answered through several paths).
#[derive(Debug)]
pub(crate) struct Kept<'b> {
    /// The full-body digest and the payload identity.
    pub hashes: PayloadHashes,
    /// The copy an unfinished row keeps (a deferred accept, a dead letter): the body as
    /// received. `None` when the source keeps digests only.
    pub unfinished: Option<Cow<'b, [u8]>>,
    /// The copy a completed row keeps: redacted when the source redacts. `None` when the
    /// source keeps digests only, or when its fields could not be redacted (never stored
    /// unredacted).
    pub completed: Option<Cow<'b, [u8]>>,
    /// The subject hash, when the source names a subject and the payload carries one.
    pub subject: Option<[u8; HASH_LEN]>,
}

impl<'b> Kept<'b> {
    /// What `config` keeps of `body` (the event's own bytes), whose `document` is the JSON
    /// the handlers read (the body, or what a form carries: the subject is named there);
    /// `event_id` only for the log line of a body that cannot be redacted.
    pub(crate) fn of(
        config: &SourceConfig,
        event_id: &str,
        body: &'b [u8],
        document: &[u8],
        hashes: PayloadHashes,
    ) -> Self {
        let subject = config
            .subject
            .as_ref()
            .and_then(|subject| subject.of_payload(document));
        if !config.store_payload {
            return Self {
                hashes,
                unfinished: None,
                completed: None,
                subject,
            };
        }
        let completed = match &config.redaction {
            None => Some(Cow::Borrowed(body)),
            Some(redaction) => match redaction.apply(body) {
                Ok(copy) => Some(copy),
                Err(why) => {
                    // Never stored unredacted: the completed row keeps digests only. No
                    // payload value in the line.
                    tracing::warn!(
                        source = config.name.as_str(),
                        event_id,
                        reason = %why,
                        "the payload's fields cannot be redacted; the completed event keeps its digests only"
                    );
                    None
                }
            },
        };
        Self {
            hashes,
            unfinished: Some(Cow::Borrowed(body)),
            completed,
            subject,
        }
    }

    /// The same copies sealed as `(source, event_id)`'s payload (the copy an unfinished row
    /// keeps and the completed one sealed once when they are the same bytes).
    ///
    /// # Errors
    /// As [`PayloadKeys::seal`]: [`SealError::Kms`] (retryable) when no data key can be made.
    pub(crate) async fn sealed(
        self,
        keys: &PayloadKeys,
        source: &str,
        event_id: &str,
    ) -> Result<Kept<'b>, SealError> {
        let seal = |bytes: &[u8]| {
            let bytes = bytes.to_vec();
            async move {
                keys.seal(source, event_id, Column::Payload, &bytes)
                    .await
                    .map(Cow::Owned)
            }
        };
        let same = match (&self.unfinished, &self.completed) {
            (Some(a), Some(b)) => a.as_ref() == b.as_ref(),
            _ => false,
        };
        let unfinished = match &self.unfinished {
            Some(bytes) => Some(seal(bytes).await?),
            None => None,
        };
        let completed = match (&self.completed, same) {
            (Some(_), true) => unfinished.clone(),
            (Some(bytes), false) => Some(seal(bytes).await?),
            (None, _) => None,
        };
        Ok(Kept {
            hashes: self.hashes,
            unfinished,
            completed,
            subject: self.subject,
        })
    }
}

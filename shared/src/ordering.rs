//! The ordering guard (docs/architecture.md, "Ordering"): the newest version applied per entity, advanced in
//! the same transaction as the effect.
//!
//! Deduplication does nothing for order: a provider may deliver v3, then v1, then v2. A handler
//! that writes state calls [`advance`] first and writes only when it returns
//! [`Advance::Applied`]; a stale or replayed version is a successful no-op (the event completes,
//! the state stays). Delta events (no version) rely on the event-id claim alone.
//!
//! Versions must move with every change. For Stripe that is the **event's** `created` (unix
//! seconds), not the object's: a subscription's own `created` is its creation time and never
//! changes, so versioning on it would freeze the state after the first event.
//!
//! **Ties.** One-second granularity means two changes within a second carry the same version,
//! and the guard cannot tell which is newer. A tie must never silently lose the newer state:
//! [`advance`] returns [`Advance::Tie`], logs it, counts it (`ordering_tie`) and records it in
//! the `ordering_tie` table (unresolved) in the same transaction. The handler then either
//! resolves it — re-fetches the object from the provider's API, writes what it returns and
//! calls [`resolved`] — or leaves it listed for operators. Rule for handler authors: on
//! `Tie`, never assume your event is the older one; resolve from the source of truth, or let it
//! stay visible.

use tokio_postgres::types::{ToSql, Type};

use crate::db::Sql;
use crate::effect::HandlerError;
use crate::ledger::Tx;

/// The guard's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// `version` is newer than any applied before (or the first): apply the effect.
    Applied,
    /// An equal or newer version was applied already: do not write; complete as a no-op.
    Stale {
        /// The version currently applied.
        current: i64,
    },
    /// Exactly the applied version again, from another event: ambiguous (one-second
    /// granularity). Recorded in `ordering_tie`, logged and counted as `ordering_tie`; the
    /// handler resolves it or leaves it for operators.
    Tie {
        /// The event whose state is applied.
        applied_event_id: String,
    },
}

impl Advance {
    /// Whether the effect should be written.
    pub fn is_applied(&self) -> bool {
        matches!(self, Advance::Applied)
    }
}

/// One entity's identity and the version an event carries.
#[derive(Debug, Clone, Copy)]
pub struct Entity<'a> {
    /// Source name.
    pub source: &'a str,
    /// Kind of entity, e.g. `subscription`.
    pub entity_type: &'a str,
    /// The entity's id, e.g. `sub_123`.
    pub entity_id: &'a str,
    /// The version this event carries (monotonic per entity; unix seconds for Stripe).
    pub version: i64,
}

static ADVANCE: Sql = Sql {
    text: "\
INSERT INTO entity_version (source, entity_type, entity_id, version, event_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (source, entity_type, entity_id) DO UPDATE
SET version = EXCLUDED.version,
    event_id = EXCLUDED.event_id,
    updated_at = now()
-- Only forward: an older or equal version leaves the row as it is and returns nothing.
WHERE entity_version.version < EXCLUDED.version
RETURNING version",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT],
};

static CURRENT: Sql = Sql {
    text: "\
SELECT version, event_id
FROM entity_version
WHERE source = $1
  AND entity_type = $2
  AND entity_id = $3",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT],
};

static RECORD_TIE: Sql = Sql {
    text: "\
INSERT INTO ordering_tie (source, entity_type, entity_id, version, applied_event_id, event_id)
VALUES ($1, $2, $3, $4, $5, $6)
-- The same tie seen again (a retry of the tying event): one record.
ON CONFLICT DO NOTHING",
    types: &[
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::TEXT,
        Type::TEXT,
    ],
};

/// Advances `entity` to its version on behalf of `event_id`, in the handler's transaction (one
/// statement; the row stays locked until that transaction ends, so concurrent events for one
/// entity serialize here). When the version is not applied a second read tells a stale version
/// from a tie, and a tie is recorded in `ordering_tie` (a third statement).
///
/// # Errors
/// [`HandlerError`] from the database error (see its `From` conversion).
pub async fn advance(
    tx: &mut Tx<'_>,
    entity: &Entity<'_>,
    event_id: &str,
) -> Result<Advance, HandlerError> {
    let params: [&(dyn ToSql + Sync); 5] = [
        &entity.source,
        &entity.entity_type,
        &entity.entity_id,
        &entity.version,
        &event_id,
    ];
    if tx.query_opt(&ADVANCE, &params).await?.is_some() {
        return Ok(Advance::Applied);
    }
    let row = tx
        .query_opt(
            &CURRENT,
            &[&entity.source, &entity.entity_type, &entity.entity_id],
        )
        .await?
        .ok_or_else(|| HandlerError::retryable("entity_version row vanished"))?;
    let current: i64 = row.try_get(0).map_err(HandlerError::from)?;
    let current_event: String = row.try_get(1).map_err(HandlerError::from)?;
    if current != entity.version || current_event == event_id {
        return Ok(Advance::Stale { current });
    }
    tx.execute(
        &RECORD_TIE,
        &[
            &entity.source,
            &entity.entity_type,
            &entity.entity_id,
            &entity.version,
            &current_event,
            &event_id,
        ],
    )
    .await?;
    tracing::warn!(
        source = entity.source,
        entity_type = entity.entity_type,
        entity_id = entity.entity_id,
        version = entity.version,
        event_id,
        applied_event_id = current_event.as_str(),
        metric = "ordering_tie",
        "two events carry the same version: recorded in ordering_tie for the handler to resolve"
    );
    crate::telemetry::count(crate::telemetry::MetricName::OrderingTie, entity.source, 1);
    Ok(Advance::Tie {
        applied_event_id: current_event,
    })
}

static RESOLVED: Sql = Sql {
    text: "\
UPDATE ordering_tie
SET resolved = true
WHERE source = $1
  AND entity_type = $2
  AND entity_id = $3
  AND version = $4
  AND event_id = $5",
    types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT],
};

/// Marks the tie [`advance`] recorded for `entity` and `event_id` as resolved (the handler
/// wrote the authoritative state it re-fetched), in the same transaction.
///
/// # Errors
/// [`HandlerError`] from the database error.
pub async fn resolved(
    tx: &mut Tx<'_>,
    entity: &Entity<'_>,
    event_id: &str,
) -> Result<(), HandlerError> {
    tx.execute(
        &RESOLVED,
        &[
            &entity.source,
            &entity.entity_type,
            &entity.entity_id,
            &entity.version,
            &event_id,
        ],
    )
    .await?;
    tracing::info!(
        source = entity.source,
        entity_type = entity.entity_type,
        entity_id = entity.entity_id,
        version = entity.version,
        event_id,
        "ordering tie resolved from the provider's API"
    );
    Ok(())
}

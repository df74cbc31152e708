//! The ordering guard (DESIGN.md section 5): the newest version applied per entity, advanced in
//! the same transaction as the effect.
//!
//! Deduplication does nothing for order: a provider may deliver v3, then v1, then v2. A handler
//! that writes state calls [`advance`] first and writes only when it returns
//! [`Advance::Applied`]; a stale or replayed version is a successful no-op (the event completes,
//! the state stays). Delta events (no version) rely on the event-id claim alone.
//!
//! Versions must move with every change. For Stripe that is the **event's** `created` (unix
//! seconds), not the object's: a subscription's own `created` is its creation time and never
//! changes, so versioning on it would freeze the state after the first event. One-second
//! granularity means two changes within a second tie: a tie is treated as stale, logged and
//! counted as `ordering_tie` ([`Advance::Tie`]); a handler that cannot accept that re-fetches the
//! object from the provider's API and writes what it returns.

use tokio_postgres::types::ToSql;

use crate::ledger::Connection;

/// The guard's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// `version` is newer than any applied before (or the first): apply the effect.
    Applied,
    /// An equal or newer version was applied already: do not write; complete as a no-op.
    Stale {
        /// The version currently applied.
        current: i64,
    },
    /// Exactly the applied version again, from another event: ambiguous (one-second
    /// granularity); treated as stale, logged and counted as `ordering_tie`.
    Tie,
}

impl Advance {
    /// Whether the effect should be written.
    pub fn is_applied(self) -> bool {
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

const ADVANCE: &str = "\
INSERT INTO entity_version (source, entity_type, entity_id, version, event_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (source, entity_type, entity_id) DO UPDATE
SET version = EXCLUDED.version,
    event_id = EXCLUDED.event_id,
    updated_at = now()
-- Only forward: an older or equal version leaves the row as it is and returns nothing.
WHERE entity_version.version < EXCLUDED.version
RETURNING version";

const CURRENT: &str = "\
SELECT version, event_id
FROM entity_version
WHERE source = $1
  AND entity_type = $2
  AND entity_id = $3";

/// Advances `entity` to its version on behalf of `event_id`, in the caller's transaction on
/// `conn` (one statement; the row stays locked until that transaction ends, so concurrent
/// events for one entity serialize here). A second read happens only when the version is not
/// applied, to tell a stale version from a tie.
///
/// # Errors
/// `tokio_postgres::Error` when PostgreSQL fails.
pub async fn advance(
    conn: &Connection,
    entity: &Entity<'_>,
    event_id: &str,
) -> Result<Advance, tokio_postgres::Error> {
    let statement = conn.prepare_cached(ADVANCE).await?;
    let params: [&(dyn ToSql + Sync); 5] = [
        &entity.source,
        &entity.entity_type,
        &entity.entity_id,
        &entity.version,
        &event_id,
    ];
    if conn.query_opt(&statement, &params).await?.is_some() {
        return Ok(Advance::Applied);
    }
    let statement = conn.prepare_cached(CURRENT).await?;
    let row = conn
        .query_one(
            &statement,
            &[&entity.source, &entity.entity_type, &entity.entity_id],
        )
        .await?;
    let current: i64 = row.try_get(0)?;
    let current_event: String = row.try_get(1)?;
    Ok(if current == entity.version && current_event != event_id {
        tracing::warn!(
            source = entity.source,
            entity_type = entity.entity_type,
            entity_id = entity.entity_id,
            version = entity.version,
            event_id,
            applied_event_id = current_event.as_str(),
            metric = "ordering_tie",
            "two events carry the same version: the later one is treated as stale"
        );
        crate::telemetry::count("ordering_tie", entity.source, 1);
        Advance::Tie
    } else {
        Advance::Stale { current }
    })
}

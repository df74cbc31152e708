//! The erasure's statements: one batch ([`erase_batch`]: pick, erase the events, empty their
//! outbox messages, in one statement) and the count of what is left ([`tally`]), each by
//! subject (`webhook_event_subject_idx`) or by key (the primary key).
//!
//! The rules they share are written once, as SQL fragments on the aliases `e` (an event) and
//! `o` (an outbox message): which events are finished, which still hold something to erase,
//! which messages do, and how earlier history entries lose their values.

use tokio_postgres::types::{ToSql, Type};

use super::request::{Erasure, Target};
use crate::db::Sql;
use crate::ledger::{Connection, LedgerError};
use crate::privacy::subject::HASH_LEN;
use crate::sweep::payload::emptied_response_sql;

/// [`ERASED_TEXT`] as a literal, for `concat!` in the statements.
macro_rules! erased_text {
    () => {
        "[erased]"
    };
}

/// [`ERASED_RESPONSE`] as a literal, for `concat!` in the statements.
macro_rules! erased_response {
    () => {
        r#"{"status": "processed", "response": "erased on request"}"#
    };
}

/// What an erased value becomes where a text or a JSON value stays in place: `last_error`, and
/// the `response` and `last_error` members of earlier `history` entries (as a JSON string).
pub const ERASED_TEXT: &str = erased_text!();

/// The response body a processed event answers retries with once erased (its status code
/// stays): the handler's own answer may quote the payload. An ignored event keeps its
/// recorded no-op and a stale one answers `{"status": "stale"}`, as after payload retention
/// (`crate::sweep::payload`). JSON text.
pub const ERASED_RESPONSE: &str = erased_response!();

/// The condition, on `e`, that an event is finished: completed or dead, and none of its outbox
/// messages still to dispatch (pending or processing: the worker sends their payload).
macro_rules! finished {
    () => {
        "(e.status IN ('completed', 'dead')
      -- A message still to dispatch needs its payload: its event waits with it
      -- (outbox_pkey: the event's messages).
      AND NOT EXISTS (
          SELECT 1
          FROM outbox AS pending
          WHERE pending.source = e.source
            AND pending.event_id = e.event_id
            AND pending.status IN ('pending', 'processing')))"
    };
}

/// The condition, on `e`, that an event still holds something to erase: never erased, or
/// claimed again since (a dead letter's redelivery: `claimed_at` moved past `erased_at`), or a
/// payload stored again.
macro_rules! left_over {
    () => {
        "(e.erased_at IS NULL
           OR e.erased_at < e.claimed_at
           OR e.payload IS NOT NULL)"
    };
}

/// The condition, on `o`, that a finished message still holds something to erase.
macro_rules! message_left_over {
    () => {
        "o.status IN ('delivered', 'dead')
      AND (o.payload <> ''::bytea OR o.last_error IS NOT NULL)"
    };
}

/// `history` (the column named) with the values of its entries erased: each entry's
/// `response` and `last_error` that hold something become [`ERASED_TEXT`]; times, statuses,
/// attempts and earlier erasure records stay. NULL for a NULL history.
macro_rules! stripped_history {
    ($column:literal) => {
        concat!(
            "(SELECT jsonb_agg(
                 entry || coalesce(
                     (SELECT jsonb_object_agg(member, to_jsonb('",
            erased_text!(),
            "'::text))
                      FROM jsonb_each(entry) AS value_of(member, value)
                      WHERE member IN ('response', 'last_error')
                        AND value <> 'null'::jsonb),
                     '{}'::jsonb)
                 ORDER BY position)
             FROM jsonb_array_elements(",
            $column,
            ") WITH ORDINALITY AS earlier(entry, position))"
        )
    };
}

/// One batch, for the events `$key` selects (`e.subject_hash = $2` or `e.event_id = $2`).
/// Parameters: `$1` source (text), `$2` the subject hash (bytea) or the event id (text), `$3`
/// the batch size (int8), `$4` who asked (text), `$5` why (text, NULL for no reason). One row
/// back: `(events erased int8, outbox messages emptied int8)`.
macro_rules! erase_batch_sql {
    ($key:literal) => {
        concat!(
            "\
WITH picked AS (
    SELECT e.source, e.event_id
    FROM webhook_event AS e
    WHERE e.source = $1
      AND ",
            $key,
            "
      AND ",
            finished!(),
            "
      AND ",
            left_over!(),
            "
    LIMIT $3
    -- Not SKIP LOCKED: a row a delivery or a worker holds right now is waited for (bounded
    -- by lock_timeout) and judged again once free, never stepped over.
    FOR UPDATE OF e
), erased AS (
    UPDATE webhook_event AS e
    SET payload = NULL,
        -- The status code stays: a retry is answered as a duplicate. A dead letter's
        -- answer is the fixed one of an inline fatal error (or none): nothing to erase.
        response_body = CASE
            WHEN e.status = 'completed' THEN ",
            emptied_response_sql!(erased_response!()),
            "
            ELSE e.response_body
        END,
        last_error = CASE WHEN e.last_error IS NOT NULL THEN '",
            erased_text!(),
            "' END,
        history = coalesce(",
            stripped_history!("e.history"),
            ", '[]'::jsonb)
            -- Who erased what and when; no erased value.
            || jsonb_build_array(jsonb_build_object(
                'action', 'forget', 'at', now(), 'by', $4::text, 'reason', $5::text,
                'erased', jsonb_build_array('payload', 'response', 'last_error', 'history',
                                            'outbox'))),
        erased_at = now()
    FROM picked
    WHERE e.source = picked.source
      AND e.event_id = picked.event_id
      -- Re-checked on the locked row.
      AND e.status IN ('completed', 'dead')
    RETURNING e.source, e.event_id
), emptied AS (
    UPDATE outbox AS o
    SET payload = ''::bytea,
        -- Marks the message as emptied: outbox re-drive never sends it again.
        payload_dropped_at = now(),
        -- A target's answer may echo what it was sent.
        last_error = NULL,
        history = ",
            stripped_history!("o.history"),
            "
    FROM erased
    WHERE o.source = erased.source
      AND o.event_id = erased.event_id
      AND ",
            message_left_over!(),
            "
    RETURNING 1
)
SELECT (SELECT count(*) FROM erased), (SELECT count(*) FROM emptied)"
        )
    };
}

/// One batch by subject: the subject's events through `webhook_event_subject_idx`.
/// Parameters and result as described at [`erase_batch`].
pub static ERASE_BY_SUBJECT: Sql = Sql {
    text: erase_batch_sql!("e.subject_hash = $2"),
    types: &[Type::TEXT, Type::BYTEA, Type::INT8, Type::TEXT, Type::TEXT],
};

/// One batch by key: the one event, through the primary key.
pub static ERASE_BY_EVENT: Sql = Sql {
    text: erase_batch_sql!("e.event_id = $2"),
    types: &[Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT, Type::TEXT],
};

/// What one batch erased.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Erased {
    /// Events erased.
    pub events: u64,
    /// Outbox messages emptied.
    pub messages: u64,
}

/// `target`'s statement (`by_subject` or `by_event`) and source, and its `$2` in `slot`.
fn keyed<'t>(
    target: &'t Target,
    by_subject: &'static Sql,
    by_event: &'static Sql,
    slot: &'t mut Option<&'t [u8]>,
) -> (&'static Sql, &'t str, &'t (dyn ToSql + Sync)) {
    match target {
        Target::Subject { source, hash } => (by_subject, source, slot.insert(hash.as_slice())),
        Target::Event { source, event_id } => (by_event, source, event_id),
    }
}

/// Erases at most `limit` finished events of `target` that still hold something to erase, and
/// empties their outbox messages: one statement, committed on its own (with the session's
/// limits).
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails (a `lock_timeout` behind a row held too long
/// included): retryable, nothing of the batch is committed.
pub async fn erase_batch(
    conn: &Connection,
    target: &Target,
    erasure: &Erasure,
    limit: i64,
) -> Result<Erased, LedgerError> {
    let mut slot = None;
    let (sql, source, key) = keyed(target, &ERASE_BY_SUBJECT, &ERASE_BY_EVENT, &mut slot);
    let by = erasure.by();
    let reason = erasure.reason();
    let rows = conn
        .autocommit(sql, &[&source, key, &limit, &by, &reason])
        .await?;
    let Some(row) = rows.first() else {
        return Ok(Erased::default());
    };
    let events: i64 = row.try_get(0)?;
    let messages: i64 = row.try_get(1)?;
    Ok(Erased {
        events: events.unsigned_abs(),
        messages: messages.unsigned_abs(),
    })
}

/// The tally for the events `$key` selects. Parameters: `$1` source, `$2` the subject hash or
/// the event id, `$3` how many unfinished ids to list (int4). One row back: `(events int8,
/// erasable int8, unfinished int8, the first unfinished ids text[] or NULL, outbox messages of
/// the erasable int8)`.
macro_rules! tally_sql {
    ($key:literal) => {
        concat!(
            "\
WITH matching AS (
    SELECT e.event_id,
           ",
            finished!(),
            " AS finished,
           ",
            left_over!(),
            " AS left_over
    FROM webhook_event AS e
    WHERE e.source = $1
      AND ",
            $key,
            "
)
SELECT count(*),
       count(*) FILTER (WHERE finished AND left_over),
       count(*) FILTER (WHERE NOT finished),
       (array_agg(event_id ORDER BY event_id) FILTER (WHERE NOT finished))[1:$3],
       (SELECT count(*)
        FROM outbox AS o
        JOIN matching AS m ON o.event_id = m.event_id
        WHERE o.source = $1
          AND m.finished
          AND m.left_over
          AND ",
            message_left_over!(),
            ")
FROM matching"
        )
    };
}

/// The tally by subject (`webhook_event_subject_idx`).
pub static TALLY_BY_SUBJECT: Sql = Sql {
    text: tally_sql!("e.subject_hash = $2"),
    types: &[Type::TEXT, Type::BYTEA, Type::INT4],
};

/// The tally by key.
pub static TALLY_BY_EVENT: Sql = Sql {
    text: tally_sql!("e.event_id = $2"),
    types: &[Type::TEXT, Type::TEXT, Type::INT4],
};

/// What [`tally`] counted of a target's events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// The target's events in the ledger, whatever their status.
    pub events: u64,
    /// Finished events that still hold something to erase.
    pub erasable: u64,
    /// The outbox messages [`erase_batch`] would empty with those.
    pub messages: u64,
    /// Unfinished events (claimed, processing, failed, or with a message to dispatch).
    pub unfinished: u64,
    /// The first `listed` of their ids, in id order.
    pub unfinished_ids: Vec<String>,
}

/// Counts `target`'s events: how many, how many a forget would erase now (with their outbox
/// messages), how many are unfinished, and the first `listed` unfinished ids. Reads only.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails.
pub async fn tally(
    conn: &Connection,
    target: &Target,
    listed: usize,
) -> Result<Tally, LedgerError> {
    let mut slot = None;
    let (sql, source, key) = keyed(target, &TALLY_BY_SUBJECT, &TALLY_BY_EVENT, &mut slot);
    let listed = i32::try_from(listed).unwrap_or(i32::MAX);
    let statement = conn.prepare(sql).await?;
    let rows = conn.query(&statement, &[&source, key, &listed]).await?;
    let Some(row) = rows.first() else {
        return Ok(Tally::default());
    };
    let count =
        |i: usize| -> Result<u64, LedgerError> { Ok(row.try_get::<_, i64>(i)?.unsigned_abs()) };
    Ok(Tally {
        events: count(0)?,
        erasable: count(1)?,
        unfinished: count(2)?,
        unfinished_ids: row
            .try_get::<_, Option<Vec<String>>>(3)?
            .unwrap_or_default(),
        messages: count(4)?,
    })
}

static SUBJECT_HASH: Sql = Sql {
    text: "\
SELECT subject_hash
FROM webhook_event
WHERE source = $1
  AND event_id = $2
  AND subject_hash IS NOT NULL",
    types: &[Type::TEXT, Type::TEXT],
};

/// The subject hash `source`'s event `event_id` was claimed with: `None` when the event is not
/// in the ledger or names no subject. A primary-key read.
///
/// # Errors
/// [`LedgerError::Db`] when PostgreSQL fails. (A stored hash of another length, which the
/// column's CHECK rules out, reads as none.)
pub async fn subject_hash(
    conn: &Connection,
    source: &str,
    event_id: &str,
) -> Result<Option<[u8; HASH_LEN]>, LedgerError> {
    let statement = conn.prepare(&SUBJECT_HASH).await?;
    let Some(row) = conn.query_opt(&statement, &[&source, &event_id]).await? else {
        return Ok(None);
    };
    let hash: Vec<u8> = row.try_get(0)?;
    Ok(<[u8; HASH_LEN]>::try_from(hash.as_slice()).ok())
}

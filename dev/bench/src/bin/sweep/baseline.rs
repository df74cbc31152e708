//! BASELINE: the duplicate path as it was before retention (commit 94d4246, before c443efa):
//! the claim's INSERT (unchanged), then ROLLBACK pipelined with a lookup that does not read
//! `claimed_at, dead_at`, and no age check. Kept here only to measure what the expiry check
//! costs the hot duplicate; the receive path never runs it.

use std::future::Future;

use anyhow::Result;
use futures_util::future::maybe_done;
use shared::db::{Connection, Sql};
use shared::ledger::{NewEvent, Status};
use tokio_postgres::types::{ToSql, Type};

/// BASELINE: the lookup before retention (no `claimed_at, dead_at`).
static BASELINE_LOOKUP: Sql = Sql {
    text: "\
SELECT status::text, payload_digest, response_status, response_body::text, payload_identity
FROM webhook_event
WHERE source = $1
  AND event_id = $2",
    types: &[Type::TEXT, Type::TEXT],
};

/// BASELINE duplicate: `Ok(true)` when it would be answered with the stored response.
pub async fn baseline_duplicate(conn: &Connection, event: &NewEvent<'_>) -> Result<bool> {
    // The claim's INSERT is unchanged by retention: the real one.
    let claim = conn.prepare(&shared::ledger::claim::CLAIM).await?;
    let lookup = conn.prepare(&BASELINE_LOOKUP).await?;
    let digest: &[u8] = event.digest;
    let identity: &[u8] = event.identity;
    let params: [&(dyn ToSql + Sync); 6] = [
        &event.source,
        &event.event_id,
        &event.event_type,
        &digest,
        &event.payload,
        &identity,
    ];
    let (begin, inserted) = in_order(conn.begin(), conn.query_opt(&claim, &params)).await;
    begin?;
    if inserted?.is_some() {
        conn.batch_execute("ROLLBACK").await?;
        return Ok(false);
    }
    let (rolled_back, row) = in_order(
        conn.batch_execute("ROLLBACK"),
        conn.query_opt(&lookup, &[&event.source, &event.event_id]),
    )
    .await;
    rolled_back?;
    let Some(row) = row? else {
        return Ok(false);
    };
    let status = Status::parse(row.try_get::<_, &str>(0)?)?;
    let payload_digest: Vec<u8> = row.try_get(1)?;
    let response_status: Option<i16> = row.try_get(2)?;
    let response_body: Option<String> = row.try_get(3)?;
    let payload_identity: Option<Vec<u8>> = row.try_get(4)?;
    let same = match &payload_identity {
        Some(identity) => identity.as_slice() == event.identity.as_slice(),
        None => payload_digest.as_slice() == event.digest.as_slice(),
    };
    Ok(same && status == Status::Completed && response_status.is_some() && response_body.is_some())
}

/// Awaits both futures, polling `first` before `second` (what `shared`'s crate-private
/// pipelining does): the two statements go out back to back, one round trip.
async fn in_order<A: Future, B: Future>(first: A, second: B) -> (A::Output, B::Output) {
    let mut first = std::pin::pin!(maybe_done(first));
    let mut second = std::pin::pin!(maybe_done(second));
    std::future::poll_fn(|cx| {
        let a = first.as_mut().poll(cx).is_ready();
        let b = second.as_mut().poll(cx).is_ready();
        if a && b {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    match (first.as_mut().take_output(), second.as_mut().take_output()) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both futures completed"),
    }
}

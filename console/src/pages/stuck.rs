//! `GET /stuck`: the auditor's stuck list now (`shared::audit::stuck_list`, what `hookledger
//! stuck` prints): `claimed` rows older than the threshold and expired leases, per source, and
//! the oldest keys. Read-only, as the CLI: a worker that runs again re-leases them; each links
//! to its event.

use axum::extract::{Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use crate::layout::{age, event_url, shell};
use crate::pages::{connection, given};
use crate::{AppState, PageError};

/// Keys listed, oldest first.
pub const LIMIT: i64 = 200;

/// `?stuck_after_secs=` (1 to 86400; default the auditor's `HOOKLEDGER_AUDIT_STUCK_AFTER_SECS`).
#[derive(Debug, Deserialize)]
pub struct StuckQuery {
    stuck_after_secs: Option<String>,
}

/// The stuck page.
///
/// # Errors
/// 400 for a bad threshold; 503 when the database fails.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<StuckQuery>,
) -> Result<Markup, PageError> {
    let stuck_after_secs = match given(&query.stuck_after_secs) {
        None => state.settings.audit.stuck_after_secs,
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=86_400).contains(s))
            .ok_or_else(|| {
                PageError::bad(
                    "stuck_after_secs",
                    "a whole number of seconds from 1 to 86400",
                )
            })?,
    };
    let conn = connection(&state).await?;
    let list = shared::audit::stuck_list(&conn, stuck_after_secs, LIMIT).await?;
    drop(conn);
    let content = html! {
        h1 { "Stuck claims and expired leases" }
        p #total { strong { (list.total) @if list.capped { "+" } } " stuck at " (list.at)
            " (claimed more than " (age(list.stuck_after_secs)) " ago and not taken by a worker, or a lease expired)." }
        p.note { "A worker that runs again picks them up (expired leases are re-leased): check the worker's logs and schedule. "
            "Open one to see its attempts and last error." }
        form.filters method="get" action="/stuck" {
            label { "stuck after (seconds)" input type="number" name="stuck_after_secs" min="1" max="86400" value=(list.stuck_after_secs); }
            button type="submit" { "Show" }
        }
        @if !list.sources.is_empty() {
            table {
                tr { th { "source" } th.n { "stuck" } th.n { "oldest" } }
                @for (source, figure) in &list.sources {
                    tr { td { (source) } td.n data-source=(source) data-figure="stuck" { (figure.count) } td.n { (age(figure.oldest_age_secs)) } }
                }
            }
        }
        @if !list.keys.is_empty() {
            h2 { "Oldest " (list.keys.len()) }
            table #stuck {
                tr { th { "source" } th { "event id" } th.n { "age" } }
                @for key in &list.keys {
                    tr.stuck { td { (key.source) } td.mono { a href=(event_url(&key.source, &key.event_id)) { (key.event_id) } } td.n { (age(key.age_secs)) } }
                }
            }
        }
    };
    Ok(shell("Stuck", content, Some("/stuck")))
}

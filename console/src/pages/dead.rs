//! `GET /dead`: the newest dead letters and dead outbox messages, by `source` and a window of
//! `dead_at` (`since`, `until`), each with a re-drive link, and re-drive of every one matching
//! the filter (a source and `since` are needed, as for `hookledger redrive --since`). Re-drive
//! goes through the confirmation ([`crate::pages::redrive`]).

use axum::extract::{Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use crate::layout::{event_url, shell, time, url_with};
use crate::pages::events::truncate;
use crate::pages::{connection, given, text};
use crate::queries::{self, DeadFilter};
use crate::{time_input, AppState, PageError};

/// Rows listed of each kind, newest first.
pub const LIMIT: i64 = 200;

/// `?source=&since=&until=`.
#[derive(Debug, Deserialize)]
pub struct DeadQuery {
    source: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// The dead-letters page.
///
/// # Errors
/// 400 naming a bad filter; 503 when the database fails.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<DeadQuery>,
) -> Result<Markup, PageError> {
    let filter = DeadFilter {
        source: text("source", given(&query.source))?,
        since: time_input::parse("since", query.since.as_deref())?,
        until: time_input::parse("until", query.until.as_deref())?,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if until <= since {
            return Err(PageError::bad("until", "must be after since"));
        }
    }
    let conn = connection(&state).await?;
    let events = queries::dead_events(&conn, &filter, LIMIT).await?;
    let messages = queries::dead_messages(&conn, &filter, LIMIT).await?;
    drop(conn);
    let read_only = state.config.read_only;
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    // "All matching" needs what `hookledger redrive --since` needs: a source and a start.
    let window = match (&filter.source, filter.since) {
        (Some(source), Some(since)) if !read_only => Some((
            source.clone(),
            shared::timestamp::rfc3339(since),
            filter
                .until
                .map(shared::timestamp::rfc3339)
                .unwrap_or_default(),
        )),
        _ => None,
    };
    let content = html! {
        h1 { "Dead letters" }
        form.filters method="get" action="/dead" {
            label { "source" input name="source" value=(value(&query.source)) size="12"; }
            label { "went dead from (UTC)" input name="since" value=(value(&query.since)) placeholder="2026-12-01T09:30:00Z" size="22"; }
            label { "until (UTC)" input name="until" value=(value(&query.until)) size="22"; }
            button type="submit" { "Filter" }
            a href="/dead" { "clear" }
        }
        @if read_only { p.note { "Read-only console: no re-drive." } }
        @else if window.is_none() { p.note { "To re-drive all that match, give a source and a start (went dead from)." } }
        h2 { "Events" }
        @if let Some((source, since, until)) = &window {
            @if !events.is_empty() {
                p { a href=(url_with("/redrive/confirm", &[("what", "dead"), ("source", source), ("since", since), ("until", until)])) { "Re-drive every dead letter matching this filter…" } }
            }
        }
        table #dead-events {
            tr { th { "went dead" } th { "source" } th { "event id" } th { "type" } th.n { "attempts" } th { "last error" } th {} }
            @for row in &events {
                tr.dead {
                    td.mono { (time(row.dead_at)) }
                    td { (row.source) }
                    td.mono { a href=(event_url(&row.source, &row.event_id)) { (row.event_id) } }
                    td { (row.event_type) }
                    td.n { (row.attempts) }
                    td { (row.last_error.as_deref().map(|e| truncate(e, 120)).unwrap_or_default()) }
                    td { @if read_only {} @else if row.has_payload {
                        a href=(url_with("/redrive/confirm", &[("what", "dead"), ("source", &row.source), ("event_id", &row.event_id)])) { "re-drive…" }
                    } @else { span.note { "no payload" } } }
                }
            }
        }
        @if events.is_empty() { p.note { "No dead letters match." } }
        @else if events.len() as i64 == LIMIT { p.note { "The newest " (LIMIT) " shown: narrow the filter to see older ones." } }
        h2 { "Outbox messages" }
        @if let Some((source, since, until)) = &window {
            @if !messages.is_empty() {
                p { a href=(url_with("/redrive/confirm", &[("what", "outbox"), ("source", source), ("since", since), ("until", until)])) { "Re-drive every dead outbox message matching this filter…" } }
            }
        }
        table #dead-messages {
            tr { th { "went dead" } th { "idempotency key" } th { "target" } th.n { "attempts" } th.n { "last HTTP status" } th { "last error" } th {} }
            @for message in &messages {
                tr.dead-message {
                    td.mono { (time(message.dead_at)) }
                    td.mono { a href=(event_url(&message.source, &message.event_id)) { (shared::outbox::idempotency_key(&message.source, &message.event_id, message.n)) } }
                    td { (message.target) }
                    td.n { (message.attempts) }
                    td.n { (message.last_status.map_or_else(|| "-".to_owned(), |s| s.to_string())) }
                    td { (message.last_error.as_deref().map(|e| truncate(e, 120)).unwrap_or_default()) }
                    td { @if !read_only {
                        a href=(url_with("/redrive/confirm", &[("what", "outbox"), ("source", &message.source), ("event_id", &message.event_id)])) { "re-drive…" }
                    } }
                }
            }
        }
        @if messages.is_empty() { p.note { "No dead outbox messages match." } }
    };
    Ok(shell("Dead letters", content, Some("/dead")))
}

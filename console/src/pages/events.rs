//! `GET /events`: the ledger newest first, filtered by source, status, outcome, event type, a
//! window of `claimed_at` (`from`, `until`) and an event id prefix (with a source), in keyset
//! pages of [`PAGE_SIZE`] (`after`: an opaque cursor of the last row's `(claimed_at, source,
//! event_id)`; never OFFSET). Each row shows its outcome (`shared::ledger::EventOutcome`: a
//! completed event `processed`, `ignored` or `stale`) and where it came from (a delivery or
//! replay, and whether an operator re-drove it). The statement is [`crate::queries::EVENTS`].

use std::time::{Duration, SystemTime};

use axum::extract::{Query, State};
use base64::Engine;
use maud::{html, Markup};
use serde::Deserialize;

use crate::layout::{event_url, shell, time, url_with};
use crate::pages::{connection, given, text};
use crate::queries::{self, EventFilter, EventRow, Keyset};
use crate::{time_input, AppState, PageError};
use shared::ledger::EventOutcome;

/// Rows per page.
pub const PAGE_SIZE: i64 = 50;

/// The statuses a filter may name.
pub const STATUSES: [&str; 5] = ["claimed", "processing", "completed", "failed", "dead"];

/// The query string of `/events`.
#[derive(Debug, Default, Deserialize)]
pub struct EventsQuery {
    /// Exact source.
    pub source: Option<String>,
    /// Exact status.
    pub status: Option<String>,
    /// Exact outcome (`processed`, `ignored`, `stale`, or a status other than `completed`).
    pub outcome: Option<String>,
    /// Exact event type.
    pub event_type: Option<String>,
    /// Claimed at or after (RFC 3339 or `datetime-local`, UTC).
    pub from: Option<String>,
    /// Claimed before.
    pub until: Option<String>,
    /// Event ids starting with this.
    pub id_prefix: Option<String>,
    /// The cursor of the previous page's last row.
    pub after: Option<String>,
}

/// The cursor of `key`: base64url of `[micros since the epoch, source, event_id]` as JSON.
pub fn cursor(key: &Keyset) -> String {
    let micros = key
        .claimed_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let json = serde_json::json!([micros, key.source, key.event_id]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// Reads a [`cursor`].
///
/// # Errors
/// [`PageError::BadInput`] for `after` when it is not one.
pub fn parse_cursor(text: &str) -> Result<Keyset, PageError> {
    let bad = || PageError::bad("after", "not a cursor of this list (follow the Next link)");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| bad())?;
    let (micros, source, event_id): (u64, String, String) =
        serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if source.contains('\0') || event_id.contains('\0') {
        return Err(bad());
    }
    Ok(Keyset {
        claimed_at: SystemTime::UNIX_EPOCH + Duration::from_micros(micros),
        source,
        event_id,
    })
}

/// Checks `value` of field `field` is at most `max` bytes of [`text`].
fn bounded(
    field: &'static str,
    value: Option<String>,
    max: usize,
) -> Result<Option<String>, PageError> {
    match text(field, value)? {
        Some(text) if text.len() > max => {
            Err(PageError::bad(field, format!("longer than {max} bytes")))
        }
        text => Ok(text),
    }
}

impl EventsQuery {
    /// The filter it names.
    ///
    /// # Errors
    /// [`PageError::BadInput`] naming the field: an unknown status or outcome, a malformed
    /// time, a window that ends before it starts, a value too long.
    pub fn filter(&self) -> Result<EventFilter, PageError> {
        let status = given(&self.status);
        if let Some(status) = &status {
            if !STATUSES.contains(&status.as_str()) {
                return Err(PageError::bad(
                    "status",
                    format!("one of {}", STATUSES.join(", ")),
                ));
            }
        }
        let outcome = match given(&self.outcome) {
            None => None,
            Some(label) => Some(EventOutcome::parse(&label).ok_or_else(|| {
                let labels: Vec<&str> = EventOutcome::ALL.iter().map(|o| o.as_str()).collect();
                PageError::bad("outcome", format!("one of {}", labels.join(", ")))
            })?),
        };
        let from = time_input::parse("from", self.from.as_deref())?;
        let until = time_input::parse("until", self.until.as_deref())?;
        if let (Some(from), Some(until)) = (from, until) {
            if until <= from {
                return Err(PageError::bad("until", "must be after from"));
            }
        }
        let source = bounded("source", given(&self.source), 64)?;
        let id_prefix = bounded("id_prefix", given(&self.id_prefix), 255)?;
        if id_prefix.is_some() && source.is_none() {
            // Over every source no index could serve it (the key is (source, event_id)).
            return Err(PageError::bad(
                "id_prefix",
                "give the source too: event ids are unique per source",
            ));
        }
        Ok(EventFilter {
            source,
            status,
            event_type: bounded("event_type", given(&self.event_type), 255)?,
            from,
            until,
            id_prefix,
            outcome,
        })
    }

    /// The filters as query pairs (for the next page's link).
    fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("source", &self.source),
            ("status", &self.status),
            ("outcome", &self.outcome),
            ("event_type", &self.event_type),
            ("from", &self.from),
            ("until", &self.until),
            ("id_prefix", &self.id_prefix),
        ]
        .into_iter()
        .filter_map(|(name, value)| given(value).map(|v| (name, v)))
        .collect()
    }
}

/// The events page.
///
/// # Errors
/// 400 naming a bad filter; 503 when the database fails.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<EventsQuery>,
) -> Result<Markup, PageError> {
    let filter = query.filter()?;
    let after = given(&query.after).map(|c| parse_cursor(&c)).transpose()?;
    let conn = connection(&state).await?;
    let mut rows = queries::events(&conn, &filter, after.as_ref(), PAGE_SIZE + 1).await?;
    drop(conn);
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    let next = rows.last().filter(|_| more).map(|row| {
        let mut pairs = query.pairs();
        pairs.push(("after", cursor(&row.keyset())));
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        url_with("/events", &pairs)
    });
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let content = html! {
        h1 { "Events" }
        form.filters method="get" action="/events" {
            label { "source" input name="source" value=(value(&query.source)) size="12"; }
            label { "status"
                select name="status" {
                    option value="" { "any" }
                    @for status in STATUSES {
                        option value=(status) selected[filter.status.as_deref() == Some(status)] { (status) }
                    }
                }
            }
            label { "outcome"
                select name="outcome" {
                    option value="" { "any" }
                    @for outcome in EventOutcome::ALL {
                        option value=(outcome.as_str()) selected[filter.outcome == Some(outcome)] { (outcome.as_str()) }
                    }
                }
            }
            label { "event type" input name="event_type" value=(value(&query.event_type)) size="22"; }
            label { "claimed from (UTC)" input name="from" value=(value(&query.from)) placeholder="2026-12-01T09:30:00Z" size="22"; }
            label { "until (UTC)" input name="until" value=(value(&query.until)) placeholder="2026-12-01T10:00:00Z" size="22"; }
            label { "event id prefix" input name="id_prefix" value=(value(&query.id_prefix)) size="18"; }
            button type="submit" { "Filter" }
            a href="/events" { "clear" }
        }
        p.note { "Newest first by claimed_at (the first delivery, or the latest re-drive); " (PAGE_SIZE) " a page. Outcome: a completed event is processed (a handler ran), ignored (no handler for its type: the recorded no-op) or stale (the ordering guard's no-op); any other event's outcome is its status." }
        table #events {
            tr { th { "claimed at" } th { "source" } th { "event id" } th { "type" } th { "status" } th { "outcome" } th { "origin" } th.n { "attempts" } th { "last error" } }
            @for row in &rows {
                tr.event data-outcome=(row.outcome.as_str()) {
                    td.mono { (time(row.claimed_at)) }
                    td { (row.source) }
                    td.mono { a href=(event_url(&row.source, &row.event_id)) { (row.event_id) } }
                    td { (row.event_type) }
                    td class=(format!("status-{}", row.status)) { (row.status) }
                    td class=(format!("outcome outcome-{}", row.outcome.as_str())) { (row.outcome.as_str()) }
                    td { (origin(row)) }
                    td.n { (row.attempts) }
                    td { @if let Some(error) = &row.last_error { (truncate(error, 120)) } }
                }
            }
        }
        @if rows.is_empty() { p.note { "No events match." } }
        @if let Some(next) = next { p { a rel="next" href=(next) { "Next " (PAGE_SIZE) " →" } } }
    };
    Ok(shell("Events", content, Some("/events")))
}

/// Where a row came from: `delivery` or `replay` (created from the provider's API), and
/// `re-driven N×` when operators re-drove or re-ran it.
pub fn origin(row: &EventRow) -> String {
    let from = if row.replayed { "replay" } else { "delivery" };
    match row.redriven {
        0 => from.to_owned(),
        n => format!("{from}, re-driven {n}×"),
    }
}

/// The first `max` characters of `text`, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_a_400() {
        let key = Keyset {
            claimed_at: SystemTime::UNIX_EPOCH + Duration::from_micros(1_765_000_000_123_456),
            source: "stripe".into(),
            event_id: "evt_1\n\"x".into(),
        };
        assert_eq!(parse_cursor(&cursor(&key)).unwrap(), key);
        assert!(matches!(
            parse_cursor("!!"),
            Err(PageError::BadInput { field: "after", .. })
        ));
    }

    #[test]
    fn filters_name_the_bad_field() {
        let query = EventsQuery {
            status: Some("gone".into()),
            ..EventsQuery::default()
        };
        assert!(matches!(
            query.filter(),
            Err(PageError::BadInput {
                field: "status",
                ..
            })
        ));
        let query = EventsQuery {
            from: Some("2026-12-01T10:00".into()),
            until: Some("2026-12-01T09:00".into()),
            ..EventsQuery::default()
        };
        assert!(matches!(
            query.filter(),
            Err(PageError::BadInput { field: "until", .. })
        ));
        let query = EventsQuery {
            outcome: Some("completed".into()),
            ..EventsQuery::default()
        };
        assert!(matches!(
            query.filter(),
            Err(PageError::BadInput {
                field: "outcome",
                ..
            })
        ));
        let query = EventsQuery {
            outcome: Some(" ignored ".into()),
            ..EventsQuery::default()
        };
        assert_eq!(query.filter().unwrap().outcome, Some(EventOutcome::Ignored));
    }
}

//! `GET /`: events per minute by their status now for each source over the last hours
//! (`?hours=`, 1 to 48, default 6), and the auditor's figures live (`shared::audit::peek`: the
//! same statements as the auditor function, without recording a run).

use std::time::{Duration, SystemTime};

use axum::extract::{Query, State};
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;

use crate::chart::{self, Series, OUTCOMES};
use crate::layout::{age, shell, url_with};
use crate::pages::{connection, given};
use crate::{queries, AppState, PageError};

/// The chart's default window, hours.
pub const DEFAULT_HOURS: u64 = 6;

/// The longest window, hours (a bar per minute: 2,880 bars).
pub const MAX_HOURS: u64 = 48;

/// `?hours=`.
#[derive(Debug, Deserialize)]
pub struct OverviewQuery {
    hours: Option<String>,
}

/// Parses `hours` (1 to [`MAX_HOURS`]).
fn hours(query: &OverviewQuery) -> Result<u64, PageError> {
    match given(&query.hours) {
        None => Ok(DEFAULT_HOURS),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|h| (1..=MAX_HOURS).contains(h))
            .ok_or_else(|| {
                PageError::bad(
                    "hours",
                    format!("a whole number of hours from 1 to {MAX_HOURS}"),
                )
            }),
    }
}

/// The start of the minute `at` falls in.
fn minute_of(at: SystemTime) -> SystemTime {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs - secs % 60)
}

/// The overview page.
///
/// # Errors
/// 400 for a bad `hours`; 503 when the database fails.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<OverviewQuery>,
) -> Result<Markup, PageError> {
    let hours = hours(&query)?;
    let conn = connection(&state).await?;
    let now = shared::db::now(&conn).await?;
    let settings = &state.settings;
    let report = shared::audit::peek(&conn, &settings.sources, &settings.audit, now).await?;
    let start = minute_of(now - Duration::from_secs(hours * 3600));
    let minutes = (hours * 60 + 1) as usize;
    let sources: Vec<&str> = report.sources.keys().map(String::as_str).collect();
    let buckets = queries::per_minute(&conn, &sources, start, now + Duration::from_secs(1)).await?;
    drop(conn);
    let mut charts: Vec<(String, Series)> = sources
        .iter()
        .map(|source| ((*source).to_owned(), Series::new(start, minutes)))
        .collect();
    for bucket in buckets {
        if let Some((_, series)) = charts
            .iter_mut()
            .find(|(source, _)| *source == bucket.source)
        {
            series.add(bucket.minute, &bucket.status, bucket.count);
        }
    }
    let figures = [
        ("stuck_claims", "stuck claims"),
        ("backlog_due", "deferred backlog (due)"),
        ("outbox_backlog", "outbox backlog"),
        ("dead_letters", "dead letters"),
        ("outbox_dead", "dead outbox messages"),
        ("past_retention_overdue", "past retention, overdue"),
    ];
    let content = html! {
        h1 { "Overview" }
        p.note {
            "At " (report.at) " (the database's clock). Figures: the auditor's, read now without recording a run. "
            "Chart: events by the minute they were claimed (first delivery, replay, or the latest re-drive), "
            "stacked by their status now: completed, failed (a retry is scheduled), dead, processing (leased by a worker), "
            "claimed (waiting for the worker). Duplicate deliveries of an event are answered from its row and add nothing."
        }
        form.filters method="get" action="/" {
            label { "hours" input type="number" name="hours" min="1" max=(MAX_HOURS) value=(hours); }
            button type="submit" { "Show" }
        }
        h2 { "Per source" }
        table {
            tr {
                th { "source" }
                @for (_, label) in figures { th.n { (label) } }
                th.n { "oldest key" } th.n { "retry horizon" } th.n { "retention" }
            }
            @for (source, audit) in &report.sources {
                tr {
                    td { a href=(url_with("/events", &[("source", source)])) { (source) }
                         @if !audit.configured { " " span.note { "(not configured)" } } }
                    @for (key, _) in figures {
                        @let value = figure(audit, key);
                        td.n data-source=(source) data-figure=(key) class=[(value > 0 && key != "backlog_due" && key != "outbox_backlog").then_some("warn")] {
                            @if matches!(key, "dead_letters" | "outbox_dead") && value > 0 {
                                a href=(url_with("/dead", &[("source", source)])) { (value) }
                            } @else if key == "stuck_claims" && value > 0 {
                                a href="/stuck" { (value) }
                            } @else { (value) }
                        }
                    }
                    td.n data-source=(source) data-figure="oldest_key_age" {
                        (audit.oldest_key_age.map_or_else(|| "-".to_owned(), age))
                        @if audit.oldest_key_too_young { " " span.warn title="younger than the provider's retry horizon: a retry may come after the key is gone" { "< horizon" } }
                    }
                    td.n { (audit.retry_horizon_secs.map_or_else(|| "-".to_owned(), age)) }
                    td.n { (age(audit.retention_secs)) }
                }
            }
        }
        @if report.idle_in_transaction.sessions > 0 {
            p.warn { (report.idle_in_transaction.sessions) " database sessions idle in a transaction (longest "
                (age(report.idle_in_transaction.longest_secs)) ")" }
        }
        h2 { "Events per minute, last " (hours) " h" }
        @if charts.is_empty() { p.note { "No sources and no events yet." } }
        @for (source, series) in &charts {
            h2 { (source) }
            (PreEscaped(chart::svg(&format!("{source}: events per minute by status"), series)))
            table {
                tr { @for (name, _) in OUTCOMES { th.n { (name) } } }
                tr { @for ((name, _), total) in OUTCOMES.iter().zip(series.totals()) {
                    td.n data-source=(source) data-outcome=(name) { (total) }
                } }
            }
        }
    };
    Ok(shell("Overview", content, Some("/")))
}

/// The figure `key` of a source's audit.
fn figure(audit: &shared::audit::SourceAudit, key: &str) -> u64 {
    match key {
        "stuck_claims" => audit.stuck_claims,
        "backlog_due" => audit.backlog_due,
        "outbox_backlog" => audit.outbox_backlog,
        "dead_letters" => audit.dead_letters,
        "outbox_dead" => audit.outbox_dead,
        "past_retention_overdue" => audit.past_retention_overdue,
        _ => 0,
    }
}

//! `GET /rejected`: the deliveries the receiver refused, per source and reason, over the last
//! 24 hours and the last 7 days, and when each was last seen (`shared::rejected`, what
//! `hookledger rejected` prints): bad signatures (a rotation the sources did not follow),
//! unknown sources (every name under `(unknown)`), bodies too large, event ids reused with
//! another body, requests that could not be read. Counted by the hour (UTC); read-only.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use maud::{html, Markup};
use shared::rejected::{counts_since, Reason, RejectedCount};

use crate::layout::{shell, time};
use crate::pages::connection;
use crate::{AppState, PageError};

/// The short window: the last 24 hours.
pub const DAY: Duration = Duration::from_secs(24 * 3600);

/// The long window: the last 7 days.
pub const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);

/// One line of the page: a source's rejections for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// In the last 24 hours.
    pub day: u64,
    /// In the last 7 days.
    pub week: u64,
    /// The latest.
    pub last_at: SystemTime,
}

/// The week's counts with the day's beside them, by (source, reason). Every key of the day's
/// is in the week's (the week's window holds the day's).
pub fn lines(day: &[RejectedCount], week: &[RejectedCount]) -> BTreeMap<(String, Reason), Line> {
    let mut lines: BTreeMap<(String, Reason), Line> = week
        .iter()
        .map(|c| {
            (
                (c.source.clone(), c.reason),
                Line {
                    day: 0,
                    week: c.count,
                    last_at: c.last_at,
                },
            )
        })
        .collect();
    for c in day {
        let line = lines
            .entry((c.source.clone(), c.reason))
            .or_insert_with(|| Line {
                day: 0,
                week: c.count,
                last_at: c.last_at,
            });
        line.day = c.count;
    }
    lines
}

/// The rejected page.
///
/// # Errors
/// 503 when the database fails.
pub async fn page(State(state): State<AppState>) -> Result<Markup, PageError> {
    let conn = connection(&state).await?;
    // The database's clock, as the receivers' buckets.
    let now = shared::db::now(&conn).await?;
    let since = |window: Duration| now.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH);
    let day = counts_since(&conn, since(DAY)).await?;
    let week = counts_since(&conn, since(WEEK)).await?;
    drop(conn);
    let lines = lines(&day, &week);
    let content = html! {
        h1 { "Rejected deliveries" }
        p.note { "Deliveries the receiver refused, counted per source and reason by the hour (UTC): "
            "a bad signature (unauthorized, 401: a rotated secret the sources do not have yet, or a forged request), "
            "a path naming no configured source (unknown_source, 404: every such name counts as " code { (shared::rejected::UNKNOWN_SOURCE) } "), "
            "a body over the source's limit (too_large, 413), an event id seen before with another body (digest_mismatch, 409), "
            "a request that could not be read or identified (bad_request, 400). Nothing of them is in the ledger. "
            "The log's delivery lines say more about each. The same figures: " code { "hookledger rejected --since 7d" } "." }
        @if lines.is_empty() {
            p #none { "None in the last 7 days." }
        } @else {
            table #rejected {
                tr { th { "source" } th { "reason" } th.n { "status" } th.n { "last 24 h" } th.n { "last 7 days" } th { "last seen (UTC)" } }
                @for ((source, reason), line) in &lines {
                    tr.rejected {
                        td { (source) }
                        td { (reason.as_str()) }
                        td.n { (reason.status()) }
                        td.n data-source=(source) data-reason=(reason.as_str()) data-window="day" { (line.day) }
                        td.n data-source=(source) data-reason=(reason.as_str()) data-window="week" { (line.week) }
                        td.mono { (time(line.last_at)) }
                    }
                }
            }
        }
    };
    Ok(shell("Rejected", content, Some("/rejected")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_sits_beside_the_week() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_765_000_000);
        let count = |source: &str, reason, count| RejectedCount {
            source: source.to_owned(),
            reason,
            count,
            last_at: at,
        };
        let week = [
            count("stripe", Reason::Unauthorized, 9),
            count("(unknown)", Reason::UnknownSource, 2),
        ];
        let day = [count("stripe", Reason::Unauthorized, 4)];
        let lines = lines(&day, &week);
        assert_eq!(
            lines[&("stripe".to_owned(), Reason::Unauthorized)],
            Line {
                day: 4,
                week: 9,
                last_at: at
            }
        );
        assert_eq!(
            lines[&("(unknown)".to_owned(), Reason::UnknownSource)].day,
            0
        );
    }
}

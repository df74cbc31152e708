//! Paddle Billing: `GET /events?order_by=id[DESC]&per_page=200[&after=evt_...]`, authenticated
//! with the source's `api_key` (`Authorization: Bearer`). The answer is `{"data": [...],
//! "meta": {"pagination": {"per_page", "next", "has_more", ...}}}`; each element is an event
//! entity (`event_id`, `event_type`, `occurred_at`, `data`), the same shape as the delivered
//! notification without its `notification_id`, handed to [`crate::Receiver::replay`] as its raw
//! bytes.
//!
//! Paddle's list has no time filter: replay reads newest first (Paddle ids sort by creation),
//! skips events after `until`, and stops paging after the first page that reaches an event
//! older than `since` (its in-window events are still replayed). `after` is the last event
//! handled, so a stopped run continues exactly there.

use reqwest::Method;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::http::{send, Credential, Failure};
use super::{json_problem, ReplayErrorKind, Run, Window};
use crate::config::SourceConfig;
use crate::timestamp::parse_rfc3339;

/// Events per page (Paddle's maximum).
pub const PAGE_SIZE: u32 = 200;

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    has_more: bool,
}

#[derive(Deserialize)]
struct Element {
    event_id: String,
    occurred_at: String,
}

pub(crate) async fn replay(
    run: &mut Run<'_>,
    config: &SourceConfig,
    window: Window,
) -> Result<(), ReplayErrorKind> {
    let source = config.name.as_str();
    let (api, credential) = Credential::event_list_key(run, config, "paddle", "a Paddle API key")?;
    let url = format!("{}/events", api.base_url);
    loop {
        let mut query = vec![
            ("order_by", "id[DESC]".to_owned()),
            ("per_page", PAGE_SIZE.to_string()),
        ];
        if let Some(cursor) = &run.report.next_cursor {
            query.push(("after", cursor.clone()));
        }
        let response = match send(run, source, &credential, Method::GET, &url, &query).await {
            Ok(response) => response,
            Err(Failure::OutOfTime) => return run.stop_for_time(source),
            Err(Failure::Error(kind)) => return Err(kind),
        };
        let malformed = |detail: &str| ReplayErrorKind::MalformedPage {
            name: source.to_owned(),
            detail: detail.to_owned(),
        };
        let page: Page<'_> = serde_json::from_slice(&response.body).map_err(|e| {
            malformed(&format!(
                "HTTP {}: not a list of events with meta.pagination ({})",
                response.status,
                json_problem(&e)
            ))
        })?;
        let mut events = Vec::with_capacity(page.data.len());
        let mut reached_since = false;
        for (index, raw) in page.data.iter().enumerate() {
            let element: Element = serde_json::from_str(raw.get()).map_err(|_| {
                malformed(&format!(
                    "data[{index}] has no string event_id or occurred_at"
                ))
            })?;
            let occurred_at = parse_rfc3339(&element.occurred_at).map_err(|_| {
                malformed(&format!(
                    "data[{index}].occurred_at is not an RFC 3339 time"
                ))
            })?;
            reached_since |= occurred_at < window.since;
            events.push((element.event_id, window.contains(occurred_at), *raw));
        }
        let has_more = page.meta.pagination.has_more;
        if !run.replay_page(config, events, has_more).await? {
            return run.stop_for_time(source);
        }
        if !has_more || reached_since {
            run.report.next_cursor = None;
            run.progress();
            return Ok(());
        }
        run.progress();
    }
}

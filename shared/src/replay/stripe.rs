//! Stripe: `GET /v1/events` (newest first) with `created[gte]`, `created[lte]`, `limit=100`,
//! `starting_after` (the last event handled) and optionally `delivery_success`, authenticated
//! with the source's `api_key` (`Authorization: Bearer`). The answer is
//! `{"object": "list", "data": [...], "has_more": bool, ...}`; each element is an Event object,
//! handed to [`crate::Receiver::replay`] as its raw bytes.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::http::{send, Credential, Failure};
use super::{json_problem, ReplayErrorKind, Run, Window};
use crate::config::SourceConfig;

/// Events per page (Stripe's maximum).
pub const PAGE_SIZE: u32 = 100;

#[derive(Deserialize)]
struct Page<'a> {
    object: &'a str,
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    has_more: bool,
}

#[derive(Deserialize)]
struct Element {
    id: String,
    /// Unix seconds.
    created: i64,
}

fn unix(at: SystemTime, round_up: bool) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => {
            let secs = d.as_secs() as i64;
            if round_up && d.subsec_nanos() > 0 {
                secs + 1
            } else {
                secs
            }
        }
        Err(_) => 0,
    }
}

pub(crate) async fn replay(
    run: &mut Run<'_>,
    config: &SourceConfig,
    window: Window,
) -> Result<(), ReplayErrorKind> {
    let source = config.name.as_str();
    let (api, credential) = Credential::event_list_key(run, config, "stripe", "a Stripe key")?;
    let url = format!("{}/v1/events", api.base_url);
    let mut base_query = vec![
        ("created[gte]", unix(window.since, true).to_string()),
        ("created[lte]", unix(window.until, false).to_string()),
        ("limit", PAGE_SIZE.to_string()),
    ];
    if let Some(success) = run.request.delivery_success {
        base_query.push(("delivery_success", success.to_string()));
    }
    loop {
        let mut query = base_query.clone();
        if let Some(cursor) = &run.report.next_cursor {
            query.push(("starting_after", cursor.clone()));
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
                "HTTP {}: not a list of events ({})",
                response.status,
                json_problem(&e)
            ))
        })?;
        if page.object != "list" {
            return Err(malformed("object is not \"list\""));
        }
        // Every element must name itself before any is replayed: the cursor moves by ids. The
        // API filters by `created` already; an event it answers outside the window anyway is
        // not replayed (nor counted).
        let (since, until) = (unix(window.since, true), unix(window.until, false));
        let mut events = Vec::with_capacity(page.data.len());
        for (index, raw) in page.data.iter().enumerate() {
            let element: Element = serde_json::from_str(raw.get()).map_err(|_| {
                malformed(&format!(
                    "data[{index}] has no string id or integer created"
                ))
            })?;
            let in_window = (since..=until).contains(&element.created);
            events.push((element.id, in_window, *raw));
        }
        if !run.replay_page(config, events, page.has_more).await? {
            return run.stop_for_time(source);
        }
        if !page.has_more {
            run.report.next_cursor = None;
            run.progress();
            return Ok(());
        }
        run.progress();
    }
}

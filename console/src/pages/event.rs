//! `GET /events/{source}/{event_id}`: one event as `hookledger inspect` reads it
//! (`shared::redrive::inspect`): its outcome and origin, its timeline, the stored response, the
//! payload (behind a `<details>`, and never for a source that keeps digests only), its outbox
//! messages.

use std::time::SystemTime;

use axum::extract::{Path, State};
use maud::{html, Markup};
use shared::ledger::{EventDetail, EventOutcome, Status};

use crate::layout::{maybe_time, shell, time, url_with};
use crate::pages::connection;
use crate::{queries, AppState, PageError};

/// One line of the timeline: when (RFC 3339, or `-`), and what.
type Line = (String, String);

/// `": {error}"`, or nothing without an error.
fn error_suffix(error: Option<&str>) -> String {
    error.map(|e| format!(": {e}")).unwrap_or_default()
}

/// A time the row's history recorded (PostgreSQL's JSON form, `2026-12-02T04:27:31.769206+00:00`)
/// in the page's one form ([`time`]: UTC, milliseconds, `Z`); `-` when absent, as recorded when
/// it does not parse.
fn history_time(recorded: Option<String>) -> String {
    match recorded {
        None => "-".to_owned(),
        Some(text) => shared::timestamp::parse_rfc3339(&text).map_or(text, time),
    }
}

/// What completed the current life of the row: the delivery itself (no worker ever leased the
/// row: `lease_token` 0; the inline path records `attempts` 1), or the worker on its
/// `attempts`-th attempt since the last claim or re-drive.
fn completed_line(lease_token: i64, attempts: i32) -> String {
    if lease_token == 0 {
        "completed inline, in the delivery".to_owned()
    } else {
        format!("completed by the worker, attempt {attempts}")
    }
}

/// The timeline: the earlier lives the row's history records (each re-drive or re-run keeps
/// what the row was), then the current one from its columns.
pub fn timeline(detail: &EventDetail) -> Vec<Line> {
    let mut lines = Vec::new();
    for entry in detail.history.as_array().into_iter().flatten() {
        let text = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        if let Some(claimed) = text("claimed_at") {
            lines.push((history_time(Some(claimed)), "claimed".to_owned()));
        }
        let attempts = entry.get("attempts").and_then(|v| v.as_i64());
        match text("status").as_deref() {
            Some("dead") => lines.push((
                history_time(text("dead_at")),
                format!(
                    "dead after {} attempts{}",
                    attempts.unwrap_or(0),
                    error_suffix(text("last_error").as_deref())
                ),
            )),
            Some("completed") => lines.push((
                history_time(text("completed_at")),
                format!(
                    "completed{}",
                    entry
                        .get("response")
                        .filter(|r| !r.is_null())
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            )),
            _ => {}
        }
        let action = match text("action").as_deref() {
            Some("redrive") => "re-driven by an operator (back to claimed)".to_owned(),
            Some("rerun_ignored") => {
                "re-run by an operator (ignored, a handler exists now)".to_owned()
            }
            Some(other) => other.to_owned(),
            None => "operator action".to_owned(),
        };
        lines.push((history_time(text("at")), action));
    }
    let mut current: Vec<(SystemTime, String)> = Vec::new();
    current.push((
        detail.claimed_at,
        match detail.replayed_at {
            Some(_) => "claimed (created by replay from the provider's API)".to_owned(),
            None => "claimed".to_owned(),
        },
    ));
    if let Some(at) = detail.replayed_at.filter(|at| *at != detail.claimed_at) {
        current.push((at, "replayed from the provider's API".to_owned()));
    }
    if let (Status::Processing, Some(at)) = (detail.status, detail.lease_expires_at) {
        current.push((
            at,
            format!(
                "leased by a worker until then (attempt {})",
                detail.attempts
            ),
        ));
    }
    if let (Status::Failed, Some(at)) = (detail.status, detail.next_attempt_at) {
        current.push((
            at,
            format!(
                "attempt {} failed{}; next attempt then",
                detail.attempts,
                error_suffix(detail.last_error.as_deref())
            ),
        ));
    }
    if let (Status::Claimed, Some(at)) = (detail.status, detail.next_attempt_at) {
        current.push((at, "due for the worker".to_owned()));
    }
    if let Some(at) = detail.completed_at {
        current.push((at, completed_line(detail.lease_token, detail.attempts)));
    }
    if let Some(at) = detail.dead_at {
        current.push((
            at,
            format!(
                "dead after {} attempts{}",
                detail.attempts,
                error_suffix(detail.last_error.as_deref())
            ),
        ));
    }
    current.sort_by_key(|(at, _)| *at);
    lines.extend(current.into_iter().map(|(at, what)| (time(at), what)));
    lines
}

/// What an outcome means, in a few words beside it.
pub fn outcome_note(outcome: EventOutcome) -> &'static str {
    match outcome {
        EventOutcome::Processed => "(a handler ran; its response is below)",
        EventOutcome::Ignored => "(no handler for its type: the recorded no-op; re-run it with hookledger redrive --ignored once one exists)",
        EventOutcome::Stale => "(the ordering guard's no-op: a version as new or newer was applied already)",
        EventOutcome::Claimed => "(accepted, not processed yet)",
        EventOutcome::Processing => "(leased by a worker)",
        EventOutcome::Failed => "(a retryable error; the worker tries again)",
        EventOutcome::Dead => "(kept for an operator; re-drive it once the cause is fixed)",
    }
}

/// Where the row came from: a delivery, or replay from the provider's API (when), and how
/// many times operators re-drove or re-ran it.
pub fn origin_text(detail: &EventDetail) -> String {
    let from = match detail.replayed_at {
        Some(at) => format!("replay from the provider's API at {}", time(at)),
        None => "a delivery".to_owned(),
    };
    match detail.history.as_array().map_or(0, Vec::len) {
        0 => from,
        n => format!("{from}; re-driven by an operator {n}×"),
    }
}

/// The payload as shown: JSON pretty-printed, other UTF-8 as is, anything else as a note.
pub fn pretty(payload: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(json) => serde_json::to_string_pretty(&json).unwrap_or_default(),
        Err(_) => match std::str::from_utf8(payload) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("({} bytes, not UTF-8)", payload.len()),
        },
    }
}

/// The event page.
///
/// # Errors
/// 404 when the key is not in the ledger; 503 when the database fails.
pub async fn page(
    State(state): State<AppState>,
    Path((source, event_id)): Path<(String, String)>,
) -> Result<Markup, PageError> {
    // A key with a NUL cannot be in the ledger (PostgreSQL's text cannot hold one).
    let holdable = !source.contains('\0') && !event_id.contains('\0');
    let detail = match holdable {
        true => shared::redrive::inspect(&state.pool, &source, &event_id).await?,
        false => None,
    };
    let Some(detail) = detail else {
        return Err(PageError::NotFound(format!(
            "{source}/{event_id} is not in the ledger."
        )));
    };
    // The payload only for a configured source that stores payloads; a source that keeps
    // digests only is never read, whatever an older row may hold.
    let keeps_payloads = state
        .settings
        .sources
        .get(&source)
        .is_some_and(|s| s.store_payload);
    let payload = match (keeps_payloads, detail.payload_bytes) {
        (true, Some(_)) => {
            let conn = connection(&state).await?;
            queries::payload(&conn, &source, &event_id).await?
        }
        _ => None,
    };
    // A sealed payload (`encrypt_payload`) is opened with the console's keys, when it has them
    // and IAM lets it (`kms:Decrypt`); otherwise the page says so instead.
    let (payload, sealed_note) =
        match payload {
            Some(stored) if shared::privacy::seal::is_sealed(&stored) => {
                match &state.settings.payload_keys {
                Some(keys) => match keys
                    .open(&source, &event_id, shared::privacy::keys::Column::Payload, &stored)
                    .await
                {
                    Ok(opened) => (Some(opened), None),
                    Err(error) => (
                        None,
                        Some(format!(
                            "Sealed (encrypted at rest); this console could not open it: {error}"
                        )),
                    ),
                },
                None => (
                    None,
                    Some(
                        "Sealed (encrypted at rest); this console has no master key to open it."
                            .to_owned(),
                    ),
                ),
            }
            }
            other => (other, None),
        };
    let read_only = state.config.read_only;
    let dead_messages = detail.outbox.iter().filter(|m| m.status == "dead").count();
    let response = match (&detail.response_status, &detail.response_body) {
        // A sealed response (`encrypt_payload`) is opened like the payload, or said to be sealed.
        (Some(status), Some(body))
            if shared::privacy::response::envelope_of(&body.to_string()).is_some() =>
        {
            let opened = match &state.settings.payload_keys {
                Some(keys) => shared::privacy::response::open_response(
                    keys,
                    &source,
                    &event_id,
                    &body.to_string(),
                )
                .await
                .ok()
                .flatten(),
                None => None,
            };
            match opened {
                Some(text) => format!("{status} {text}"),
                None => format!("{status} (sealed: encrypted at rest)"),
            }
        }
        (Some(status), Some(body)) => format!("{status} {body}"),
        (Some(status), None) => status.to_string(),
        _ => "-".to_owned(),
    };
    let content = html! {
        h1 { (detail.source) " / " span.mono { (detail.event_id) } }
        table {
            tr { th { "event type" } td { (detail.event_type) } }
            tr { th { "status" } td #status class=(format!("status-{}", detail.status.as_str())) { (detail.status.as_str()) } }
            tr { th { "outcome" } td #outcome class=(format!("outcome-{}", detail.outcome.as_str())) { (detail.outcome.as_str()) " " span.note { (outcome_note(detail.outcome)) } } }
            tr { th { "origin" } td #origin { (origin_text(&detail)) } }
            tr { th { "attempts" } td #attempts { (detail.attempts) } }
            tr { th { "last error" } td { (detail.last_error.clone().unwrap_or_else(|| "-".to_owned())) } }
            tr { th { "next attempt at" } td { (maybe_time(detail.next_attempt_at)) } }
            tr { th { "lease expires at" } td { (maybe_time(detail.lease_expires_at)) } }
            tr { th { "payload" } td.mono #payload { @match (detail.payload_bytes, detail.payload_dropped_at) {
                (None, _) if detail.erased_at.is_some() => { "erased at " (maybe_time(detail.erased_at)) " (hookledger forget: see the timeline), sha256 " (detail.payload_digest) }
                (Some(bytes), _) => { (bytes) " bytes stored, sha256 " (detail.payload_digest) }
                (None, Some(at)) => { "dropped at " (maybe_time(Some(at))) " (the source's payload retention), sha256 " (detail.payload_digest) }
                (None, None) => { "not stored (the source keeps digests only), sha256 " (detail.payload_digest) }
            } } }
        }
        @if detail.status == Status::Dead && !read_only {
            p { a href=(url_with("/redrive/confirm", &[("what", "dead"), ("source", &detail.source), ("event_id", &detail.event_id)])) { "Re-drive this dead letter…" } }
        }
        @if dead_messages > 0 && !read_only {
            p { a href=(url_with("/redrive/confirm", &[("what", "outbox"), ("source", &detail.source), ("event_id", &detail.event_id)])) { "Re-drive its " (dead_messages) " dead outbox messages…" } }
        }
        // Erasure (issue 28): the Forget form, behind a confirmation page (pages::forget).
        @if !read_only { (super::forget::form(&state, &detail.source, &detail.event_id)) }
        h2 { "Timeline" }
        table #timeline {
            tr { th { "at (UTC)" } th { "what" } }
            @for (at, what) in timeline(&detail) { tr { td.mono { (at) } td { (what) } } }
        }
        h2 { "Stored response" }
        pre #response { (response) }
        h2 { "Payload" }
        @if let Some(payload) = &payload {
            details {
                summary { "Show the payload (" (payload.len()) " bytes)" }
                pre #payload { (pretty(payload)) }
            }
        } @else if let Some(note) = &sealed_note {
            p.note #sealed { (note) }
        } @else if detail.payload_bytes.is_some() {
            p.note { "Not shown: the source " (detail.source) " is not configured to store payloads now." }
        } @else {
            p.note { "Not stored: the source keeps digests only." }
        }
        h2 { "Outbox messages" }
        @if detail.outbox.is_empty() { p.note { "None." } } @else {
            table #outbox {
                tr { th { "idempotency key" } th { "target" } th { "status" } th.n { "attempts" } th.n { "last HTTP status" } th { "last error" } th { "created" } th { "next attempt" } th { "delivered" } th { "dead" } }
                @for message in &detail.outbox {
                    tr {
                        td.mono { (message.idempotency_key) }
                        td { (message.target) }
                        td class=(format!("status-{}", message.status)) { (message.status) }
                        td.n { (message.attempts) }
                        td.n { (message.last_status.map_or_else(|| "-".to_owned(), |s| s.to_string())) }
                        td { (message.last_error.clone().unwrap_or_default()) }
                        td.mono { (time(message.created_at)) }
                        td.mono { (time(message.next_attempt_at)) }
                        td.mono { (maybe_time(message.delivered_at)) }
                        td.mono { (maybe_time(message.dead_at)) }
                    }
                }
            }
        }
    };
    Ok(shell(
        &format!("{source}/{event_id}"),
        content,
        Some("/events"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_times_read_in_the_same_form_as_the_row_s_own() {
        let row_time = shared::timestamp::parse_rfc3339("2026-12-02T04:27:31.769Z").unwrap();
        assert_eq!(
            history_time(Some("2026-12-02T04:27:31.769206+00:00".to_owned())),
            time(row_time)
        );
        assert_eq!(history_time(None), "-");
        assert_eq!(history_time(Some("yesterday".to_owned())), "yesterday");
    }

    #[test]
    fn a_completion_says_whether_the_delivery_or_the_worker_completed_it() {
        // The inline path writes attempts = 1 and never leases (shared/src/ledger/one_statement.rs).
        assert_eq!(completed_line(0, 1), "completed inline, in the delivery");
        assert_eq!(completed_line(3, 1), "completed by the worker, attempt 1");
    }
}

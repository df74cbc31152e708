//! `hookledger inspect`: one ledger row in full (`shared::redrive::inspect`): status, outcome
//! (`shared::ledger::EventOutcome`: a completed event `processed`, `ignored` or `stale`),
//! attempts, the last error, every timestamp, the stored response, whether replay created it,
//! and what operators did to it.

use std::time::SystemTime;

use shared::db::Pool;
use shared::ledger::{EventDetail, EventOutcome};
use shared::timestamp::rfc3339;
use shared::Settings;

/// Options of `hookledger inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The source, as configured (or as it was, for a row of a removed source).
    #[arg(long)]
    source: String,
    /// The provider's event id (Stripe's `evt_...`, GitHub's delivery GUID, ...).
    event_id: String,
    /// Print the row as JSON (times RFC 3339, `response_body` and `history` as stored).
    #[arg(long)]
    json: bool,
}

/// Prints the row, or fails with "not found" (exit status 1) when the key is not in the ledger.
///
/// # Errors
/// The key is absent, or the database fails.
pub async fn run(settings: &Settings, pool: &Pool, args: Args) -> anyhow::Result<()> {
    let Some(detail) = shared::redrive::inspect(pool, &args.source, &args.event_id).await? else {
        anyhow::bail!(
            "{}/{} not found in the ledger{}",
            args.source,
            args.event_id,
            if settings.sources.get(&args.source).is_none() {
                format!(" (and {:?} is not a configured source)", args.source)
            } else {
                String::new()
            }
        );
    };
    if args.json {
        println!("{}", detail.to_json());
    } else {
        // A sealed response (`encrypt_payload`) is shown opened when this CLI has the keys
        // (and, in AWS, kms:Decrypt), else said to be sealed; `--json` prints it as stored.
        let sealed = detail
            .response_body
            .as_ref()
            .map(ToString::to_string)
            .filter(|text| shared::privacy::response::envelope_of(text).is_some());
        let opened = match (&sealed, &settings.payload_keys) {
            (Some(text), Some(keys)) => Some(
                shared::privacy::response::open_response(
                    keys,
                    &detail.source,
                    &detail.event_id,
                    text,
                )
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| {
                    "(sealed: encrypted at rest; these keys cannot open it)".to_owned()
                }),
            ),
            (Some(_), None) => Some("(sealed: encrypted at rest)".to_owned()),
            (None, _) => None,
        };
        print!("{}", summary(&detail, opened.as_deref()));
    }
    Ok(())
}

fn or_dash(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "-".to_owned(), rfc3339)
}

/// One history entry on one line: `2026-12-01T10:00:00.000Z redrive (was dead, 8 attempts,
/// error "...")`.
fn history_line(entry: &serde_json::Value) -> String {
    let text = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let mut parts = Vec::new();
    if let Some(status) = text("status") {
        parts.push(format!("was {status}"));
    }
    if let Some(attempts) = entry.get("attempts").and_then(|v| v.as_i64()) {
        parts.push(format!("{attempts} attempts"));
    }
    if let Some(error) = text("last_error") {
        parts.push(format!("error {error:?}"));
    }
    if let Some(response) = entry.get("response").filter(|v| !v.is_null()) {
        parts.push(format!("response {response}"));
    }
    // An erasure (`forget`): who asked, and why.
    if let Some(by) = text("by") {
        parts.push(format!("by {by:?}"));
    }
    if let Some(reason) = text("reason") {
        parts.push(format!("reason {reason:?}"));
    }
    format!(
        "{} {}{}",
        text("at").unwrap_or_else(|| "?".to_owned()),
        text("action").unwrap_or_else(|| "?".to_owned()),
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    )
}

/// The outcome and, for a completed row, what it means: `processed (a handler ran)`,
/// `ignored (no handler for invoice.paid: the recorded no-op)`, `stale (the ordering guard's
/// no-op)`; any other row's outcome is its status.
fn outcome(detail: &EventDetail) -> String {
    let note = match detail.outcome {
        EventOutcome::Processed => " (a handler ran)".to_owned(),
        EventOutcome::Ignored => format!(
            " (no handler for {}: the recorded no-op; redrive --ignored re-runs it once one exists)",
            detail.event_type
        ),
        EventOutcome::Stale => " (the ordering guard's no-op: a newer version was applied)".to_owned(),
        _ => String::new(),
    };
    format!("{}{note}", detail.outcome)
}

/// The readable form: a header line, then one labelled line per field; `response` in place of
/// the stored response body when given (a sealed one, opened or said to be sealed).
fn summary(detail: &EventDetail, response: Option<&str>) -> String {
    let mut text = format!(
        "{}/{} ({})\n",
        detail.source, detail.event_id, detail.event_type
    );
    let response = match (&detail.response_status, &detail.response_body) {
        (Some(status), Some(_)) if response.is_some() => {
            format!("{status} {}", response.unwrap_or_default())
        }
        (Some(status), Some(body)) => format!("{status} {body}"),
        (Some(status), None) => status.to_string(),
        _ => "-".to_owned(),
    };
    let rows = [
        ("status", detail.status.as_str().to_owned()),
        ("outcome", outcome(detail)),
        ("attempts", detail.attempts.to_string()),
        (
            "last error",
            detail.last_error.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        ("claimed at", rfc3339(detail.claimed_at)),
        ("completed at", or_dash(detail.completed_at)),
        ("dead at", or_dash(detail.dead_at)),
        ("next attempt at", or_dash(detail.next_attempt_at)),
        ("lease expires at", or_dash(detail.lease_expires_at)),
        (
            "replayed",
            detail.replayed_at.map_or_else(
                || "no (a delivery)".to_owned(),
                |at| format!("yes, from the provider's API at {}", rfc3339(at)),
            ),
        ),
        (
            "payload",
            match (detail.payload_bytes, detail.payload_dropped_at) {
                (None, _) if detail.erased_at.is_some() => format!(
                    "erased at {} (hookledger forget: see the history), sha256 {}",
                    detail.erased_at.map(rfc3339).unwrap_or_default(),
                    detail.payload_digest
                ),
                (Some(bytes), _) => {
                    format!("{bytes} bytes stored, sha256 {}", detail.payload_digest)
                }
                (None, Some(at)) => format!(
                    "dropped at {} (the source's payload retention), sha256 {}",
                    rfc3339(at),
                    detail.payload_digest
                ),
                (None, None) => {
                    format!("not stored (digest only), sha256 {}", detail.payload_digest)
                }
            },
        ),
        ("response", response),
    ];
    for (label, value) in rows {
        // A multi-line value (PostgreSQL's DETAIL in an error) stays inside its column.
        let value = value.trim_end().replace('\n', &format!("\n  {:<17} ", ""));
        text.push_str(&format!("  {label:<17} {value}\n"));
    }
    match detail
        .history
        .as_array()
        .filter(|entries| !entries.is_empty())
    {
        None => text.push_str(&format!("  {:<17} -\n", "history")),
        Some(entries) => {
            text.push_str("  history (oldest first):\n");
            for entry in entries {
                text.push_str(&format!("    {}\n", history_line(entry)));
            }
        }
    }
    if detail.outbox.is_empty() {
        text.push_str(&format!("  {:<17} -\n", "outbox"));
    } else {
        text.push_str("  outbox:\n");
        for message in &detail.outbox {
            text.push_str(&format!("    {}\n", message_line(message)));
        }
    }
    text
}

/// One outbox message on one line: `stripe:evt_1:1 -> billing delivered (1 attempt, HTTP 200)`
/// or `... dead (8 attempts, HTTP 400: fatal: ...)`.
fn message_line(message: &shared::ledger::MessageDetail) -> String {
    let attempts = match message.attempts {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    };
    let mut facts = vec![attempts];
    if let Some(status) = message.last_status {
        facts.push(format!("HTTP {status}"));
    }
    let when = match message.status.as_str() {
        "delivered" => format!(" at {}", or_dash(message.delivered_at)),
        "dead" => format!(" at {}", or_dash(message.dead_at)),
        "pending" => format!(", next at {}", rfc3339(message.next_attempt_at)),
        _ => String::new(),
    };
    let error = match (&message.last_error, message.status.as_str()) {
        (Some(error), "pending" | "dead") => format!(": {}", error.replace('\n', " ")),
        _ => String::new(),
    };
    format!(
        "{} -> {} {}{when} ({}){error}",
        message.idempotency_key,
        message.target,
        message.status,
        facts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_entry_reads_as_one_line() {
        let entry = serde_json::json!({"action": "redrive", "at": "2026-12-01T10:00:00Z",
            "status": "dead", "attempts": 8, "last_error": "downstream answered 502",
            "dead_at": "2026-12-01T09:00:00Z"});
        assert_eq!(
            history_line(&entry),
            "2026-12-01T10:00:00Z redrive (was dead, 8 attempts, error \"downstream answered 502\")"
        );
    }
}

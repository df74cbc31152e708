//! Payload retention shorter than key retention (issue 28, item 1): past a source's
//! `payload_retention_hours` the sweeper drops a completed event's raw payload and the response
//! it stored, in bounded batches, and keeps the key, status, digests and times, so a retry is
//! still answered as a duplicate and nothing runs twice. Pending, failed and dead events keep
//! their payload (the worker and re-drive need it), and a source without payload retention is
//! untouched.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shared::config::SweepSettings;
use shared::sweep::payload::DROPPED_RESPONSE;
use shared::sweep::SweepReport;
use tokio_postgres::Client;

use hookledger_tests::PAYLOAD_MARKER as MARK;

use crate::helpers::*;

/// The sweeps' clock.
fn t() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW as u64)
}

fn hours_ago(hours: u64) -> SystemTime {
    t() - Duration::from_secs(hours * 3600)
}

/// The local sources, `stripe` with `payload_retention_hours` set to `hours` and a source
/// `keeper` of the same scheme without it.
async fn app_with_payload_retention(hours: u32) -> TestApp {
    let mut sources: Vec<serde_json::Value> =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    for source in &mut sources {
        if source["name"] == "stripe" {
            source["payload_retention_hours"] = serde_json::json!(hours);
        }
    }
    sources.push(serde_json::json!({"name": "keeper", "scheme": "stripe",
                                    "secrets": ["whsec_keeper"]}));
    let db = hookledger_tests::test_db().await.expect("test database");
    let database = db.settings(4);
    spawn_app_over_sources(db, database, &serde_json::to_string(&sources).unwrap())
}

/// Inserts one ledger row of `source` with `status`, claimed at `claimed_at`, its payload and
/// (completed) response holding the marker, or `response` when given.
async fn seed(
    client: &Client,
    source: &str,
    event_id: &str,
    status: &str,
    claimed_at: SystemTime,
    response: Option<serde_json::Value>,
) {
    let response = response.unwrap_or(serde_json::json!({"ok": true, "email": MARK}));
    client
        .execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, payload, status, claimed_at,
                  completed_at, response_status, response_body, next_attempt_at, dead_at)
             VALUES ($1, $2, 'test.event', sha256($2::text::bytea), $5::text::bytea,
                     $3::text::event_status, $4,
                     CASE WHEN $3::text = 'completed' THEN $4::timestamptz END,
                     CASE WHEN $3::text = 'completed' THEN 200::smallint END,
                     CASE WHEN $3::text = 'completed' THEN $6::jsonb END,
                     CASE WHEN $3::text IN ('claimed', 'failed') THEN $4::timestamptz END,
                     CASE WHEN $3::text = 'dead' THEN $4::timestamptz END)",
            &[
                &source,
                &event_id,
                &status,
                &claimed_at,
                &format!("{{\"id\": \"{event_id}\", \"email\": \"{MARK}\"}}"),
                &response,
            ],
        )
        .await
        .unwrap();
}

/// `event_id -> (payload kept, response body, dropped at set, digest length)` of `source`.
async fn rows(
    client: &Client,
    source: &str,
) -> std::collections::BTreeMap<String, (bool, serde_json::Value, bool, i32)> {
    client
        .query(
            "SELECT event_id, payload IS NOT NULL, coalesce(response_body, 'null'::jsonb),
                    payload_dropped_at IS NOT NULL, octet_length(payload_digest)
             FROM webhook_event WHERE source = $1",
            &[&source],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2), row.get(3), row.get(4))))
        .collect()
}

async fn sweep(app: &TestApp, now: SystemTime, batch_size: i64) -> SweepReport {
    let conn = app.receiver().pool.get().await.unwrap();
    let settings = SweepSettings {
        batch_size,
        max_batches: 100,
        pause_ms: 0,
        duty_percent: 100,
        margin_ms: 0,
        ..SweepSettings::default()
    };
    shared::sweep::run(&conn, &app.settings.sources, &settings, now, plenty)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_sweep_drops_payloads_past_their_retention_and_keeps_keys_and_everything_else() {
    let app = app_with_payload_retention(1).await;
    let client = app.db.connect().await.unwrap();
    let ignored = |t: &str| serde_json::json!({"status": "ignored", "event_type": t});
    seed(&client, "stripe", "old", "completed", hours_ago(3), None).await;
    seed(
        &client,
        "stripe",
        "old_ignored",
        "completed",
        hours_ago(3),
        Some(ignored("test.event")),
    )
    .await;
    seed(
        &client,
        "stripe",
        "old_stale",
        "completed",
        hours_ago(3),
        Some(serde_json::json!({"status": "stale", "email": MARK})),
    )
    .await;
    seed(
        &client,
        "stripe",
        "recent",
        "completed",
        t() - Duration::from_secs(1800),
        None,
    )
    .await;
    seed(&client, "stripe", "dead", "dead", hours_ago(4), None).await;
    // Pending since two hours: the bound of the run; `after_pending`, completed since, waits.
    seed(&client, "stripe", "pending", "failed", hours_ago(2), None).await;
    seed(
        &client,
        "stripe",
        "after_pending",
        "completed",
        t() - Duration::from_secs(5400),
        None,
    )
    .await;
    seed(&client, "keeper", "old", "completed", hours_ago(3), None).await;

    // Batches of two: the three old ones take two batches.
    let report = sweep(&app, t(), 2).await;
    assert_eq!(report.payloads_dropped, 3, "{report:?}");
    assert_eq!(report.payloads_dropped_by_source["stripe"], 3);
    assert_eq!(report.deleted, 0, "{report:?}");
    let stripe = rows(&client, "stripe").await;
    let dropped: serde_json::Value = serde_json::from_str(DROPPED_RESPONSE).unwrap();
    assert_eq!(stripe["old"], (false, dropped.clone(), true, 32));
    assert_eq!(
        stripe["old_ignored"],
        (false, ignored("test.event"), true, 32)
    );
    assert_eq!(
        stripe["old_stale"],
        (false, serde_json::json!({"status": "stale"}), true, 32)
    );
    for kept in ["recent", "dead", "pending", "after_pending"] {
        assert!(
            stripe[kept].0 && !stripe[kept].2,
            "{kept}: {:?}",
            stripe[kept]
        );
    }
    assert!(
        rows(&client, "keeper").await["old"].0,
        "no payload retention: kept"
    );
    // What the operator sees: the outcomes are unchanged (the ignored one is still ignored).
    let outcomes = app
        .texts(&format!(
            "SELECT event_id || ' ' || {} FROM webhook_event WHERE source = 'stripe' \
             AND event_id LIKE 'old%' ORDER BY event_id",
            shared::ledger::outcome::EVENT_OUTCOME_SQL
        ))
        .await;
    assert_eq!(
        outcomes,
        ["old processed", "old_ignored ignored", "old_stale stale"]
    );
    // No marker left in what the dropped rows hold.
    let left = app
        .count(&format!(
            "SELECT count(*) FROM webhook_event WHERE payload_dropped_at IS NOT NULL \
             AND (position('{MARK}' in response_body::text) > 0 OR payload IS NOT NULL)"
        ))
        .await;
    assert_eq!(left, 0);

    // Nothing new: the next run reads from the watermark and drops nothing.
    assert_eq!(sweep(&app, t(), 2).await.payloads_dropped, 0);
    // The pending event completes: both it and the one after it go at the next run.
    client
        .execute(
            "UPDATE webhook_event SET status = 'completed', completed_at = $1, next_attempt_at = NULL,
                 response_status = 200, response_body = '{\"ok\": true}'
             WHERE source = 'stripe' AND event_id = 'pending'",
            &[&t()],
        )
        .await
        .unwrap();
    let report = sweep(&app, t(), 2).await;
    assert_eq!(report.payloads_dropped, 2, "{report:?}");
    let stripe = rows(&client, "stripe").await;
    assert!(!stripe["pending"].0 && !stripe["after_pending"].0);
    assert!(stripe["recent"].0 && stripe["dead"].0);
    // Later still, the recent one's turn.
    assert_eq!(
        sweep(&app, t() + Duration::from_secs(3600), 2)
            .await
            .payloads_dropped,
        1
    );
}

#[tokio::test]
async fn a_retry_of_an_event_whose_payload_was_dropped_is_a_duplicate_and_runs_nothing() {
    let app = app_with_payload_retention(1).await;
    let delivery = stripe_payment("evt_private", "ord_private", 1200, NOW);
    let first = app.receive("stripe", &delivery).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(first.body.contains("ord_private"), "{}", first.body);
    // Two hours later (the receiver's clock is the wall clock: move the row back).
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "UPDATE webhook_event SET claimed_at = claimed_at - interval '2 hours',
                 completed_at = completed_at - interval '2 hours'
             WHERE event_id = 'evt_private'",
            &[],
        )
        .await
        .unwrap();
    let report = sweep(&app, SystemTime::now(), 100).await;
    assert_eq!(report.payloads_dropped, 1, "{report:?}");
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(retry.status, 200);
    assert!(retry.replayed, "a duplicate: Idempotent-Replayed");
    let body: serde_json::Value = serde_json::from_str(&retry.body).unwrap();
    assert_eq!(
        body,
        serde_json::from_str::<serde_json::Value>(DROPPED_RESPONSE).unwrap()
    );
    assert_eq!(
        app.count("SELECT count(*) FROM orders").await,
        1,
        "nothing ran twice"
    );
    // What an operator reads: no payload, when it went, no marker anywhere.
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe", "evt_private")
        .await
        .unwrap()
        .expect("the key stays");
    assert_eq!(detail.payload_bytes, None);
    assert!(detail.payload_dropped_at.is_some());
    let json = detail.to_json();
    assert!(json["payload_dropped_at"].is_string(), "{json}");
    assert!(!json.to_string().contains(MARK), "{json}");
    // A changed body under the same id is still a conflict: the digests stayed.
    let changed = stripe_payment("evt_private", "ord_private", 1300, NOW);
    assert_eq!(app.receive("stripe", &changed).await.status, 409);
}

#[test]
fn a_payload_retention_of_zero_or_not_shorter_than_the_retention_is_refused_at_start_up() {
    let refused = |hours: u32| {
        let mut sources: Vec<serde_json::Value> =
            serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
        sources[0]["payload_retention_hours"] = serde_json::json!(hours);
        shared::config::Sources::from_json(&serde_json::to_string(&sources).unwrap())
            .err()
            .map(|error| error.to_string())
    };
    let error = refused(30 * 24).expect("as long as the keys");
    assert!(
        error.contains(
            "payload_retention_hours (720) must be shorter than retention_days (30 days)"
        ),
        "{error}"
    );
    let error = refused(0).expect("zero hours");
    assert!(
        error.contains("payload_retention_hours must be at least 1"),
        "{error}"
    );
    assert_eq!(refused(30 * 24 - 1), None);
}

#[tokio::test]
async fn the_sweeper_role_drops_payloads_and_may_change_nothing_else_of_a_row() {
    let app = app_with_payload_retention(1).await;
    let owner = app.db.connect().await.unwrap();
    seed(&owner, "stripe", "old", "completed", hours_ago(3), None).await;
    let (_, settings) = crate::roles::login_as(&app.db, "hookledger_sweeper", 1).await;
    let pool = shared::db::pool(&settings).unwrap();
    let conn = pool.get().await.unwrap();
    let report = shared::sweep::run(
        &conn,
        &app.settings.sources,
        &SweepSettings::default(),
        t(),
        plenty,
    )
    .await
    .unwrap();
    assert_eq!(report.payloads_dropped, 1, "{report:?}");
    assert!(!rows(&owner, "stripe").await["old"].0);
    // The grant is the three columns: not the status, not the digest.
    let sweeper = shared::db::connect(&settings).await.unwrap();
    for statement in [
        "UPDATE webhook_event SET status = 'dead'",
        "UPDATE webhook_event SET payload_digest = sha256('x')",
        "UPDATE webhook_event SET event_type = 'x'",
    ] {
        let error = sweeper.execute(statement, &[]).await.unwrap_err();
        assert_eq!(error.code().map(|c| c.code()), Some("42501"), "{statement}");
    }
}

#[tokio::test]
async fn a_key_taken_again_after_its_payload_was_dropped_has_its_new_payload_dropped_too() {
    // Found by a hostile review: the retake kept the earlier life's `payload_dropped_at`, and
    // the sweep (which picks rows without one) never emptied the new payload.
    let app = app_with_payload_retention(1).await;
    let delivery = stripe_payment("evt_again", "ord_again", 700, NOW);
    assert_eq!(app.receive("stripe", &delivery).await.status, 200);
    let client = app.db.connect().await.unwrap();
    // Past the key's retention (30 days), its payload dropped long ago, the row not yet
    // deleted (the sweep's delete of it still to come).
    client
        .execute(
            "UPDATE webhook_event SET claimed_at = now() - interval '31 days',
                 completed_at = now() - interval '31 days', payload = NULL,
                 payload_dropped_at = now() - interval '31 days'
             WHERE event_id = 'evt_again'",
            &[],
        )
        .await
        .unwrap();
    // The provider delivers it again: a new life with a new payload.
    let again = app.receive("stripe", &delivery).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(!again.replayed, "a new life, not a duplicate");
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe", "evt_again")
        .await
        .unwrap()
        .expect("the key");
    assert!(detail.payload_bytes.is_some(), "the new life's payload");
    assert_eq!(
        detail.payload_dropped_at, None,
        "not the earlier life's drop"
    );
    // Two hours later its payload goes too.
    client
        .execute(
            "UPDATE webhook_event SET claimed_at = claimed_at - interval '2 hours',
                 completed_at = completed_at - interval '2 hours'
             WHERE event_id = 'evt_again'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(sweep_count(&app).await, 1);
}

async fn sweep_count(app: &TestApp) -> u64 {
    sweep(app, SystemTime::now(), 100).await.payloads_dropped
}

#[tokio::test]
async fn delivered_outbox_messages_lose_their_payload_and_undelivered_ones_keep_it() {
    let app = app_with_payload_retention(1).await;
    let client = app.db.connect().await.unwrap();
    for (n, status, at) in [
        (1, "delivered", hours_ago(3)),
        (2, "delivered", t() - Duration::from_secs(1800)),
        (3, "pending", hours_ago(3)),
        (4, "dead", hours_ago(3)),
    ] {
        client
            .execute(
                "INSERT INTO outbox (source, event_id, n, event_type, target, payload,
                                     content_type, status, created_at, delivered_at, dead_at)
                 VALUES ('stripe', 'evt_out', $1, 'test.event', 'service', $2::text::bytea,
                         'application/json', $3::text::outbox_status, $4,
                         CASE WHEN $3::text = 'delivered' THEN $4::timestamptz END,
                         CASE WHEN $3::text = 'dead' THEN $4::timestamptz END)",
                &[&n, &format!("{{\"email\": \"{MARK}\"}}"), &status, &at],
            )
            .await
            .unwrap();
    }
    let report = sweep(&app, t(), 100).await;
    assert_eq!(report.payloads_dropped, 1, "{report:?}");
    let kept: Vec<(i32, i32, bool)> = client
        .query(
            "SELECT n, octet_length(payload), payload_dropped_at IS NOT NULL FROM outbox ORDER BY n",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let full = i32::try_from(format!("{{\"email\": \"{MARK}\"}}").len()).unwrap();
    assert_eq!(
        kept,
        [
            (1, 0, true),
            (2, full, false),
            (3, full, false),
            (4, full, false)
        ]
    );
    // The watermark: nothing more at the next run, the recent one an hour later.
    assert_eq!(sweep(&app, t(), 100).await.payloads_dropped, 0);
    assert_eq!(
        sweep(&app, t() + Duration::from_secs(3600), 100)
            .await
            .payloads_dropped,
        1
    );
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe", "evt_out").await;
    // No ledger row for these seeded messages: inspect finds no key, and that is all.
    assert!(detail.unwrap().is_none());
}

/// `line`'s words as a shell splits them: on spaces, except inside double quotes.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// docs/operations/privacy.md's erasure of one event, run as written (its `hookledger forget
/// --event-id` line, with the event's id): the payloads go, a retry is still a duplicate that
/// runs nothing, and a payload sweep afterwards leaves the erased answer as it is.
#[tokio::test]
async fn the_privacy_pages_erasure_command_runs_and_keeps_the_duplicate_answer() {
    let page =
        std::fs::read_to_string(hookledger_tests::repo_root().join("docs/operations/privacy.md"))
            .unwrap();
    let line = page
        .lines()
        .find(|line| line.starts_with("hookledger forget ") && line.contains("--event-id"))
        .expect("the page's command for one event");
    let args: Vec<String> = shell_words(line)
        .into_iter()
        .skip(1)
        .map(|word| word.replace("evt_...", "evt_erase"))
        .collect();
    let app = app_with_payload_retention(24).await;
    let delivery = stripe_payment("evt_erase", "ord_erase", 900, NOW);
    assert_eq!(app.receive("stripe", &delivery).await.status, 200);
    let output = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        &app.db.url,
        &hookledger_tests::events_dir().join("sources.local.json"),
    )
    .args(&args)
    .output()
    .await
    .unwrap();
    hookledger_tests::test_log::record("hookledger", &output);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let detail = shared::redrive::inspect(&app.receiver().pool, "stripe", "evt_erase")
        .await
        .unwrap()
        .expect("the key stays");
    assert_eq!(detail.payload_bytes, None);
    assert!(!detail.to_json().to_string().contains(MARK));
    let retry = app.receive("stripe", &delivery).await;
    assert_eq!(
        (retry.status, retry.replayed),
        (200, true),
        "{}",
        retry.body
    );
    assert_eq!(retry.body, shared::forget::ERASED_RESPONSE);
    assert_eq!(app.count("SELECT count(*) FROM orders").await, 1);
    // The payload sweep, past the retention: nothing left to drop, the erased answer stays.
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    assert_eq!(sweep(&app, later, 10).await.payloads_dropped, 0);
    assert_eq!(
        app.receive("stripe", &delivery).await.body,
        shared::forget::ERASED_RESPONSE
    );
}

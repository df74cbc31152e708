//! The auditor: its figures on a seeded ledger against hand-computed values, "since the last
//! run" windows, a real session idle in a transaction, valid EMF, the function handler, and
//! every query served by an index on a million rows.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shared::audit::{AuditReport, SourceAudit};
use shared::config::{AuditSettings, Sources};
use tokio_postgres::types::ToSql;

use crate::helpers::{capture_logs, spawn_app, TestApp, NOW};

const MINUTE: i64 = 60;
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

fn at(offset_secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs((NOW + offset_secs) as u64)
}

/// The local sources, with `expected_interval_minutes` on github (60), acme (60) and slack (30).
fn sources_with_intervals() -> Sources {
    let mut specs: serde_json::Value =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    for spec in specs.as_array_mut().unwrap() {
        let minutes = match spec["name"].as_str().unwrap() {
            "github" | "acme" => 60,
            "slack" => 30,
            _ => continue,
        };
        spec["expected_interval_minutes"] = serde_json::json!(minutes);
    }
    Sources::from_json(&specs.to_string()).unwrap()
}

/// Inserts one ledger row `offset` seconds from `NOW` for each timestamp (NULL for `None`).
#[allow(clippy::too_many_arguments)]
async fn seed(
    app: &TestApp,
    source: &str,
    event_id: &str,
    status: &str,
    claimed: i64,
    next_attempt: Option<i64>,
    lease_expires: Option<i64>,
    dead: Option<i64>,
) {
    let client = app.db.connect().await.unwrap();
    let ts = |offset: Option<i64>| offset.map(at);
    client
        .execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, status, claimed_at,
                  next_attempt_at, lease_expires_at, dead_at, completed_at, response_status,
                  response_body)
             VALUES ($1, $2, 'test.event', decode(repeat('00', 32), 'hex'),
                     $3::text::event_status, $4::timestamptz, $5, $6, $7,
                     CASE WHEN $3::text = 'completed' THEN $4::timestamptz END,
                     CASE WHEN $3::text = 'completed' THEN 200 END,
                     CASE WHEN $3::text = 'completed' THEN '{}'::jsonb END)",
            &[
                &source,
                &event_id,
                &status,
                &at(claimed),
                &ts(next_attempt),
                &ts(lease_expires),
                &ts(dead),
            ],
        )
        .await
        .unwrap();
}

/// Inserts outbox message `n` of `(source, event_id)` with `status`, committed `created`
/// seconds from `NOW` (dead or delivered then too).
async fn seed_outbox(
    app: &TestApp,
    source: &str,
    event_id: &str,
    n: i32,
    status: &str,
    created: i64,
) {
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "INSERT INTO outbox
                 (source, event_id, n, event_type, target, payload, content_type, status,
                  created_at, next_attempt_at, lease_expires_at, delivered_at, dead_at)
             VALUES ($1, $2, $3, 'test.event', 'forward', '\\x7b7d', 'application/json',
                     $4::text::outbox_status, $5::timestamptz, $5::timestamptz,
                     CASE WHEN $4::text = 'processing' THEN $5::timestamptz END,
                     CASE WHEN $4::text = 'delivered' THEN $5::timestamptz END,
                     CASE WHEN $4::text = 'dead' THEN $5::timestamptz END)",
            &[&source, &event_id, &n, &status, &at(created)],
        )
        .await
        .unwrap();
}

async fn tie(app: &TestApp, source: &str, event_id: &str, seen: i64) {
    let client = app.db.connect().await.unwrap();
    client
        .execute(
            "INSERT INTO ordering_tie
                 (source, entity_type, entity_id, version, applied_event_id, event_id, seen_at)
             VALUES ($1, 'subscription', 'sub_1', 1, 'evt_applied', $2, $3)",
            &[&source, &event_id, &at(seen)],
        )
        .await
        .unwrap();
}

async fn set_last_run(app: &TestApp, offset: i64) {
    let client = app.db.connect().await.unwrap();
    client
        .execute("UPDATE audit_run SET last_run_at = $1", &[&at(offset)])
        .await
        .unwrap();
}

async fn audit(
    app: &TestApp,
    sources: &Sources,
    settings: &AuditSettings,
    now: i64,
) -> AuditReport {
    let conn = app.receiver().pool.get().await.unwrap();
    shared::audit::run(&conn, sources, settings, at(now))
        .await
        .unwrap()
}

/// A source's figures with nothing in them, to compare against with `..`.
fn quiet_default(audit: &SourceAudit) -> SourceAudit {
    SourceAudit {
        stuck_claims: 0,
        stuck_oldest_age: 0,
        past_retention: 0,
        past_retention_overdue: 0,
        dead_letters: 0,
        dead_letters_new: 0,
        dead_letter_oldest_age: 0,
        ordering_ties_new: 0,
        backlog_due: 0,
        backlog_oldest_age: 0,
        outbox_backlog: 0,
        outbox_backlog_oldest_age: 0,
        outbox_dead: 0,
        outbox_dead_new: 0,
        outbox_dead_oldest_age: 0,
        capped: Vec::new(),
        ..audit.clone()
    }
}

/// The seeded ledger of `audit_figures_on_a_seeded_ledger_equal_hand_computed_values`.
async fn seed_ledger(app: &TestApp) {
    // stripe-deferred's outbox: a backlog of three (the oldest committed 15 minutes ago, one
    // being dispatched), one delivered, and two dead (one in the window since the last run).
    let d = "stripe-deferred";
    seed_outbox(app, d, "o1", 1, "pending", -900).await;
    seed_outbox(app, d, "o1", 2, "processing", -60).await;
    seed_outbox(app, d, "o2", 1, "pending", -10).await;
    seed_outbox(app, d, "o3", 1, "delivered", -100).await;
    seed_outbox(app, d, "o4", 1, "dead", -2 * DAY).await;
    seed_outbox(app, d, "o5", 1, "dead", -100).await;
    // stripe-deferred: the worker's rows.
    let d = "stripe-deferred";
    // A claim waiting 10 minutes: stuck (> 300 s) and due.
    seed(app, d, "d1", "claimed", -600, Some(-600), None, None).await;
    // A claim of 100 s: due, not stuck.
    seed(app, d, "d2", "claimed", -100, Some(-100), None, None).await;
    // A lease that expired 50 s ago: stuck since its expiry; not backlog (processing).
    seed(
        app,
        d,
        "d3",
        "processing",
        -1000,
        Some(-50),
        Some(-50),
        None,
    )
    .await;
    // A lease still running.
    seed(app, d, "d4", "processing", -30, Some(60), Some(60), None).await;
    // Failed, due 30 s ago; failed, due in 5 minutes.
    seed(app, d, "d5", "failed", -2 * HOUR, Some(-30), None, None).await;
    seed(app, d, "d6", "failed", -2 * HOUR, Some(300), None, None).await;
    // Dead 2 minutes ago (after the last run), 400 s ago (before it), and 91 days ago (past
    // the 90-day dead-letter retention; claimed 92 days ago: the source's oldest key).
    seed(app, d, "d7", "dead", -DAY, None, None, Some(-120)).await;
    seed(app, d, "d9", "dead", -DAY, None, None, Some(-400)).await;
    seed(app, d, "d8", "dead", -92 * DAY, None, None, Some(-91 * DAY)).await;
    // Completed 31 days ago: past the 30-day retention.
    seed(app, d, "c1", "completed", -31 * DAY, None, None, None).await;
    // stripe: completed only, within retention.
    seed(
        app,
        "stripe",
        "s1",
        "completed",
        -10 * DAY,
        None,
        None,
        None,
    )
    .await;
    seed(app, "stripe", "s2", "completed", -HOUR, None, None, None).await;
    // github expects a delivery every hour; the last came two hours ago: quiet.
    seed(
        app,
        "github",
        "g1",
        "completed",
        -2 * HOUR,
        None,
        None,
        None,
    )
    .await;
    // acme expects one every hour; the last came 10 minutes ago (younger than the horizon).
    seed(
        app,
        "acme",
        "a1",
        "completed",
        -10 * MINUTE,
        None,
        None,
        None,
    )
    .await;
    // slack expects one every 30 minutes and has none: quiet.
    // legacy is not configured: default retention (30 days, dead 90 days).
    seed(
        app,
        "legacy",
        "l1",
        "completed",
        -40 * DAY,
        None,
        None,
        None,
    )
    .await;
    seed(
        app,
        "legacy",
        "l2",
        "dead",
        -11 * DAY,
        None,
        None,
        Some(-10 * DAY),
    )
    .await;
    // Ordering ties: before the last run (-300), after it, and after `now` (not yet).
    tie(app, "stripe", "t_before", -400).await;
    tie(app, "stripe", "t_after", -100).await;
    tie(app, d, "t_deferred", -10).await;
    tie(app, "stripe", "t_future", 10).await;
    set_last_run(app, -300).await;
}

#[tokio::test]
async fn audit_figures_on_a_seeded_ledger_equal_hand_computed_values() {
    let app = spawn_app().await;
    seed_ledger(&app).await;
    let sources = sources_with_intervals();
    let settings = AuditSettings {
        stuck_after_secs: 300,
        // Nothing on this database is idle in a transaction for an hour.
        idle_in_transaction_after_secs: 3600,
    };
    let report = audit(&app, &sources, &settings, 0).await;

    assert!(!report.first_run);
    assert!(report.recorded);
    assert_eq!(report.since, shared::timestamp::rfc3339(at(-300)));
    assert_eq!(report.at, shared::timestamp::rfc3339(at(0)));
    let keys: Vec<(&str, &str, u64)> = report
        .stuck_keys
        .iter()
        .map(|k| (k.source.as_str(), k.event_id.as_str(), k.age_secs))
        .collect();
    assert_eq!(
        keys,
        [
            ("stripe-deferred", "d1", 600),
            ("stripe-deferred", "d3", 50)
        ]
    );
    assert_eq!(report.idle_in_transaction.sessions, 0);

    // Every configured source, plus the unconfigured one with keys.
    let names: Vec<&str> = report.sources.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "acme",
            "acme-forward",
            "discord",
            "github",
            "legacy",
            "paddle",
            "partner",
            "sendgrid",
            "shopify",
            "slack",
            "stripe",
            "stripe-deferred"
        ]
    );

    let deferred = &report.sources["stripe-deferred"];
    assert_eq!(
        deferred,
        &SourceAudit {
            configured: true,
            stuck_claims: 2,
            stuck_oldest_age: 600,
            oldest_key_age: Some(92 * DAY as u64),
            newest_key_age: Some(30),
            retry_horizon_secs: Some(72 * HOUR as u64),
            retention_secs: 30 * DAY as u64,
            oldest_key_too_young: false,
            past_retention: 2,
            past_retention_overdue: 2,
            dead_letters: 3,
            dead_letters_new: 1,
            dead_letter_oldest_age: 91 * DAY as u64,
            ordering_ties_new: 1,
            backlog_due: 3,
            backlog_oldest_age: 600,
            outbox_backlog: 3,
            outbox_backlog_oldest_age: 900,
            outbox_dead: 2,
            outbox_dead_new: 1,
            outbox_dead_oldest_age: 2 * DAY as u64,
            expected_interval_secs: None,
            quiet: false,
            capped: Vec::new(),
        }
    );

    let stripe = &report.sources["stripe"];
    assert_eq!(stripe.ordering_ties_new, 1, "{stripe:?}");
    assert_eq!(
        stripe,
        &SourceAudit {
            ordering_ties_new: 1,
            oldest_key_age: Some(10 * DAY as u64),
            newest_key_age: Some(HOUR as u64),
            ..quiet_default(stripe)
        }
    );
    assert!(!stripe.oldest_key_too_young && !stripe.quiet);

    let github = &report.sources["github"];
    assert_eq!(github.newest_key_age, Some(2 * HOUR as u64));
    assert_eq!(github.expected_interval_secs, Some(HOUR as u64));
    assert!(github.quiet, "{github:?}");
    // Two hours old against a 72-hour horizon: younger (informative only).
    assert!(github.oldest_key_too_young);

    let acme = &report.sources["acme"];
    assert_eq!(acme.newest_key_age, Some(600));
    assert!(!acme.quiet && acme.oldest_key_too_young, "{acme:?}");
    assert_eq!(acme.retry_horizon_secs, Some(76 * HOUR as u64));

    let slack = &report.sources["slack"];
    assert_eq!((slack.oldest_key_age, slack.newest_key_age), (None, None));
    assert!(slack.quiet && !slack.oldest_key_too_young, "{slack:?}");

    let legacy = &report.sources["legacy"];
    assert_eq!(
        legacy,
        &SourceAudit {
            configured: false,
            oldest_key_age: Some(40 * DAY as u64),
            newest_key_age: Some(11 * DAY as u64),
            retry_horizon_secs: None,
            retention_secs: 30 * DAY as u64,
            oldest_key_too_young: false,
            // The completed key past 30 days; the dead one (10 days) is within 90.
            past_retention: 1,
            past_retention_overdue: 1,
            dead_letters: 1,
            dead_letter_oldest_age: 10 * DAY as u64,
            expected_interval_secs: None,
            quiet: false,
            ..quiet_default(legacy)
        }
    );

    // No key, no interval: zeros and no quiet figure.
    let paddle = &report.sources["paddle"];
    assert_eq!(paddle, &quiet_default(paddle));
    assert_eq!((paddle.oldest_key_age, paddle.quiet), (None, false));
    assert!(paddle.metrics().iter().all(|m| m.name != "source_quiet"));
    assert!(slack.metrics().iter().any(|m| m.name == "source_quiet"));

    // The run was recorded at `now`.
    let client = app.db.connect().await.unwrap();
    let last: SystemTime = client
        .query_one("SELECT last_run_at FROM audit_run", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(last, at(0));
}

/// `past_retention` is rarely 0 under steady traffic (keys expire between two sweeps), so the
/// retention alarm reads `past_retention_overdue`: only keys more than `SWEEP_GRACE` (an hour)
/// past their cutoff, which a sweeper running every five minutes would have deleted.
#[tokio::test]
async fn keys_an_hour_past_retention_are_overdue_and_keys_just_past_it_are_not() {
    let app = spawn_app().await;
    let grace = shared::audit::SWEEP_GRACE.as_secs() as i64;
    assert_eq!(grace, HOUR);
    // stripe keeps completed keys 30 days and dead letters 90 days.
    seed(
        &app,
        "stripe",
        "just",
        "completed",
        -30 * DAY - 10 * MINUTE,
        None,
        None,
        None,
    )
    .await;
    seed(
        &app,
        "stripe",
        "late",
        "completed",
        -30 * DAY - 2 * HOUR,
        None,
        None,
        None,
    )
    .await;
    seed(
        &app,
        "stripe",
        "kept",
        "completed",
        -29 * DAY,
        None,
        None,
        None,
    )
    .await;
    seed(
        &app,
        "stripe",
        "dead-just",
        "dead",
        -DAY,
        None,
        None,
        Some(-90 * DAY - MINUTE),
    )
    .await;
    seed(
        &app,
        "stripe",
        "dead-late",
        "dead",
        -DAY,
        None,
        None,
        Some(-90 * DAY - 2 * HOUR),
    )
    .await;
    let report = audit(
        &app,
        &sources_with_intervals(),
        &AuditSettings::default(),
        0,
    )
    .await;
    let stripe = &report.sources["stripe"];
    assert_eq!(
        (stripe.past_retention, stripe.past_retention_overdue),
        (4, 2),
        "{stripe:?}"
    );
    let metric = |name: &str| {
        stripe
            .metrics()
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    };
    assert_eq!(metric("past_retention"), Some(4));
    assert_eq!(metric("past_retention_overdue"), Some(2));
}

#[tokio::test]
async fn a_read_only_audit_does_not_wait_on_a_recording_one() {
    let app = spawn_app().await;
    let sources = sources_with_intervals();
    let settings = AuditSettings::default();
    audit(&app, &sources, &settings, 0).await;
    // A recording audit (or anyone) holds the audit_run row, as a slow scheduled run would.
    let holder = app.receiver().pool.get().await.unwrap();
    holder
        .batch_execute("BEGIN; SELECT last_run_at FROM audit_run WHERE id FOR UPDATE")
        .await
        .unwrap();
    let conn = app.receiver().pool.get().await.unwrap();
    let peeked = shared::audit::peek(&conn, &sources, &settings, at(60)).await;
    holder.batch_execute("ROLLBACK").await.unwrap();
    let peeked = peeked.expect("a peek must not wait for the audit_run row lock");
    assert!(!peeked.recorded);
    assert_eq!(peeked.since, shared::timestamp::rfc3339(at(0)));
}

#[tokio::test]
async fn audit_since_last_run_counts_reset_on_the_second_run() {
    let app = spawn_app().await;
    let sources = sources_with_intervals();
    let settings = AuditSettings::default();
    let d = "stripe-deferred";
    // Before any run: counted by the first run's five-minute window, or not.
    seed(&app, d, "old", "dead", -DAY, None, None, Some(-600)).await;
    seed(&app, d, "fresh", "dead", -DAY, None, None, Some(-100)).await;
    tie(&app, "stripe", "t1", -50).await;

    let first = audit(&app, &sources, &settings, 0).await;
    assert!(first.first_run);
    assert_eq!(first.since, shared::timestamp::rfc3339(at(-300)));
    assert_eq!(first.sources[d].dead_letters, 2);
    assert_eq!(first.sources[d].dead_letters_new, 1);
    assert_eq!(first.sources["stripe"].ordering_ties_new, 1);

    // Five minutes later, nothing new: the counts reset, the total stays.
    let second = audit(&app, &sources, &settings, 300).await;
    assert!(!second.first_run);
    assert_eq!(second.since, shared::timestamp::rfc3339(at(0)));
    assert_eq!(second.sources[d].dead_letters, 2);
    assert_eq!(second.sources[d].dead_letters_new, 0);
    assert_eq!(second.sources["stripe"].ordering_ties_new, 0);

    // Something new; a peek sees it and leaves it to the next recorded run.
    seed(&app, d, "newer", "dead", -DAY, None, None, Some(400)).await;
    tie(&app, "stripe", "t2", 450).await;
    let conn = app.receiver().pool.get().await.unwrap();
    let peeked = shared::audit::peek(&conn, &sources, &settings, at(600))
        .await
        .unwrap();
    drop(conn);
    assert!(!peeked.recorded);
    assert_eq!(peeked.sources[d].dead_letters_new, 1);
    let third = audit(&app, &sources, &settings, 600).await;
    assert_eq!(third.since, shared::timestamp::rfc3339(at(300)));
    assert_eq!(third.sources[d].dead_letters_new, 1);
    assert_eq!(third.sources["stripe"].ordering_ties_new, 1);
    let fourth = audit(&app, &sources, &settings, 900).await;
    assert_eq!(fourth.sources[d].dead_letters_new, 0);
    assert_eq!(fourth.sources["stripe"].ordering_ties_new, 0);
    assert_eq!(fourth.sources[d].dead_letters, 3);

    // A clock behind the last run never moves it back.
    let behind = audit(&app, &sources, &settings, 100).await;
    assert_eq!(behind.sources[d].dead_letters_new, 0);
    let after = audit(&app, &sources, &settings, 1200).await;
    assert_eq!(after.since, shared::timestamp::rfc3339(at(900)));
}

#[tokio::test]
async fn audit_counts_a_real_session_idle_in_a_transaction() {
    let app = spawn_app().await;
    // A second connection opens a transaction and goes idle in it (what a function killed
    // mid-transaction leaves behind until idle_in_transaction_session_timeout).
    let idle = app.db.connect().await.unwrap();
    idle.batch_execute("BEGIN; SELECT 1").await.unwrap();
    let pid: i32 = idle
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let settings = AuditSettings {
        stuck_after_secs: 300,
        idle_in_transaction_after_secs: 1,
    };
    let report = audit(&app, &sources_with_intervals(), &settings, 0).await;
    let sessions = &report.idle_in_transaction;
    assert!(sessions.sessions >= 1, "{sessions:?}");
    assert!(sessions.pids.contains(&pid), "{pid} not in {sessions:?}");
    assert!(sessions.longest_secs >= 1, "{sessions:?}");
    // Once it commits it is no longer counted.
    idle.batch_execute("COMMIT").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let report = audit(&app, &sources_with_intervals(), &settings, 300).await;
    assert!(
        !report.idle_in_transaction.pids.contains(&pid),
        "{:?}",
        report.idle_in_transaction
    );
}

#[tokio::test]
async fn audit_emf_is_valid_embedded_metric_format() {
    let app = spawn_app().await;
    seed_ledger(&app).await;
    let report = audit(
        &app,
        &sources_with_intervals(),
        &AuditSettings::default(),
        0,
    )
    .await;
    let timestamp = at(5);
    let documents = report.emf_documents(timestamp);
    // One per source and one for the database.
    assert_eq!(documents.len(), report.sources.len() + 1);
    let mut sources_seen = Vec::new();
    for document in &documents {
        // Through text, as CloudWatch Logs reads it.
        let line = serde_json::to_string(document).unwrap();
        assert!(!line.contains('\n'));
        let emf: serde_json::Value = serde_json::from_str(&line).unwrap();
        let aws = &emf["_aws"];
        assert_eq!(aws["Timestamp"], serde_json::json!((NOW + 5) * 1000));
        let directives = aws["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 1);
        assert_eq!(directives[0]["Namespace"], "hookledger");
        assert_eq!(directives[0]["Dimensions"], serde_json::json!([["source"]]));
        let source = emf["source"].as_str().unwrap().to_owned();
        let metrics = directives[0]["Metrics"].as_array().unwrap();
        assert!(!metrics.is_empty());
        let mut names = Vec::new();
        for metric in metrics {
            let name = metric["Name"].as_str().unwrap();
            let unit = metric["Unit"].as_str().unwrap();
            let expected_unit = if name.ends_with("_age") || name.ends_with("_longest") {
                "Seconds"
            } else {
                "Count"
            };
            assert_eq!(unit, expected_unit, "{name}");
            assert!(emf[name].is_u64(), "{name} is not a number in {line}");
            names.push(name.to_owned());
        }
        if source == "*" {
            assert_eq!(
                names,
                [
                    "idle_in_transaction_sessions",
                    "idle_in_transaction_longest"
                ]
            );
        } else {
            let mut expected = vec![
                "stuck_claims",
                "stuck_oldest_age",
                "past_retention",
                "past_retention_overdue",
                "dead_letters",
                "dead_letters_new",
                "dead_letter_oldest_age",
                "ordering_ties_new",
                "backlog_due",
                "backlog_oldest_age",
                "outbox_backlog",
                "outbox_backlog_oldest_age",
                "outbox_dead",
                "outbox_dead_new",
                "outbox_dead_oldest_age",
            ];
            if report.sources[&source].oldest_key_age.is_some() {
                expected.push("oldest_key_age");
            }
            if report.sources[&source].expected_interval_secs.is_some() {
                expected.push("source_quiet");
            }
            names.sort();
            expected.sort();
            assert_eq!(names, expected, "{source}");
        }
        sources_seen.push(source);
    }
    let deferred = documents
        .iter()
        .find(|d| d["source"] == "stripe-deferred")
        .unwrap();
    assert_eq!(deferred["stuck_claims"], 2);
    assert_eq!(deferred["stuck_oldest_age"], 600);
    assert_eq!(deferred["dead_letters_new"], 1);
    let slack = documents.iter().find(|d| d["source"] == "slack").unwrap();
    assert_eq!(slack["source_quiet"], 1);

    // emit(): one `audit` line carrying the report, and every metric as an emf_metric event.
    let (logs, guard) = capture_logs();
    report.emit();
    drop(guard);
    let lines = logs.with("message", "audit");
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert_eq!(lines[0]["stuck_claims"], 2);
    assert_eq!(lines[0]["quiet_sources"], "github,slack");
    assert_eq!(
        lines[0]["stuck_keys"],
        "stripe-deferred/d1 stripe-deferred/d3"
    );
    let logged: serde_json::Value =
        serde_json::from_str(lines[0]["report"].as_str().unwrap()).unwrap();
    assert_eq!(logged, serde_json::to_value(&report).unwrap());
    let stuck_events = logs.with("emf_metric", "stuck_claims");
    assert_eq!(stuck_events.len(), report.sources.len());
    let quiet_events = logs.with("emf_metric", "source_quiet");
    assert_eq!(
        quiet_events.len(),
        3,
        "github, acme and slack have an interval"
    );
    assert_eq!(
        logs.with("emf_metric", "idle_in_transaction_sessions")
            .len(),
        1
    );
}

#[tokio::test]
async fn the_auditor_function_audits_on_its_schedule_event() {
    let app = spawn_app().await;
    seed(
        &app,
        "stripe-deferred",
        "d1",
        "claimed",
        -DAY,
        Some(-DAY),
        None,
        None,
    )
    .await;
    let state = auditor::handler::AppState::new(&app.settings, app.receiver().pool.clone());
    let payload = hookledger_tests::EventFile::load("auditor/schedule.json")
        .unwrap()
        .json;
    let mut context = lambda_runtime::Context::default();
    context.deadline = (SystemTime::now() + Duration::from_secs(60))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (logs, guard) = capture_logs();
    let report = auditor::handler::function_handler(
        &state,
        lambda_runtime::LambdaEvent::new(payload, context),
    )
    .await
    .unwrap();
    drop(guard);
    assert!(report.recorded && report.first_run);
    // The real clock: the row claimed a day before NOW is far older than 300 s.
    assert_eq!(report.sources["stripe-deferred"].stuck_claims, 1);
    assert_eq!(report.stuck_keys[0].event_id, "d1");
    assert_eq!(logs.with("message", "audit").len(), 1, "{}", logs.text());
    assert_eq!(
        logs.with("emf_metric", "backlog_due").len(),
        report.sources.len()
    );
    let recorded: Option<SystemTime> = app
        .db
        .connect()
        .await
        .unwrap()
        .query_one("SELECT last_run_at FROM audit_run", &[])
        .await
        .unwrap()
        .get(0);
    assert!(recorded.is_some());
    // The report is what the function returns: it serialises.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["sources"]["stripe-deferred"]["stuck_claims"], 1);
}

/// A million rows: mostly completed over 31 days (a few percent past retention), dead letters
/// throughout, and the unfinished rows (claimed, processing, failed) in the last hours, with
/// some old stuck claims.
const SEED_MILLION: &str = "
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, status, attempts, claimed_at,
     next_attempt_at, lease_expires_at, completed_at, dead_at, response_status, response_body)
SELECT (ARRAY['stripe','stripe-deferred','github','acme','shopify','slack','paddle','partner',
              'legacy'])[1 + i % 9],
       'evt_' || i,
       'seed.event',
       decode(repeat('00', 32), 'hex'),
       s.status,
       CASE WHEN s.status IN ('failed', 'dead') THEN 3 ELSE 0 END,
       t.claimed_at,
       CASE WHEN s.status IN ('claimed', 'failed') THEN t.claimed_at + interval '1 minute'
            WHEN s.status = 'processing' THEN t.claimed_at + interval '2 minutes' END,
       CASE WHEN s.status = 'processing' THEN t.claimed_at + interval '2 minutes' END,
       CASE WHEN s.status = 'completed' THEN t.claimed_at END,
       CASE WHEN s.status = 'dead' THEN t.claimed_at + interval '1 hour' END,
       CASE WHEN s.status = 'completed' THEN 200 END,
       CASE WHEN s.status = 'completed' THEN '{}'::jsonb END
FROM generate_series(1, 1000000) AS i,
     LATERAL (SELECT to_timestamp($1) - i * interval '2.7 seconds' AS claimed_at) t,
     LATERAL (SELECT (CASE
         WHEN i % 250 = 7 THEN 'dead'
         WHEN i <= 3000 AND i % 3 = 0 THEN 'claimed'
         WHEN i <= 3000 AND i % 3 = 1 THEN 'failed'
         WHEN i <= 300 THEN 'processing'
         WHEN i % 100000 = 0 THEN 'claimed'
         ELSE 'completed' END)::event_status AS status) s";

const SEED_TIES: &str = "
INSERT INTO ordering_tie (source, entity_type, entity_id, version, applied_event_id, event_id,
                          seen_at)
SELECT 'stripe', 'subscription', 'sub_' || i, 1, 'evt_a' || i, 'evt_b' || i,
       to_timestamp($1) - i * interval '30 seconds'
FROM generate_series(1, 50000) AS i";

/// 200,000 outbox messages: mostly delivered, one in 100 dead, the newest 2,000 pending.
const SEED_OUTBOX: &str = "
INSERT INTO outbox
    (source, event_id, n, event_type, target, payload, content_type, status, created_at,
     next_attempt_at, delivered_at, dead_at)
SELECT (ARRAY['stripe','stripe-deferred','github','acme'])[1 + i % 4],
       'evt_' || i, 1, 'seed.event', 'forward', '\\x7b7d', 'application/json',
       s.status, t.created_at, t.created_at,
       CASE WHEN s.status = 'delivered' THEN t.created_at END,
       CASE WHEN s.status = 'dead' THEN t.created_at END
FROM generate_series(1, 200000) AS i,
     LATERAL (SELECT to_timestamp($1) - i * interval '10 seconds' AS created_at) t,
     LATERAL (SELECT (CASE
         WHEN i % 100 = 3 THEN 'dead'
         WHEN i <= 2000 THEN 'pending'
         ELSE 'delivered' END)::outbox_status AS status) s";

/// `EXPLAIN` (not ANALYZE) of `sql` with `params`: the plan's lines.
async fn explain(
    client: &tokio_postgres::Client,
    sql: &'static shared::db::Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Vec<String> {
    let statement = client
        .prepare_typed(&format!("EXPLAIN {}", sql.text), sql.types)
        .await
        .unwrap();
    client
        .query(&statement, params)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect()
}

#[tokio::test]
async fn audit_queries_are_served_by_indexes() {
    use shared::audit::sql as q;
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    let started = Instant::now();
    let now_secs = NOW as f64;
    client.execute(SEED_MILLION, &[&now_secs]).await.unwrap();
    client.execute(SEED_TIES, &[&now_secs]).await.unwrap();
    client.execute(SEED_OUTBOX, &[&now_secs]).await.unwrap();
    client
        .batch_execute("ANALYZE webhook_event; ANALYZE ordering_tie; ANALYZE outbox")
        .await
        .unwrap();
    eprintln!("seeded 1,000,000 rows in {:?}", started.elapsed());
    assert_eq!(app.ledger_rows().await, 1_000_000);

    let now = at(0);
    let stuck_before = at(-300);
    let since = at(-300);
    let retention = shared::retention::Retention::default();
    let (completed_cutoff, dead_cutoff) =
        (retention.completed_cutoff(now), retention.dead_cutoff(now));
    let cap = shared::audit::CAP as i64;
    let fifty = 50i64;
    let threshold = 30i64;
    let source = "stripe-deferred";
    let plans: Vec<(&str, Vec<String>)> = vec![
        (
            "stuck_summary",
            explain(&client, &q::STUCK_SUMMARY, &[&stuck_before, &now, &cap]).await,
        ),
        (
            "stuck_keys",
            explain(&client, &q::STUCK_KEYS, &[&stuck_before, &now, &fifty]).await,
        ),
        (
            "backlog",
            explain(&client, &q::BACKLOG, &[&now, &cap]).await,
        ),
        (
            "newest_key",
            explain(&client, &q::NEWEST_KEY, &[&source]).await,
        ),
        (
            "oldest_key",
            explain(&client, &shared::sweep::sql::OLDEST_KEY, &[&source]).await,
        ),
        (
            "past_retention",
            explain(
                &client,
                &q::PAST_RETENTION,
                &[&source, &completed_cutoff, &dead_cutoff, &cap],
            )
            .await,
        ),
        (
            "dead_letters",
            explain(&client, &q::DEAD_LETTERS, &[&source, &since, &now, &cap]).await,
        ),
        (
            "ties_since",
            explain(&client, &q::TIES_SINCE, &[&since, &now, &cap]).await,
        ),
        (
            "idle_in_transaction",
            explain(&client, &q::IDLE_IN_TRANSACTION, &[&threshold, &fifty]).await,
        ),
        ("lock_run", explain(&client, &q::LOCK_RUN, &[]).await),
        (
            "outbox_backlog",
            explain(&client, &q::OUTBOX_BACKLOG, &[&cap]).await,
        ),
        (
            "outbox_dead",
            explain(&client, &q::OUTBOX_DEAD, &[&source, &since, &now, &cap]).await,
        ),
    ];
    for (name, plan) in &plans {
        let text = plan.join("\n");
        eprintln!("{name}:\n{text}\n");
        assert!(
            !text.contains("Seq Scan on webhook_event"),
            "{name} reads the whole ledger:\n{text}"
        );
        assert!(
            !text.contains("Seq Scan on ordering_tie"),
            "{name} reads every tie:\n{text}"
        );
        assert!(
            !text.contains("Seq Scan on outbox"),
            "{name} reads the whole outbox:\n{text}"
        );
    }
    // Expired leases come from their own small index, not from the whole due backlog.
    let stuck_plan = plans[0].1.join("\n");
    assert!(
        stuck_plan.contains("webhook_event_processing_idx"),
        "{stuck_plan}"
    );
    // Stuck claims come from the claims' own index (V11), not from one that also holds every
    // dead letter, failure and lease (at 10M rows that walk took 10 ms: dev/bench/SWEEP.md).
    for (name, plan) in &plans[..2] {
        let text = plan.join("\n");
        assert!(
            text.contains("webhook_event_stuck_claim_idx")
                && !text.contains("webhook_event_incomplete_idx"),
            "{name}: stuck claims not from webhook_event_stuck_claim_idx:\n{text}"
        );
    }
    // Each webhook_event query names an index of webhook_event.
    for (name, plan) in &plans {
        if ["idle_in_transaction", "lock_run", "ties_since"].contains(name) {
            continue;
        }
        if name.starts_with("outbox_") {
            let index = if *name == "outbox_backlog" {
                "outbox_due_idx"
            } else {
                "outbox_dead_idx"
            };
            assert!(
                plan.iter().any(|line| line.contains(index)),
                "{name}: not from {index}:\n{}",
                plan.join("\n")
            );
            continue;
        }
        assert!(
            plan.iter()
                .any(|line| line.contains("using webhook_event_")),
            "{name}: no index of webhook_event in\n{}",
            plan.join("\n")
        );
    }

    // The whole audit on the million rows, timed (reported, and bounded generously).
    let conn = app.receiver().pool.get().await.unwrap();
    let started = Instant::now();
    let report = shared::audit::run(
        &conn,
        &sources_with_intervals(),
        &AuditSettings::default(),
        now,
    )
    .await
    .unwrap();
    let took = started.elapsed();
    eprintln!(
        "audit of 1,000,000 rows took {took:?} (report says {} ms)",
        report.duration_ms
    );
    // 1,000,000 / 9 per source, one in 250 dead; the unfinished rows are the newest 3,000
    // (2.7 s apart) plus one old claim in 100,000.
    let deferred = &report.sources["stripe-deferred"];
    assert!(
        deferred.dead_letters > 0 && deferred.past_retention > 0,
        "{deferred:?}"
    );
    assert!(report.sources["legacy"].past_retention > 0);
    assert!(report.sources.values().map(|s| s.stuck_claims).sum::<u64>() > 0);
    assert!(took < Duration::from_secs(20), "the audit took {took:?}");
}

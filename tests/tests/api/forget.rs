//! Erasure that keeps deduplication (issue 28, item 4): `shared::forget` erases the payload,
//! the stored response, the error, the history's values and the outbox payloads of one event,
//! or of every finished event of a data subject, found through the subject hash the claim
//! stored (an index lookup, not a scan), in bounded batches; the key and digests stay, so a
//! redelivery afterwards is still a duplicate and nothing runs twice. Unfinished events keep
//! their payload and are reported. The same erasure through the console (confirmation, then
//! POST) and the replay function's `forget` input.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
use hookledger_tests::PAYLOAD_MARKER as MARK;
use serde_json::{json, Value};
use shared::doorbell::Doorbell;
use shared::effect::{Effect, Event, HandlerError};
use shared::forget::{Erasure, ForgetReport, Target, ERASED_RESPONSE, ERASED_TEXT};
use shared::handler::Handler;
use shared::ledger::Tx;
use shared::Outcome;

use crate::helpers::*;

/// The subject key of the test's sources (at least 16 bytes).
const SUBJECT_KEY: &str = "forget-test-subject-key-0123456789";

/// Answers `order.paid` with a receipt quoting the payload's e-mail (a handler's answer may
/// quote the payload: what erasure must not leave behind), and counts its runs.
#[derive(Default)]
struct Paid(AtomicUsize);

#[async_trait::async_trait]
impl Handler for Paid {
    async fn handle(&self, _: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let document: Value = event.json()?;
        Ok(Effect::ok(json!({
            "paid": true,
            "receipt_to": document["data"]["customer"]["email"],
        })))
    }
}

/// Refuses `order.refused` fatally (kept dead inline). Its reason quotes nothing of the
/// payload: error chains are logged, and no log line may carry the marker.
struct Refused;

#[async_trait::async_trait]
impl Handler for Refused {
    async fn handle(&self, _: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
        Err(HandlerError::fatal("the bank refused the refund"))
    }
}

/// A Standard Webhooks source `name` in `mode` whose events name their data subject at
/// `/data/customer/id`, forwarding `order.*` to `mirror_url`.
fn shop_source(name: &str, mode: &str, mirror_url: &str) -> Value {
    let mirror = forward_target("mirror", mirror_url, 5_000, json!(["order.*"]));
    let mut source = standard_source(name, mode, json!([mirror]));
    source["subject"] = json!({"pointers": ["/data/customer/id"], "key": SUBJECT_KEY});
    source
}

/// An order event of `kind` by `customer`, the marker in the customer's e-mail.
fn order(kind: &str, customer: &str) -> String {
    json!({
        "type": kind,
        "data": {"order": 7, "customer": {"id": customer,
                                          "email": format!("{MARK}+{customer}@example.com")}}
    })
    .to_string()
}

/// The app with source `shop` (inline) and its handlers, and the forward target it mirrors to.
async fn shop_app() -> (TestApp, Arc<Paid>, RecordingTarget) {
    let mirror = RecordingTarget::start(std::time::Duration::ZERO).await;
    let url = format!("{}/mirror", mirror.base_url);
    let (mut app, _) = spawn_app_with_sources(json!([shop_source("shop", "inline", &url)])).await;
    let paid = Arc::new(Paid::default());
    let handlers = &mut app.state.receiver.handlers;
    handlers.register("shop", "order.paid", paid.clone() as Arc<dyn Handler>);
    handlers.register("shop", "order.refused", Refused);
    (app, paid, mirror)
}

/// `source`'s keyed hash of `identifier`, as `hookledger forget --subject` computes it.
fn hash(app: &TestApp, source: &str, identifier: &str) -> [u8; 32] {
    app.settings
        .sources
        .get(source)
        .and_then(|config| config.subject.as_ref())
        .expect("the source names subjects")
        .hash(identifier)
}

/// Everything of event `id`'s row an erasure must clear, as text: payload, response, history,
/// last error.
async fn row_text(app: &TestApp, id: &str) -> String {
    app.texts(&format!(
        "SELECT convert_from(coalesce(payload, ''), 'UTF8') || ' ' || \
                coalesce(response_body::text, '') || ' ' || coalesce(history::text, '') || \
                ' ' || coalesce(last_error, '')
         FROM webhook_event WHERE event_id = '{id}'"
    ))
    .await
    .pop()
    .expect("the row stays")
}

/// The same for the outbox messages of event `id`: payload, last error, history.
async fn outbox_text(app: &TestApp, id: &str) -> String {
    app.texts(&format!(
        "SELECT coalesce(string_agg(convert_from(payload, 'UTF8') || ' ' || \
                coalesce(last_error, '') || ' ' || coalesce(history::text, ''), ' | '), '')
         FROM outbox WHERE event_id = '{id}'"
    ))
    .await
    .pop()
    .unwrap_or_default()
}

async fn forget(app: &TestApp, target: &Target, batch_size: i64) -> ForgetReport {
    let conn = app.receiver().pool.get().await.unwrap();
    let erasure = Erasure::new("ops: ticket PRIV-42", Some("erasure request")).unwrap();
    shared::forget::forget(&conn, target, &erasure, batch_size, 100)
        .await
        .unwrap()
}

#[tokio::test]
async fn erasure_by_subject_empties_every_finished_event_of_the_customer_and_a_redelivery_is_still_a_duplicate(
) {
    let (app, paid, mirror) = shop_app().await;
    let a1 = standard("msg_a1", &order("order.paid", "cus_A"), NOW);
    let a4 = standard("msg_a4", &order("order.shipped", "cus_A"), NOW);
    let deliveries = [
        ("msg_a1", a1.clone(), Outcome::Processed),
        (
            "msg_a2",
            standard("msg_a2", &order("order.paid", "cus_A"), NOW),
            Outcome::Processed,
        ),
        (
            "msg_a3",
            standard("msg_a3", &order("order.refused", "cus_A"), NOW),
            Outcome::Dead,
        ),
        ("msg_a4", a4.clone(), Outcome::Ignored),
        (
            "msg_b1",
            standard("msg_b1", &order("order.paid", "cus_B"), NOW),
            Outcome::Processed,
        ),
    ];
    for (id, delivery, outcome) in &deliveries {
        assert_eq!(
            app.receive("shop", delivery).await.outcome,
            *outcome,
            "{id}"
        );
    }
    // The worker dispatches the mirror's copies: delivered.
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    assert_eq!(mirror.seen().len(), 4, "{:?}", mirror.seen());
    // What earlier paths can leave quoting the payload: a dead message with the target's
    // answer, a re-run's earlier answer in the history, a handler's error. (Written here:
    // a real one would also be logged, and no log line of the suite may hold the marker.)
    let owner = app.db.connect().await.unwrap();
    owner
        .batch_execute(&format!(
            "UPDATE outbox SET status = 'dead', delivered_at = NULL, dead_at = now(),
                    last_error = 'HTTP 400: unknown customer {MARK}'
             WHERE event_id = 'msg_a2';
             UPDATE webhook_event
             SET history = jsonb_build_array(jsonb_build_object(
                     'action', 'rerun_ignored', 'at', now(), 'status', 'completed',
                     'response', jsonb_build_object('receipt_to', '{MARK}'),
                     'completed_at', now(), 'claimed_at', now()))
             WHERE event_id = 'msg_a2';
             UPDATE webhook_event SET last_error = 'refused for {MARK}'
             WHERE event_id = 'msg_a3';"
        ))
        .await
        .unwrap();
    // A later event of the customer whose copy for the mirror is not sent yet: unfinished.
    let a5 = standard("msg_a5", &order("order.paid", "cus_A"), NOW);
    assert_eq!(app.receive("shop", &a5).await.outcome, Outcome::Processed);
    let before_b1 = row_text(&app, "msg_b1").await;
    let outbox_b1 = outbox_text(&app, "msg_b1").await;
    assert!(before_b1.contains(MARK) && outbox_b1.contains(MARK));

    // One call, batches of 2: the four finished events of cus_A, 2 + 2 + an empty one.
    let target = Target::Subject {
        source: "shop".into(),
        hash: hash(&app, "shop", "cus_A"),
    };
    let report = forget(&app, &target, 2).await;
    assert_eq!(
        report,
        ForgetReport {
            source: "shop".into(),
            target: "subject".into(),
            dry_run: false,
            events: 5,
            erased: 4,
            // a1, a2 (its dead one included) and a4's copies; a3 died before queueing any.
            outbox_messages: 3,
            unfinished_count: 1,
            unfinished: vec!["msg_a5".into()],
            batches: 3,
            done: true,
        }
    );

    for id in ["msg_a1", "msg_a2", "msg_a3", "msg_a4"] {
        let text = row_text(&app, id).await;
        assert!(!text.contains(MARK), "{id}: {text}");
        let messages = outbox_text(&app, id).await;
        assert!(!messages.contains(MARK), "{id}: {messages}");
    }
    let client = app.db.connect().await.unwrap();
    let rows = client
        .query(
            "SELECT event_id, payload IS NULL, response_status, response_body::text,
                    last_error, erased_at IS NOT NULL, status::text,
                    octet_length(payload_digest), coalesce(history::text, 'null')
             FROM webhook_event WHERE source = 'shop' ORDER BY event_id",
            &[],
        )
        .await
        .unwrap();
    let by_id = |id: &str| rows.iter().find(|r| r.get::<_, String>(0) == id).unwrap();
    for id in ["msg_a1", "msg_a2"] {
        let row = by_id(id);
        assert!(row.get::<_, bool>(1), "{id}: payload gone");
        assert_eq!(
            row.get::<_, Option<i16>>(2),
            Some(200),
            "{id}: status stays"
        );
        let body: Value = serde_json::from_str(&row.get::<_, String>(3)).unwrap();
        assert_eq!(
            body,
            serde_json::from_str::<Value>(ERASED_RESPONSE).unwrap()
        );
        assert_eq!(row.get::<_, String>(6), "completed");
        assert_eq!(row.get::<_, i32>(7), 32, "the digest stays");
    }
    // The dead letter keeps its fixed answer; its error is replaced.
    let dead = by_id("msg_a3");
    assert_eq!(dead.get::<_, String>(6), "dead");
    assert_eq!(
        dead.get::<_, Option<String>>(4).as_deref(),
        Some(ERASED_TEXT)
    );
    assert_eq!(
        serde_json::from_str::<Value>(&dead.get::<_, String>(3)).unwrap(),
        shared::apply::fatal_body()
    );
    // The ignored event keeps its recorded no-op (it holds only the type).
    assert_eq!(
        serde_json::from_str::<Value>(&by_id("msg_a4").get::<_, String>(3)).unwrap(),
        json!({"status": "ignored", "event_type": "order.shipped"})
    );
    // History: the earlier answer's value is gone, the entry stays; then the erasure record.
    let history: Value = serde_json::from_str(&by_id("msg_a2").get::<_, String>(8)).unwrap();
    assert_eq!(history[0]["action"], "rerun_ignored");
    assert_eq!(history[0]["response"], ERASED_TEXT);
    let record = &history[1];
    assert_eq!(record["action"], "forget");
    assert_eq!(record["by"], "ops: ticket PRIV-42");
    assert_eq!(record["reason"], "erasure request");
    assert_eq!(
        record["erased"],
        json!(["payload", "response", "last_error", "history", "outbox"])
    );
    assert!(record["at"].is_string(), "{record}");
    // The erased messages: empty payloads, no error; the dead one still dead, keys unchanged.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM outbox WHERE event_id IN ('msg_a1', 'msg_a2', 'msg_a4')
             AND payload = ''::bytea AND last_error IS NULL"
        )
        .await,
        3
    );
    // The other customer, and the unfinished event, untouched.
    assert_eq!(row_text(&app, "msg_b1").await, before_b1);
    assert_eq!(outbox_text(&app, "msg_b1").await, outbox_b1);
    let a5_row = by_id("msg_a5");
    assert!(!a5_row.get::<_, bool>(1) && !a5_row.get::<_, bool>(5));
    assert!(outbox_text(&app, "msg_a5").await.contains(MARK));

    // A redelivery of an erased event is still a duplicate: the same status, the erased
    // answer, nothing run again, nothing queued again.
    let runs = paid.0.load(Ordering::SeqCst);
    let messages = app.count("SELECT count(*) FROM outbox").await;
    let retry = app.receive("shop", &a1).await;
    assert_eq!(
        (retry.status, retry.replayed),
        (200, true),
        "{}",
        retry.body
    );
    assert_eq!(
        serde_json::from_str::<Value>(&retry.body).unwrap(),
        serde_json::from_str::<Value>(ERASED_RESPONSE).unwrap()
    );
    let retry = app.receive("shop", &a4).await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    assert!(retry.body.contains("ignored"), "{}", retry.body);
    // The same id with another body is still a conflict: the identity stays.
    let reused = standard("msg_a1", &order("order.paid", "cus_C"), NOW);
    assert_eq!(app.receive("shop", &reused).await.status, 409);
    assert_eq!(paid.0.load(Ordering::SeqCst), runs);
    assert_eq!(app.count("SELECT count(*) FROM outbox").await, messages);

    // Again: nothing new, nothing appended, one (empty) batch.
    let histories = app
        .texts("SELECT coalesce(history::text, '') FROM webhook_event ORDER BY event_id")
        .await;
    let again = forget(&app, &target, 2).await;
    assert_eq!(
        (
            again.erased,
            again.outbox_messages,
            again.batches,
            again.done
        ),
        (0, 0, 1, true)
    );
    assert_eq!(
        app.texts("SELECT coalesce(history::text, '') FROM webhook_event ORDER BY event_id")
            .await,
        histories
    );
    // Once the unfinished one's copy is sent, forgetting again takes it.
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    let last = forget(&app, &target, 2).await;
    assert_eq!(
        (last.erased, last.outbox_messages, last.unfinished_count),
        (1, 1, 0)
    );
    assert!(!row_text(&app, "msg_a5").await.contains(MARK));
    // cus_B is still whole.
    assert_eq!(row_text(&app, "msg_b1").await, before_b1);
}

#[tokio::test]
async fn erasure_by_event_id_takes_that_event_only_and_a_second_run_erases_nothing() {
    let (app, _, _mirror) = shop_app().await;
    for id in ["msg_e1", "msg_e2"] {
        let delivery = standard(id, &order("order.paid", "cus_E"), NOW);
        assert_eq!(app.receive("shop", &delivery).await.status, 200);
    }
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    // msg_e1's copy went dead at its target: erased, it must never be sent again (empty).
    app.db
        .connect()
        .await
        .unwrap()
        .batch_execute(
            "UPDATE outbox SET status = 'dead', delivered_at = NULL, dead_at = now() \
             WHERE event_id = 'msg_e1'",
        )
        .await
        .unwrap();
    let target = Target::Event {
        source: "shop".into(),
        event_id: "msg_e1".into(),
    };
    let report = forget(&app, &target, 500).await;
    assert_eq!(
        (
            report.events,
            report.erased,
            report.outbox_messages,
            report.batches
        ),
        (1, 1, 1, 1)
    );
    assert!(!row_text(&app, "msg_e1").await.contains(MARK));
    assert!(row_text(&app, "msg_e2").await.contains(MARK));
    let conn = app.receiver().pool.get().await.unwrap();
    let redriven =
        shared::redrive::outbox_sql::redrive_ids(&conn, "shop", &["msg_e1".to_owned()], 100)
            .await
            .unwrap();
    assert!(
        redriven.is_empty(),
        "an erased message was re-driven: {redriven:?}"
    );
    drop(conn);
    // inspect says when it was erased.
    let detail = shared::redrive::inspect(&app.receiver().pool, "shop", "msg_e1")
        .await
        .unwrap()
        .unwrap();
    assert!(detail.erased_at.is_some() && detail.payload_bytes.is_none());
    let history_len = app
        .count(
            "SELECT jsonb_array_length(history)::int8 FROM webhook_event WHERE event_id = 'msg_e1'",
        )
        .await;
    assert_eq!(history_len, 1);
    let again = forget(&app, &target, 500).await;
    assert_eq!((again.events, again.erased, again.done), (1, 0, true));
    assert_eq!(
        app.count(
            "SELECT jsonb_array_length(history)::int8 FROM webhook_event WHERE event_id = 'msg_e1'"
        )
        .await,
        1
    );
    // An event not in the ledger: nothing, and said so.
    let missing = forget(
        &app,
        &Target::Event {
            source: "shop".into(),
            event_id: "msg_nowhere".into(),
        },
        500,
    )
    .await;
    assert_eq!((missing.events, missing.erased, missing.done), (0, 0, true));
    // A dry run counts and writes nothing.
    let conn = app.receiver().pool.get().await.unwrap();
    let e2 = Target::Event {
        source: "shop".into(),
        event_id: "msg_e2".into(),
    };
    let preview = shared::forget::preview(&conn, &e2).await.unwrap();
    assert_eq!(
        (preview.dry_run, preview.erased, preview.outbox_messages),
        (true, 1, 1)
    );
    assert!(row_text(&app, "msg_e2").await.contains(MARK));
}

/// The plan of `sql` (a statement with `types`) with `args` (SQL literals), run with EXPLAIN.
async fn plan(client: &tokio_postgres::Client, sql: &shared::db::Sql, args: &str) -> String {
    let types: Vec<String> = sql.types.iter().map(|t| t.name().to_owned()).collect();
    client
        .batch_execute(&format!(
            "DEALLOCATE ALL; PREPARE planned ({}) AS {}",
            types.join(", "),
            sql.text
        ))
        .await
        .unwrap();
    let rows = client
        .simple_query(&format!("EXPLAIN EXECUTE planned ({args})"))
        .await
        .unwrap();
    rows.iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn erasure_by_subject_is_an_index_lookup_not_a_scan() {
    let (app, _, _mirror) = shop_app().await;
    let client = app.db.connect().await.unwrap();
    // A ledger of 20,000 events of 4,000 subjects, and events of sources without subjects,
    // each with an outbox message.
    client
        .batch_execute(
            "INSERT INTO webhook_event
                 (source, event_id, event_type, payload_digest, payload, status,
                  response_status, response_body, completed_at, subject_hash)
             SELECT CASE WHEN i % 5 = 0 THEN 'other' ELSE 'shop' END, 'evt_' || i, 'order.paid',
                    sha256(i::text::bytea), convert_to('{\"i\": ' || i || '}', 'UTF8'),
                    'completed', 200, '{\"ok\": true}', now(),
                    CASE WHEN i % 5 <> 0 THEN sha256((i % 4000)::text::bytea) END
             FROM generate_series(1, 20000) AS i;
             INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, delivered_at)
             SELECT source, event_id, 1, event_type, 'mirror', payload, 'application/json',
                    'delivered', now()
             FROM webhook_event;
             ANALYZE webhook_event; ANALYZE outbox;",
        )
        .await
        .unwrap();
    let subject = "'shop', sha256('7'::bytea)";
    for (sql, args) in [
        (
            &shared::forget::sql::ERASE_BY_SUBJECT,
            format!("{subject}, 500, 'ops', NULL"),
        ),
        (
            &shared::forget::sql::TALLY_BY_SUBJECT,
            format!("{subject}, 100"),
        ),
    ] {
        let plan = plan(&client, sql, &args).await;
        assert!(
            plan.contains("Index Scan") && plan.contains("webhook_event_subject_idx"),
            "{plan}"
        );
        assert!(!plan.contains("Seq Scan on webhook_event"), "{plan}");
        // The events' messages by their key (outbox_pkey), never a scan of the outbox.
        assert!(!plan.contains("Seq Scan on outbox"), "{plan}");
    }
    let plan = plan(
        &client,
        &shared::forget::sql::ERASE_BY_EVENT,
        "'shop', 'evt_7', 500, 'ops', NULL",
    )
    .await;
    assert!(plan.contains("webhook_event_pkey"), "{plan}");
    assert!(!plan.contains("Seq Scan on webhook_event"), "{plan}");
    // And the statement does what the plan says: the 5 events of subject 7 (7, 4007, ...,
    // 16007), in one batch.
    let report = forget(
        &app,
        &Target::Subject {
            source: "shop".into(),
            hash: sha256(b"7"),
        },
        500,
    )
    .await;
    assert_eq!(
        (
            report.events,
            report.erased,
            report.outbox_messages,
            report.batches
        ),
        (5, 5, 5, 1)
    );
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

#[tokio::test]
async fn the_console_forgets_after_its_confirmation_and_records_who_asked() {
    let (app, paid, _mirror) = shop_app().await;
    for (id, customer) in [
        ("msg_c1", "cus_K"),
        ("msg_c2", "cus_K"),
        ("msg_c3", "cus_L"),
    ] {
        let delivery = standard(id, &order("order.paid", customer), NOW);
        assert_eq!(app.receive("shop", &delivery).await.status, 200);
    }
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    let token = "forget-console-token-0123456789abcdef";
    let console = |read_only| {
        Console::new(
            app.settings.clone(),
            app.receiver().pool.clone(),
            handlers_for(&app.settings.sources),
            Doorbell::off(),
            ConsoleConfig {
                auth: Auth::Token(AccessToken::new(token).unwrap()),
                read_only,
            },
        )
    };
    let mut bases = Vec::new();
    for read_only in [false, true] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        bases.push(format!("http://{}", listener.local_addr().unwrap()));
        let console = console(read_only);
        tokio::spawn(async move { console.serve(listener, std::future::pending()).await });
    }
    let (base, read_only_base) = (&bases[0], &bases[1]);
    let http = reqwest::Client::new();
    let get = |url: String| {
        let http = http.clone();
        async move {
            let response = http.get(url).bearer_auth(token).send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };

    // The event page offers the form (and the subject's scope: the source names subjects).
    let (status, page) = get(format!("{base}/events/shop/msg_c1")).await;
    assert_eq!(status, 200);
    assert!(page.contains("action=\"/forget/confirm\""), "{page}");
    assert!(page.contains("value=\"subject\""), "{page}");
    let (_, page) = get(format!("{read_only_base}/events/shop/msg_c1")).await;
    assert!(!page.contains("/forget"), "read-only: {page}");
    let (status, _) = get(format!(
        "{read_only_base}/forget/confirm?source=shop&event_id=msg_c1&by=x"
    ))
    .await;
    assert_eq!(status, 403);

    // The confirmation counts the subject's events and writes nothing.
    let (status, page) = get(format!(
        "{base}/forget/confirm?source=shop&event_id=msg_c1&scope=subject&by=Ada&reason=art.+17"
    ))
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<strong id=\"erasable\">2</strong>"),
        "{page}"
    );
    assert!(row_text(&app, "msg_c2").await.contains(MARK));
    let csrf = hookledger_console::auth::csrf_token(&AccessToken::new(token).unwrap());
    let post = |fields: Vec<(&'static str, String)>| {
        let http = http.clone();
        let url = format!("{base}/forget");
        async move {
            let response = http
                .post(url)
                .bearer_auth(token)
                .form(&fields)
                .send()
                .await
                .unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };
    let fields = |confirmed: &str, csrf: &str| {
        vec![
            ("source", "shop".to_owned()),
            ("event_id", "msg_c1".to_owned()),
            ("scope", "subject".to_owned()),
            ("by", "Ada".to_owned()),
            ("reason", "art. 17".to_owned()),
            ("confirmed", confirmed.to_owned()),
            ("csrf", csrf.to_owned()),
        ]
    };
    // Without the CSRF token, or with a count that changed: refused, nothing erased.
    let (status, _) = post(fields("2", "wrong")).await;
    assert_eq!(status, 403);
    let (status, page) = post(fields("3", &csrf)).await;
    assert_eq!(status, 409, "{page}");
    assert!(row_text(&app, "msg_c1").await.contains(MARK));

    let (status, page) = post(fields("2", &csrf)).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<strong id=\"erased\">2</strong>"), "{page}");
    for id in ["msg_c1", "msg_c2"] {
        assert!(!row_text(&app, id).await.contains(MARK), "{id}");
        assert!(!outbox_text(&app, id).await.contains(MARK), "{id}");
    }
    assert!(row_text(&app, "msg_c3").await.contains(MARK));
    let by = app
        .texts("SELECT history -> -1 ->> 'by' FROM webhook_event WHERE event_id = 'msg_c2'")
        .await;
    assert_eq!(by, ["Ada (console)"]);
    // The event page after: no payload, and the retry is a duplicate.
    let (_, page) = get(format!("{base}/events/shop/msg_c1")).await;
    assert!(!page.contains(MARK), "{page}");
    let runs = paid.0.load(Ordering::SeqCst);
    let retry = app
        .receive(
            "shop",
            &standard("msg_c1", &order("order.paid", "cus_K"), NOW),
        )
        .await;
    assert_eq!((retry.status, retry.replayed), (200, true));
    assert_eq!(paid.0.load(Ordering::SeqCst), runs);
}

#[tokio::test]
async fn the_replay_function_forgets_by_subject_and_refuses_a_source_without_one() {
    let (app, _, _mirror) = shop_app().await;
    for id in ["msg_r1", "msg_r2"] {
        let delivery = standard(id, &order("order.paid", "cus_R"), NOW);
        assert_eq!(app.receive("shop", &delivery).await.status, 200);
    }
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    let state = ::replay::handler::AppState::new(
        &app.settings,
        app.receiver().pool.clone(),
        handlers_for(&app.settings.sources),
    )
    .unwrap();
    let input = |dry_run: bool| {
        json!({"forget": {"source": "shop", "subject": "cus_R", "by": "ops",
                          "reason": "ticket 9", "dry_run": dry_run}})
    };
    let dry = ::replay::handler::handle(&state, input(true), plenty)
        .await
        .unwrap();
    assert_eq!(
        (dry["dry_run"].clone(), dry["erased"].clone()),
        (json!(true), json!(2))
    );
    assert!(row_text(&app, "msg_r1").await.contains(MARK));
    let report = ::replay::handler::handle(&state, input(false), plenty)
        .await
        .unwrap();
    assert_eq!(
        report,
        json!({"source": "shop", "target": "subject", "dry_run": false, "events": 2,
               "erased": 2, "outbox_messages": 2, "unfinished_count": 0, "unfinished": [],
               "batches": 1, "done": true})
    );
    for id in ["msg_r1", "msg_r2"] {
        assert!(!row_text(&app, id).await.contains(MARK), "{id}");
    }
    assert!(!report.to_string().contains("cus_R"));
    // A source without `subject`: a clear refusal.
    let error = ::replay::handler::handle(
        &state,
        json!({"forget": {"source": "stripe", "subject": "cus_R", "by": "ops"}}),
        plenty,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("no \"subject\" configured"), "{error}");
    // The example input of events/replay/ parses.
    let example = hookledger_tests::EventFile::load("replay/forget-event.json")
        .unwrap()
        .json;
    ::replay::handler::Input::parse(example).unwrap();
}

#[tokio::test]
async fn the_replay_role_can_forget() {
    let (app, _, _mirror) = shop_app().await;
    let delivery = standard("msg_role", &order("order.paid", "cus_Z"), NOW);
    assert_eq!(app.receive("shop", &delivery).await.status, 200);
    worker_for(&app).worker.drain(soon, plenty).await.unwrap();
    // The console with re-drive (and forget) on logs in as the replay function's role.
    let (_, settings) = crate::roles::login_as(&app.db, "hookledger_replay", 2).await;
    let pool = shared::db::pool(&settings).unwrap();
    let report = shared::forget::run_target(
        &pool,
        &Target::Subject {
            source: "shop".into(),
            hash: hash(&app, "shop", "cus_Z"),
        },
        &Erasure::new("ops", None).unwrap(),
        false,
    )
    .await
    .unwrap();
    assert_eq!((report.erased, report.outbox_messages), (1, 1));
    assert!(!row_text(&app, "msg_role").await.contains(MARK));
}

//! The functions' database roles (migration V14): exactly the privileges each function needs,
//! checked table by table, refused where they must be (SQLSTATE 42501), and each function's
//! real operations run through a pool that logs in as a member of its role.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use hookledger_tests::fake_providers::{Answer, FakeServer};
use hookledger_tests::TestDb;
use shared::config::{AuditSettings, DatabaseSettings, SweepSettings};
use shared::doorbell::Doorbell;
use shared::redrive::{RedriveSpec, Which};

use crate::helpers::*;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh LOGIN role that is a member of `group` (as a DBA would create it: the book's
/// `docs/reference/database-roles.md`), and settings for `db` connecting as it. Roles are
/// cluster-wide: the name is unique per test process and call.
pub async fn login_as(db: &TestDb, group: &str, pool_size: usize) -> (String, DatabaseSettings) {
    let name = format!(
        "{}_login_{}_{}",
        group.trim_start_matches("hookledger_"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD 'unused'; GRANT {group} TO {name};"
        ))
        .await
        .unwrap();
    let mut settings = db.settings(pool_size);
    settings.url = user_url(&db.url, &name).into();
    (name, settings)
}

/// `url` with its user replaced by `user` (the throwaway cluster trusts local connections).
pub fn user_url(url: &str, user: &str) -> String {
    let mut url = url::Url::parse(url).unwrap();
    url.set_username(user).unwrap();
    url.set_password(None).unwrap();
    url.to_string()
}

/// The privileges a role holds on a table, directly or through its groups: a subset of
/// `SIUDT` (SELECT, INSERT, UPDATE, DELETE, TRUNCATE), `u` for UPDATE on some columns only,
/// `R`/`G` for REFERENCES/TRIGGER.
const PRIVILEGES: &str = "\
SELECT c.relname,
       concat_ws('',
         CASE WHEN has_table_privilege($1, c.oid, 'SELECT') THEN 'S' END,
         CASE WHEN has_table_privilege($1, c.oid, 'INSERT') THEN 'I' END,
         CASE WHEN has_table_privilege($1, c.oid, 'UPDATE') THEN 'U'
              WHEN has_any_column_privilege($1, c.oid, 'UPDATE') THEN 'u' END,
         CASE WHEN has_table_privilege($1, c.oid, 'DELETE') THEN 'D' END,
         CASE WHEN has_table_privilege($1, c.oid, 'TRUNCATE') THEN 'T' END,
         CASE WHEN has_table_privilege($1, c.oid, 'REFERENCES') THEN 'R' END,
         CASE WHEN has_table_privilege($1, c.oid, 'TRIGGER') THEN 'G' END)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
ORDER BY c.relname";

#[tokio::test]
async fn each_role_has_exactly_its_privileges_on_every_table() {
    // The ledger's tables, the history tables, and the examples' tables (created by the
    // handlers' sets, granted after each set: shared::db::grants).
    let app = spawn_app().await;
    let client = app.db.connect().await.unwrap();
    // (table, [receiver, worker, sweeper, auditor, replay, handlers]). A new table anywhere
    // (a later ledger migration) fails this test until it is listed here with its grants.
    let handlers_table = ["SIUD", "SIUD", "", "", "SIUD", "SIUD"];
    let expected: BTreeMap<&str, [&str; 6]> = BTreeMap::from([
        ("webhook_event", ["SIU", "SU", "SuD", "S", "SIU", ""]),
        ("outbox", ["SI", "SIU", "SuD", "S", "SIU", ""]),
        ("audit_run", ["", "", "", "SU", "S", ""]),
        ("rejected_delivery", ["SIU", "", "SD", "S", "S", ""]),
        ("payload_sweep", ["", "", "SIU", "S", "S", ""]),
        ("ordering_tie", ["SIU", "SIU", "", "S", "SIU", "SIU"]),
        ("entity_version", ["SIU", "SIU", "", "", "SIU", "SIU"]),
        ("refinery_schema_history", ["", "", "", "", "", ""]),
        (
            "hookledger_handlers_schema_history",
            ["", "", "", "", "", ""],
        ),
        (
            "hookledger_examples_schema_history",
            ["", "", "", "", "", ""],
        ),
        ("orders", handlers_table),
        ("refunds", handlers_table),
        ("subscriptions", handlers_table),
    ]);
    let roles = migrate::schema::GROUP_ROLES;
    let mut actual: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for role in roles {
        for row in client.query(PRIVILEGES, &[&role]).await.unwrap() {
            actual
                .entry(row.get(0))
                .or_default()
                .push(row.get::<_, String>(1));
        }
    }
    let expected: BTreeMap<String, Vec<String>> = expected
        .into_iter()
        .map(|(t, p)| (t.to_owned(), p.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(
        actual, expected,
        "privileges per table, in the order {roles:?}"
    );

    // No role logs in, and only the ones that run handlers are in hookledger_handlers.
    let rows = client
        .query(
            "SELECT r.rolname, r.rolcanlogin, r.rolsuper OR r.rolcreaterole OR r.rolcreatedb,
                    pg_has_role(r.rolname, 'hookledger_handlers', 'MEMBER'),
                    pg_has_role(r.rolname, 'pg_read_all_stats', 'MEMBER')
             FROM pg_roles r WHERE r.rolname LIKE 'hookledger\\_%' ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let roles: Vec<(String, bool, bool, bool, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    let expect =
        |name: &str, handlers: bool, stats: bool| (name.to_owned(), false, false, handlers, stats);
    assert_eq!(
        roles,
        [
            expect("hookledger_auditor", false, true),
            expect("hookledger_handlers", true, false),
            expect("hookledger_receiver", true, false),
            expect("hookledger_replay", true, false),
            expect("hookledger_sweeper", false, false),
            expect("hookledger_worker", true, false),
        ]
    );
}

#[tokio::test]
async fn the_receiver_cannot_delete_and_the_sweeper_cannot_insert() {
    let app = spawn_app().await;
    let reply = app
        .receive(
            "stripe",
            &stripe_payment("evt_roles_1", "ord_roles_1", 100, NOW),
        )
        .await;
    assert_eq!(reply.status, 200);
    let (_, receiver) = login_as(&app.db, "hookledger_receiver", 1).await;
    let receiver = shared::db::connect(&receiver).await.unwrap();
    let error = receiver
        .execute("DELETE FROM webhook_event", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"), "{error:?}");
    let error = receiver
        .execute("DELETE FROM outbox", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"));
    let error = receiver
        .execute("TRUNCATE webhook_event", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"));

    let (_, sweeper) = login_as(&app.db, "hookledger_sweeper", 1).await;
    let sweeper = shared::db::connect(&sweeper).await.unwrap();
    let error = sweeper
        .execute(
            "INSERT INTO webhook_event (source, event_id, event_type, payload_digest)
             VALUES ('stripe', 'evt_forged', 'x', sha256('x'))",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"), "{error:?}");
    let error = sweeper
        .execute("UPDATE webhook_event SET status = 'dead'", &[])
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42501"));
    assert_eq!(app.ledger_rows().await, 1, "nothing was deleted or added");
}

/// Sources `roles-shop` (inline) and `roles-shop-deferred` (deferred), each forwarding every
/// `order.*` event to `server` (a built-in outbox target).
fn shop_sources(server: &FakeServer) -> serde_json::Value {
    let target = serde_json::json!([{
        "name": "service", "type": "forward", "url": format!("{}/service", server.base_url),
        "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "timeout_ms": 5000,
        "event_types": ["order.*"]}]);
    serde_json::json!([
        {"name": "roles-shop", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "inline", "tolerance_secs": 300, "targets": target},
        {"name": "roles-shop-deferred", "scheme": "standard-webhooks", "secrets": [ACME_SECRET],
         "mode": "deferred", "tolerance_secs": 300, "targets": target},
    ])
}

fn order(id: &str) -> Delivery {
    let body = serde_json::json!({"type": "order.created", "data": {"order": id}}).to_string();
    standard(id, &body, NOW)
}

/// A receiver (and its sources) whose pool logs in as a member of `group`, over a fresh
/// database; the returned app's `db.connect()` stays the owner's, for assertions.
async fn app_as(group: &str, server: &FakeServer) -> TestApp {
    let (app, json) = spawn_app_with_sources(shop_sources(server)).await;
    let (_, settings) = login_as(&app.db, group, 4).await;
    spawn_app_over_sources(app.db.clone(), settings, &json)
}

#[tokio::test]
async fn the_receiver_role_claims_inline_and_deferred_enqueues_and_answers_duplicates() {
    let server = FakeServer::start(|_| Answer::raw(200, "ok")).await.unwrap();
    let app = app_as("hookledger_receiver", &server).await;
    // Inline, with the example handler's business row (hookledger_handlers).
    let payment = stripe_payment("evt_roles_in", "ord_roles_in", 990, NOW);
    let first = app.receive("stripe", &payment).await;
    assert_eq!(first.status, 200, "{first:?}");
    let again = app.receive("stripe", &payment).await;
    assert_eq!(
        (again.status, again.body.clone()),
        (200, first.body.clone())
    );
    assert_eq!(app.order_rows().await, 1);
    // Deferred: accepted, then a duplicate.
    let accepted = app
        .receive(
            "stripe-deferred",
            &deferred(payment_intent_body("evt_roles_d", "o", 1)),
        )
        .await;
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let duplicate = app
        .receive(
            "stripe-deferred",
            &deferred(payment_intent_body("evt_roles_d", "o", 1)),
        )
        .await;
    assert_eq!(duplicate.status, 202);
    // A built-in target's message, committed with the claim.
    let reply = app.receive("roles-shop", &order("msg_roles_1")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE event_id = 'msg_roles_1'")
            .await,
        1
    );
    // A conflicting body under a known id is still judged (it reads the row).
    let conflict = app
        .receive(
            "stripe",
            &stripe_payment("evt_roles_in", "ord_roles_in", 1, NOW),
        )
        .await;
    assert_eq!(conflict.status, 409);
    // Refusals are counted under the receiver's login (rejected_delivery, V20).
    let mut forged = stripe_payment("evt_roles_f", "o", 1, NOW);
    forged.body = payment_intent_body("evt_roles_f", "o", 2);
    assert_eq!(app.receive("stripe", &forged).await.status, 401);
    assert_eq!(app.receive("nosuch", &forged).await.status, 404);
    assert_eq!(
        app.texts(
            "SELECT source || ' ' || reason || ' ' || count FROM rejected_delivery
             ORDER BY source, reason"
        )
        .await,
        [
            "(unknown) unknown_source 1",
            "stripe digest_mismatch 1",
            "stripe unauthorized 1"
        ]
    );
}

#[tokio::test]
async fn the_worker_role_drains_deferred_events_and_outbox_messages() {
    let server = FakeServer::start(|_| Answer::raw(200, "ok")).await.unwrap();
    let owner = app_as("hookledger_receiver", &server).await;
    let accepted = owner
        .receive(
            "stripe-deferred",
            &deferred(payment_intent_body("evt_roles_w", "ow", 5)),
        )
        .await;
    assert_eq!(accepted.status, 202);
    let queued = owner
        .receive("roles-shop-deferred", &order("msg_roles_w"))
        .await;
    assert_eq!(queued.status, 202);
    assert_eq!(
        owner
            .receive("roles-shop", &order("msg_roles_x"))
            .await
            .status,
        200
    );

    let (_, settings) = login_as(&owner.db, "hookledger_worker", 2).await;
    let app = spawn_app_over_sources(
        owner.db.clone(),
        settings,
        &serde_json::to_string(&{
            let mut all: Vec<serde_json::Value> =
                serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
            all.extend(shop_sources(&server).as_array().unwrap().clone());
            all
        })
        .unwrap(),
    );
    let worker = worker_for(&app);
    let at = SystemTime::now() + Duration::from_secs(1);
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(summary.completed, 2, "{summary:?}");
    assert_eq!(row(&app, "evt_roles_w").await.0, "completed");
    assert_eq!(app.order_rows().await, 1);
    // Both messages (the deferred event's, written by the worker, and the inline one's).
    let at = SystemTime::now() + Duration::from_secs(2);
    worker.worker.drain(move || at, plenty).await.unwrap();
    let delivered = app
        .count("SELECT count(*) FROM outbox WHERE status = 'delivered'")
        .await;
    assert_eq!(delivered, 2);
    assert_eq!(server.requests_with("POST").len(), 2);
}

#[tokio::test]
async fn the_sweeper_role_sweeps_expired_keys() {
    let app = spawn_app().await;
    for i in 0..3 {
        let reply = app
            .receive(
                "stripe",
                &stripe_payment(&format!("evt_sw_{i}"), &format!("o_sw_{i}"), 1, NOW),
            )
            .await;
        assert_eq!(reply.status, 200);
    }
    // A count of rejected deliveries, long past its retention by then.
    let owner = app.db.connect().await.unwrap();
    owner
        .batch_execute(
            "INSERT INTO rejected_delivery (source, reason, bucket, count, last_at)
             VALUES ('stripe', 'unauthorized', date_trunc('hour', now(), 'UTC'), 1,
                     date_trunc('hour', now(), 'UTC'))",
        )
        .await
        .unwrap();
    let (_, settings) = login_as(&app.db, "hookledger_sweeper", 1).await;
    let pool = shared::db::pool(&settings).unwrap();
    let conn = pool.get().await.unwrap();
    // Long after every retention.
    let later = SystemTime::now() + Duration::from_secs(400 * 86_400);
    let report = shared::sweep::run(
        &conn,
        &app.settings.sources,
        &SweepSettings::default(),
        later,
        plenty,
    )
    .await
    .unwrap();
    assert_eq!(report.deleted, 4, "{report:?}");
    assert_eq!(report.rejected_deleted, 1, "{report:?}");
    assert_eq!(app.ledger_rows().await, 0);
    assert_eq!(app.count("SELECT count(*) FROM rejected_delivery").await, 0);
    assert_eq!(app.order_rows().await, 3, "never the business rows");
}

#[tokio::test]
async fn the_auditor_role_audits_and_sees_another_roles_idle_transaction() {
    let app = spawn_app().await;
    // Another function's session (the receiver's login) left idle in a transaction.
    let (_, receiver) = login_as(&app.db, "hookledger_receiver", 1).await;
    let idle = shared::db::connect(&receiver).await.unwrap();
    idle.batch_execute("BEGIN; SELECT 1").await.unwrap();
    let pid: i32 = idle
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, settings) = login_as(&app.db, "hookledger_auditor", 1).await;
    let pool = shared::db::pool(&settings).unwrap();
    let conn = pool.get().await.unwrap();
    let audit = AuditSettings {
        stuck_after_secs: 300,
        idle_in_transaction_after_secs: 1,
    };
    let report = shared::audit::run(&conn, &app.settings.sources, &audit, SystemTime::now())
        .await
        .unwrap();
    assert!(
        report.idle_in_transaction.pids.contains(&pid),
        "{pid} not in {:?}",
        report.idle_in_transaction
    );
    // The read-only console's Rejected page reads as the auditor.
    shared::rejected::counts_since(&conn, SystemTime::UNIX_EPOCH)
        .await
        .unwrap();
    // It recorded its run (audit_run).
    assert_eq!(
        app.count("SELECT count(*) FROM audit_run WHERE last_run_at IS NOT NULL")
            .await,
        1
    );
    idle.batch_execute("COMMIT").await.unwrap();
}

#[tokio::test]
async fn the_replay_role_redrives_dead_letters_and_inspects() {
    let app = spawn_app().await;
    // A dead letter: a deferred event whose attempts are used up.
    let accepted = app
        .receive(
            "stripe-deferred",
            &deferred(payment_intent_body("evt_rp", "o_rp", 7)),
        )
        .await;
    assert_eq!(accepted.status, 202);
    let owner = app.db.connect().await.unwrap();
    owner
        .batch_execute(
            "UPDATE webhook_event SET status = 'dead', dead_at = now(), attempts = 5,
                    last_error = 'gave up' WHERE event_id = 'evt_rp'",
        )
        .await
        .unwrap();
    let (_, settings) = login_as(&app.db, "hookledger_replay", 2).await;
    let pool = shared::db::pool(&settings).unwrap();
    let detail = shared::redrive::inspect(&pool, "stripe-deferred", "evt_rp")
        .await
        .unwrap()
        .expect("the row");
    assert_eq!(detail.status.as_str(), "dead");
    assert_eq!(detail.outcome.as_str(), "dead");
    // The console with re-drive on reads the rejected deliveries as replay.
    shared::rejected::counts_since(&pool.get().await.unwrap(), SystemTime::UNIX_EPOCH)
        .await
        .unwrap();
    let selection = RedriveSpec {
        status: Which::Dead,
        event_ids: Some(vec!["evt_rp".to_owned()]),
        event_type: None,
        since: None,
        until: None,
        outbox: false,
    }
    .selection()
    .unwrap();
    let report = shared::redrive::run(
        &pool,
        &app.settings.sources,
        &handlers::examples::registry(&app.settings.sources),
        &Doorbell::off(),
        "stripe-deferred",
        &selection,
        false,
        plenty,
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.redriven, 1, "{report:?}");
    assert_eq!(row(&app, "evt_rp").await.0, "claimed");
}

#[tokio::test]
async fn handlers_tables_created_before_v14_are_granted_to_the_handlers_role() {
    // A deployment that ran V1..V13 and the examples' set before the roles existed.
    let db = TestDb::empty().await.unwrap();
    let mut client = db.connect().await.unwrap();
    let before: Vec<refinery::Migration> = shared::db::MigrationSet::ledger()
        .migrations()
        .iter()
        .filter(|m| m.version() <= 13)
        .cloned()
        .collect();
    refinery::Runner::new(&before)
        .run_async(&mut client)
        .await
        .unwrap();
    let examples = handlers::examples::migrations();
    for set in &examples {
        let mut runner = refinery::Runner::new(set.migrations());
        runner.set_migration_table_name(set.table());
        runner.run_async(&mut client).await.unwrap();
    }
    // Another application's table, owned by the same (master) user.
    client
        .batch_execute("CREATE TABLE other_app_accounts (id serial PRIMARY KEY, email text)")
        .await
        .unwrap();
    let applied = shared::db::migrate_with(&db.settings(1), &examples)
        .await
        .unwrap();
    let from_v14: Vec<String> = shared::db::MigrationSet::ledger()
        .migrations()
        .iter()
        .filter(|m| m.version() >= 14)
        .map(|m| m.to_string())
        .collect();
    assert_eq!(applied, from_v14);
    let privileges = |table: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT has_table_privilege('hookledger_handlers', $1, 'DELETE'),
                            has_table_privilege('hookledger_receiver', $1, 'INSERT'),
                            has_table_privilege('hookledger_sweeper', $1, 'SELECT')",
                    &[&table],
                )
                .await
                .unwrap()
        }
    };
    for table in ["orders", "refunds", "subscriptions"] {
        let row = privileges(table).await;
        assert_eq!(
            (
                row.get::<_, bool>(0),
                row.get::<_, bool>(1),
                row.get::<_, bool>(2)
            ),
            (true, true, false),
            "{table}"
        );
    }
    // The history tables are nobody's business but the owner's, nor is another application's
    // table (V14 granted it; V18 took it back).
    for table in ["hookledger_examples_schema_history", "other_app_accounts"] {
        let row = privileges(table).await;
        assert!(!row.get::<_, bool>(0) && !row.get::<_, bool>(1), "{table}");
    }
    assert!(!any_privilege(&client, "hookledger_receiver", "other_app_accounts_id_seq").await);
}

/// Whether `role` holds any privilege on the relation `name` (a table or a sequence).
async fn any_privilege(client: &tokio_postgres::Client, role: &str, name: &str) -> bool {
    client
        .query_one(
            "SELECT CASE WHEN c.relkind = 'S'
                         THEN has_sequence_privilege($1, c.oid, 'USAGE, SELECT, UPDATE')
                         ELSE has_table_privilege($1, c.oid,
                                'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
                    END
             FROM pg_class c WHERE c.oid = $2::text::regclass",
            &[&role, &name],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn another_applications_tables_are_never_granted_to_the_handlers_role() {
    // One database shared with another application, whose tables the same (master) user owns:
    // one created before hookledger's first migration, one after.
    let db = TestDb::empty().await.unwrap();
    let owner = db.connect().await.unwrap();
    owner
        .batch_execute("CREATE TABLE other_app_before (id serial PRIMARY KEY, email text)")
        .await
        .unwrap();
    shared::db::migrate_with(&db.settings(1), &handlers::examples::migrations())
        .await
        .unwrap();
    owner
        .batch_execute("CREATE TABLE other_app_after (id serial PRIMARY KEY, email text)")
        .await
        .unwrap();
    // A second deploy changes nothing of that.
    shared::db::migrate_with(&db.settings(1), &handlers::examples::migrations())
        .await
        .unwrap();
    for role in [
        "hookledger_handlers",
        "hookledger_receiver",
        "hookledger_worker",
        "hookledger_replay",
    ] {
        for name in [
            "other_app_before",
            "other_app_before_id_seq",
            "other_app_after",
            "other_app_after_id_seq",
        ] {
            assert!(!any_privilege(&owner, role, name).await, "{role} on {name}");
        }
        assert!(
            any_privilege(&owner, role, "orders").await,
            "{role} on orders"
        );
    }

    // The receiver's login: refused on the other application's tables, writes its own.
    let (_, settings) = login_as(&db, "hookledger_receiver", 1).await;
    let receiver = shared::db::connect(&settings).await.unwrap();
    for statement in [
        "INSERT INTO other_app_before (email) VALUES ('x@example.com')",
        "UPDATE other_app_after SET email = 'x@example.com'",
        "SELECT count(*) FROM other_app_after",
        "DELETE FROM other_app_before",
    ] {
        let error = receiver.execute(statement, &[]).await.unwrap_err();
        assert_eq!(
            error.code().map(|c| c.code()),
            Some("42501"),
            "{statement}: {error:?}"
        );
    }
    let written = receiver
        .execute(
            "INSERT INTO orders (order_id, total_minor, currency, source, event_id)
             VALUES ('ord_other_app', 1, 'usd', 'stripe', 'evt_other_app')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(written, 1);
}

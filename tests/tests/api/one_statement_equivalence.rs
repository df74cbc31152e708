//! The one-statement shape (`shared::ledger::one_statement`, the scanner in
//! `shared::ledger::gate`) applies exactly what the transaction shape applies: each test runs the
//! same handler through the transaction shape (`plain_sql` false, always correct) and through the
//! one statement (`plain_sql` true), and asserts both leave the same effect and answer. A failing
//! test is a defect of the one statement: it writes something the handler did not mean, or
//! refuses a handler the transaction shape runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shared::db::Sql;
use shared::ledger::Tx;
use shared::Outcome;
use shared::{
    effect::{Effect, Event, HandlerError},
    handler::Handler,
};
use tokio_postgres::types::Type;

use crate::helpers::*;

/// A handler deferring `writes` in order, every parameter (all declared `text`) the event id;
/// `plain` says whether it declares `plain_sql`.
struct Writes {
    writes: Vec<&'static Sql>,
    plain: bool,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Handler for Writes {
    async fn handle(&self, tx: &mut Tx<'_>, event: &Event<'_>) -> Result<Effect, HandlerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        for sql in &self.writes {
            let params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> = sql
                .types
                .iter()
                .map(|_| Box::new(event.event_id.to_owned()) as _)
                .collect();
            tx.defer(sql, params)?;
        }
        Ok(Effect::ok(serde_json::json!({ "done": event.event_id })))
    }

    fn plain_sql(&self) -> bool {
        self.plain
    }
}

/// A fresh app with `schema` applied and a [`Writes`] handler on the inline Stripe source.
async fn app_with(schema: &str, writes: Vec<&'static Sql>, plain: bool) -> (TestApp, Arc<Writes>) {
    let mut app = spawn_app_with(8, 2_000).await;
    let client = app.db.connect().await.unwrap();
    client.batch_execute(schema).await.unwrap();
    let handler = Arc::new(Writes {
        writes,
        plain,
        calls: AtomicUsize::new(0),
    });
    app.state.receiver.handlers.register(
        "stripe",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    (app, handler)
}

/// The first column of the first row of `sql`, as text (NULL as "NULL", no row as "no row").
async fn text(app: &TestApp, sql: &str) -> String {
    let client = app.db.connect().await.unwrap();
    match client.query_opt(sql, &[]).await.unwrap() {
        None => "no row".to_owned(),
        Some(row) => row
            .get::<_, Option<String>>(0)
            .unwrap_or_else(|| "NULL".to_owned()),
    }
}

/// After one delivery of a fresh event, in the transaction shape and then in the one
/// statement: its (status, outcome), the value of `probe`, then a redelivery's (status,
/// outcome) and whether it left `probe` as it was.
async fn both_shapes(schema: &str, writes: Vec<&'static Sql>, probe: &str) -> [Shape; 2] {
    let mut results = Vec::new();
    for plain in [false, true] {
        let (app, _) = app_with(schema, writes.clone(), plain).await;
        let reply = app
            .receive("stripe", &stripe_payment("evt_h", "ord_h", 2000, NOW))
            .await;
        let value = text(&app, probe).await;
        let again = app
            .receive("stripe", &stripe_payment("evt_h", "ord_h", 2000, NOW))
            .await;
        let unchanged = text(&app, probe).await == value;
        results.push((
            (reply.status, reply.outcome),
            value,
            (again.status, again.outcome, unchanged),
        ));
    }
    [results[0].clone(), results[1].clone()]
}

/// What [`both_shapes`] reports for one shape.
type Shape = ((u16, Outcome), String, (u16, Outcome, bool));

/// A new event's answer, then a redelivery's: `processed`, then `replayed` changing nothing.
const APPLIED: (u16, Outcome) = (200, Outcome::Processed);
const REPLAYED: (u16, Outcome, bool) = (200, Outcome::Replayed, true);

static COUNTER_UPSERT: Sql = Sql {
    text: "INSERT INTO counters (k, n) VALUES ($1, 1) \
           ON CONFLICT (k) DO UPDATE SET n = counters.n + 1",
    types: &[Type::TEXT],
};

/// A handler that defers the same upsert twice (e.g. once per line item of one product): the
/// transaction shape runs them one after the other (n = 2). In one statement both are CTEs of
/// one command, and the second cannot update the row the first inserted.
#[tokio::test]
async fn the_same_upsert_deferred_twice_counts_twice() {
    let [tx, one] = both_shapes(
        "CREATE TABLE counters (k text PRIMARY KEY, n int NOT NULL)",
        vec![&COUNTER_UPSERT, &COUNTER_UPSERT],
        "SELECT n::text FROM counters",
    )
    .await;
    assert_eq!(tx, (APPLIED, "2".to_owned(), REPLAYED), "transaction shape");
    assert_eq!(
        one, tx,
        "the one statement must apply what the transaction does"
    );
}

static PARENT: Sql = Sql {
    text: "INSERT INTO parents (ext) VALUES ($1)",
    types: &[Type::TEXT],
};

static CHILD: Sql = Sql {
    // The usual way to point at a row an earlier write of the same handler inserted.
    text: "INSERT INTO children (parent_id, note) \
           VALUES ((SELECT id FROM parents WHERE ext = $1), $1)",
    types: &[Type::TEXT],
};

/// A second write that finds the first's row by a subquery: sequential statements see it; the
/// CTEs of one statement share one snapshot and do not.
#[tokio::test]
async fn a_write_that_finds_an_earlier_writes_row_links_to_it() {
    let [tx, one] = both_shapes(
        "CREATE TABLE parents (id bigserial PRIMARY KEY, ext text UNIQUE NOT NULL); \
         CREATE TABLE children (parent_id bigint REFERENCES parents (id), note text)",
        vec![&PARENT, &CHILD],
        "SELECT parent_id::text FROM children",
    )
    .await;
    assert_eq!(tx, (APPLIED, "1".to_owned(), REPLAYED), "transaction shape");
    assert_eq!(one, tx, "the child must point at its parent");
}

static LEDGER_PEEK: Sql = Sql {
    // Records the ledger status the write saw ('claimed' in the transaction shape).
    text: "INSERT INTO seen (event_id, status) VALUES ($1, \
           (SELECT status::text FROM webhook_event WHERE event_id = $1))",
    types: &[Type::TEXT],
};

/// A write whose subquery reads the ledger row of its own event.
#[tokio::test]
async fn a_write_reading_its_own_ledger_row_sees_it() {
    let [tx, one] = both_shapes(
        "CREATE TABLE seen (event_id text, status text)",
        vec![&LEDGER_PEEK],
        "SELECT status FROM seen",
    )
    .await;
    assert_eq!(
        tx,
        (APPLIED, "claimed".to_owned(), REPLAYED),
        "transaction shape"
    );
    assert_eq!(one, tx, "the write must see its event's row");
}

static UNICODE_DOLLAR_TAG: Sql = Sql {
    // `$é$ ... $é$` is a dollar-quoted string (a tag follows identifier rules, and identifiers
    // may hold non-ASCII letters: PostgreSQL documentation, "Dollar-Quoted String Constants").
    text: "INSERT INTO notes (note) VALUES ($é$price $1$é$ || ' ' || $1)",
    types: &[Type::TEXT],
};

/// A `$1` inside a dollar quote whose tag is not ASCII must stay as written.
#[tokio::test]
async fn a_dollar_quote_with_a_non_ascii_tag_is_stored_as_written() {
    let [tx, one] = both_shapes(
        "CREATE TABLE notes (note text)",
        vec![&UNICODE_DOLLAR_TAG],
        "SELECT note FROM notes",
    )
    .await;
    assert_eq!(
        tx,
        (APPLIED, "price $1 evt_h".to_owned(), REPLAYED),
        "transaction shape"
    );
    assert_eq!(one, tx, "the literal must not be renumbered");
}

static UNICODE_COLUMN: Sql = Sql {
    // A column whose name holds a non-ASCII letter followed by `$1` (identifiers may hold `$`).
    text: "INSERT INTO prices (\"id\", prié$1) VALUES ($1, 7)",
    types: &[Type::TEXT],
};

#[tokio::test]
async fn an_identifier_with_a_non_ascii_letter_and_a_dollar_is_kept() {
    let [tx, one] = both_shapes(
        "CREATE TABLE prices (id text, prié$1 int)",
        vec![&UNICODE_COLUMN],
        "SELECT prié$1::text FROM prices",
    )
    .await;
    assert_eq!(tx, (APPLIED, "7".to_owned(), REPLAYED), "transaction shape");
    assert_eq!(one, tx, "the column name must not be renumbered");
}

static FROM_A_TABLE_NAMED_CLAIMED: Sql = Sql {
    text: "INSERT INTO grants (event_id, label) \
           VALUES ($1, (SELECT label FROM claimed WHERE code = 'vip'))",
    types: &[Type::TEXT],
};

/// A business table named `claimed` (or `w1`): the composed statement's CTE names shadow it.
#[tokio::test]
async fn a_business_table_named_claimed_is_read_as_itself() {
    let [tx, one] = both_shapes(
        "CREATE TABLE claimed (code text, label text); \
         INSERT INTO claimed VALUES ('vip', 'gold'); \
         CREATE TABLE grants (event_id text, label text)",
        vec![&FROM_A_TABLE_NAMED_CLAIMED],
        "SELECT label FROM grants",
    )
    .await;
    assert_eq!(
        tx,
        (APPLIED, "gold".to_owned(), REPLAYED),
        "transaction shape"
    );
    assert_eq!(one, tx);
}

static ORDERS_TWICE: Sql = Sql {
    text: "INSERT INTO once (k) VALUES ($1) ON CONFLICT (k) DO NOTHING",
    types: &[Type::TEXT],
};

static UNUSED_PARAMETER: Sql = Sql {
    // Declares two parameters and uses the second only; then zero-parameter write.
    text: "INSERT INTO once_log (k) VALUES ($2); ",
    types: &[Type::TEXT, Type::TEXT],
};

static NO_PARAMETERS: Sql = Sql {
    text: "/* leading */ insert into once_log (k) values (E'\\\\ $1 '/* ) */) -- trailing",
    types: &[],
};

/// Held: the same DO NOTHING insert twice, a parameter declared and unused, trailing `;`,
/// comments, an E'' string with backslashes and `$1` in it.
#[tokio::test]
async fn duplicate_do_nothing_unused_parameters_and_comments_hold() {
    let [tx, one] = both_shapes(
        "CREATE TABLE once (k text PRIMARY KEY); CREATE TABLE once_log (k text)",
        vec![
            &ORDERS_TWICE,
            &ORDERS_TWICE,
            &UNUSED_PARAMETER,
            &NO_PARAMETERS,
        ],
        "SELECT (SELECT count(*) FROM once)::text || ' ' || \
         (SELECT string_agg(k, '|' ORDER BY k COLLATE \"C\") FROM once_log)",
    )
    .await;
    assert_eq!(
        tx,
        (APPLIED, "1 \\ $1 |evt_h".to_owned(), REPLAYED),
        "transaction shape"
    );
    assert_eq!(one, tx);
}

/// Held: an expired key and a dead key redelivered to a plain-SQL handler apply its write once
/// more, exactly once, in the transaction shape the one statement hands them to.
#[tokio::test]
async fn expired_and_dead_keys_redelivered_apply_once() {
    let (app, handler) = app_with(
        "CREATE TABLE once (k text PRIMARY KEY); \
         CREATE TABLE once_log (k text CHECK (k <> 'evt_dead'))",
        vec![&ORDERS_TWICE, &UNUSED_PARAMETER],
        true,
    )
    .await;
    let client = app.db.connect().await.unwrap();
    // Expired: completed long ago, not swept yet.
    let expired = stripe_payment("evt_old", "ord_old", 2000, NOW);
    assert_eq!(app.receive("stripe", &expired).await.status, 200);
    client
        .batch_execute(
            "UPDATE webhook_event SET claimed_at = now() - interval '3650 days', \
             completed_at = now() - interval '3650 days' WHERE event_id = 'evt_old'; \
             DELETE FROM once",
        )
        .await
        .unwrap();
    let again = app.receive("stripe", &expired).await;
    assert_eq!(
        (again.status, again.outcome),
        (200, Outcome::Processed),
        "{again:?}"
    );
    assert_eq!(app.count("SELECT count(*) FROM once").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM once_log WHERE k = 'evt_old'")
            .await,
        2,
        "once per run: the first and the retake"
    );
    // Dead: the CHECK refuses it; an operator drops the CHECK; the redelivery runs it.
    let dead = stripe_payment("evt_dead", "ord_dead", 2000, NOW);
    let first = app.receive("stripe", &dead).await;
    assert_eq!(
        (first.status, first.outcome),
        (200, Outcome::Dead),
        "{first:?}"
    );
    client
        .batch_execute("ALTER TABLE once_log DROP CONSTRAINT once_log_k_check")
        .await
        .unwrap();
    let calls = handler.calls.load(Ordering::SeqCst);
    let retried = app.receive("stripe", &dead).await;
    assert_eq!(
        (retried.status, retried.outcome),
        (200, Outcome::Processed),
        "{retried:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM once_log WHERE k = 'evt_dead'")
            .await,
        1
    );
    assert!(handler.calls.load(Ordering::SeqCst) > calls);
    let status = text(
        &app,
        "SELECT status::text FROM webhook_event WHERE event_id = 'evt_dead'",
    )
    .await;
    assert_eq!(status, "completed");
}

/// Held: a storm of two events racing through one statement each (duplicates waiting on the
/// winner's uncommitted claim, then taking the transaction shape's lookup): each write once.
#[tokio::test]
async fn a_storm_over_two_keys_applies_each_write_once() {
    let (app, _) = app_with(
        "CREATE TABLE once (k text PRIMARY KEY); CREATE TABLE once_log (k text)",
        vec![&ORDERS_TWICE, &UNUSED_PARAMETER],
        true,
    )
    .await;
    let a = stripe_payment("evt_sa", "ord_sa", 2000, NOW);
    let b = stripe_payment("evt_sb", "ord_sb", 2000, NOW);
    let replies = futures_util::future::join_all((0..24).map(|i| {
        let d = if i % 2 == 0 { a.clone() } else { b.clone() };
        let app = &app;
        async move { app.receive("stripe", &d).await }
    }))
    .await;
    for reply in &replies {
        assert!(
            reply.status == 200 || (reply.status == 409 && reply.outcome == Outcome::InFlight),
            "{reply:?}"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM once").await, 2);
    assert_eq!(app.count("SELECT count(*) FROM once_log").await, 2);
}

/// The example handler behind pgbouncer (transaction mode) with the statement cache on and
/// off, limits per transaction and on the database: the one statement answers as the
/// transaction shape does.
#[tokio::test]
async fn behind_pgbouncer_with_and_without_the_statement_cache() {
    for statement_cache in [false, true] {
        let app = spawn_app_behind_pooler(2, 2_000, statement_cache).await;
        let delivery = stripe_payment("evt_pgb", "ord_pgb", 2000, NOW);
        let first = app.receive("stripe", &delivery).await;
        assert_eq!(
            (first.status, first.outcome),
            (200, Outcome::Processed),
            "statement cache {statement_cache}: {first:?}"
        );
        for _ in 0..4 {
            let again = app.receive("stripe", &delivery).await;
            assert_eq!(
                (again.status, again.outcome, again.body.as_str()),
                (200, Outcome::Replayed, first.body.as_str()),
                "statement cache {statement_cache}"
            );
        }
        assert_eq!(app.order_rows().await, 1);
    }
}

static LOG: Sql = Sql {
    text: "INSERT INTO shadow_log (k) VALUES ($1)",
    types: &[Type::TEXT],
};

/// Held: a shadow source (inline) answers a duplicate as enforcement would and re-runs the
/// handler as a naive receiver would, in both shapes alike.
#[tokio::test]
async fn a_shadow_source_reprocesses_duplicates_in_both_shapes() {
    let mut seen = Vec::new();
    for plain in [false, true] {
        let (mut app, _) = app_with("CREATE TABLE shadow_log (k text)", vec![&LOG], plain).await;
        let json = r#"[{"name": "stripe", "scheme": "stripe", "shadow": true,
                        "secrets": ["whsec_hookledger_local_development_secret"]}]"#;
        app.settings.sources = shared::Sources::from_json(json).unwrap();
        let handlers = app.state.receiver.handlers.clone();
        app.state = receiver::handler::AppState::new(
            &app.settings,
            app.receiver().pool.clone(),
            handlers::examples::registry(&app.settings.sources),
        );
        app.state.receiver.handlers = handlers;
        let delivery = stripe_payment("evt_shadow", "ord_shadow", 5, NOW);
        let first = app.receive("stripe", &delivery).await;
        let again = app.receive("stripe", &delivery).await;
        seen.push((
            (first.status, first.outcome),
            (again.status, again.outcome, again.body == first.body),
            app.count("SELECT count(*) FROM shadow_log").await,
        ));
    }
    assert_eq!(
        seen[0],
        (
            (200, Outcome::Processed),
            (200, Outcome::ShadowDuplicate, true),
            2
        ),
        "transaction shape"
    );
    assert_eq!(seen[1], seen[0]);
}

static REFUSED: Sql = Sql {
    text: "INSERT INTO refused (k) VALUES ($1)",
    types: &[Type::TEXT],
};

/// Held: a storm of one event whose write the table refuses: each winner's statement rolls
/// back and the next waiter wins; the event ends `dead` once, nothing is applied, and every
/// answer is the dead answer or 409.
#[tokio::test]
async fn a_storm_of_an_event_whose_write_is_refused_ends_dead_once() {
    let (app, _) = app_with(
        "CREATE TABLE refused (k text CHECK (k = 'never'))",
        vec![&REFUSED],
        true,
    )
    .await;
    let delivery = stripe_payment("evt_refused", "ord_refused", 5, NOW);
    let replies =
        futures_util::future::join_all((0..16).map(|_| app.receive("stripe", &delivery))).await;
    for reply in &replies {
        assert!(
            (reply.status == 200 && [Outcome::Dead, Outcome::Replayed].contains(&reply.outcome))
                || (reply.status == 409 && reply.outcome == Outcome::InFlight),
            "{reply:?}"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM refused").await, 0);
    let status = text(&app, "SELECT status::text FROM webhook_event").await;
    assert_eq!(status, "dead");
}

/// `INSERT INTO wide (v) VALUES (concat($1, ..., $100))`: one hundred declared parameters.
fn wide() -> &'static Sql {
    static WIDE: std::sync::OnceLock<&'static Sql> = std::sync::OnceLock::new();
    WIDE.get_or_init(|| {
        let args: Vec<String> = (1..=100).map(|n| format!("${n}")).collect();
        let text = format!("INSERT INTO wide (v) VALUES (concat({}))", args.join(", "));
        Box::leak(Box::new(Sql {
            text: Box::leak(text.into_boxed_str()),
            types: Box::leak(vec![Type::TEXT; 100].into_boxed_slice()),
        }))
    })
}

/// A handler with one insert per item of a large payload (660 inserts of 100 parameters):
/// each of the transaction shape's statements is small; the one statement would carry 66,008
/// parameters, past the protocol's 65,535.
#[tokio::test]
async fn many_writes_past_the_parameter_limit_still_apply() {
    let writes = vec![wide(); 660];
    let [tx, one] = both_shapes(
        "CREATE TABLE wide (v text)",
        writes,
        "SELECT count(*)::text FROM wide",
    )
    .await;
    assert_eq!(
        tx,
        (APPLIED, "660".to_owned(), REPLAYED),
        "transaction shape"
    );
    assert_eq!(one, tx);
}

/// A handler's write that waits on a business row another session holds, past `lock_timeout`:
/// the event has no ledger row at all, so the answer is the handler's failure (the transaction
/// shape's 503), not 409 `in_flight` ("another delivery of this event is
/// being processed").
#[tokio::test]
async fn a_business_lock_timeout_is_not_answered_as_in_flight() {
    let mut seen = Vec::new();
    for plain in [false, true] {
        let (app, _) = app_with(
            "CREATE TABLE once (k text PRIMARY KEY)",
            vec![&ORDERS_TWICE],
            plain,
        )
        .await;
        let holder = app.db.connect().await.unwrap();
        holder
            .batch_execute("BEGIN; INSERT INTO once (k) VALUES ('evt_lock')")
            .await
            .unwrap();
        let reply = app
            .receive("stripe", &stripe_payment("evt_lock", "ord_lock", 5, NOW))
            .await;
        holder.batch_execute("ROLLBACK").await.unwrap();
        seen.push((reply.status, reply.outcome, app.ledger_rows().await));
    }
    assert_eq!(seen[0], (503, Outcome::Unavailable, 0), "transaction shape");
    assert_eq!(seen[1], seen[0]);
}

//! The ledger console against real PostgreSQL (a fresh migrated database per test), served on
//! 127.0.0.1:0 and driven with a real HTTP client.

use std::collections::BTreeSet;

use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
use hookledger_tests::{local_sources_json, test_db, TestDb};
use reqwest::{header, redirect, Client, StatusCode};
use shared::doorbell::Doorbell;
use shared::Settings;

/// The local Stripe source's signing secret (events/sources.local.json).
const STRIPE_SECRET: &str = "whsec_hookledger_local_development_secret";

/// A console served on a free port over a fresh database.
struct App {
    db: TestDb,
    base: String,
    token: String,
    client: Client,
    /// The console's settings and pool, for a receiver writing real deliveries beside it.
    settings: Settings,
    pool: shared::db::Pool,
}

/// The local sources, with `slack` keeping digests only (`store_payload: false`).
fn sources_json() -> String {
    let mut sources: serde_json::Value =
        serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    for source in sources.as_array_mut().unwrap() {
        if source["name"] == "slack" {
            source["store_payload"] = serde_json::Value::Bool(false);
        }
    }
    sources.to_string()
}

async fn spawn(read_only: bool) -> App {
    let db = test_db().await.unwrap();
    spawn_on(db, read_only).await
}

async fn spawn_on(db: TestDb, read_only: bool) -> App {
    // The console's logs go where make test's secret scan reads them.
    hookledger_tests::test_log::install();
    let url = db.url.clone();
    let sources = sources_json();
    let settings = Settings::from_lookup(|name| match name {
        "DATABASE_URL" => Some(url.clone()),
        "HOOKLEDGER_SOURCES" => Some(sources.clone()),
        _ => None,
    })
    .unwrap();
    let pool = shared::db::pool(&settings.database).unwrap();
    let handlers = handlers::examples::registry(&settings.sources);
    let token = AccessToken::random().unwrap();
    let console = Console::new(
        settings.clone(),
        pool.clone(),
        handlers,
        Doorbell::off(),
        ConsoleConfig {
            auth: Auth::Token(token.clone()),
            read_only,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    assert_eq!(
        console.url(addr),
        format!("http://{addr}/?token={}", token.expose())
    );
    tokio::spawn(async move { console.serve(listener, std::future::pending()).await });
    App {
        db,
        base: format!("http://{addr}"),
        token: token.expose().to_owned(),
        client: Client::builder()
            .redirect(redirect::Policy::none())
            .build()
            .unwrap(),
        settings,
        pool,
    }
}

impl App {
    /// GET `path` with the token as a bearer header: (status, body).
    async fn get(&self, path: &str) -> (StatusCode, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.text().await.unwrap())
    }

    /// GET `path`, asserting 200: the body.
    async fn page(&self, path: &str) -> String {
        let (status, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body
    }

    /// POST the form `fields` to `path` with the token: (status, body).
    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> (StatusCode, String) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(
                form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(fields)
                    .finish(),
            )
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.text().await.unwrap())
    }

    /// POSTs the re-drive of `what` (`dead`, `outbox`) of one event, with `confirmed` and `csrf`.
    async fn redrive_one(
        &self,
        what: &str,
        source: &str,
        event_id: &str,
        confirmed: &str,
        csrf: &str,
    ) -> (StatusCode, String) {
        self.post(
            "/redrive",
            &[
                ("what", what),
                ("source", source),
                ("event_id", event_id),
                ("confirmed", confirmed),
                ("csrf", csrf),
            ],
        )
        .await
    }

    /// Delivers the Stripe event `body` to source `stripe` through the receive path (signed
    /// now with the local secret), as the receiver function does: the ledger row is the one a
    /// real delivery writes.
    async fn deliver(&self, body: serde_json::Value) -> shared::Reply {
        use hookledger_verify::{Scheme, SigningKey};
        let receiver = shared::Receiver::new(
            &self.settings,
            self.pool.clone(),
            handlers::examples::registry(&self.settings.sources),
        );
        let body = serde_json::to_vec(&body).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let key = SigningKey::new(Scheme::Stripe, STRIPE_SECRET).unwrap();
        let mut headers = axum::http::HeaderMap::new();
        for (name, value) in hookledger_verify::sign(Scheme::Stripe, &key, "", now, &body) {
            headers.insert(
                axum::http::HeaderName::try_from(name).unwrap(),
                value.parse().unwrap(),
            );
        }
        receiver.receive("stripe", &headers, &body, now).await
    }

    async fn sql(&self, statement: &str) {
        self.db
            .connect()
            .await
            .unwrap()
            .batch_execute(statement)
            .await
            .unwrap();
    }

    async fn count(&self, query: &str) -> i64 {
        self.db
            .connect()
            .await
            .unwrap()
            .query_one(query, &[])
            .await
            .unwrap()
            .get(0)
    }
}

/// One ledger row as the paths write it: `status` with the columns its CHECKs tie to it,
/// claimed `age_min` minutes ago, a JSON payload naming the id.
fn row(source: &str, id: &str, event_type: &str, status: &str, age_min: i64) -> String {
    let (extra_cols, extra_vals) = match status {
        "completed" => (
            ", response_status, response_body, completed_at",
            format!(", 200, '{{\"status\": \"ok\"}}', now() - interval '{age_min} minutes'"),
        ),
        "dead" => (
            ", attempts, last_error, dead_at",
            format!(", 8, 'downstream answered 502', now() - interval '{age_min} minutes' + interval '30 seconds'"),
        ),
        "failed" => (
            ", attempts, last_error, next_attempt_at",
            ", 2, 'timed out', now() - interval '1 minute'".to_owned(),
        ),
        "processing" => (
            ", attempts, lease_expires_at, next_attempt_at",
            ", 1, now() - interval '2 minutes', now() - interval '2 minutes'".to_owned(),
        ),
        _ => (", next_attempt_at", format!(", now() - interval '{age_min} minutes'")),
    };
    format!(
        "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status, claimed_at{extra_cols})
         VALUES ('{source}', '{id}', '{event_type}', sha256('{id}'::bytea),
                 convert_to('{{\"id\": \"{id}\", \"secret_marker\": \"pl_{id}\"}}', 'UTF8'),
                 '{status}', now() - interval '{age_min} minutes'{extra_vals});\n"
    )
}

/// The text of the cell `data-source="{source}" data-{kind}="{name}"` (inside a link or not).
fn cell(html: &str, source: &str, kind: &str, name: &str) -> String {
    let needle = format!("data-{kind}=\"{name}\"");
    for (at, _) in html.match_indices(&needle) {
        let tag_start = html[..at].rfind('<').unwrap();
        let tag_end = at + html[at..].find('>').unwrap();
        if !html[tag_start..tag_end].contains(&format!("data-source=\"{source}\"")) {
            continue;
        }
        let mut rest = &html[tag_end + 1..];
        while rest.starts_with('<') {
            rest = &rest[rest.find('>').unwrap() + 1..];
        }
        return rest[..rest.find('<').unwrap()].trim().to_owned();
    }
    panic!("no cell {source}/{kind}={name} in {html}");
}

/// The event ids linked from the table `id` of a page, in order.
fn linked_ids(html: &str, table: &str) -> Vec<String> {
    let start = html
        .find(&format!("<table id=\"{table}\""))
        .unwrap_or_else(|| panic!("no table {table}: {html}"));
    let end = start + html[start..].find("</table>").unwrap();
    let table = &html[start..end];
    table
        .match_indices("href=\"/events/")
        .map(|(at, _)| {
            let rest = &table[at + "href=\"/events/".len()..];
            let path = &rest[..rest.find('"').unwrap()];
            path.split_once('/').unwrap().1.to_owned()
        })
        .collect()
}

/// Every `href` and `action` a page generates.
fn urls(html: &str) -> Vec<String> {
    ["href=\"", "action=\""]
        .iter()
        .flat_map(|attr| {
            html.match_indices(attr).map(move |(at, _)| {
                let rest = &html[at + attr.len()..];
                rest[..rest.find('"').unwrap()].to_owned()
            })
        })
        .collect()
}

const ROUTES: [&str; 10] = [
    "/",
    "/events",
    "/events/stripe/evt_1",
    "/stuck",
    "/dead",
    "/rejected",
    "/redrive/confirm?what=dead&source=stripe&event_id=evt_1",
    "/forget/confirm?source=stripe&event_id=evt_1&by=ops",
    "/style.css",
    "/no-such-page",
];

#[tokio::test]
async fn every_route_needs_the_token_get_and_post() {
    let app = spawn(false).await;
    for path in ROUTES {
        for token in [None, Some("wrong"), Some(&app.token[..63])] {
            let mut request = app.client.get(format!("{}{path}", app.base));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(response.headers()["cache-control"], "no-store");
            let body = response.text().await.unwrap();
            assert!(body.contains("access token"), "{body}");
        }
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .header(header::COOKIE, "hookledger_console=wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let sep = if path.contains('?') { '&' } else { '?' };
        let response = app
            .client
            .get(format!("{}{path}{sep}token=wrong", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    for path in ["/redrive", "/forget", "/", "/events"] {
        let response = app
            .client
            .post(format!("{}{path}", app.base))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body("what=dead&source=stripe&event_id=evt_1&confirmed=1")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "POST {path}");
    }
}

/// Browsers send a cookie of 127.0.0.1 to every port of it: the session cookie is named after
/// the console's port (two consoles do not overwrite each other's) and holds a value good for
/// this console only, never the access token (which another local service would receive).
#[tokio::test]
async fn the_session_cookie_is_named_after_the_port_and_is_not_the_token() {
    let app = spawn(false).await;
    let port = app.base.rsplit_once(':').unwrap().1;
    let response = app
        .client
        .get(format!("{}/?token={}", app.base, app.token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
    let (pair, attributes) = cookie.split_once("; ").unwrap();
    assert_eq!(attributes, "HttpOnly; SameSite=Strict; Path=/");
    let (name, value) = pair.split_once('=').unwrap();
    assert_eq!(name, format!("hookledger_console_{port}"));
    assert!(!value.contains(&app.token), "{cookie}");
    assert_eq!(value.len(), 64, "{cookie}");
    let with_cookie = |cookie: String| {
        app.client
            .get(format!("{}/stuck", app.base))
            .header(header::COOKIE, cookie)
            .send()
    };
    let response = with_cookie(format!("hookledger_console_1={value}; {pair}"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The value under another port's name, the token under the old name or this port's name,
    // and the value as a bearer token: none of them opens the console.
    for refused in [
        format!("hookledger_console_1={value}"),
        format!("hookledger_console={}", app.token),
        format!("hookledger_console={value}"),
        format!("{name}={}", app.token),
    ] {
        let response = with_cookie(refused.clone()).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{refused}");
    }
    let response = app
        .client
        .get(format!("{}/stuck", app.base))
        .bearer_auth(value)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_token_in_the_url_becomes_a_cookie_and_leaves_the_address_bar() {
    let app = spawn(false).await;
    let response = app
        .client
        .get(format!(
            "{}/events?source=stripe&token={}&status=dead",
            app.base, app.token
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response.headers()[header::LOCATION],
        "/events?source=stripe&status=dead"
    );
    let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
    let (pair, attributes) = cookie.split_once("; ").unwrap();
    assert_eq!(attributes, "HttpOnly; SameSite=Strict; Path=/");
    let response = app
        .client
        .get(format!("{}/events?source=stripe&status=dead", app.base))
        .header(header::COOKIE, format!("other=1; {pair}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers();
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("style-src 'self'"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
}

#[tokio::test]
async fn the_overview_shows_the_seeded_figures() {
    let app = spawn(false).await;
    let mut seed = String::new();
    for i in 0..4 {
        seed.push_str(&row(
            "stripe",
            &format!("evt_ok_{i}"),
            "invoice.paid",
            "completed",
            10 + i,
        ));
    }
    for i in 0..2 {
        seed.push_str(&row(
            "stripe",
            &format!("evt_dead_{i}"),
            "invoice.paid",
            "dead",
            20,
        ));
    }
    seed.push_str(&row("stripe", "evt_retry", "invoice.paid", "failed", 30));
    // A deferred claim 10 minutes old: stuck (past 300 s) and due.
    seed.push_str(&row(
        "stripe-deferred",
        "evt_waiting",
        "charge.refunded",
        "claimed",
        10,
    ));
    // Seven hours ago: outside the default six-hour chart, inside ?hours=8.
    seed.push_str(&row("github", "gh_old", "push", "completed", 7 * 60));
    seed.push_str(
        "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type, status,
                             attempts, last_error, dead_at)
         VALUES ('stripe', 'evt_ok_0', 1, 'invoice.paid', 'billing', '{}', 'application/json',
                 'dead', 8, 'fatal: 400', now());",
    );
    app.sql(&seed).await;
    let html = app.page("/").await;
    assert_eq!(cell(&html, "stripe", "figure", "dead_letters"), "2");
    assert_eq!(cell(&html, "stripe", "figure", "outbox_dead"), "1");
    assert_eq!(cell(&html, "stripe", "figure", "backlog_due"), "1");
    assert_eq!(cell(&html, "stripe", "figure", "stuck_claims"), "0");
    assert_eq!(
        cell(&html, "stripe-deferred", "figure", "stuck_claims"),
        "1"
    );
    assert_eq!(cell(&html, "stripe-deferred", "figure", "backlog_due"), "1");
    assert_eq!(cell(&html, "stripe", "outcome", "completed"), "4");
    assert_eq!(cell(&html, "stripe", "outcome", "dead"), "2");
    assert_eq!(cell(&html, "stripe", "outcome", "failed"), "1");
    assert_eq!(cell(&html, "stripe-deferred", "outcome", "claimed"), "1");
    assert_eq!(cell(&html, "github", "outcome", "completed"), "0");
    assert!(html.contains("<svg class=\"chart\""), "{html}");
    assert!(html.contains("completed 4"), "the legend's totals: {html}");
    let html = app.page("/?hours=8").await;
    assert_eq!(cell(&html, "github", "outcome", "completed"), "1");
    for bad in ["/?hours=0", "/?hours=49", "/?hours=six"] {
        let (status, body) = app.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body.contains("hours"), "{body}");
    }
}

#[tokio::test]
async fn the_events_filters_return_exactly_the_matching_rows() {
    let app = spawn(false).await;
    let mut seed = String::new();
    seed.push_str(&row("stripe", "evt_a1", "invoice.paid", "completed", 50));
    seed.push_str(&row("stripe", "evt_a2", "invoice.paid", "dead", 40));
    seed.push_str(&row("stripe", "evt_b1", "charge.refunded", "completed", 30));
    seed.push_str(&row("github", "evt_a3", "push", "completed", 20));
    seed.push_str(&row("github", "gh_1", "push", "failed", 10));
    app.sql(&seed).await;
    let ids = |html: String| linked_ids(&html, "events");
    // Newest first.
    assert_eq!(
        ids(app.page("/events").await),
        ["gh_1", "evt_a3", "evt_b1", "evt_a2", "evt_a1"]
    );
    assert_eq!(
        ids(app.page("/events?source=stripe").await),
        ["evt_b1", "evt_a2", "evt_a1"]
    );
    assert_eq!(ids(app.page("/events?status=dead").await), ["evt_a2"]);
    assert_eq!(
        ids(app.page("/events?event_type=invoice.paid").await),
        ["evt_a2", "evt_a1"]
    );
    assert_eq!(
        ids(app.page("/events?source=stripe&id_prefix=evt_a").await),
        ["evt_a2", "evt_a1"]
    );
    assert_eq!(
        ids(app.page("/events?source=github&id_prefix=evt_a").await),
        ["evt_a3"]
    );
    assert_eq!(
        ids(app
            .page("/events?source=stripe&status=completed&id_prefix=evt_")
            .await),
        ["evt_b1", "evt_a1"]
    );
    // A window of claimed_at, from the database's clock, as RFC 3339 and as datetime-local.
    let client = app.db.connect().await.unwrap();
    let bounds: (String, String) = {
        let row = client
            .query_one(
                "SELECT to_char((now() - interval '45 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        to_char((now() - interval '15 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    let window = format!("/events?from={}&until={}", bounds.0, bounds.1);
    assert_eq!(ids(app.page(&window).await), ["evt_a3", "evt_b1", "evt_a2"]);
    assert!(ids(app.page("/events?source=nobody").await).is_empty());
    for (bad, field) in [
        ("/events?status=gone", "status"),
        ("/events?outcome=completed", "outcome"),
        ("/events?outcome=gone", "outcome"),
        ("/events?from=yesterday", "from"),
        ("/events?after=garbage!", "after"),
        ("/events?id_prefix=evt_a", "id_prefix"),
    ] {
        let (status, body) = app.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body.contains(&format!("field {field}")), "{body}");
    }
}

/// A Stripe event of `event_type` with id `id`, created at `created` (unix seconds).
fn stripe_event(
    id: &str,
    event_type: &str,
    created: i64,
    object: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "id": id, "object": "event", "type": event_type, "created": created,
        "data": {"object": object},
    })
}

/// The outcome each row of the events table shows, by event id, in the page's order.
fn outcomes(html: &str) -> Vec<(String, String)> {
    let ids = linked_ids(html, "events");
    let shown: Vec<String> = html
        .match_indices("<td class=\"outcome outcome-")
        .map(|(at, _)| {
            let rest = &html[at..];
            let text = &rest[rest.find('>').unwrap() + 1..];
            text[..text.find('<').unwrap()].to_owned()
        })
        .collect();
    assert_eq!(ids.len(), shown.len(), "{html}");
    ids.into_iter().zip(shown).collect()
}

#[tokio::test]
async fn each_event_shows_its_outcome_and_the_outcome_filter_lists_exactly_those() {
    let app = spawn(false).await;
    // Real deliveries through the receive path: a handler ran (an order), no handler for the
    // type (the recorded no-op), and a subscription update older than the one applied (the
    // ordering guard's no-op).
    let order = stripe_event(
        "evt_paid",
        "payment_intent.succeeded",
        1_765_000_000,
        serde_json::json!({"id": "pi_1", "object": "payment_intent", "amount": 100,
                           "amount_received": 100, "currency": "usd",
                           "metadata": {"order_id": "ord_1"}}),
    );
    let subscription = |id: &str, created: i64| {
        stripe_event(
            id,
            "customer.subscription.updated",
            created,
            serde_json::json!({"id": "sub_1", "object": "subscription", "customer": "cus_1",
                               "status": "active",
                               "items": {"data": [{"price": {"id": "price_1"}}]}}),
        )
    };
    for (body, expected) in [
        (order, shared::Outcome::Processed),
        (
            stripe_event(
                "evt_ignored",
                "invoice.paid",
                1_765_000_001,
                serde_json::json!({"id": "in_1"}),
            ),
            shared::Outcome::Ignored,
        ),
        (
            subscription("evt_sub_new", 1_765_000_100),
            shared::Outcome::Processed,
        ),
        (
            subscription("evt_sub_old", 1_765_000_050),
            shared::Outcome::Processed,
        ),
    ] {
        let reply = app.deliver(body).await;
        assert_eq!(
            (reply.status, reply.outcome),
            (200, expected),
            "{}",
            reply.body
        );
    }
    // A handler's own answer that says "ignored" with more members is the handler's: processed.
    let mut seed = row("stripe", "evt_own_ignored", "invoice.paid", "completed", 0);
    seed.push_str(
        "UPDATE webhook_event
         SET response_body = '{\"status\": \"ignored\", \"event_type\": \"invoice.paid\", \"why\": \"test\"}'
         WHERE event_id = 'evt_own_ignored';",
    );
    // The recorded no-op names the row's own type: another type's body is a handler's too.
    seed.push_str(&row(
        "stripe",
        "evt_other_type",
        "invoice.created",
        "completed",
        0,
    ));
    seed.push_str(
        "UPDATE webhook_event
         SET response_body = '{\"status\": \"ignored\", \"event_type\": \"invoice.paid\"}'
         WHERE event_id = 'evt_other_type';",
    );
    // A response without a "status" member at all is a handler's: processed.
    seed.push_str(&row(
        "stripe",
        "evt_no_status",
        "invoice.paid",
        "completed",
        0,
    ));
    seed.push_str(
        "UPDATE webhook_event SET response_body = '[1, 2]' WHERE event_id = 'evt_no_status';",
    );
    seed.push_str(&row("stripe", "evt_dead", "invoice.paid", "dead", 0));
    seed.push_str(&row("github", "gh_waiting", "push", "claimed", 0));
    // An ignored event replay created: its origin says so.
    seed.push_str(&row("github", "gh_replayed", "push", "completed", 0));
    seed.push_str(
        "UPDATE webhook_event
         SET response_body = jsonb_build_object('status', 'ignored', 'event_type', 'push'),
             replayed_at = claimed_at
         WHERE event_id = 'gh_replayed';",
    );
    app.sql(&seed).await;

    let html = app.page("/events").await;
    let shown: std::collections::BTreeMap<String, String> = outcomes(&html).into_iter().collect();
    let expected = [
        ("evt_paid", "processed"),
        ("evt_ignored", "ignored"),
        ("evt_sub_new", "processed"),
        ("evt_sub_old", "stale"),
        ("evt_own_ignored", "processed"),
        ("evt_other_type", "processed"),
        ("evt_no_status", "processed"),
        ("evt_dead", "dead"),
        ("gh_waiting", "claimed"),
        ("gh_replayed", "ignored"),
    ];
    assert_eq!(
        shown,
        expected
            .iter()
            .map(|(id, o)| (id.to_string(), o.to_string()))
            .collect(),
        "{html}"
    );
    // All are `completed` but the dead and the claimed one: the status column cannot tell them.
    assert!(html.contains("<th>outcome</th>"), "{html}");
    let ids = |path: &str| {
        let app = &app;
        let path = path.to_owned();
        async move {
            let mut ids = linked_ids(&app.page(&path).await, "events");
            ids.sort();
            ids
        }
    };
    assert_eq!(
        ids("/events?outcome=ignored").await,
        ["evt_ignored", "gh_replayed"]
    );
    assert_eq!(ids("/events?outcome=stale").await, ["evt_sub_old"]);
    assert_eq!(
        ids("/events?outcome=processed").await,
        [
            "evt_no_status",
            "evt_other_type",
            "evt_own_ignored",
            "evt_paid",
            "evt_sub_new"
        ]
    );
    assert_eq!(ids("/events?outcome=dead").await, ["evt_dead"]);
    assert_eq!(ids("/events?outcome=claimed").await, ["gh_waiting"]);
    assert!(ids("/events?outcome=failed").await.is_empty());
    // With the page's other filters.
    assert_eq!(
        ids("/events?outcome=ignored&source=stripe").await,
        ["evt_ignored"]
    );
    assert_eq!(
        ids("/events?outcome=ignored&event_type=push").await,
        ["gh_replayed"]
    );
    assert!(ids("/events?outcome=ignored&status=dead").await.is_empty());
    assert_eq!(
        ids("/events?outcome=ignored&status=completed&source=github&id_prefix=gh_").await,
        ["gh_replayed"]
    );
    // The select keeps the choice, and the origin column says where each came from.
    let html = app.page("/events?outcome=ignored").await;
    assert!(
        html.contains("<option value=\"ignored\" selected>ignored</option>"),
        "{html}"
    );
    assert!(html.contains("<td>replay</td>"), "{html}");
    assert!(html.contains("<td>delivery</td>"), "{html}");
    // The event page and the row agree.
    for (id, outcome) in [
        ("evt_ignored", "ignored"),
        ("evt_sub_old", "stale"),
        ("evt_paid", "processed"),
    ] {
        let html = app.page(&format!("/events/stripe/{id}")).await;
        let at = html
            .find("id=\"outcome\"")
            .unwrap_or_else(|| panic!("{html}"));
        let cell = &html[at..];
        let text = &cell[cell.find('>').unwrap() + 1..];
        assert_eq!(
            text[..text.find('<').unwrap()].trim(),
            outcome,
            "{id}: {html}"
        );
        assert!(cell[..cell.find('>').unwrap()].contains(&format!("outcome-{outcome}")));
    }
    let html = app.page("/events/github/gh_replayed").await;
    let at = html
        .find("id=\"origin\"")
        .unwrap_or_else(|| panic!("{html}"));
    assert!(html[at..].contains(">replay from the provider"), "{html}");
}

#[tokio::test]
async fn the_outcome_filter_pages_by_keyset_through_exactly_its_rows() {
    let app = spawn(false).await;
    // 130 rows, one in three the recorded no-op, the rest processed, several sharing a
    // claimed_at: the filter's pages hold only ignored rows, each once, newest first.
    app.sql(
        "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status, claimed_at,
                                    completed_at, response_status, response_body)
         SELECT 'stripe', 'evt_' || lpad(i::text, 3, '0'), 'invoice.paid', sha256(i::text::bytea),
                'completed', now() - (i / 3) * interval '1 second',
                now() - (i / 3) * interval '1 second', 200,
                CASE WHEN i % 3 = 0 THEN jsonb_build_object('status', 'ignored', 'event_type', 'invoice.paid')
                     ELSE '{\"status\": \"ok\"}' END
         FROM generate_series(1, 130) AS i",
    )
    .await;
    let mut seen = Vec::new();
    let mut path = "/events?outcome=ignored".to_owned();
    let mut pages = 0;
    loop {
        let html = app.page(&path).await;
        for (id, outcome) in outcomes(&html) {
            assert_eq!(outcome, "ignored", "{id} on page {pages}");
            seen.push(id);
        }
        pages += 1;
        let Some(at) = html.find("rel=\"next\" href=\"") else {
            break;
        };
        let rest = &html[at + "rel=\"next\" href=\"".len()..];
        path = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
        assert!(
            path.contains("outcome=ignored") && path.contains("after="),
            "{path}"
        );
    }
    let expected: Vec<String> = (1..=130)
        .rev()
        .filter(|i| i % 3 == 0)
        .map(|i| format!("evt_{i:03}"))
        .collect();
    assert_eq!(pages, 1, "43 ignored rows fit one page");
    let mut sorted = seen.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want);
    // 60 more ignored rows: two pages, every row once.
    app.sql(
        "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status, claimed_at,
                                    completed_at, response_status, response_body)
         SELECT 'github', 'gh_' || lpad(i::text, 3, '0'), 'push', sha256(('gh' || i)::bytea),
                'completed', now() - (i / 2) * interval '1 second',
                now() - (i / 2) * interval '1 second', 200,
                jsonb_build_object('status', 'ignored', 'event_type', 'push')
         FROM generate_series(1, 60) AS i",
    )
    .await;
    let mut seen = Vec::new();
    let mut path = "/events?outcome=ignored".to_owned();
    let mut pages = 0;
    loop {
        let html = app.page(&path).await;
        let listed = outcomes(&html);
        assert!(listed.len() <= 50);
        for (id, outcome) in listed {
            assert_eq!(outcome, "ignored", "{id}");
            seen.push(id);
        }
        pages += 1;
        let Some(at) = html.find("rel=\"next\" href=\"") else {
            break;
        };
        let rest = &html[at + "rel=\"next\" href=\"".len()..];
        path = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
    }
    assert_eq!(pages, 3, "103 ignored rows: 50, 50, 3");
    assert_eq!(seen.len(), 103, "{seen:?}");
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 103, "a row twice: {seen:?}");
}

#[tokio::test]
async fn the_rejected_page_shows_the_last_day_and_week_per_source_and_reason() {
    let app = spawn(false).await;
    let (status, html) = app.get("/rejected").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("None in the last 7 days."), "{html}");
    // Counts as the receiver writes them: per source, reason and hour.
    app.sql(
        "INSERT INTO rejected_delivery (source, reason, bucket, count, last_at)
         SELECT source, reason, date_trunc('hour', now() - age, 'UTC'), n,
                date_trunc('hour', now() - age, 'UTC') + interval '5 minutes'
         FROM (VALUES ('stripe', 'unauthorized', interval '10 minutes', 7),
                      ('stripe', 'unauthorized', interval '30 hours', 5),
                      ('stripe', 'unauthorized', interval '10 days', 100),
                      ('stripe', 'too_large', interval '3 days', 2),
                      ('(unknown)', 'unknown_source', interval '2 hours', 4)) AS r(source, reason, age, n)",
    )
    .await;
    let html = app.page("/rejected").await;
    let figure = |source: &str, reason: &str, window: &str| {
        let needle =
            format!("data-source=\"{source}\" data-reason=\"{reason}\" data-window=\"{window}\">");
        let at = html
            .find(&needle)
            .unwrap_or_else(|| panic!("{needle} in {html}"));
        let rest = &html[at + needle.len()..];
        rest[..rest.find('<').unwrap()].to_owned()
    };
    assert_eq!(figure("stripe", "unauthorized", "day"), "7");
    // The week holds the day, never the ten-day-old hour.
    assert_eq!(figure("stripe", "unauthorized", "week"), "12");
    assert_eq!(figure("stripe", "too_large", "day"), "0");
    assert_eq!(figure("stripe", "too_large", "week"), "2");
    assert_eq!(figure("(unknown)", "unknown_source", "day"), "4");
    assert_eq!(figure("(unknown)", "unknown_source", "week"), "4");
    assert_eq!(html.matches("<tr class=\"rejected\">").count(), 3, "{html}");
    // Linked from the navigation on every page.
    assert!(app
        .page("/")
        .await
        .contains("<a href=\"/rejected\">Rejected</a>"));
}

#[tokio::test]
async fn keyset_pages_return_every_row_once_also_when_rows_arrive_between_pages() {
    let app = spawn(false).await;
    // 130 rows, several sharing a claimed_at (ties broken by source and event id).
    app.sql(
        "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, status, claimed_at,
                                    next_attempt_at)
         SELECT CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END, 'evt_' || i, 'invoice.paid',
                sha256(i::text::bytea), 'claimed',
                now() - (i / 3) * interval '1 second', now()
         FROM generate_series(1, 130) AS i",
    )
    .await;
    let mut seen = Vec::new();
    let mut path = "/events".to_owned();
    let mut pages = 0;
    loop {
        let html = app.page(&path).await;
        let ids = linked_ids(&html, "events");
        assert!(ids.len() <= 50);
        seen.extend(ids);
        pages += 1;
        // New deliveries between pages: newer than every listed row, so never on a later page.
        app.sql(&row(
            "stripe",
            &format!("evt_new_{pages}"),
            "invoice.paid",
            "claimed",
            0,
        ))
        .await;
        let Some(at) = html.find("rel=\"next\" href=\"") else {
            break;
        };
        let rest = &html[at + "rel=\"next\" href=\"".len()..];
        path = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
        assert!(path.contains("after="), "{path}");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 130, "{seen:?}");
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 130, "a row twice: {seen:?}");
    assert!(seen.iter().all(|id| !id.starts_with("evt_new")));
}

#[tokio::test]
async fn the_event_page_shows_the_timeline_response_payload_and_outbox() {
    let app = spawn(false).await;
    let mut seed = row("stripe", "evt_done", "invoice.paid", "completed", 5);
    seed.push_str(
        "UPDATE webhook_event SET attempts = 2, lease_token = 11,
             history = jsonb_build_array(jsonb_build_object(
                 'action', 'redrive', 'at', '2026-12-01T10:00:00.000Z', 'status', 'dead',
                 'attempts', 8, 'last_error', 'downstream answered 502',
                 'dead_at', '2026-12-01T09:00:00.000Z', 'claimed_at', '2026-12-01T08:00:00.000Z'))
         WHERE event_id = 'evt_done';
         INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type, status,
                             attempts, last_status, delivered_at)
         VALUES ('stripe', 'evt_done', 1, 'invoice.paid', 'billing', '{}', 'application/json',
                 'delivered', 1, 200, now());",
    );
    // slack keeps digests only (this test's sources): an older row's payload is never shown.
    seed.push_str(&row("slack", "Ev_lean", "app_mention", "completed", 5));
    app.sql(&seed).await;
    let html = app.page("/events/stripe/evt_done").await;
    for text in [
        "2026-12-01T08:00:00Z",
        "dead after 8 attempts: downstream answered 502",
        "re-driven by an operator",
        "completed by the worker, attempt 2",
        "200 {&quot;status&quot;:&quot;ok&quot;}",
        "stripe:evt_done:1",
        "billing",
        "delivered",
    ] {
        assert!(html.contains(text), "{text} missing: {html}");
    }
    // The payload, pretty-printed, behind a closed <details>.
    let details = html.find("<details>").expect("a details element");
    let payload = html
        .find("&quot;secret_marker&quot;: &quot;pl_evt_done&quot;")
        .unwrap();
    assert!(payload > details, "{html}");
    let html = app.page("/events/slack/Ev_lean").await;
    assert!(!html.contains("pl_Ev_lean"), "{html}");
    // Completed inline, as the receiver's one statement writes it: attempts 1, never leased.
    app.sql("UPDATE webhook_event SET attempts = 1 WHERE event_id = 'Ev_lean'")
        .await;
    let html = app.page("/events/slack/Ev_lean").await;
    assert!(html.contains("completed inline, in the delivery"), "{html}");
    assert!(!html.contains("by the worker"), "{html}");
    assert!(!html.contains("<details>"), "{html}");
    // Percent-encoded segments, and a key not in the ledger.
    app.sql(&row("github", "a/b c", "push", "completed", 1))
        .await;
    let html = app.page("/events/github/a%2Fb%20c").await;
    assert!(html.contains("a/b c"), "{html}");
    let (status, _) = app.get("/events/stripe/evt_missing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_stuck_page_lists_what_hookledger_stuck_lists() {
    let app = spawn(false).await;
    let mut seed = row(
        "stripe-deferred",
        "evt_stuck_old",
        "invoice.paid",
        "claimed",
        60,
    );
    seed.push_str(&row(
        "stripe-deferred",
        "evt_stuck_new",
        "invoice.paid",
        "claimed",
        10,
    ));
    seed.push_str(&row(
        "stripe-deferred",
        "evt_fresh",
        "invoice.paid",
        "claimed",
        1,
    ));
    // An expired lease counts too.
    seed.push_str(&row(
        "stripe",
        "evt_leased",
        "invoice.paid",
        "processing",
        30,
    ));
    app.sql(&seed).await;
    let html = app.page("/stuck").await;
    assert_eq!(cell(&html, "stripe-deferred", "figure", "stuck"), "2");
    assert_eq!(cell(&html, "stripe", "figure", "stuck"), "1");
    let ids = linked_ids(&html, "stuck");
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[0], "evt_stuck_old");
    assert!(!ids.contains(&"evt_fresh".to_owned()));
    let html = app.page("/stuck?stuck_after_secs=1800").await;
    // An expired lease is stuck whatever the threshold.
    assert_eq!(linked_ids(&html, "stuck"), ["evt_stuck_old", "evt_leased"]);
    let (status, body) = app.get("/stuck?stuck_after_secs=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("stuck_after_secs"), "{body}");
}

async fn status_of(app: &App, id: &str) -> String {
    app.db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT status::text FROM webhook_event WHERE event_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
}

/// The value of the hidden field `name` in a page's form.
fn hidden(html: &str, name: &str) -> String {
    let needle = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&needle)
        .unwrap_or_else(|| panic!("no {name}: {html}"))
        + needle.len();
    html[at..at + html[at..].find('"').unwrap()].replace("&amp;", "&")
}

#[tokio::test]
async fn redrive_from_the_page_moves_exactly_the_confirmed_rows() {
    let app = spawn(false).await;
    let mut seed = String::new();
    for id in ["evt_d1", "evt_d2", "evt_d3"] {
        seed.push_str(&row("stripe", id, "invoice.paid", "dead", 20));
    }
    // Outside the window (went dead 3 hours ago), and another source.
    seed.push_str(&row("stripe", "evt_d_old", "invoice.paid", "dead", 180));
    seed.push_str(&row("github", "gh_dead", "push", "dead", 20));
    app.sql(&seed).await;
    let since: String = app
        .db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT to_char((now() - interval '1 hour') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let dead = app
        .page(&format!("/dead?source=stripe&since={since}"))
        .await;
    assert_eq!(
        linked_ids(&dead, "dead-events"),
        ["evt_d1", "evt_d2", "evt_d3"]
    );
    let confirm_at = dead
        .find("href=\"/redrive/confirm?what=dead&amp;source=stripe&amp;since=")
        .unwrap();
    let rest = &dead[confirm_at + "href=\"".len()..];
    let confirm = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
    let html = app.page(&confirm).await;
    assert!(html.contains("<strong id=\"matched\">3</strong>"), "{html}");
    assert_eq!(hidden(&html, "confirmed"), "3");
    let fields: Vec<(String, String)> = ["what", "source", "since", "confirmed", "csrf"]
        .iter()
        .map(|name| (name.to_string(), hidden(&html, name)))
        .collect();
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();

    // A fourth dead letter in the window since the confirmation: refused, nothing moves.
    app.sql(&row("stripe", "evt_d4", "invoice.paid", "dead", 10))
        .await;
    let (status, body) = app.post("/redrive", &fields).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("<strong id=\"matched\">4</strong>"), "{body}");
    assert_eq!(
        app.count("SELECT count(*) FROM webhook_event WHERE status = 'dead'")
            .await,
        6
    );

    // Confirmed again with the new count: exactly those four move.
    let mut fields = fields.clone();
    fields.retain(|(n, _)| *n != "confirmed");
    fields.push(("confirmed", "4"));
    let (status, body) = app.post("/redrive", &fields).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("<strong id=\"redriven\">4</strong>"),
        "{body}"
    );
    for id in ["evt_d1", "evt_d2", "evt_d3", "evt_d4"] {
        assert_eq!(status_of(&app, id).await, "claimed", "{id}");
    }
    assert_eq!(status_of(&app, "evt_d_old").await, "dead");
    assert_eq!(status_of(&app, "gh_dead").await, "dead");

    // One row, from its event page's link.
    let html = app.page("/events/github/gh_dead").await;
    assert!(
        html.contains("/redrive/confirm?what=dead&amp;source=github&amp;event_id=gh_dead"),
        "{html}"
    );
    let html = app
        .page("/redrive/confirm?what=dead&source=github&event_id=gh_dead")
        .await;
    assert!(html.contains("<strong id=\"matched\">1</strong>"), "{html}");
    let csrf = hidden(&html, "csrf");
    let (status, _) = app
        .redrive_one("dead", "github", "gh_dead", "1", &csrf)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(status_of(&app, "gh_dead").await, "claimed");
    assert_eq!(status_of(&app, "evt_d_old").await, "dead");
}

#[tokio::test]
async fn dead_outbox_messages_are_redriven_as_hookledger_redrive_outbox_does() {
    let app = spawn(false).await;
    let mut seed = row("stripe", "evt_ob", "invoice.paid", "completed", 5);
    seed.push_str(
        "INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type, status,
                             attempts, last_error, last_status, dead_at)
         VALUES ('stripe', 'evt_ob', 1, 'invoice.paid', 'billing', '{}', 'application/json',
                 'dead', 8, 'fatal: answered 400', 400, now()),
                ('stripe', 'evt_ob', 2, 'invoice.paid', 'billing', '{}', 'application/json',
                 'dead', 8, 'fatal: answered 400', 400, now());",
    );
    app.sql(&seed).await;
    let dead = app.page("/dead").await;
    assert!(
        dead.contains("stripe:evt_ob:1") && dead.contains("stripe:evt_ob:2"),
        "{dead}"
    );
    let html = app
        .page("/redrive/confirm?what=outbox&source=stripe&event_id=evt_ob")
        .await;
    assert!(html.contains("<strong id=\"matched\">2</strong>"), "{html}");
    let csrf = hidden(&html, "csrf");
    let (status, body) = app
        .redrive_one("outbox", "stripe", "evt_ob", "2", &csrf)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0")
            .await,
        2
    );
    assert_eq!(status_of(&app, "evt_ob").await, "completed");
}

#[tokio::test]
async fn a_post_without_or_with_a_wrong_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn(false).await;
    app.sql(&row("stripe", "evt_d1", "invoice.paid", "dead", 20))
        .await;
    let base = [
        ("what", "dead"),
        ("source", "stripe"),
        ("event_id", "evt_d1"),
        ("confirmed", "1"),
    ];
    let other = hookledger_console::auth::csrf_token(&AccessToken::random().unwrap());
    for csrf in [None, Some(""), Some("00"), Some(other.as_str())] {
        let mut fields = base.to_vec();
        if let Some(csrf) = csrf {
            fields.push(("csrf", csrf));
        }
        let (status, body) = app.post("/redrive", &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{csrf:?}: {body}");
        assert!(body.contains("CSRF"), "{body}");
        assert_eq!(status_of(&app, "evt_d1").await, "dead");
    }
    // GET is never a re-drive.
    let (status, _) = app
        .get("/redrive?what=dead&source=stripe&event_id=evt_d1&confirmed=1")
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(status_of(&app, "evt_d1").await, "dead");
}

#[tokio::test]
async fn read_only_mode_has_no_redrive() {
    let app = spawn(true).await;
    app.sql(&row("stripe", "evt_d1", "invoice.paid", "dead", 20))
        .await;
    for path in [
        "/dead?source=stripe&since=2000-01-01T00:00:00Z",
        "/events/stripe/evt_d1",
    ] {
        let html = app.page(path).await;
        assert!(!html.contains("/redrive"), "{path}: {html}");
        assert!(!html.contains("re-drive…"), "{path}: {html}");
        assert!(!html.contains("/forget"), "{path}: {html}");
    }
    let (status, _) = app
        .get("/redrive/confirm?what=dead&source=stripe&event_id=evt_d1")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app
        .get("/forget/confirm?source=stripe&event_id=evt_d1&by=ops")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let csrf = hookledger_console::auth::csrf_token(&AccessToken::new(&app.token).unwrap());
    let (status, _) = app
        .redrive_one("dead", "stripe", "evt_d1", "1", &csrf)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(status_of(&app, "evt_d1").await, "dead");
}

#[tokio::test]
async fn no_generated_url_carries_the_token_or_a_payload() {
    let app = spawn(false).await;
    let mut seed = String::new();
    for i in 0..60 {
        seed.push_str(&row(
            "stripe",
            &format!("evt_{i}"),
            "invoice.paid",
            "dead",
            60 - i,
        ));
    }
    app.sql(&seed).await;
    let mut pages = Vec::new();
    for path in [
        "/",
        "/events",
        "/events?source=stripe&status=dead",
        "/events?outcome=dead",
        "/events/stripe/evt_3",
        "/rejected",
        "/stuck",
        "/dead",
        "/dead?source=stripe&since=2000-01-01T00:00:00Z",
        "/redrive/confirm?what=dead&source=stripe&event_id=evt_3",
    ] {
        pages.push((path, app.page(path).await));
    }
    let mut checked = 0;
    for (path, html) in &pages {
        for url in urls(html) {
            checked += 1;
            assert!(!url.contains(&app.token), "{path}: {url}");
            assert!(!url.contains("token="), "{path}: {url}");
            assert!(
                !url.contains("pl_evt") && !url.contains("secret_marker"),
                "{path}: {url}"
            );
        }
        // The token itself appears nowhere in a page (the CSRF token is derived from it).
        assert!(!html.contains(&app.token), "{path}");
    }
    assert!(checked > 100, "{checked}");
}

#[tokio::test]
async fn a_database_failure_is_a_503_without_sql() {
    let db = test_db().await.unwrap();
    let app = spawn_on(db, false).await;
    // The ledger's table gone from under the console: the statements fail.
    app.sql("ALTER TABLE webhook_event RENAME TO webhook_event_gone")
        .await;
    let (status, body) = app.get("/events").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("Database unavailable"), "{body}");
    assert!(
        !body.contains("SELECT") && !body.contains("webhook_event"),
        "{body}"
    );
}

/// The plan of `sql` with `params` on a seeded ledger: every filter combination the events page
/// offers reads webhook_event through an index.
#[tokio::test]
async fn every_console_query_is_served_by_an_index() {
    use hookledger_console::queries;
    use shared::ledger::EventOutcome;
    use tokio_postgres::types::ToSql;
    let db = test_db().await.unwrap();
    let client = db.connect().await.unwrap();
    // 20,000 events over six sources and two days, mostly completed, some dead and failed.
    client
        .batch_execute(
            "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status,
                                        attempts, last_error, response_status, response_body,
                                        claimed_at, completed_at, dead_at, next_attempt_at)
             SELECT (ARRAY['stripe', 'github', 'shopify', 'slack', 'paddle', 'partner'])[1 + i % 6],
                    'evt_' || lpad(i::text, 6, '0'),
                    (ARRAY['invoice.paid', 'charge.refunded', 'push', 'orders/create'])[1 + i % 4],
                    sha256(i::text::bytea), convert_to('{\"n\": ' || i || '}', 'UTF8'),
                    s.status::event_status,
                    CASE WHEN s.status = 'completed' THEN 1 ELSE 8 END,
                    CASE WHEN s.status <> 'completed' THEN 'downstream answered 502' END,
                    CASE WHEN s.status = 'completed' THEN 200 END,
                    CASE WHEN s.status = 'completed' THEN '{\"ok\": true}'::jsonb END,
                    now() - i * interval '8 seconds',
                    CASE WHEN s.status = 'completed' THEN now() - i * interval '8 seconds' END,
                    CASE WHEN s.status = 'dead' THEN now() - i * interval '8 seconds' END,
                    CASE WHEN s.status = 'failed' THEN now() END
             FROM generate_series(1, 20000) AS i,
                  LATERAL (SELECT CASE WHEN i % 50 = 0 THEN 'dead'
                                       WHEN i % 77 = 0 THEN 'failed'
                                       ELSE 'completed' END AS status) AS s;
             INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type,
                                 status, attempts, dead_at, delivered_at)
             SELECT source, event_id, 1, event_type, 'billing', '{}', 'application/json',
                    CASE WHEN status = 'dead' THEN 'dead'::outbox_status ELSE 'delivered' END, 1,
                    CASE WHEN status = 'dead' THEN now() END,
                    CASE WHEN status = 'dead' THEN NULL ELSE now() END
             FROM webhook_event;",
        )
        .await
        .unwrap();
    for table in ["webhook_event", "outbox"] {
        client
            .batch_execute(&format!("VACUUM ANALYZE {table}"))
            .await
            .unwrap();
    }
    client
        .batch_execute("SET plan_cache_mode = force_custom_plan")
        .await
        .unwrap();
    let now = std::time::SystemTime::now();
    let hour = std::time::Duration::from_secs(3600);
    let ago = |h: u64| now - hour * h as u32;
    let text = |v: &str| Some(v.to_owned());
    let none: Option<String> = None;
    let no_time: Option<std::time::SystemTime> = None;
    let cursor_at = Some(ago(10));
    // (label, source, status, event_type, from, until, id_prefix, keyset)
    #[allow(clippy::type_complexity)]
    let combinations: Vec<(
        &str,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<std::time::SystemTime>,
        Option<std::time::SystemTime>,
        Option<String>,
        bool,
    )> = vec![
        (
            "no filter",
            none.clone(),
            none.clone(),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            false,
        ),
        (
            "no filter, next page",
            none.clone(),
            none.clone(),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            true,
        ),
        (
            "source",
            text("stripe"),
            none.clone(),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            false,
        ),
        (
            "source, next page",
            text("stripe"),
            none.clone(),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            true,
        ),
        (
            "status",
            none.clone(),
            text("dead"),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            false,
        ),
        (
            "status, next page",
            none.clone(),
            text("failed"),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            true,
        ),
        (
            "event type",
            none.clone(),
            none.clone(),
            text("push"),
            no_time,
            no_time,
            none.clone(),
            false,
        ),
        (
            "time range",
            none.clone(),
            none.clone(),
            none.clone(),
            Some(ago(30)),
            Some(ago(20)),
            none.clone(),
            false,
        ),
        (
            "time range, next page",
            none.clone(),
            none.clone(),
            none.clone(),
            Some(ago(30)),
            Some(ago(5)),
            none.clone(),
            true,
        ),
        (
            "from only",
            none.clone(),
            none.clone(),
            none.clone(),
            Some(ago(2)),
            no_time,
            none.clone(),
            false,
        ),
        (
            "source + id prefix",
            text("github"),
            none.clone(),
            none.clone(),
            no_time,
            no_time,
            text("evt_01"),
            false,
        ),
        (
            "source + status",
            text("stripe"),
            text("dead"),
            none.clone(),
            no_time,
            no_time,
            none.clone(),
            false,
        ),
        (
            "source + status + type + range",
            text("stripe"),
            text("completed"),
            text("invoice.paid"),
            Some(ago(40)),
            Some(ago(1)),
            none.clone(),
            true,
        ),
        (
            "everything",
            text("paddle"),
            text("completed"),
            text("invoice.paid"),
            Some(ago(40)),
            Some(ago(1)),
            text("evt_0"),
            true,
        ),
    ];
    let limit = 51i64;
    // Each combination without an outcome, then with the outcomes of completed rows (the rule)
    // and two of the others, as the page passes them: an outcome becomes its status, so
    // `dead` and `failed` plan as the status filter does (`claimed` and `processing` too,
    // which this ledger has none of: as with that status filter, a table the statistics say
    // holds none is read whole, to find none); a contradiction reads nothing.
    let outcomes = [
        None,
        Some(EventOutcome::Processed),
        Some(EventOutcome::Ignored),
        Some(EventOutcome::Stale),
        Some(EventOutcome::Dead),
        Some(EventOutcome::Failed),
    ];
    for (label, source, status, event_type, from, until, prefix, paged) in &combinations {
        for outcome in outcomes {
            let filter = queries::EventFilter {
                status: status.clone(),
                outcome,
                ..Default::default()
            };
            let Some((status, outcome)) = filter.status_and_outcome() else {
                continue;
            };
            let after_at = if *paged { cursor_at } else { None };
            let after_source = paged.then(|| "stripe".to_owned());
            let after_id = paged.then(|| "evt_004500".to_owned());
            let params: [&(dyn ToSql + Sync); 11] = [
                source,
                &status,
                event_type,
                from,
                until,
                prefix,
                &after_at,
                &after_source,
                &after_id,
                &limit,
                &outcome,
            ];
            let plan = explain(
                &client,
                queries::EVENTS.text,
                queries::EVENTS.types,
                &params,
            )
            .await;
            // An event type has no index of its own: given alone with a rare outcome (or the
            // status a dead or failed outcome becomes), the statistics say fewer rows than a
            // page match it, and PostgreSQL reads them all, as it does for
            // `?event_type=push&status=dead` without an outcome.
            if *label == "event type"
                && filter.outcome.is_some_and(|o| o != EventOutcome::Processed)
            {
                continue;
            }
            assert!(
                !plan.contains("Seq Scan on webhook_event"),
                "{label}, outcome {outcome:?}:\n{plan}"
            );
            assert!(
                plan.contains("Index"),
                "{label}, outcome {outcome:?}:\n{plan}"
            );
        }
    }
    let since = ago(6);
    let sources = vec!["stripe", "github"];
    let params: [&(dyn ToSql + Sync); 3] = [&sources, &since, &now];
    let plan = explain(
        &client,
        queries::PER_MINUTE.text,
        queries::PER_MINUTE.types,
        &params,
    )
    .await;
    assert!(
        plan.contains("webhook_event_source_claimed_at_idx") && !plan.contains("Seq Scan"),
        "{plan}"
    );
    for sql in [&queries::DEAD_EVENTS, &queries::DEAD_MESSAGES] {
        for (source, since) in [(none.clone(), no_time), (text("stripe"), Some(ago(30)))] {
            let params: [&(dyn ToSql + Sync); 4] = [&source, &since, &no_time, &200i64];
            let plan = explain(&client, sql.text, sql.types, &params).await;
            assert!(!plan.contains("Seq Scan"), "{}:\n{plan}", sql.text);
        }
    }
}

async fn explain(
    client: &tokio_postgres::Client,
    sql: &str,
    types: &[tokio_postgres::types::Type],
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    let statement = client
        .prepare_typed(&format!("EXPLAIN {sql}"), types)
        .await
        .unwrap();
    client
        .query(&statement, params)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends `head` (request line and headers, without the final blank line) as is over TCP, so the
/// path reaches the server byte for byte (no client normalizes it): the response's head.
async fn raw_head(app: &App, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    response[..response.find("\r\n\r\n").unwrap_or(response.len())].to_owned()
}

#[tokio::test]
async fn the_token_redirect_never_leaves_the_origin() {
    let app = spawn(false).await;
    for path in [
        "//evil.example/",
        "//evil.example/x?a=1",
        "/\\evil.example/",
        "/\\/evil.example/",
        "///evil.example/",
        "/%2F/evil.example/",
        "/%5Cevil.example/",
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        let head = raw_head(
            &app,
            &format!("GET {path}{sep}token={} HTTP/1.1", app.token),
        )
        .await;
        let status = head.split(' ').nth(1).unwrap_or("");
        if status == "400" {
            continue; // the server refused the request target itself: no redirect at all
        }
        assert_eq!(status, "303", "{path}: {head}");
        let location = head
            .lines()
            .find_map(|l| l.strip_prefix("location: "))
            .unwrap_or_else(|| panic!("{path}: {head}"));
        // On this origin: a path that a browser cannot read as another host (`//host`, and
        // `/\host`, which browsers read as `//host`).
        assert!(location.starts_with('/'), "{path}: {location}");
        let second = location.as_bytes().get(1).copied();
        assert!(
            second != Some(b'/') && second != Some(b'\\'),
            "{path}: {location}"
        );
        assert!(!location.contains("token="), "{path}: {location}");
    }
}

#[tokio::test]
async fn hostile_filters_cursors_and_paths_are_400_or_404_never_500_or_503() {
    use base64::Engine;
    let app = spawn(false).await;
    app.sql(&row("stripe", "evt_d1", "invoice.paid", "dead", 20))
        .await;
    let b64 = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    let mut probes = vec![
        "/events?source=%00".to_owned(),
        "/events?event_type=a%00b".to_owned(),
        "/events?source=stripe&id_prefix=%00".to_owned(),
        "/events?after=%FF%FE".to_owned(),
        "/events?after=!!".to_owned(),
        format!("/events?after={}", "A".repeat(20_000)),
        "/events?from=0000-01-01T00:00:00Z".to_owned(),
        "/events?until=9999-12-31T23:59:59Z".to_owned(),
        "/events?status=%00".to_owned(),
        "/events?outcome=%00".to_owned(),
        "/events?outcome=ignored%00".to_owned(),
        "/dead?source=%00".to_owned(),
        "/dead?since=%00".to_owned(),
        "/events/%00/evt_d1".to_owned(),
        "/events/stripe/evt%00".to_owned(),
        "/events/stripe/%FF".to_owned(),
        "/events/stripe/..%2F..%2Fetc".to_owned(),
        "/events/stripe/a%2Fb".to_owned(),
        "/redrive/confirm?what=dead&source=stripe&event_id=%00".to_owned(),
        "/redrive/confirm?what=dead&source=%00&event_id=x".to_owned(),
        "/redrive/confirm?what=outbox&source=stripe&event_id=%00".to_owned(),
        "/forget/confirm?source=stripe&event_id=%00&by=ops".to_owned(),
        "/forget/confirm?source=%00&event_id=x&by=ops".to_owned(),
        "/forget/confirm?source=stripe&event_id=evt_d1&by=o%00ps".to_owned(),
        "/forget/confirm?source=stripe&event_id=evt_d1&by=ops&reason=%00".to_owned(),
        "/forget/confirm?source=stripe&event_id=evt_d1&scope=%00&by=ops".to_owned(),
        "/forget/confirm?source=stripe&event_id=evt_d1&scope=subject&by=ops".to_owned(),
        "/forget/confirm?source=stripe&event_id=evt_d1".to_owned(),
        format!(
            "/forget/confirm?source=stripe&event_id=evt_d1&by={}",
            "x".repeat(300)
        ),
        "/?hours=99999999999999999999999".to_owned(),
        "/?hours=-1".to_owned(),
        "/?hours=0".to_owned(),
    ];
    for cursor in [
        r#"[18446744073709551615,"stripe","evt"]"#,
        r#"[9223372036854775807,"stripe","evt"]"#,
        r#"[300000000000000000,"stripe","evt"]"#,
        r#"[1,"stripe\u0000","evt"]"#,
        r#"[1,"stripe","evt\u0000"]"#,
        r#"[-1,"stripe","evt"]"#,
        r#"[1.5,"stripe","evt"]"#,
        r#"[1,"stripe"]"#,
        r#"{"a":1}"#,
    ] {
        probes.push(format!("/events?after={}", b64(cursor)));
    }
    let mut failed = Vec::new();
    for probe in &probes {
        let (status, body) = app.get(probe).await;
        if ![
            StatusCode::OK,
            StatusCode::BAD_REQUEST,
            StatusCode::NOT_FOUND,
        ]
        .contains(&status)
        {
            failed.push(format!("{probe}: {status} {body}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // The ledger is still there, the console still serves.
    assert!(app.page("/events").await.contains("evt_d1"));
}

#[tokio::test]
async fn hostile_ledger_text_is_escaped_on_every_page_and_in_the_chart() {
    let app = spawn(false).await;
    let evil = r#"x"'></pre></td><script>alert(1)</script><img src=x onerror=alert(2)><svg onload=alert(3)>javascript:alert(4)"#;
    let evil_source = r#"s"><script>alert(5)</script>"#;
    // Every text column the pages show, hostile; a dead event (dead letters, confirmation),
    // a completed one (stored response, payload), a stuck one, a dead outbox message.
    app.sql(&format!(
        "INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status,
                                    attempts, last_error, dead_at, claimed_at)
         VALUES ('stripe', $e${evil}$e$, $e${evil}$e$, sha256('a'), convert_to($e${evil}$e$, 'UTF8'),
                 'dead', 8, $e${evil}$e$, now(), now() - interval '5 minutes'),
                ($e${evil_source}$e$, $e${evil}$e$, $e${evil}$e$, sha256('a'), convert_to($e${evil}$e$, 'UTF8'),
                 'dead', 8, $e${evil}$e$, now(), now() - interval '5 minutes');
         INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status,
                                    response_status, response_body, completed_at, claimed_at)
         VALUES ('stripe', 'evt_resp', $e${evil}$e$, sha256('a'),
                 convert_to($e${{\"k\": \"{}\"}}$e$, 'UTF8'), 'completed', 200, to_jsonb($e${evil}$e$::text),
                 now(), now() - interval '3 minutes');
         INSERT INTO webhook_event (source, event_id, event_type, payload_digest, payload, status,
                                    attempts, lease_expires_at, next_attempt_at, claimed_at)
         VALUES ('stripe', $e$stuck{evil}$e$, $e${evil}$e$, sha256('a'), '{{}}', 'processing', 1,
                 now() - interval '2 hours', now() - interval '2 hours', now() - interval '3 hours');
         INSERT INTO outbox (source, event_id, n, event_type, target, payload, content_type, status,
                             attempts, last_error, dead_at)
         VALUES ('stripe', $e${evil}$e$, 1, $e${evil}$e$, $e${evil}$e$, '{{}}', 'application/json',
                 'dead', 8, $e${evil}$e$, now());",
        evil.replace('"', "\\\"")
    ))
    .await;
    let id = hookledger_console::layout::encode(evil);
    let paths = [
        "/".to_owned(),
        "/events".to_owned(),
        format!(
            "/events?source={}",
            hookledger_console::layout::encode(evil_source)
        ),
        format!("/events?event_type={id}&id_prefix={id}&source=stripe"),
        format!("/events/stripe/{id}"),
        "/events/stripe/evt_resp".to_owned(),
        format!("/events/stripe/stuck{id}"),
        format!("/events/stripe/{id}x"),
        "/stuck".to_owned(),
        "/dead".to_owned(),
        format!("/dead?source=stripe&since=2000-01-01T00:00:00Z&until={id}"),
        "/dead?source=stripe&since=2000-01-01T00:00:00Z".to_owned(),
        format!("/redrive/confirm?what=dead&source=stripe&event_id={id}"),
        format!("/redrive/confirm?what=outbox&source=stripe&event_id={id}"),
        format!("/redrive/confirm?what={id}&source=stripe&event_id={id}"),
        format!("/events?status={id}"),
        format!("/events?from={id}"),
        format!("/?hours={id}"),
    ];
    let mut shown = 0;
    for path in &paths {
        let (status, html) = app.get(path).await;
        assert!(
            status != StatusCode::INTERNAL_SERVER_ERROR,
            "{path}: {html}"
        );
        let lower = html.to_lowercase();
        for tag in [
            "<script",
            "<img",
            "<svg onload",
            "</pre></td>",
            "href=\"javascript",
        ] {
            assert!(!lower.contains(tag), "{path}: {tag} in {html}");
        }
        shown += usize::from(html.contains("&lt;script&gt;alert("));
    }
    // The hostile text is shown, escaped, on most pages (not a page that refused it).
    assert!(shown >= 10, "{shown}");
    // In the chart's SVG too (the hostile source has a chart on the overview).
    let overview = app.page("/").await;
    assert!(
        overview.contains("s&quot;&gt;&lt;script&gt;alert(5)&lt;/script&gt;"),
        "{overview}"
    );
}

#[tokio::test]
async fn every_response_has_the_security_headers_and_hostile_posts_change_nothing() {
    let app = spawn(false).await;
    app.sql(&row("stripe", "evt_d1", "invoice.paid", "dead", 20))
        .await;
    let csrf = hookledger_console::auth::csrf_token(&AccessToken::new(&app.token).unwrap());
    let check = |response: &reqwest::Response, what: &str| {
        let headers = response.headers();
        assert_eq!(headers["cache-control"], "no-store", "{what}");
        assert_eq!(headers["x-frame-options"], "DENY", "{what}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{what}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .starts_with("default-src 'none'"),
            "{what}"
        );
    };
    let url = |path: &str| format!("{}{path}", app.base);
    let mut responses = vec![
        ("401", app.client.get(url("/")).send().await.unwrap()),
        (
            "303",
            app.client
                .get(url(&format!("/?token={}", app.token)))
                .send()
                .await
                .unwrap(),
        ),
    ];
    for (what, request) in [
        ("404", app.client.get(url("/nope"))),
        ("400", app.client.get(url("/events?status=gone"))),
        ("400 path", app.client.get(url("/events/stripe/%FF"))),
        ("405", app.client.get(url("/redrive"))),
        ("405 put", app.client.put(url("/redrive"))),
        ("405 post", app.client.post(url("/redrive/confirm"))),
        ("403", app.client.post(url("/redrive")).form(&[("what", "dead")])),
        (
            "415 json",
            app.client.post(url("/redrive")).json(&serde_json::json!({
                "what": "dead", "source": "stripe", "event_id": "evt_d1", "confirmed": "1", "csrf": csrf
            })),
        ),
        (
            "text/plain",
            app.client
                .post(url("/redrive"))
                .header(header::CONTENT_TYPE, "text/plain")
                .body(format!("what=dead&source=stripe&event_id=evt_d1&confirmed=1&csrf={csrf}")),
        ),
        (
            "two csrf fields",
            app.client
                .post(url("/redrive"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(format!(
                    "what=dead&source=stripe&event_id=evt_d1&confirmed=1&csrf=x&csrf={csrf}"
                )),
        ),
        (
            "csrf in the query",
            app.client
                .post(url(&format!("/redrive?csrf={csrf}")))
                .form(&[("what", "dead"), ("source", "stripe"), ("event_id", "evt_d1"), ("confirmed", "1")]),
        ),
        (
            "method override",
            app.client
                .get(url(&format!(
                    "/redrive?_method=POST&what=dead&source=stripe&event_id=evt_d1&confirmed=1&csrf={csrf}"
                )))
                .header("X-HTTP-Method-Override", "POST"),
        ),
    ] {
        responses.push((what, request.bearer_auth(&app.token).send().await.unwrap()));
    }
    for confirmed in ["-1", "0", "2", "18446744073709551616", "1e0", "one", ""] {
        let (status, body) = app
            .redrive_one("dead", "stripe", "evt_d1", confirmed, &csrf)
            .await;
        assert!(
            [StatusCode::BAD_REQUEST, StatusCode::CONFLICT].contains(&status),
            "{confirmed}: {status} {body}"
        );
    }
    for (what, response) in responses {
        check(&response, what);
        assert!(
            response.status().is_client_error() || response.status().is_redirection(),
            "{what}: {}",
            response.status()
        );
    }
    assert_eq!(status_of(&app, "evt_d1").await, "dead");
    // The 503 page too.
    app.sql("ALTER TABLE webhook_event RENAME TO webhook_event_gone")
        .await;
    let response = app
        .client
        .get(url("/events"))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    check(&response, "503");
}

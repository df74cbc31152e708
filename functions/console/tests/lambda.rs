//! The console function against real PostgreSQL (a fresh migrated database per test), driven
//! through its own service stack (`receiver::stack::stack(service_fn(function_handler))`, as
//! its `main` runs it) with API Gateway HTTP API v2 events from `events/console/`, connecting
//! with the database logins the template gives it: the auditor's (read-only) or the replay
//! function's (re-drive).

use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use console_function::handler::{function_handler, router};
use hookledger_console::auth::{authorizer_csrf_token, CsrfKey, Principal};
use hookledger_tests::{local_sources_json, test_db, EventFile, TestDb};
use lambda_http::{service_fn, Context, LambdaEvent, Service};
use secrecy::SecretString;
use serde_json::Value;
use shared::config::ConsoleSettings;
use shared::Settings;

/// The CSRF key every execution environment of a test's "stack" reads.
const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A dead stripe event `evt_console_dead` with its payload, written as the worker leaves one.
const DEAD_ROW: &str = "INSERT INTO webhook_event (source, event_id, event_type, payload_digest,
        payload, status, claimed_at, attempts, last_error, dead_at)
    VALUES ('stripe', 'evt_console_dead', 'payment_intent.succeeded', sha256('x'::bytea),
        convert_to('{\"id\": \"evt_console_dead\"}', 'UTF8'), 'dead', now() - interval '20 minutes',
        8, 'downstream answered 502', now() - interval '10 minutes')";

/// A fresh database holding [`DEAD_ROW`].
async fn seeded_db() -> TestDb {
    let db = test_db().await.unwrap();
    db.connect()
        .await
        .unwrap()
        .batch_execute(DEAD_ROW)
        .await
        .unwrap();
    db
}

/// The re-drive form of [`DEAD_ROW`] (count 1) with the CSRF token a console with [`KEY`]
/// derives for `csrf_sub`.
fn redrive_form(csrf_sub: &str) -> String {
    let key = CsrfKey::new(&SecretString::from(KEY.to_owned())).unwrap();
    let principal = Principal {
        sub: csrf_sub.to_owned(),
        ..Principal::default()
    };
    format!(
        "what=dead&source=stripe&event_id=evt_console_dead&confirmed=1&csrf={}",
        authorizer_csrf_token(&key, &principal)
    )
}

/// The console as the function builds it over `db`, logged in as a fresh member of `group`
/// (`hookledger_auditor`, `hookledger_replay`), with `HOOKLEDGER_CONSOLE_REDRIVE=redrive`,
/// open to the subjects the tests sign in as (`operator-1`, `alice`, `bob`).
async fn console(db: &TestDb, group: &str, redrive: bool) -> &'static Router {
    let allow = [(
        "HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS",
        " operator-1, alice ,bob",
    )];
    console_allowing(db, group, redrive, &allow).await
}

/// [`console`] with the allow rule's variables `allow` (name, value) instead.
async fn console_allowing(
    db: &TestDb,
    group: &str,
    redrive: bool,
    allow: &[(&str, &str)],
) -> &'static Router {
    // The function's logs go where make test's secret scan reads them.
    hookledger_tests::test_log::install();
    let login = format!(
        "console_{}_{}_{}",
        group.trim_start_matches("hookledger_"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!(
            "CREATE ROLE {login} LOGIN PASSWORD 'unused'; GRANT {group} TO {login};"
        ))
        .await
        .unwrap();
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&login).unwrap();
    url.set_password(None).unwrap();
    let sources = local_sources_json().unwrap();
    let settings = Settings::from_lookup(|name| match name {
        "DATABASE_URL" => Some(url.to_string()),
        "HOOKLEDGER_SOURCES" => Some(sources.clone()),
        _ => None,
    })
    .unwrap();
    let console = ConsoleSettings::from_lookup(|name| match name {
        "HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN" => {
            Some("arn:aws:secretsmanager:x:1:secret:csrf".into())
        }
        "HOOKLEDGER_CONSOLE_REDRIVE" => redrive.then(|| "true".to_owned()),
        name => allow
            .iter()
            .find(|(var, _)| *var == name)
            .map(|(_, value)| (*value).to_owned()),
    })
    .unwrap();
    assert_eq!(console.redrive, redrive);
    let pool = shared::db::pool(&settings.database).unwrap();
    let handlers = handlers::examples::registry(&settings.sources);
    let key = SecretString::from(KEY.to_owned());
    Box::leak(Box::new(
        router(settings, pool, handlers, &console, &key).unwrap(),
    ))
}

/// An event of `events/console/`: `method` `path` (with its query) as `sub` (`None`: no
/// authorizer in the request context), with `body` (a form) if given.
fn event(name: &str, method: &str, path: &str, sub: Option<&str>, body: Option<&str>) -> Value {
    let mut json = EventFile::load(name).unwrap().json;
    let (raw_path, query) = path.split_once('?').unwrap_or((path, ""));
    json["rawPath"] = raw_path.into();
    json["rawQueryString"] = query.into();
    json["requestContext"]["http"]["path"] = raw_path.into();
    json["requestContext"]["http"]["method"] = method.into();
    match sub {
        Some(sub) => json["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub.into(),
        None => {
            json["requestContext"]
                .as_object_mut()
                .unwrap()
                .remove("authorizer");
        }
    }
    if let Some(body) = body {
        json["body"] = body.into();
    }
    json
}

/// Runs `event` through the function's service stack over `router`: (status, headers, body).
async fn send(router: &'static Router, event: Value) -> (u16, Value, String) {
    let mut service =
        receiver::stack::stack(service_fn(move |request| function_handler(router, request)));
    let payload = serde_json::value::to_raw_value(&event).unwrap();
    let response = service
        .call(LambdaEvent::new(payload, Context::default()))
        .await
        .unwrap();
    let response = serde_json::to_value(response).unwrap();
    let status = response["statusCode"].as_u64().unwrap() as u16;
    let body = response["body"].as_str().unwrap_or("").to_owned();
    (status, response["headers"].clone(), body)
}

/// The value of the hidden field `name` in `html`.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name}: {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

async fn status_of(db: &TestDb, id: &str) -> String {
    db.connect()
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

const OVERVIEW: &str = "console/overview.json";
const REDRIVE: &str = "console/redrive.json";

#[tokio::test]
async fn an_http_api_event_with_jwt_claims_renders_the_overview_read_only_as_the_auditor() {
    let db = seeded_db().await;
    let console = console(&db, "hookledger_auditor", false).await;

    // The fixture as API Gateway sends it, claims and all.
    let fixture = EventFile::load(OVERVIEW).unwrap().json;
    let (status, headers, body) = send(console, fixture).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Overview"), "{body}");
    assert!(body.contains("<svg"), "the chart: {body}");
    assert_eq!(headers["cache-control"], "no-store", "{headers}");
    assert_eq!(headers["x-frame-options"], "DENY", "{headers}");
    assert!(
        headers["content-security-policy"]
            .as_str()
            .unwrap()
            .starts_with("default-src 'none'"),
        "{headers}"
    );

    // The dead letter is listed, without a re-drive link: read-only by default.
    let (status, _, body) = send(
        console,
        event(OVERVIEW, "GET", "/dead", Some("operator-1"), None),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("evt_console_dead"), "{body}");
    assert!(body.contains("Read-only console"), "{body}");
    assert!(!body.contains("/redrive/confirm"), "{body}");
    let confirm = "/redrive/confirm?what=dead&source=stripe&event_id=evt_console_dead";
    let (status, _, _) = send(
        console,
        event(OVERVIEW, "GET", confirm, Some("operator-1"), None),
    )
    .await;
    assert_eq!(status, 403);
    // Even with the right CSRF token the POST is refused, and the row stays dead.
    let form = redrive_form("operator-1");
    let (status, _, _) = send(
        console,
        event(REDRIVE, "POST", "/redrive", Some("operator-1"), Some(&form)),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(status_of(&db, "evt_console_dead").await, "dead");
}

#[tokio::test]
async fn without_validated_jwt_claims_every_route_is_401() {
    let db = seeded_db().await;
    let console = console(&db, "hookledger_replay", true).await;
    let form = redrive_form("operator-1");
    let gets = [
        "/",
        "/events",
        "/events/stripe/evt_console_dead",
        "/stuck",
        "/dead",
        "/style.css",
        "/nowhere",
        "/?token=0123456789abcdef0123",
    ];
    for path in gets {
        // No authorizer in the request context (a route without it), still carrying the
        // bearer header and a cookie of the local mode: neither counts here.
        let mut request = event(OVERVIEW, "GET", path, None, None);
        request["cookies"] = serde_json::json!(["hookledger_console=0123456789abcdef0123"]);
        let (status, headers, body) = send(console, request).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert!(!body.contains("evt_console_dead"), "{path}: {body}");
        assert_eq!(headers["cache-control"], "no-store", "{path}: {headers}");
    }
    // Claims without a sub are no principal either.
    let mut request = event(OVERVIEW, "GET", "/", Some("x"), None);
    request["requestContext"]["authorizer"]["jwt"]["claims"]
        .as_object_mut()
        .unwrap()
        .remove("sub");
    assert_eq!(send(console, request).await.0, 401);
    let (status, _, _) = send(
        console,
        event(REDRIVE, "POST", "/redrive", None, Some(&form)),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(status_of(&db, "evt_console_dead").await, "dead");
}

#[tokio::test]
async fn a_redrive_post_needs_the_csrf_token_of_the_same_sub_from_any_execution_environment() {
    let db = seeded_db().await;
    // Two execution environments of the same function (the same CSRF key).
    let first = console(&db, "hookledger_replay", true).await;
    let second = console(&db, "hookledger_replay", true).await;

    let confirm = "/redrive/confirm?what=dead&source=stripe&event_id=evt_console_dead";
    let (status, _, page) = send(first, event(OVERVIEW, "GET", confirm, Some("alice"), None)).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("It will touch"), "{page}");
    let alice = hidden(&page, "csrf");
    let (_, _, page) = send(first, event(OVERVIEW, "GET", confirm, Some("bob"), None)).await;
    let bob = hidden(&page, "csrf");
    assert_ne!(alice, bob);

    let post = |sub: &'static str, csrf: Option<&str>| {
        let mut form = "what=dead&source=stripe&event_id=evt_console_dead&confirmed=1".to_owned();
        if let Some(csrf) = csrf {
            form.push_str("&csrf=");
            form.push_str(csrf);
        }
        event(REDRIVE, "POST", "/redrive", Some(sub), Some(&form))
    };
    // Bob's token for Alice, Alice's for Bob, none, the fixture's placeholder: 403, nothing moves.
    for (sub, csrf) in [
        ("alice", Some(bob.as_str())),
        ("bob", Some(alice.as_str())),
        ("alice", None),
        ("alice", Some("")),
    ] {
        let (status, _, body) = send(second, post(sub, csrf)).await;
        assert_eq!(status, 403, "{sub} {csrf:?}: {body}");
        assert_eq!(status_of(&db, "evt_console_dead").await, "dead");
    }
    let (status, _, body) = send(second, EventFile::load(REDRIVE).unwrap().json).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(status_of(&db, "evt_console_dead").await, "dead");

    // Alice's own token, rendered by the first environment, verifies on the second.
    let (status, _, body) = send(second, post("alice", Some(&alice))).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Re-drive done"), "{body}");
    assert_eq!(status_of(&db, "evt_console_dead").await, "claimed");
    // The replay login renders the overview too (it reads the last audit run).
    let (status, _, body) = send(second, event(OVERVIEW, "GET", "/", Some("alice"), None)).await;
    assert_eq!(status, 200, "{body}");
}

/// [`OVERVIEW`] for `GET /dead` with the authorizer's claims replaced by `claims` (strings, as
/// API Gateway passes them: a list claim as `[a b]`).
fn signed_in_as(claims: &[(&str, &str)]) -> Value {
    let mut json = event(OVERVIEW, "GET", "/dead", Some("x"), None);
    let map = json["requestContext"]["authorizer"]["jwt"]["claims"]
        .as_object_mut()
        .unwrap();
    map.retain(|name, _| ["aud", "exp", "iat", "iss"].contains(&name.as_str()));
    for (name, value) in claims {
        map.insert((*name).to_owned(), (*value).into());
    }
    json
}

/// Any valid token of the issuer and audience is not enough: the allow rule the deployment
/// names (here verified e-mail domains and a group, both required; then a scope) decides, and
/// a token it does not admit gets 403 on every route, without a row of the ledger (issue 24,
/// item 3).
#[tokio::test]
async fn a_token_the_allow_rule_does_not_admit_is_403_and_one_it_admits_gets_in() {
    let db = seeded_db().await;
    let open_to = console_allowing(
        &db,
        "hookledger_replay",
        true,
        &[
            ("HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS", "example.com"),
            ("HOOKLEDGER_CONSOLE_ALLOWED_GROUPS", "hookledger-operators"),
        ],
    )
    .await;
    let refused: [&[(&str, &str)]; 5] = [
        // A stranger who signed up with the identity provider.
        &[
            ("sub", "mallory"),
            ("email", "mallory@gmail.com"),
            ("email_verified", "true"),
            ("cognito:groups", "[hookledger-operators]"),
        ],
        // The right domain, not verified.
        &[
            ("sub", "eve"),
            ("email", "eve@example.com"),
            ("email_verified", "false"),
            ("cognito:groups", "[hookledger-operators]"),
        ],
        // The domain as a suffix of another.
        &[
            ("sub", "eve"),
            ("email", "eve@evil-example.com"),
            ("email_verified", "true"),
            ("groups", "[hookledger-operators]"),
        ],
        // The right domain, not in the group.
        &[
            ("sub", "trent"),
            ("email", "trent@example.com"),
            ("email_verified", "true"),
            ("cognito:groups", "[readers]"),
        ],
        // No claims but a sub.
        &[("sub", "trent")],
    ];
    for claims in refused {
        let (status, headers, body) = send(open_to, signed_in_as(claims)).await;
        assert_eq!(status, 403, "{claims:?}: {body}");
        assert!(!body.contains("evt_console_dead"), "{claims:?}: {body}");
        assert_eq!(headers["cache-control"], "no-store", "{headers}");
    }
    // Nor may a refused user re-drive, whatever token they carry.
    let mut post = signed_in_as(refused[0]);
    post["requestContext"]["http"]["method"] = "POST".into();
    post["rawPath"] = "/redrive".into();
    post["requestContext"]["http"]["path"] = "/redrive".into();
    post["body"] = redrive_form("mallory").into();
    assert_eq!(send(open_to, post).await.0, 403);
    assert_eq!(status_of(&db, "evt_console_dead").await, "dead");

    let admitted = [
        ("sub", "trent"),
        ("email", "Trent@EXAMPLE.com"),
        ("email_verified", "true"),
        ("cognito:groups", "[admins hookledger-operators]"),
    ];
    let (status, _, body) = send(open_to, signed_in_as(&admitted)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("evt_console_dead"), "{body}");

    // A required scope (the route's AuthorizationScopes, checked again by the function).
    let open_to = console_allowing(
        &db,
        "hookledger_auditor",
        false,
        &[("HOOKLEDGER_CONSOLE_REQUIRED_SCOPES", "hookledger/console")],
    )
    .await;
    let without = [("sub", "u-1"), ("scope", "openid email")];
    assert_eq!(send(open_to, signed_in_as(&without)).await.0, 403);
    for scope in [
        ("scope", "openid hookledger/console"),
        ("scp", "[hookledger/console]"),
    ] {
        let (status, _, body) = send(open_to, signed_in_as(&[("sub", "u-1"), scope])).await;
        assert_eq!(status, 200, "{scope:?}: {body}");
    }
    // The subjects the default test console names, and no other.
    let by_subject = console(&db, "hookledger_auditor", false).await;
    assert_eq!(
        send(by_subject, signed_in_as(&[("sub", "bob")])).await.0,
        200
    );
    assert_eq!(
        send(by_subject, signed_in_as(&[("sub", "operator-10")]))
            .await
            .0,
        403
    );
}

/// Deploying the console without saying who may use it is a start-up error naming the settings,
/// not a console open to every token of the issuer.
#[test]
fn a_console_without_an_allow_rule_refuses_to_start() {
    let csrf = |name: &str| {
        (name == "HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN")
            .then(|| "arn:aws:secretsmanager:x:1:secret:csrf".to_owned())
    };
    let error = ConsoleSettings::from_lookup(csrf).unwrap_err().to_string();
    for name in [
        "HOOKLEDGER_CONSOLE_REQUIRED_SCOPES",
        "HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS",
        "HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS",
        "HOOKLEDGER_CONSOLE_ALLOWED_GROUPS",
    ] {
        assert!(error.contains(name), "{error}");
    }
    // Blank entries are no rule either.
    let blank = ConsoleSettings::from_lookup(|name| match name {
        "HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS" => Some(" , ,".to_owned()),
        other => csrf(other),
    });
    assert!(blank.is_err(), "{blank:?}");
}

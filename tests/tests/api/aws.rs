//! TLS to PostgreSQL and Secrets Manager against the local AWS emulator (moto), both started by
//! `make test`: the path a cold start takes in AWS, and a rotation of the sources secret seen by
//! a warm receiver.

use hookledger_tests::{local_sources_json, url_with_database};
use secrecy::ExposeSecret;
use shared::config::{DatabaseSettings, Settings, SourcesOrigin};
use shared::sources_refresh::{LiveSources, ManualClock, Refresher, DEFAULT_MIN_REFRESH_INTERVAL};

use crate::helpers::{spawn_app, stripe_payment, NOW, STRIPE_SECRET};

fn ca_file() -> String {
    std::env::var("HOOKLEDGER_TEST_CA_FILE")
        .expect("HOOKLEDGER_TEST_CA_FILE: run with make test (the throwaway cluster speaks TLS)")
}

fn tls_url(url: &str) -> String {
    // Same server, by the name on its certificate, with TLS required.
    let base = url.split('?').next().unwrap_or(url);
    base.replace("127.0.0.1", "localhost") + "?sslmode=require"
}

#[tokio::test]
async fn sslmode_require_connects_over_tls_verified_against_the_ca() {
    let app = spawn_app().await;
    let mut settings = DatabaseSettings::with_url(tls_url(&app.db.url));
    settings.ca_file = Some(ca_file().into());
    let client = shared::db::connect(&settings).await.unwrap();
    let ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "the session is encrypted");
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_refused() {
    let app = spawn_app().await;
    // No CA file: the throwaway CA is not among the system roots.
    let settings = DatabaseSettings::with_url(tls_url(&app.db.url));
    let error = shared::db::connect(&settings).await.unwrap_err();
    assert!(matches!(error, shared::db::DbError::Connect(_)), "{error}");
}

fn secrets_lookup(vars: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }
}

async fn emulator() -> aws_sdk_secretsmanager::Client {
    assert!(
        std::env::var("AWS_ENDPOINT_URL_SECRETS_MANAGER").is_ok(),
        "AWS_ENDPOINT_URL_SECRETS_MANAGER: run with make test (it starts the moto emulator)"
    );
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_secretsmanager::Client::new(&config)
}

async fn create_secret(client: &aws_sdk_secretsmanager::Client, name: &str, value: &str) -> String {
    client
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap()
}

#[tokio::test]
async fn a_cold_start_reads_the_database_and_the_sources_from_secrets_manager() {
    let app = spawn_app().await;
    let client = emulator().await;
    let port = <tokio_postgres::Config as std::str::FromStr>::from_str(&app.db.url)
        .unwrap()
        .get_ports()[0];
    let db_secret = serde_json::json!({
        "engine": "postgres",
        "username": "postgres",
        "password": "unused-with-trust-auth",
        "host": "localhost",
        "port": port,
        "dbname": app.db.name,
    });
    let suffix = format!("{}-{}", std::process::id(), app.db.name);
    let db_arn = create_secret(
        &client,
        &format!("hookledger/db-{suffix}"),
        &db_secret.to_string(),
    )
    .await;
    let sources_arn = create_secret(
        &client,
        &format!("hookledger/sources-{suffix}"),
        &local_sources_json().unwrap(),
    )
    .await;

    let settings = Settings::from_lookup_with_secrets(secrets_lookup(vec![
        ("HOOKLEDGER_DB_SECRET_ARN", db_arn.clone()),
        ("HOOKLEDGER_SOURCES_SECRET_ARN", sources_arn),
        ("HOOKLEDGER_DB_CA_FILE", ca_file()),
    ]))
    .await
    .unwrap();
    assert!(settings
        .database
        .url
        .expose_secret()
        .contains("sslmode=require"));
    assert!(!format!("{settings:?}").contains("unused-with-trust-auth"));

    let pool = shared::db::pool(&settings.database).unwrap();
    let receiver = shared::Receiver::new(&settings, pool, handlers::registry(&settings.sources));
    let delivery = stripe_payment("evt_aws", "ord_aws", 10, NOW);
    let reply = receiver
        .receive("stripe", &delivery.headers, &delivery.body, NOW)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(app.order_rows().await, 1);
}

#[tokio::test]
async fn a_missing_secret_is_a_start_up_error_naming_the_arn() {
    let _client = emulator().await;
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hookledger/nope-AbCdEf";
    let error = Settings::from_lookup_with_secrets(secrets_lookup(vec![
        ("HOOKLEDGER_DB_SECRET_ARN", arn.to_owned()),
        ("HOOKLEDGER_SOURCES", local_sources_json().unwrap()),
    ]))
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains(arn), "{error}");
    let both = Settings::from_lookup_with_secrets(secrets_lookup(vec![
        ("HOOKLEDGER_DB_SECRET_ARN", arn.to_owned()),
        (
            "DATABASE_URL",
            url_with_database("postgres://x/y", "z").unwrap(),
        ),
    ]))
    .await;
    assert!(matches!(
        both,
        Err(shared::config::ConfigError::DatabaseAmbiguous)
    ));
}

// Secret rotation without a redeploy (shared::sources_refresh): a warm receiver re-reads the
// sources secret after a signature mismatch, at most once a minute.

const ROTATED_SECRET: &str = "whsec_hookledger_rotated_secret";

/// The local sources with the `stripe` source's secrets replaced by `secrets`.
fn sources_with_stripe_secrets(secrets: &[&str]) -> String {
    let mut sources: serde_json::Value =
        serde_json::from_str(&local_sources_json().unwrap()).unwrap();
    let stripe = sources
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|source| source["name"] == "stripe")
        .unwrap();
    stripe["secrets"] = serde_json::json!(secrets);
    sources.to_string()
}

/// A Stripe payment delivery signed at `NOW` with `secret`.
fn stripe_signed_with(secret: &str, event_id: &str, order_id: &str) -> crate::helpers::Delivery {
    use shared::verify::{sign, Scheme, SigningKey};
    let body = crate::helpers::payment_intent_body(event_id, order_id, 10);
    let key = SigningKey::new(Scheme::Stripe, secret).unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    for (name, value) in sign(Scheme::Stripe, &key, "", NOW, &body) {
        headers.insert(name, value.parse().unwrap());
    }
    crate::helpers::Delivery { headers, body }
}

/// A warm receiver as `functions/receiver/src/main.rs` builds it from
/// `HOOKLEDGER_SOURCES_SECRET_ARN`, with its refresh clock and Secrets Manager client exposed.
struct Rotation {
    client: aws_sdk_secretsmanager::Client,
    arn: String,
    receiver: shared::Receiver,
    clock: std::sync::Arc<ManualClock>,
    /// The refresher's own client: counts only re-reads, not the cold start's read.
    secrets: shared::secrets::Secrets,
}

impl Rotation {
    async fn new(app: &crate::helpers::TestApp, tag: &str) -> Self {
        let client = emulator().await;
        let arn = create_secret(
            &client,
            &format!(
                "hookledger/rotation-{tag}-{}-{}",
                std::process::id(),
                app.db.name
            ),
            &local_sources_json().unwrap(),
        )
        .await;
        let settings = Settings::from_lookup_with_secrets(secrets_lookup(vec![
            ("DATABASE_URL", app.db.url.clone()),
            ("HOOKLEDGER_SOURCES_SECRET_ARN", arn.clone()),
        ]))
        .await
        .unwrap();
        assert_eq!(
            settings.sources_reload.origin,
            SourcesOrigin::Secret(arn.clone())
        );
        let secrets = shared::secrets::Secrets::from_env().await;
        let clock = std::sync::Arc::new(ManualClock::default());
        let refresher = Refresher::for_reload(&settings.sources_reload, Some(secrets.clone()))
            .await
            .unwrap()
            .with_clock(clock.clone());
        assert_eq!(refresher.min_interval(), DEFAULT_MIN_REFRESH_INTERVAL);
        let pool = shared::db::pool(&settings.database).unwrap();
        let mut receiver =
            shared::Receiver::new(&settings, pool, handlers::registry(&settings.sources));
        receiver.sources = LiveSources::refreshing(settings.sources.clone(), refresher);
        Self {
            client,
            arn,
            receiver,
            clock,
            secrets,
        }
    }

    async fn put(&self, value: &str) {
        self.client
            .put_secret_value()
            .secret_id(&self.arn)
            .secret_string(value)
            .send()
            .await
            .unwrap();
    }

    async fn deliver(&self, delivery: &crate::helpers::Delivery) -> shared::Reply {
        self.receiver
            .receive("stripe", &delivery.headers, &delivery.body, NOW)
            .await
    }

    fn refreshes(&self) -> u64 {
        self.receiver.sources.refresher().unwrap().reads()
    }
}

/// The emulator's own record of `GetSecretValue` calls for `arn` since recording started
/// (`/moto-api/recorder`, into the file `scripts/with-moto.sh` gives it).
async fn moto_reads_of(arn: &str) -> usize {
    use base64::Engine;
    let endpoint = std::env::var("AWS_ENDPOINT_URL_SECRETS_MANAGER").unwrap();
    let recording = reqwest::Client::new()
        .get(format!("{endpoint}/moto-api/recorder/download-recording"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    recording
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|entry| {
            let target = entry["headers"]
                .as_object()
                .and_then(|headers| {
                    headers
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case("x-amz-target"))
                })
                .and_then(|(_, value)| value.as_str())
                .unwrap_or("");
            let body = entry["body"].as_str().unwrap_or("");
            let body = if entry["body_encoded"] == true {
                String::from_utf8(
                    base64::engine::general_purpose::STANDARD
                        .decode(body)
                        .unwrap_or_default(),
                )
                .unwrap_or_default()
            } else {
                body.to_owned()
            };
            target == "secretsmanager.GetSecretValue" && body.contains(arn)
        })
        .count()
}

async fn moto_recorder(action: &str) {
    let endpoint = std::env::var("AWS_ENDPOINT_URL_SECRETS_MANAGER").unwrap();
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/moto-api/recorder/{action}"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{action}: {response:?}");
}

#[tokio::test]
async fn a_warm_receiver_accepts_a_secret_rotated_in_secrets_manager_without_a_redeploy() {
    let app = spawn_app().await;
    let rotation = Rotation::new(&app, "rotate").await;
    let old = stripe_signed_with(STRIPE_SECRET, "evt_rot_old", "ord_rot_old");
    assert_eq!(rotation.deliver(&old).await.status, 200);
    assert_eq!(rotation.refreshes(), 0, "a good delivery reads nothing");

    // Step 1 of a rotation: the new secret first, the old one kept.
    rotation
        .put(&sources_with_stripe_secrets(&[
            ROTATED_SECRET,
            STRIPE_SECRET,
        ]))
        .await;
    let new = stripe_signed_with(ROTATED_SECRET, "evt_rot_new", "ord_rot_new");
    let reply = rotation.deliver(&new).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.outcome, "processed");
    assert_eq!(app.order_rows().await, 2);
    assert_eq!(rotation.refreshes(), 1);
    assert_eq!(rotation.secrets.reads(), 1);

    // The new sources are in force: more deliveries with the new secret read nothing more, and
    // the old secret still verifies.
    for i in 0..5 {
        let again = stripe_signed_with(ROTATED_SECRET, &format!("evt_rot_{i}"), "ord_rot_new");
        assert_eq!(rotation.deliver(&again).await.status, 200);
    }
    let old_again = stripe_signed_with(STRIPE_SECRET, "evt_rot_old2", "ord_rot_old");
    assert_eq!(rotation.deliver(&old_again).await.status, 200);
    assert_eq!(rotation.refreshes(), 1);

    // Step 2: the old secret removed. Within the minute the warm receiver still has it; after
    // the next failure past the minute it is gone.
    rotation
        .put(&sources_with_stripe_secrets(&[ROTATED_SECRET]))
        .await;
    rotation.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
    let stranger = stripe_signed_with("whsec_someone_else", "evt_rot_x", "ord_rot_x");
    assert_eq!(rotation.deliver(&stranger).await.status, 401);
    assert_eq!(rotation.refreshes(), 2);
    let retired = stripe_signed_with(STRIPE_SECRET, "evt_rot_old3", "ord_rot_old");
    assert_eq!(rotation.deliver(&retired).await.status, 401);
    let current = rotation.receiver.sources.current();
    assert_eq!(current.get("stripe").unwrap().verifier.key_count(), 1);
}

#[tokio::test]
async fn a_flood_of_bad_signatures_reads_the_sources_secret_once_per_interval() {
    let app = spawn_app().await;
    let rotation = Rotation::new(&app, "flood").await;
    moto_recorder("start-recording").await;
    let (logs, _guard) = crate::helpers::capture_logs();
    let bad = |i: usize| stripe_signed_with("whsec_forged", &format!("evt_bad_{i}"), "ord_bad");

    // 500 at once (they queue behind the one re-read in flight), then 500 one after another.
    let concurrent: Vec<_> = (0..500).map(bad).collect();
    let replies =
        futures_util::future::join_all(concurrent.iter().map(|d| rotation.deliver(d))).await;
    for i in 500..1_000 {
        replies_are_401(&[rotation.deliver(&bad(i)).await]);
    }
    replies_are_401(&replies);
    assert_eq!(rotation.refreshes(), 1, "one re-read within the interval");
    assert_eq!(rotation.secrets.reads(), 1, "one GetSecretValue call");

    // The next interval allows exactly one more.
    rotation
        .clock
        .advance(DEFAULT_MIN_REFRESH_INTERVAL - std::time::Duration::from_millis(1));
    replies_are_401(&[rotation.deliver(&bad(1_000)).await]);
    assert_eq!(rotation.refreshes(), 1);
    rotation.clock.advance(std::time::Duration::from_millis(1));
    for i in 1_001..1_101 {
        replies_are_401(&[rotation.deliver(&bad(i)).await]);
    }
    assert_eq!(rotation.refreshes(), 2);
    assert_eq!(rotation.secrets.reads(), 2);
    assert_eq!(
        moto_reads_of(&rotation.arn).await,
        2,
        "as the emulator saw it"
    );
    assert_eq!(app.ledger_rows().await, 0);
    // Each refusal is one delivery line (the signature_failed metric is an EMF line on
    // stdout), and each re-read one "sources re-read" line (so is secrets_refreshed).
    assert_eq!(logs.with("outcome", "unauthorized").len(), 1_101);
    let rereads = logs
        .lines()
        .into_iter()
        .filter(|line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("sources re-read"))
        })
        .count();
    assert_eq!(rereads, 2, "one log line per re-read");
}

fn replies_are_401(replies: &[shared::Reply]) {
    for reply in replies {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert_eq!(reply.outcome, "unauthorized");
    }
}

#[tokio::test]
async fn a_rotated_secret_that_does_not_validate_keeps_the_sources_in_force() {
    let app = spawn_app().await;
    let rotation = Rotation::new(&app, "invalid").await;
    for broken in [
        "{ not json".to_owned(),
        // Valid JSON, invalid sources: a secret where a list belongs.
        sources_with_stripe_secrets(&[]).replace("[]", "\"whsec_not_a_list\""),
    ] {
        rotation.put(&broken).await;
        rotation.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
        let forged = stripe_signed_with(ROTATED_SECRET, "evt_inv_new", "ord_inv");
        assert_eq!(rotation.deliver(&forged).await.status, 401);
    }
    assert_eq!(rotation.refreshes(), 2);
    let old = stripe_signed_with(STRIPE_SECRET, "evt_inv_old", "ord_inv");
    let reply = rotation.deliver(&old).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(app.order_rows().await, 1);

    // Fixed a minute later: picked up.
    rotation
        .put(&sources_with_stripe_secrets(&[ROTATED_SECRET]))
        .await;
    rotation.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
    let new = stripe_signed_with(ROTATED_SECRET, "evt_inv_fixed", "ord_inv_fixed");
    assert_eq!(rotation.deliver(&new).await.status, 200);
    assert_eq!(rotation.refreshes(), 3);
}

//! TLS to PostgreSQL and Secrets Manager against the local AWS emulator (moto), both started by
//! `make test`: the path a cold start takes in AWS.

use hookledger_tests::{local_sources_json, url_with_database};
use secrecy::ExposeSecret;
use shared::config::{DatabaseSettings, Settings};

use crate::helpers::{spawn_app, stripe_payment, NOW};

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
    let receiver = shared::Receiver::new(&settings, pool);
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

//! TLS to PostgreSQL and Secrets Manager against the local AWS emulator (moto), both started by
//! `make test`: the path a cold start takes in AWS, and a rotation of the sources secret seen by
//! a warm receiver.
//!
//! TLS is verify-full whatever the `sslmode` says: the throwaway cluster's certificate (for
//! `localhost` and `127.0.0.1`, signed by the CA in `HOOKLEDGER_TEST_CA_FILE`) is accepted only
//! with that CA trusted and under a name it carries; a server without TLS (the tests'
//! pgbouncer) is refused under `sslmode=require`, which every secret-configured connection has.

use hookledger_tests::{local_sources_json, url_with_database};
use secrecy::ExposeSecret;
use shared::config::{DatabaseSettings, Settings, SourcesOrigin};
use shared::config::{DEFAULT_MIN_REFRESH_INTERVAL, DEFAULT_SOURCES_MAX_AGE};
use shared::sources_refresh::{LiveSources, ManualClock, Refresher};
use shared::Outcome;

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

/// The error and all its sources, as one line: what the assertions match on.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// `url`'s port (the throwaway cluster's, or pgbouncer's).
fn port_of(url: &str) -> u16 {
    <tokio_postgres::Config as std::str::FromStr>::from_str(url)
        .unwrap()
        .get_ports()[0]
}

async fn session_is_encrypted(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_certificate_that_does_not_name_the_host_is_refused() {
    let db = hookledger_tests::test_db().await.unwrap();
    let port = port_of(&db.url);
    // The same address and the right CA each time; only the name the client expects changes
    // (hostaddr is where it connects, host what the certificate must name).
    let under = |host: &str| {
        let mut settings = DatabaseSettings::with_url(format!(
            "host={host} hostaddr=127.0.0.1 port={port} user=postgres dbname={} sslmode=require",
            db.name
        ));
        settings.ca_file = Some(ca_file().into());
        settings
    };
    let client = shared::db::connect(&under("localhost")).await.unwrap();
    assert!(session_is_encrypted(&client).await);
    let error = shared::db::connect(&under("wrong.invalid"))
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(matches!(error, shared::db::DbError::Connect(_)), "{text}");
    assert!(text.contains("certificate verify failed"), "{text}");
    assert!(text.to_lowercase().contains("hostname mismatch"), "{text}");
}

#[tokio::test]
async fn sslmode_require_refuses_a_server_without_tls() {
    // The tests' pgbouncer speaks no TLS to clients; in plain text it answers.
    let pooler = hookledger_tests::pooler_url().unwrap();
    let plain = DatabaseSettings::with_url(pooler.clone());
    let client = shared::db::connect(&plain).await.unwrap();
    client.simple_query("SELECT 1").await.unwrap();
    let base = pooler.split('?').next().unwrap_or(&pooler).to_owned();
    let mut settings = DatabaseSettings::with_url(base + "?sslmode=require");
    settings.ca_file = Some(ca_file().into());
    let error = shared::db::connect(&settings).await.unwrap_err();
    let text = chain(&error);
    assert!(text.contains("TLS"), "{text}");
}

#[tokio::test]
async fn the_bundled_rds_cas_do_not_make_the_test_ca_trusted() {
    let db = hookledger_tests::test_db().await.unwrap();
    let mut settings = DatabaseSettings::with_url(tls_url(&db.url));
    settings.bundled_rds_ca = true;
    let error = shared::db::connect(&settings).await.unwrap_err();
    let text = chain(&error);
    assert!(text.contains("certificate verify failed"), "{text}");
    // A CA file takes the bundle's place: the same settings with the test CA connect.
    settings.ca_file = Some(ca_file().into());
    let client = shared::db::connect(&settings).await.unwrap();
    assert!(session_is_encrypted(&client).await);
}

/// The arguments that make this test binary run only `test` of this module, its output shown:
/// how a test here runs itself again as a child process with another environment.
fn this_test_alone(test: &str) -> [String; 4] {
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    [
        "--exact".to_owned(),
        format!("{module}::{test}"),
        "--nocapture".to_owned(),
        "--test-threads=1".to_owned(),
    ]
}

/// Set in the child of [`a_ca_file_or_the_rds_cas_replace_the_system_roots`]: the connection
/// string it tries.
const ROOTS_CHILD_URL: &str = "HOOKLEDGER_TEST_ROOTS_CHILD_URL";

/// Issue 29: a CA file (`HOOKLEDGER_DB_CA_FILE`) or, for a secret-configured connection, the
/// compiled-in RDS CAs are the only roots a database connection trusts; the system's trust store
/// is trusted only without either, or when the CA file is `system` (libpq's
/// `sslrootcert=system`; an RDS Proxy's certificate chains to a system root). This runs the test
/// binary again with `SSL_CERT_FILE` (the "system" store as openssl-probe finds it) holding the
/// test CA: without a CA file, and with the CA file `system` beside the RDS CAs, the child
/// connects; with the RDS bundle as its CA file or the compiled-in RDS CAs it is refused. Before,
/// both of those connected too (the system roots were trusted beside them).
#[tokio::test]
async fn a_ca_file_or_the_rds_cas_replace_the_system_roots() {
    if let Ok(url) = std::env::var(ROOTS_CHILD_URL) {
        let rds_file =
            std::env::temp_dir().join(format!("hookledger-rds-{}.pem", std::process::id()));
        std::fs::write(&rds_file, shared::rds_ca::RDS_CA_BUNDLE).unwrap();
        let system_only = DatabaseSettings::with_url(url.clone());
        let mut rds_as_file = DatabaseSettings::with_url(url.clone());
        rds_as_file.ca_file = Some(rds_file.clone());
        let mut bundled = DatabaseSettings::with_url(url.clone());
        bundled.bundled_rds_ca = true;
        // What the template sets behind an RDS Proxy: the system roots, by name.
        let mut system_by_name = DatabaseSettings::with_url(url);
        system_by_name.bundled_rds_ca = true;
        system_by_name.ca_file = Some(shared::db::SYSTEM_ROOTS.into());
        for (name, settings) in [
            ("system roots", system_only),
            ("ca file", rds_as_file),
            ("bundled rds", bundled),
            ("ca file system", system_by_name),
        ] {
            match shared::db::connect(&settings).await {
                Ok(client) if session_is_encrypted(&client).await => {
                    println!("ROOTS-CHILD {name}: connected")
                }
                Ok(_) => println!("ROOTS-CHILD {name}: connected without TLS"),
                Err(error) => println!("ROOTS-CHILD {name}: refused: {}", chain(&error)),
            }
        }
        let _ = std::fs::remove_file(rds_file);
        return;
    }
    let db = hookledger_tests::test_db().await.unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(this_test_alone(
            "a_ca_file_or_the_rds_cas_replace_the_system_roots",
        ))
        .env(ROOTS_CHILD_URL, tls_url(&db.url))
        .env("SSL_CERT_FILE", ca_file())
        .env_remove("SSL_CERT_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for name in ["system roots", "ca file system"] {
        assert!(
            stdout.contains(&format!("ROOTS-CHILD {name}: connected\n")),
            "{stdout}"
        );
    }
    for name in ["ca file", "bundled rds"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("ROOTS-CHILD {name}: ")))
            .unwrap_or_else(|| panic!("{name} not tried: {stdout}"));
        assert!(
            line.contains("refused") && line.contains("certificate verify failed"),
            "{line}"
        );
    }
}

/// Set in the child of [`native_tls_finds_the_amazon_linux_2023_trust_store_with_vendored_openssl`]:
/// the connection string it tries.
const PROBE_CHILD_URL: &str = "HOOKLEDGER_TEST_PROBE_CHILD_URL";

/// One `/etc` for the child: files (path under `etc/`, contents) and symlinks (path, target).
struct EtcLayout {
    name: &'static str,
    files: Vec<(&'static str, Vec<u8>)>,
    links: Vec<(&'static str, &'static str)>,
    connects: bool,
}

/// With OpenSSL vendored (compiled in, its own OPENSSLDIR pointing nowhere useful), the system
/// roots are found by native-tls itself: it loads what openssl-probe finds (`SSL_CERT_FILE`,
/// else a fixed list of distribution paths). This runs the test binary again in a private
/// mount namespace (`unshare --mount`, root) whose `/etc` is a temporary directory laid out
/// like Amazon Linux 2023's (the `provided.al2023` Lambda runtime), with the test CA as the
/// only system root and `SSL_CERT_FILE`/`SSL_CERT_DIR` unset: a connection without any CA
/// file must then verify, and must not with an `/etc` that has no trust store. Nothing on the
/// machine is changed: the namespace dies with the child.
#[tokio::test]
async fn native_tls_finds_the_amazon_linux_2023_trust_store_with_vendored_openssl() {
    if let Ok(url) = std::env::var(PROBE_CHILD_URL) {
        // The child: /etc is the parent's layout.
        match shared::db::connect(&DatabaseSettings::with_url(url)).await {
            Ok(client) if session_is_encrypted(&client).await => println!("PROBE-CHILD: connected"),
            Ok(_) => println!("PROBE-CHILD: connected without TLS"),
            Err(error) => println!("PROBE-CHILD: refused: {}", chain(&error)),
        }
        return;
    }
    let db = hookledger_tests::test_db().await.unwrap();
    let url = format!(
        "host=localhost hostaddr=127.0.0.1 port={} user=postgres dbname={} sslmode=require",
        port_of(&db.url),
        db.name
    );
    let ca = std::fs::read(ca_file()).unwrap();
    let al2023_bundle = "pki/ca-trust/extracted/pem/tls-ca-bundle.pem";
    let layouts = [
        // Amazon Linux 2023: the extracted bundle, ca-bundle.crt linking to it, and
        // /etc/ssl/certs linking to /etc/pki/tls/certs.
        EtcLayout {
            name: "al2023",
            files: vec![(al2023_bundle, ca.clone())],
            links: vec![
                (
                    "pki/tls/certs/ca-bundle.crt",
                    "../../ca-trust/extracted/pem/tls-ca-bundle.pem",
                ),
                ("ssl/certs", "../pki/tls/certs"),
            ],
            connects: true,
        },
        // Only /etc/pki/tls/certs/ca-bundle.crt, as a file.
        EtcLayout {
            name: "ca-bundle.crt only",
            files: vec![("pki/tls/certs/ca-bundle.crt", ca.clone())],
            links: vec![],
            connects: true,
        },
        // No trust store at all: the control (nothing else lets the child in).
        EtcLayout {
            name: "no trust store",
            files: vec![],
            links: vec![],
            connects: false,
        },
    ];
    let exe = std::env::current_exe().unwrap();
    for layout in layouts {
        let root = std::env::temp_dir().join(format!(
            "hookledger-etc-{}-{}",
            std::process::id(),
            layout.name.replace(' ', "-")
        ));
        let etc = root.join("etc");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&etc).unwrap();
        // The dynamic loader's cache, so the child starts as it would with the real /etc.
        if std::path::Path::new("/etc/ld.so.cache").exists() {
            std::fs::copy("/etc/ld.so.cache", etc.join("ld.so.cache")).unwrap();
        }
        for (path, contents) in &layout.files {
            let path = etc.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        for (path, target) in &layout.links {
            let path = etc.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, path).unwrap();
        }
        let output = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(r#"mount --bind "$1" /etc && shift && exec "$@""#)
            .arg("sh")
            .arg(&etc)
            .arg(&exe)
            .args(this_test_alone(
                "native_tls_finds_the_amazon_linux_2023_trust_store_with_vendored_openssl",
            ))
            .env(PROBE_CHILD_URL, &url)
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR")
            .output()
            .expect("unshare (util-linux) runs the child in its own mount namespace");
        let _ = std::fs::remove_dir_all(&root);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.contains("PROBE-CHILD: "),
            "the child did not run (this test needs root for unshare --mount): {stdout}{stderr}"
        );
        if layout.connects {
            assert!(
                stdout.contains("PROBE-CHILD: connected\n"),
                "{}: {stdout}",
                layout.name
            );
        } else {
            assert!(
                stdout.contains("PROBE-CHILD: refused")
                    && stdout.contains("certificate verify failed"),
                "{}: {stdout}",
                layout.name
            );
        }
    }
}

fn secrets_lookup(vars: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }
}

/// A Secrets Manager client on the moto emulator `make test` starts.
pub(crate) async fn emulator() -> aws_sdk_secretsmanager::Client {
    assert!(
        std::env::var("AWS_ENDPOINT_URL_SECRETS_MANAGER").is_ok(),
        "AWS_ENDPOINT_URL_SECRETS_MANAGER: run with make test (it starts the moto emulator)"
    );
    let config = shared::aws::load().await;
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
    let receiver = shared::Receiver::new(
        &settings,
        pool,
        handlers::examples::registry(&settings.sources),
    );
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

/// A secret as RDS manages a master user's: `username` and `password`, nothing else.
async fn credentials_only_secret(client: &aws_sdk_secretsmanager::Client, tag: &str) -> String {
    let secret = serde_json::json!({"username": "postgres", "password": "unused-with-trust-auth"});
    create_secret(
        client,
        &format!("hookledger/master-{tag}-{}", std::process::id()),
        &secret.to_string(),
    )
    .await
}

#[tokio::test]
async fn a_credentials_only_secret_connects_to_the_host_port_and_database_of_the_environment() {
    let client = emulator().await;
    let db = hookledger_tests::test_db().await.unwrap();
    let arn = credentials_only_secret(&client, &db.name).await;
    let settings = Settings::from_lookup_with_secrets(secrets_lookup(vec![
        ("HOOKLEDGER_DB_SECRET_ARN", arn.clone()),
        ("HOOKLEDGER_DB_HOST", "localhost".to_owned()),
        ("HOOKLEDGER_DB_PORT", port_of(&db.url).to_string()),
        ("HOOKLEDGER_DB_NAME", db.name.clone()),
        ("HOOKLEDGER_DB_CA_FILE", ca_file()),
        ("HOOKLEDGER_SOURCES", local_sources_json().unwrap()),
    ]))
    .await
    .unwrap();
    assert!(settings.database.bundled_rds_ca);
    let connection = shared::db::connect(&settings.database).await.unwrap();
    assert!(session_is_encrypted(&connection).await);
    let name: String = connection
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(name, db.name);

    // Without HOOKLEDGER_DB_HOST the secret names no host: a start-up error that says so.
    let error = Settings::from_lookup_with_secrets(secrets_lookup(vec![
        ("HOOKLEDGER_DB_SECRET_ARN", arn),
        ("HOOKLEDGER_SOURCES", local_sources_json().unwrap()),
    ]))
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("HOOKLEDGER_DB_HOST"), "{error}");
    assert!(!error.contains("unused-with-trust-auth"), "{error}");
}

#[tokio::test]
async fn a_secret_configured_connection_trusts_the_rds_cas_and_refuses_plain_text() {
    let client = emulator().await;
    let db = hookledger_tests::test_db().await.unwrap();
    let arn = credentials_only_secret(&client, &format!("{}-trust", db.name)).await;
    let with = |port: u16, ca: Option<String>| {
        let mut vars = vec![
            ("HOOKLEDGER_DB_SECRET_ARN", arn.clone()),
            ("HOOKLEDGER_DB_HOST", "localhost".to_owned()),
            ("HOOKLEDGER_DB_PORT", port.to_string()),
            ("HOOKLEDGER_DB_NAME", db.name.clone()),
            ("HOOKLEDGER_SOURCES", local_sources_json().unwrap()),
        ];
        if let Some(ca) = ca {
            vars.push(("HOOKLEDGER_DB_CA_FILE", ca));
        }
        Settings::from_lookup_with_secrets(secrets_lookup(vars))
    };
    // No CA file: the RDS CAs alone, which do not include the test CA.
    let settings = with(port_of(&db.url), None).await.unwrap();
    assert!(settings.database.ca_file.is_none() && settings.database.bundled_rds_ca);
    let error = shared::db::connect(&settings.database).await.unwrap_err();
    let text = chain(&error);
    assert!(text.contains("certificate verify failed"), "{text}");
    // A server without TLS (pgbouncer) is refused, even with the right CA.
    let pooler = port_of(&hookledger_tests::pooler_url().unwrap());
    let settings = with(pooler, Some(ca_file())).await.unwrap();
    let error = shared::db::connect(&settings.database).await.unwrap_err();
    let text = chain(&error);
    assert!(text.contains("TLS"), "{text}");
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
    use hookledger_verify::{sign, Scheme, SigningKey};
    let body = crate::helpers::payment_intent_body(event_id, order_id, 10);
    let key = SigningKey::new(Scheme::Stripe, secret).unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    for (name, value) in sign(Scheme::Stripe, &key, "", NOW, &body) {
        headers.insert(
            http::HeaderName::try_from(name).unwrap(),
            value.parse().unwrap(),
        );
    }
    crate::helpers::Delivery { headers, body }
}

/// A warm receiver as `functions/receiver/src/run.rs` builds it from
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
        let mut receiver = shared::Receiver::new(
            &settings,
            pool,
            handlers::examples::registry(&settings.sources),
        );
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
    assert_eq!(reply.outcome, Outcome::Processed);
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

/// A leaked secret that was removed from the sources secret: someone keeps signing with it and
/// never sends a bad signature, so no failed verification ever triggers a re-read. The warm
/// receiver still re-reads once its sources are older than the max age, and the removed secret
/// stops verifying then (issue 24, item 4).
#[tokio::test]
async fn a_removed_secret_stops_verifying_after_the_max_age_without_a_failed_signature() {
    let app = spawn_app().await;
    let rotation = Rotation::new(&app, "max-age").await;
    let (logs, _guard) = crate::helpers::capture_logs();
    let leaked = |i: usize| stripe_signed_with(STRIPE_SECRET, &format!("evt_age_{i}"), "ord_age");
    assert_eq!(rotation.deliver(&leaked(0)).await.status, 200);

    // The operator removes the leaked secret.
    rotation
        .put(&sources_with_stripe_secrets(&[ROTATED_SECRET]))
        .await;
    // Younger than the max age: the sources in force still have it, and nothing is read.
    rotation
        .clock
        .advance(DEFAULT_SOURCES_MAX_AGE - std::time::Duration::from_millis(1));
    assert_eq!(rotation.deliver(&leaked(1)).await.status, 200);
    assert_eq!(
        rotation.refreshes(),
        0,
        "every signature matched: nothing read"
    );

    // At the max age the next delivery re-reads first, and the leaked secret is refused.
    rotation.clock.advance(std::time::Duration::from_millis(1));
    let reply = rotation.deliver(&leaked(2)).await;
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(reply.outcome, Outcome::Unauthorized);
    assert_eq!(rotation.refreshes(), 1, "one re-read, for the age");
    let rereads = logs.with("why", "max_age");
    assert_eq!(rereads.len(), 1, "{rereads:?}");
    assert_eq!(rereads[0]["outcome"], "changed");
    let current = rotation.receiver.sources.current();
    assert_eq!(current.get("stripe").unwrap().verifier.key_count(), 1);
    // The new secret verifies, and reads nothing more.
    let new = stripe_signed_with(ROTATED_SECRET, "evt_age_new", "ord_age_new");
    assert_eq!(rotation.deliver(&new).await.status, 200);
    assert_eq!(rotation.refreshes(), 1);
    assert_eq!(app.order_rows().await, 2);
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
        assert_eq!(reply.outcome, Outcome::Unauthorized);
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

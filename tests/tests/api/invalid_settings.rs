//! Settings the functions refuse at start-up, as a configuration error and never a panic:
//! out-of-range worker settings, a `forward` target's timeout that the worker's lease cannot
//! cover, an `sqs` target's queue over plain http to a remote host.

use shared::config::Settings;

use crate::helpers::*;

#[test]
fn out_of_range_worker_settings_are_configuration_errors_not_panics() {
    for (var, value) in [
        ("HOOKLEDGER_LEASE_SECS", u64::MAX.to_string()),
        ("HOOKLEDGER_BACKOFF_CAP_SECS", u64::MAX.to_string()),
        ("HOOKLEDGER_HANDLER_TIMEOUT_MS", "100000".to_owned()),
    ] {
        let outcome = std::panic::catch_unwind(|| {
            shared::Settings::from_lookup(|name| match name {
                "DATABASE_URL" => Some("postgres://u@localhost/db".to_owned()),
                "HOOKLEDGER_SOURCES" => {
                    Some(r#"[{"name":"s","scheme":"stripe","secrets":["whsec_x"]}]"#.to_owned())
                }
                name if name == var => Some(value.clone()),
                _ => None,
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
        });
        assert!(matches!(outcome, Ok(Err(_))), "{var}={value}: {outcome:?}");
    }
}

/// The configuration accepted a `forward` timeout longer than the worker's lease
/// (`HOOKLEDGER_LEASE_SECS`, 120 s): such a dispatch could outlive its lease, so another worker
/// could re-lease and re-send the message while the first request was still in flight, and the
/// first outcome was thrown away as `lost`. Now a target's timeout is at most 60 s and must
/// (plus 1 s) be shorter than the lease.
#[test]
fn a_forward_timeout_longer_than_the_lease_is_refused_at_start_up() {
    let sources = serde_json::json!([standard_source(
        "slowshop",
        "inline",
        serde_json::json!([forward_target(
            "slow",
            "https://billing.example.com/h",
            300_000,
            serde_json::json!(["*"])
        )])
    )])
    .to_string();
    let lookup = |name: &str| match name {
        "DATABASE_URL" => Some("postgres://hookledger@127.0.0.1:5432/hookledger".to_owned()),
        "HOOKLEDGER_SOURCES" => Some(sources.clone()),
        "HOOKLEDGER_LEASE_SECS" => Some("120".to_owned()),
        _ => None,
    };
    let settings = Settings::from_lookup(lookup);
    assert!(
        settings.is_err(),
        "a 300 s forward timeout under a 120 s lease was accepted"
    );
}

/// An `sqs` target's queue_url could be plain http:// to any host, though its own error said
/// "queue_url must be an https:// URL" (and forward targets allow http:// only to the loopback
/// host): SigV4-signed requests with the payloads in clear text to anyone on the path.
#[test]
fn an_sqs_queue_url_over_plain_http_to_a_remote_host_is_refused() {
    let json = serde_json::json!([standard_source(
        "shop",
        "inline",
        serde_json::json!([{"name": "orders", "type": "sqs",
                            "queue_url": "http://sqs.attacker.example/123456789012/orders.fifo"}])
    )])
    .to_string();
    assert!(
        shared::config::Sources::from_json(&json).is_err(),
        "http:// queue_url to a non-loopback host accepted"
    );
}

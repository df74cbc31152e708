//! At start-up the receiver says what runs for each source and warns where nothing would
//! (issue 25: a handler registered for `billing` while the source is configured as
//! `stripe-live` answered every event 200 `ignored`, with no word anywhere).

use shared::prelude::*;

use crate::helpers::*;

async fn refund(_: &mut Tx<'_>, _: &Event<'_>) -> Result<Effect, HandlerError> {
    Ok(Effect::ok(json!({"refunded": true})))
}

fn settings(sources: &str) -> shared::Settings {
    shared::Settings::from_lookup(|name| match name {
        "DATABASE_URL" => Some("postgres://u@127.0.0.1:1/unused".to_owned()),
        "HOOKLEDGER_SOURCES" => Some(sources.to_owned()),
        _ => None,
    })
    .expect("valid settings")
}

#[tokio::test]
async fn the_receiver_warns_at_start_up_of_handlers_for_a_source_that_is_not_configured() {
    let settings =
        settings(r#"[{"name": "stripe-live", "scheme": "stripe", "secrets": ["whsec_x"]}]"#);
    let mut registry = Registry::new();
    registry.register("billing", "charge.refunded", handler_fn!(refund));
    let (logs, _guard) = capture_logs();
    receiver::handler::AppState::from_settings(&settings, registry)
        .await
        .expect("the state");
    let unconfigured = logs.with("gap", "unconfigured_source");
    assert_eq!(unconfigured.len(), 1, "{}", logs.text());
    assert_eq!(unconfigured[0]["level"], "WARN");
    let message = unconfigured[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"billing\" (charge.refunded), which is not configured"),
        "{message}"
    );
    let nothing = logs.with("gap", "nothing_runs");
    assert_eq!(nothing.len(), 1, "{}", logs.text());
    assert!(nothing[0]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("\"stripe-live\""));
    let coverage = logs.with("source", "stripe-live");
    assert_eq!(coverage.len(), 1, "{}", logs.text());
    assert_eq!(coverage[0]["handled"], "");
}

#[tokio::test]
async fn the_receiver_logs_what_runs_and_no_warning_when_handlers_match_the_sources() {
    let settings = settings(r#"[{"name": "billing", "scheme": "stripe", "secrets": ["whsec_x"]}]"#);
    let mut registry = Registry::new();
    registry.register("billing", "charge.refunded", handler_fn!(refund));
    let (logs, _guard) = capture_logs();
    receiver::handler::AppState::from_settings(&settings, registry)
        .await
        .expect("the state");
    assert!(logs.with("level", "WARN").is_empty(), "{}", logs.text());
    let coverage = logs.with("source", "billing");
    assert_eq!(coverage.len(), 1, "{}", logs.text());
    assert_eq!(coverage[0]["handled"], "charge.refunded");
    assert_eq!(coverage[0]["message"], "source coverage");
}

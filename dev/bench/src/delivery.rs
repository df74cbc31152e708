//! The in-process receive path the benches drive (bench-load, bench-limit): the receiver, and
//! new Stripe `payment_intent.succeeded` deliveries signed for it.

/// One signed delivery: its headers and body.
pub type Delivery = (http::HeaderMap, Vec<u8>);

/// The in-process receive path over `database` with the sources `sources_json` (a JSON array,
/// as `HOOKLEDGER_SOURCES`), running the example Rust handlers on its Stripe sources when
/// `examples` (`handlers::examples::registry`) and every source's SQL handlers (its
/// `"handlers"`), as the functions join them (`App::handlers`), sealing the payloads of its
/// sources with `encrypt_payload` under `payload_keys` (`Settings::payload_keys`); and the
/// configuration of its source `source` (to sign deliveries with).
///
/// # Errors
/// When the sources do not parse, a SQL handler is refused, the pool cannot be built, or
/// `source` is not among them.
pub fn in_process_receiver(
    database: shared::config::DatabaseSettings,
    sources_json: &str,
    source: &str,
    examples: bool,
    payload_keys: Option<std::sync::Arc<shared::privacy::keys::PayloadKeys>>,
) -> anyhow::Result<(
    std::sync::Arc<shared::Receiver>,
    std::sync::Arc<shared::SourceConfig>,
)> {
    use anyhow::Context;
    let settings = shared::Settings {
        database,
        sources: shared::Sources::from_json(sources_json)?,
        sources_reload: Default::default(),
        worker: Default::default(),
        worker_function: None,
        sweep: Default::default(),
        audit: Default::default(),
        payload_keys,
    };
    let pool = shared::db::pool(&settings.database)?;
    let rust = if examples {
        handlers::examples::registry(&settings.sources)
    } else {
        shared::handler::Registry::new()
    };
    let registry = shared::sql_handler::with_sql_handlers(rust, &settings.sources)?;
    let receiver = std::sync::Arc::new(shared::Receiver::new(&settings, pool, registry));
    let config = settings
        .sources
        .get(source)
        .cloned()
        .with_context(|| format!("the bench's {source} source"))?;
    Ok((receiver, config))
}

/// A new `payment_intent.succeeded` event body, id `evt_{tag}_{i}`, created at `now` (unix
/// seconds), amount `1000 + i`, order `ord_{tag}_{i}` (the shape the example order handler
/// reads; bench-load and bench-limit send it).
pub fn order_event_body(tag: &str, i: usize, now: i64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": format!("evt_{tag}_{i}"), "object": "event", "created": now,
        "type": "payment_intent.succeeded",
        "data": {"object": {"id": format!("pi_{tag}_{i}"), "amount": 1000 + i,
            "amount_received": 1000 + i, "currency": "usd",
            "metadata": {"order_id": format!("ord_{tag}_{i}")}}}
    }))
    .unwrap_or_default()
}

/// `n` new events tagged `tag` ([`order_event_body`], `i` from 0), each signed at `now` by
/// `source`'s verifier (a header that is not valid HTTP is left out).
pub fn signed_deliveries(
    source: &shared::SourceConfig,
    tag: &str,
    n: usize,
    now: i64,
) -> Vec<Delivery> {
    (0..n)
        .map(|i| {
            let body = order_event_body(tag, i, now);
            let mut headers = http::HeaderMap::new();
            for (name, value) in source.verifier.sign(0, "", now, &body) {
                if let (Ok(name), Ok(value)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(&value),
                ) {
                    headers.insert(name, value);
                }
            }
            (headers, body)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_events_have_the_order_handlers_shape() {
        let body = order_event_body("t", 7, 1_700_000_000);
        let event: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(event["id"], "evt_t_7");
        assert_eq!(event["created"], 1_700_000_000);
        assert_eq!(event["type"], "payment_intent.succeeded");
        assert_eq!(event["data"]["object"]["id"], "pi_t_7");
        assert_eq!(event["data"]["object"]["amount"], 1007);
        assert_eq!(event["data"]["object"]["amount_received"], 1007);
        assert_eq!(event["data"]["object"]["metadata"]["order_id"], "ord_t_7");
    }

    #[test]
    fn deliveries_are_signed_as_stripe_signs() {
        let sources = shared::Sources::from_json(
            r#"[{"name": "stripe", "scheme": "stripe", "secrets": ["whsec_test"], "mode": "inline"}]"#,
        )
        .expect("one source");
        let source = sources.get("stripe").expect("the stripe source");
        let list = signed_deliveries(source, "t", 2, 1_700_000_000);
        assert_eq!(list.len(), 2);
        for (i, (headers, body)) in list.iter().enumerate() {
            assert_eq!(body, &order_event_body("t", i, 1_700_000_000));
            assert_eq!(
                headers["stripe-signature"],
                crate::stripe_signature("whsec_test", 1_700_000_000, body).as_str()
            );
        }
    }
}

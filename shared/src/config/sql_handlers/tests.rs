use tokio_postgres::types::Type;

use crate::Sources;

/// The start-up error for `json`, as printed.
fn error_of(json: &str) -> String {
    crate::error_chain::error_chain(&Sources::from_json(json).unwrap_err())
}

/// A source with `handlers` as its SQL handlers.
fn source(handlers: &str) -> String {
    format!(r#"[{{"name": "pay", "scheme": "stripe", "secrets": ["x"], "handlers": {handlers}}}]"#)
}

const GOOD: &str = r#"[
  {"event_types": ["charge.refunded"],
   "when": "body.data.object.amount_refunded > `0`",
   "sql": [{"statement": "INSERT INTO refunds (charge_id, amount_minor, event_id) VALUES ($1, $2, $3) ON CONFLICT (charge_id) DO NOTHING",
            "params": [{"path": "/data/object/id", "type": "text"},
                       {"path": "/data/object/amount_refunded", "type": "bigint"},
                       {"event": "id"}]}],
   "response": {"status": 201, "body": {"refund": "recorded"}}},
  {"event_types": ["customer.*"],
   "sql": [{"statement": "UPDATE customers SET email = $2 WHERE id = $1 RETURNING id",
            "params": [{"path": "/data/object/id", "type": "text"},
                       {"path": "/data/object/email", "type": "text", "optional": true}]}],
   "order": {"entity_type": "customer", "entity": "/data/object/id", "version": "/created"},
   "response": {"returning": 1}}
]"#;

#[test]
fn a_good_configuration_parses_with_its_shapes() {
    let sources = Sources::from_json(&source(GOOD)).unwrap();
    let sql = &sources.get("pay").unwrap().sql_handlers;
    assert_eq!(sql.len(), 2);
    let refund = &sql[0];
    assert_eq!(refund.response.status, 201);
    assert_eq!(
        refund.statements[0].types(),
        vec![Type::TEXT, Type::INT8, Type::TEXT]
    );
    assert!(refund.when.is_some() && refund.order.is_none());
    let customer = &sql[1];
    assert_eq!(customer.response.returning, Some(1));
    assert_eq!(customer.response.body, super::default_body());
    assert!(customer.statements[0].params[1].optional);
    assert!(customer.event_types.matches("customer.updated"));
    assert_eq!(customer.patterns(), "event_types \"customer.*\"");
}

/// The error for handlers `handlers`, which must name the source, the handler and its patterns.
fn refused(handlers: &str) -> String {
    let e = error_of(&source(handlers));
    assert!(e.contains("source \"pay\""), "{e}");
    assert!(e.contains("SQL handler #1 (event_types \"t\")"), "{e}");
    e
}

fn one(statement: &str, params: &str, extra: &str) -> String {
    format!(
        r#"[{{"event_types": ["t"], "sql": [{{"statement": {statement:?}, "params": {params}}}]{extra}}}]"#
    )
}

#[test]
fn static_configuration_errors_name_source_patterns_and_statement() {
    let e = refused(&one(
        "INSERT INTO t (a) VALUES ($1)",
        r#"[{"path": "a", "type": "text"}]"#,
        "",
    ));
    assert!(
        e.contains("statement 1: parameter $1") && e.contains("JSON pointer"),
        "{e}"
    );
    let e = refused(&one(
        "INSERT INTO t (a) VALUES ($1)",
        r#"[{"path": "/a"}]"#,
        "",
    ));
    assert!(e.contains("type is required"), "{e}");
    let e = refused(&one(
        "INSERT INTO t (a) VALUES ($1)",
        r#"[{"path": "/a", "form": "a", "type": "text"}]"#,
        "",
    ));
    assert!(e.contains("exactly one of path, form and event"), "{e}");
    let e = refused(&one(
        "INSERT INTO t (a) VALUES ($1)",
        r#"[{"event": "id", "type": "bigint"}]"#,
        "",
    ));
    assert!(e.contains("event field is text"), "{e}");
    let e = refused(&one("  ", "[]", ""));
    assert!(e.contains("statement 1: statement is empty"), "{e}");
    let e = refused(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "when": "a ==""#,
    ));
    assert!(e.contains("when:"), "{e}");
    let e = refused(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "response": {"status": 204}"#,
    ));
    assert!(e.contains("response.status 204"), "{e}");
    // The recorded no-op's exact body: the ledger would read the event as ignored, and
    // `hookledger redrive --ignored` would run the handler again.
    let e = refused(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "response": {"body": {"event_type": "t", "status": "ignored"}}"#,
    ));
    assert!(e.contains("response.body") && e.contains("no-op"), "{e}");
    // Any other body that says ignored is the handler's own.
    Sources::from_json(&source(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "response": {"body": {"status": "ignored"}}"#,
    )))
    .unwrap();
    let e = refused(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "response": {"returning": 2}"#,
    ));
    assert!(e.contains("response.returning 2 names no statement"), "{e}");
    let e = refused(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "order": {"entity_type": "c", "entity": "id", "version": "/v"}"#,
    ));
    assert!(e.contains("order.entity"), "{e}");
    let e = refused(r#"[{"event_types": ["t"], "sql": []}]"#);
    assert!(e.contains("no statement"), "{e}");
    let e = error_of(&source(
        r#"[{"event_types": [], "sql": [{"statement": "SELECT 1"}]}]"#,
    ));
    assert!(e.contains("event_types is empty"), "{e}");
    let e = error_of(&source(
        r#"[{"event_types": ["a*b"], "sql": [{"statement": "SELECT 1"}]}]"#,
    ));
    assert!(e.contains("\"a*b\""), "{e}");
}

#[test]
fn unknown_types_and_fields_are_refused_by_the_parser() {
    let e = error_of(&source(&one(
        "INSERT INTO t (a) VALUES ($1)",
        r#"[{"path": "/a", "type": "int"}]"#,
        "",
    )));
    assert!(e.contains("unknown variant") && e.contains("bigint"), "{e}");
    let e = error_of(&source(&one(
        "INSERT INTO t (a) VALUES (1)",
        "[]",
        r#", "sqll": 1"#,
    )));
    assert!(e.contains("unknown field"), "{e}");
}

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
    let sql = sources.get("pay").unwrap().sql_handlers.clone().unwrap();
    assert_eq!(sql.handlers.len(), 2);
    let refund = &sql.handlers[0];
    assert!(
        refund.one_statement,
        "a plain INSERT rides in the claim's statement"
    );
    assert_eq!(refund.response.status.code(), 201);
    assert_eq!(refund.statements[0].sql.types.len(), 3);
    let customer = &sql.handlers[1];
    assert!(!customer.one_statement);
    let (n, wrapped) = customer.response.returning.unwrap();
    assert_eq!(n, 1);
    assert!(wrapped.text.starts_with("WITH r AS ("), "{}", wrapped.text);
    assert_eq!(customer.response.body, super::default_body());
    assert!(sql.matches("charge.refunded") && sql.matches("customer.updated"));
    assert!(!sql.matches("charge.succeeded"));
    assert_eq!(sql.patterns(), vec!["charge.refunded", "customer.*"]);
}

#[test]
fn re_reading_the_same_sources_reuses_the_same_statements() {
    let a = Sources::from_json(&source(GOOD)).unwrap();
    let b = Sources::from_json(&source(GOOD)).unwrap();
    let sql = |s: &Sources| s.get("pay").unwrap().sql_handlers.clone().unwrap();
    assert!(std::ptr::eq(
        sql(&a).handlers[0].statements[0].sql,
        sql(&b).handlers[0].statements[0].sql
    ));
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
        "INSERT INTO t (a) VALUES ($1, $2)",
        r#"[{"path": "/a", "type": "text"}]"#,
        "",
    ));
    assert!(
        e.contains("statement 1") && e.contains("up to $2") && e.contains("lists 1"),
        "{e}"
    );
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
    let e = refused(&one("COMMIT", "[]", ""));
    assert!(e.contains("statement 1") && e.contains("COMMIT"), "{e}");
    let e = refused(&one("INSERT INTO t (a) VALUES ('x)", "[]", ""));
    assert!(e.contains("does not scan"), "{e}");
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

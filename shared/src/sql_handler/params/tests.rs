use super::*;
use crate::config::sql_handlers::is_json_pointer;

/// A marker that must never appear in an error.
const SECRET: &str = "hl-value-7c1e";

fn input(document: &str) -> Input<'_> {
    Input::new(
        "src",
        "evt_1",
        "charge.refunded",
        document.as_bytes(),
        document.as_bytes(),
    )
}

fn param(pointer: &str, ty: ParamType) -> Param {
    Param {
        origin: Origin::Path(pointer.to_owned()),
        ty,
        optional: false,
    }
}

/// The value as PostgreSQL's binary (or, for numeric, text) encoding would carry it.
fn encoded(value: &SqlValue, ty: &Type) -> Option<Vec<u8>> {
    let mut out = tokio_postgres::types::private::BytesMut::new();
    match value.to_sql_checked(ty, &mut out).unwrap() {
        IsNull::Yes => None,
        IsNull::No => Some(out.to_vec()),
    }
}

fn ok(document: &str, pointer: &str, ty: ParamType) -> Option<Vec<u8>> {
    let value = param(pointer, ty).value(1, &input(document)).unwrap();
    encoded(&value, &ty.pg_type())
}

fn err(document: &str, pointer: &str, ty: ParamType) -> String {
    let e = param(pointer, ty)
        .value(3, &input(document))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(!e.contains(SECRET), "the value leaked: {e}");
    assert!(e.contains("$3"), "{e}");
    e
}

#[test]
fn text_takes_strings_numbers_and_booleans_as_their_text() {
    assert_eq!(
        ok(r#"{"a": "x"}"#, "/a", ParamType::Text),
        Some(b"x".to_vec())
    );
    assert_eq!(
        ok(r#"{"a": 12.5}"#, "/a", ParamType::Text),
        Some(b"12.5".to_vec())
    );
    assert_eq!(
        ok(r#"{"a": true}"#, "/a", ParamType::Text),
        Some(b"true".to_vec())
    );
    let e = err(
        &format!(r#"{{"a": {{"k": "{SECRET}"}}}}"#),
        "/a",
        ParamType::Text,
    );
    assert!(e.contains("use jsonb") || e.contains("jsonb"), "{e}");
    assert!(e.contains("an object"), "{e}");
    err(&format!(r#"{{"a": ["{SECRET}"]}}"#), "/a", ParamType::Text);
}

#[test]
fn bigint_takes_integers_and_integer_strings_only() {
    assert_eq!(
        ok(r#"{"a": 42}"#, "/a", ParamType::Bigint),
        Some(42i64.to_be_bytes().to_vec())
    );
    assert_eq!(
        ok(r#"{"a": "-7"}"#, "/a", ParamType::Bigint),
        Some((-7i64).to_be_bytes().to_vec())
    );
    assert!(err(r#"{"a": 1.5}"#, "/a", ParamType::Bigint).contains("not an integer"));
    assert!(err(r#"{"a": 18446744073709551615}"#, "/a", ParamType::Bigint).contains("range"));
    err(&format!(r#"{{"a": "{SECRET}"}}"#), "/a", ParamType::Bigint);
    err(r#"{"a": " 4"}"#, "/a", ParamType::Bigint);
    err(r#"{"a": true}"#, "/a", ParamType::Bigint);
}

#[test]
fn numeric_is_a_checked_decimal_sent_as_text() {
    let value = param("/a", ParamType::Numeric)
        .value(1, &input(r#"{"a": "12.50"}"#))
        .unwrap();
    assert!(matches!(value.encode_format(&Type::NUMERIC), Format::Text));
    assert_eq!(encoded(&value, &Type::NUMERIC), Some(b"12.50".to_vec()));
    assert_eq!(
        ok(r#"{"a": 3}"#, "/a", ParamType::Numeric),
        Some(b"3".to_vec())
    );
    assert_eq!(
        ok(r#"{"a": 0.1}"#, "/a", ParamType::Numeric),
        Some(b"0.1".to_vec())
    );
    for good in ["1", "-1", "+1.", ".5", "1e10", "1.5E-3", "007"] {
        assert!(is_decimal(good), "{good}");
    }
    for bad in [
        "", ".", "-", "1e", "e5", "NaN", "Infinity", "1.2.3", "1 ", "0x10", "1_000",
    ] {
        assert!(!is_decimal(bad), "{bad}");
    }
    err(&format!(r#"{{"a": "{SECRET}"}}"#), "/a", ParamType::Numeric);
    err(r#"{"a": "NaN"}"#, "/a", ParamType::Numeric);
    err(r#"{"a": [1]}"#, "/a", ParamType::Numeric);
}

#[test]
fn boolean_takes_booleans_and_their_strings() {
    assert_eq!(
        ok(r#"{"a": true}"#, "/a", ParamType::Boolean),
        Some(vec![1])
    );
    assert_eq!(
        ok(r#"{"a": "false"}"#, "/a", ParamType::Boolean),
        Some(vec![0])
    );
    err(r#"{"a": "yes"}"#, "/a", ParamType::Boolean);
    err(r#"{"a": 1}"#, "/a", ParamType::Boolean);
    err(&format!(r#"{{"a": "{SECRET}"}}"#), "/a", ParamType::Boolean);
}

#[test]
fn timestamptz_takes_unix_seconds_and_rfc_3339() {
    let at = |document: &str| {
        let value = param("/a", ParamType::Timestamptz)
            .value(1, &input(document))
            .unwrap();
        encoded(&value, &Type::TIMESTAMPTZ).unwrap()
    };
    assert_eq!(
        at(r#"{"a": 1750000000}"#),
        at(r#"{"a": "2025-06-15T15:06:40Z"}"#)
    );
    assert_eq!(
        at(r#"{"a": "2025-06-15T17:06:40+02:00"}"#),
        at(r#"{"a": 1750000000}"#)
    );
    assert_ne!(at(r#"{"a": -5}"#), at(r#"{"a": 5}"#));
    err(r#"{"a": "2025-06-15"}"#, "/a", ParamType::Timestamptz);
    err(r#"{"a": 1.5}"#, "/a", ParamType::Timestamptz);
    err(
        &format!(r#"{{"a": "{SECRET}"}}"#),
        "/a",
        ParamType::Timestamptz,
    );
    err(
        r#"{"a": 9223372036854775807}"#,
        "/a",
        ParamType::Timestamptz,
    );
}

#[test]
fn jsonb_takes_any_value_and_the_empty_pointer_is_the_document() {
    let whole = ok(r#"{"a": [1, {"b": null}]}"#, "", ParamType::Jsonb).unwrap();
    // Version byte 1, then the JSON text.
    assert_eq!(whole[0], 1);
    let text: serde_json::Value = serde_json::from_slice(&whole[1..]).unwrap();
    assert_eq!(text, serde_json::json!({"a": [1, {"b": null}]}));
    let null = ok(r#"{"a": null}"#, "/a", ParamType::Jsonb).unwrap();
    assert_eq!(
        &null[1..],
        b"null",
        "a non-optional jsonb null is the JSON null"
    );
}

#[test]
fn a_missing_path_or_null_is_an_error_unless_optional() {
    let e = err(r#"{"b": 1}"#, "/data/object/id", ParamType::Text);
    assert!(
        e.contains("\"/data/object/id\"") && e.contains("missing"),
        "{e}"
    );
    let e = err(r#"{"a": null}"#, "/a", ParamType::Bigint);
    assert!(e.contains("null"), "{e}");
    let optional = Param {
        optional: true,
        ..param("/a", ParamType::Bigint)
    };
    for document in [r#"{"b": 1}"#, r#"{"a": null}"#] {
        let value = optional.value(1, &input(document)).unwrap();
        assert_eq!(encoded(&value, &Type::INT8), None);
    }
    let e = err("not json", "/a", ParamType::Text);
    assert!(e.contains("not JSON"), "{e}");
}

#[test]
fn form_fields_and_event_fields_are_read() {
    let body = format!("a=1&token={SECRET}&a=2&n=x%20y");
    let form = |field: &str, ty: ParamType, optional: bool| Param {
        origin: Origin::Form(field.to_owned()),
        ty,
        optional,
    };
    let input = Input::new("src", "evt_9", "t", body.as_bytes(), body.as_bytes());
    let value = form("a", ParamType::Bigint, false)
        .value(1, &input)
        .unwrap();
    assert_eq!(
        encoded(&value, &Type::INT8),
        Some(2i64.to_be_bytes().to_vec())
    );
    let value = form("n", ParamType::Text, false).value(1, &input).unwrap();
    assert_eq!(encoded(&value, &Type::TEXT), Some(b"x y".to_vec()));
    let e = form("token", ParamType::Bigint, false)
        .value(2, &input)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("form field \"token\"") && !e.contains(SECRET),
        "{e}"
    );
    assert!(form("gone", ParamType::Text, false)
        .value(1, &input)
        .is_err());
    let value = form("gone", ParamType::Text, true)
        .value(1, &input)
        .unwrap();
    assert_eq!(encoded(&value, &Type::TEXT), None);
    let event = Param {
        origin: Origin::Event(EventField::Id),
        ty: ParamType::Text,
        optional: false,
    };
    let value = event.value(1, &input).unwrap();
    assert_eq!(encoded(&value, &Type::TEXT), Some(b"evt_9".to_vec()));
}

/// A JSON body is no form: read as one, a string inside it (text a sender typed, such as a
/// chat message) would supply form fields (`"hi&user_id=U_ADMIN&x="`).
#[test]
fn a_json_body_has_no_form_fields() {
    let body = r#"{"type": "message", "text": "hi&user_id=U_ADMIN&x=", "n": 1}"#;
    let input = input(body);
    let form = |optional: bool| Param {
        origin: Origin::Form("user_id".to_owned()),
        ty: ParamType::Text,
        optional,
    };
    let value = form(true).value(1, &input).unwrap();
    assert_eq!(encoded(&value, &Type::TEXT), None, "optional: NULL");
    let e = form(false)
        .value(1, &input)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("form field \"user_id\"") && !e.contains("U_ADMIN"),
        "{e}"
    );
    // The JSON a form carries (GitHub's payload=, Slack interactivity) is the document; the
    // form's own fields are still read.
    let form_body = "payload=%7B%22a%22%3A1%7D&user_id=U1";
    let carried = Input::new("src", "evt_1", "t", form_body.as_bytes(), br#"{"a":1}"#);
    let value = form(false).value(1, &carried).unwrap();
    assert_eq!(encoded(&value, &Type::TEXT), Some(b"U1".to_vec()));
}

#[test]
fn json_pointers_follow_rfc_6901() {
    for good in ["", "/", "/a", "/a/0", "/a~0b", "/a~1b", "/~01"] {
        assert!(is_json_pointer(good), "{good}");
    }
    for bad in ["a", "a/b", "/a~", "/a~2", "#/a"] {
        assert!(!is_json_pointer(bad), "{bad}");
    }
}

#[test]
fn entity_and_version_read_strictly() {
    let input = input(r#"{"id": "ch_1", "n": 7, "v": 12, "s": "13", "f": 1.5, "o": {}}"#);
    assert_eq!(text_at(&input, "/id").unwrap(), "ch_1");
    assert_eq!(text_at(&input, "/n").unwrap(), "7");
    assert!(text_at(&input, "/o").is_err());
    assert!(text_at(&input, "/gone").unwrap_err().contains("missing"));
    assert_eq!(integer_at(&input, "/v").unwrap(), 12);
    assert_eq!(integer_at(&input, "/s").unwrap(), 13);
    assert!(integer_at(&input, "/f").is_err());
    assert!(integer_at(&input, "/id").is_err());
}

use super::*;

fn redaction(pointers: &[&str]) -> Redaction {
    let pointers: Vec<String> = pointers.iter().map(|p| (*p).to_owned()).collect();
    Redaction::new(&pointers).expect("valid pointers")
}

fn applied(pointers: &[&str], body: &str) -> String {
    let out = redaction(pointers)
        .apply(body.as_bytes())
        .expect("redactable");
    String::from_utf8(out.into_owned()).expect("utf-8")
}

#[test]
fn a_named_field_is_replaced_and_every_other_byte_is_kept() {
    let body = r#"{"id": "evt_1", "data": {"object": {"email": "ada@example.com", "amount": 1.50, "z": 1, "a": 2}}}"#;
    assert_eq!(
        applied(&["/data/object/email"], body),
        r#"{"id":"evt_1","data":{"object":{"email":"[redacted]","amount":1.50,"z":1,"a":2}}}"#
    );
}

#[test]
fn an_untouched_body_is_borrowed_byte_for_byte() {
    let body = br#"{ "id" : "evt_1",  "data": {"object": {}} }"#;
    let out = redaction(&["/data/object/email"])
        .apply(body)
        .expect("redactable");
    assert!(matches!(out, Cow::Borrowed(_)));
    assert_eq!(&*out, body);
}

#[test]
fn a_star_matches_every_element_and_member() {
    let body = r#"{"items": [{"name": "a", "qty": 1}, {"name": "b", "qty": 2}], "meta": {"x": 1, "y": [2]}}"#;
    assert_eq!(
        applied(&["/items/*/name", "/meta/*"], body),
        r#"{"items":[{"name":"[redacted]","qty":1},{"name":"[redacted]","qty":2}],"meta":{"x":"[redacted]","y":"[redacted]"}}"#
    );
}

#[test]
fn an_index_matches_its_element_only() {
    assert_eq!(
        applied(&["/1"], r#"["a", "b", "c"]"#),
        r#"["a","[redacted]","c"]"#
    );
    // RFC 6901: "01" is not an index.
    assert_eq!(applied(&["/01"], r#"["a", "b"]"#), r#"["a", "b"]"#);
}

#[test]
fn a_whole_object_or_array_value_is_replaced() {
    assert_eq!(
        applied(
            &["/customer"],
            r#"{"customer": {"name": "Ada", "address": ["x"]}, "n": 1}"#
        ),
        r#"{"customer":"[redacted]","n":1}"#
    );
}

#[test]
fn escaped_names_and_names_with_escapes_in_the_body_match() {
    assert_eq!(
        applied(
            &["/a~1b/c~0d"],
            r#"{"a/b": {"c~d": "secret"}, "\u0065": 1}"#
        ),
        r#"{"a/b":{"c~d":"[redacted]"},"e":1}"#
    );
}

#[test]
fn a_pointer_below_a_scalar_or_missing_member_changes_nothing() {
    let body = r#"{"a": 1, "b": null}"#;
    assert_eq!(applied(&["/a/b", "/b/c", "/zz"], body), body);
}

#[test]
fn a_form_body_is_a_flat_object_of_its_fields() {
    let body = "From=%2B15551234567&Body=hello+there&MessageSid=SM1";
    assert_eq!(
        applied(&["/Body", "/From"], body),
        "From=%5Bredacted%5D&Body=%5Bredacted%5D&MessageSid=SM1"
    );
    assert_eq!(applied(&["/Other"], body), body);
}

#[test]
fn a_body_that_starts_as_json_but_is_not_is_refused() {
    let r = redaction(&["/a"]);
    assert_eq!(r.apply(br#"{"a": "#), Err(Unredactable::Json));
    assert_eq!(r.apply(b"\xff\xfe"), Err(Unredactable::NotUtf8));
}

#[test]
fn bad_lists_are_refused_at_start_up() {
    assert_eq!(
        Redaction::new(&["email".to_owned()]),
        Err(RedactionError::NotAPointer("email".to_owned()))
    );
    assert_eq!(
        Redaction::new(&["/a~2".to_owned()]),
        Err(RedactionError::BadEscape("/a~2".to_owned()))
    );
    assert_eq!(Redaction::new(&[]), Err(RedactionError::Empty));
    let many: Vec<String> = (0..=MAX_POINTERS).map(|i| format!("/f{i}")).collect();
    assert_eq!(
        Redaction::new(&many),
        Err(RedactionError::TooMany(MAX_POINTERS + 1))
    );
}

#[test]
fn the_output_is_valid_json_with_the_same_shape() {
    let body = r#"{"a": [1, {"b": "x\"y", "c": [true, false]}], "d": "\ud83d\ude00"}"#;
    let out = applied(&["/a/1/b", "/a/1/c/0"], body);
    let value: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(
        value,
        serde_json::json!({"a": [1, {"b": "[redacted]", "c": ["[redacted]", false]}], "d": "😀"})
    );
}

proptest::proptest! {
    /// Whatever the body, redaction never panics, and JSON output stays valid JSON.
    #[test]
    fn any_body_is_redacted_or_refused(body in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
        let r = redaction(&["/a", "/*/b", "/0"]);
        if let Ok(out) = r.apply(&body) {
            if matches!(String::from_utf8_lossy(&body).trim_start().as_bytes().first(), Some(b'{' | b'[')) {
                proptest::prop_assert!(serde_json::from_slice::<&RawValue>(&out).is_ok());
            }
        }
    }
}

#[test]
fn a_form_with_a_payload_field_is_redacted_inside_its_json() {
    let inner = r#"{"pusher": {"email": "ada@example.com", "name": "ada"}, "ref": "main"}"#;
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", inner)
        .finish();
    let out = applied(&["/pusher/email"], &body);
    let fields: Vec<(String, String)> = form_urlencoded::parse(out.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].0, "payload");
    assert_eq!(
        fields[0].1,
        r#"{"pusher":{"email":"[redacted]","name":"ada"},"ref":"main"}"#
    );
    // A payload field that is not JSON cannot be redacted: never stored as it is.
    assert_eq!(
        redaction(&["/a"]).apply(b"payload=not-json"),
        Err(Unredactable::Json)
    );
}

//! The generic configuration's tests: JSON parsing, every validation rule, the template parser.

use super::super::template::{parse_template, Segment, Use};
use super::super::{Algorithm, Encoding, GenericHmac};
use super::fixtures::{minimal, timestamped};
use crate::{KeyError, Scheme, Verifier, VerifierError};

#[test]
fn a_minimal_json_configuration_takes_the_defaults() {
    let config: GenericHmac =
        serde_json::from_str(r#"{"signature_header":"X-Signature","event_id_pointer":"/id"}"#)
            .unwrap();
    assert_eq!(config, minimal());
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn a_full_json_configuration_parses() {
    let config: GenericHmac = serde_json::from_str(
        r#"{
            "signature_header": "X-Signature",
            "algorithm": "sha512",
            "encoding": "base64",
            "prefix": "v1=",
            "timestamp_header": "X-Timestamp",
            "signed_payload": "{timestamp}.{body}",
            "event_id_pointer": "/id",
            "event_type_header": "X-Event-Type"
        }"#,
    )
    .unwrap();
    assert_eq!(
        config,
        GenericHmac {
            event_type_header: Some("X-Event-Type".to_owned()),
            ..timestamped()
        }
    );
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn unknown_fields_algorithms_and_encodings_do_not_parse() {
    for json in [
        r#"{"signature_header":"X-S","event_id_pointer":"/id","secret":"x"}"#,
        r#"{"signature_header":"X-S","event_id_pointer":"/id","algorithm":"sha3"}"#,
        r#"{"signature_header":"X-S","event_id_pointer":"/id","algorithm":"SHA256"}"#,
        r#"{"signature_header":"X-S","event_id_pointer":"/id","encoding":"base32"}"#,
    ] {
        assert!(serde_json::from_str::<GenericHmac>(json).is_err(), "{json}");
    }
    // A signature location is optional in the JSON (a header or a body pointer), required by
    // the validation.
    let nowhere: GenericHmac = serde_json::from_str(r#"{"event_id_pointer":"/id"}"#).unwrap();
    assert_invalid(
        &nowhere,
        "one of signature_header or signature_pointer is required",
    );
}

#[test]
fn algorithm_and_encoding_names_are_lowercase() {
    for (value, name) in [
        (serde_json::to_string(&Algorithm::Sha256), "\"sha256\""),
        (serde_json::to_string(&Algorithm::Sha512), "\"sha512\""),
        (serde_json::to_string(&Encoding::Hex), "\"hex\""),
        (serde_json::to_string(&Encoding::Base64), "\"base64\""),
    ] {
        assert_eq!(value.unwrap(), name);
    }
}

/// Assert that `config` is invalid with a message containing `needle`.
fn assert_invalid(config: &GenericHmac, needle: &str) {
    let error = config.validate().unwrap_err();
    assert!(
        error.contains(needle),
        "{error:?} should mention {needle:?}"
    );
}

#[test]
fn header_names_must_be_valid() {
    for bad in ["", "X Signature", "X-Signature:", "X-Sïgnature", "X-Sig\n"] {
        assert_invalid(
            &GenericHmac {
                signature_header: Some(bad.to_owned()),
                ..minimal()
            },
            "signature_header",
        );
        assert_invalid(
            &GenericHmac {
                timestamp_header: Some(bad.to_owned()),
                signed_payload: Some("{timestamp}.{body}".to_owned()),
                ..minimal()
            },
            "timestamp_header",
        );
        assert_invalid(
            &GenericHmac {
                event_id_header: Some(bad.to_owned()),
                event_id_pointer: None,
                ..minimal()
            },
            "event_id_header",
        );
        assert_invalid(
            &GenericHmac {
                event_type_header: Some(bad.to_owned()),
                ..minimal()
            },
            "event_type_header",
        );
    }
}

#[test]
fn the_timestamp_header_must_differ_from_the_signature_header() {
    assert_invalid(
        &GenericHmac {
            timestamp_header: Some("x-SIGNATURE".to_owned()),
            signed_payload: Some("{timestamp}.{body}".to_owned()),
            ..minimal()
        },
        "differ",
    );
}

#[test]
fn a_prefix_must_be_non_empty_visible_ascii() {
    for bad in ["", "sha256=\n", "é=", "\t"] {
        assert_invalid(
            &GenericHmac {
                prefix: Some(bad.to_owned()),
                ..minimal()
            },
            "prefix",
        );
    }
    for good in ["sha256=", "v1,", "Bearer "] {
        let config = GenericHmac {
            prefix: Some(good.to_owned()),
            ..minimal()
        };
        assert_eq!(config.validate(), Ok(()), "{good:?}");
    }
}

#[test]
fn exactly_one_event_id_location_is_required() {
    assert_invalid(
        &GenericHmac {
            event_id_pointer: None,
            ..minimal()
        },
        "required",
    );
    assert_invalid(
        &GenericHmac {
            event_id_header: Some("X-Event-Id".to_owned()),
            ..minimal()
        },
        "set only one of",
    );
    let by_header = GenericHmac {
        event_id_header: Some("X-Event-Id".to_owned()),
        event_id_pointer: None,
        ..timestamped()
    };
    assert_eq!(by_header.validate(), Ok(()));
}

#[test]
fn an_id_or_type_from_a_header_needs_a_signed_timestamp() {
    // A header is never signed: without a signed timestamp a captured body could be sent again
    // under a new id or type for ever (issue 24).
    assert_invalid(
        &GenericHmac {
            event_id_header: Some("X-Event-Id".to_owned()),
            event_id_pointer: None,
            ..minimal()
        },
        "event_id_header is not covered by the signature and no timestamp is signed",
    );
    assert_invalid(
        &GenericHmac {
            event_type_header: Some("X-Event-Type".to_owned()),
            ..minimal()
        },
        "event_type_header is not covered by the signature",
    );
    assert_eq!(minimal().validate(), Ok(()));
    assert!(minimal().signs_id_and_type());
    let timestamped_header = GenericHmac {
        event_type_header: Some("X-Event-Type".to_owned()),
        ..timestamped()
    };
    assert_eq!(timestamped_header.validate(), Ok(()));
    assert!(!timestamped_header.signs_id_and_type());
}

#[test]
fn at_most_one_event_type_location_is_allowed() {
    assert_invalid(
        &GenericHmac {
            event_type_header: Some("X-Event-Type".to_owned()),
            event_type_pointer: Some("/type".to_owned()),
            ..minimal()
        },
        "set only one of",
    );
    for config in [
        GenericHmac {
            event_type_header: Some("X-Event-Type".to_owned()),
            ..timestamped()
        },
        GenericHmac {
            event_type_pointer: Some("/type".to_owned()),
            ..minimal()
        },
    ] {
        assert_eq!(config.validate(), Ok(()));
    }
}

#[test]
fn pointers_must_be_rfc_6901_pointers_into_the_body() {
    for bad in ["", "id", "#/id", "/a~2b", "/a~", "/~/x"] {
        assert_invalid(
            &GenericHmac {
                event_id_pointer: Some(bad.to_owned()),
                ..minimal()
            },
            "event_id_pointer",
        );
        assert_invalid(
            &GenericHmac {
                event_type_pointer: Some(bad.to_owned()),
                ..minimal()
            },
            "event_type_pointer",
        );
    }
    for good in ["/", "/id", "/data/object/id", "/a~0b/c~1d", "/items/0"] {
        let config = GenericHmac {
            event_id_pointer: Some(good.to_owned()),
            ..minimal()
        };
        assert_eq!(config.validate(), Ok(()), "{good:?}");
    }
}

#[test]
fn templates_use_only_known_placeholders_and_contain_the_body_once() {
    for (bad, needle) in [
        ("", "must sign the request's content"),
        ("static", "must sign the request's content"),
        ("{timestamp}", "must sign the request's content"),
        ("{body}{body}", "more than once"),
        ("{body}.{id}", "unknown placeholder"),
        ("{Body}", "unknown placeholder"),
        ("{ body }", "unknown placeholder"),
        ("{{body}}", "unknown placeholder"),
        ("{body", "unclosed"),
        ("body}", "closes no placeholder"),
        ("{body}}", "closes no placeholder"),
        ("{}{body}", "unknown placeholder"),
    ] {
        assert_invalid(
            &GenericHmac {
                signed_payload: Some(bad.to_owned()),
                ..minimal()
            },
            needle,
        );
    }
}

#[test]
fn the_timestamp_placeholder_and_header_come_together() {
    assert_invalid(
        &GenericHmac {
            signed_payload: Some("{timestamp}.{body}".to_owned()),
            ..minimal()
        },
        "no timestamp location",
    );
    assert_invalid(
        &GenericHmac {
            timestamp_header: Some("X-Timestamp".to_owned()),
            ..minimal()
        },
        "unsigned timestamp",
    );
    assert_invalid(
        &GenericHmac {
            signed_payload: Some("{timestamp}{timestamp}{body}".to_owned()),
            ..timestamped()
        },
        "more than once",
    );
}

#[test]
fn templates_split_into_literals_and_placeholders() {
    assert_eq!(
        parse_template("signed_payload", "{body}", Use::Signed),
        Ok(vec![Segment::Body])
    );
    assert_eq!(
        parse_template("signed_payload", "v0:{timestamp}:{body}", Use::Signed),
        Ok(vec![
            Segment::Literal("v0:".to_owned()),
            Segment::Timestamp,
            Segment::Literal(":".to_owned()),
            Segment::Body,
        ])
    );
    assert_eq!(
        parse_template("signed_payload", "{body}\n", Use::Signed),
        Ok(vec![Segment::Body, Segment::Literal("\n".to_owned())])
    );
}

#[test]
fn a_verifier_refuses_an_invalid_configuration_with_the_validation_message() {
    let config = GenericHmac {
        signed_payload: Some("{nope}".to_owned()),
        ..minimal()
    };
    let expected = config.validate().unwrap_err();
    assert_eq!(
        Verifier::new(Scheme::GenericHmac, &["s"], 300, Some(config)).unwrap_err(),
        VerifierError::Generic(expected)
    );
}

#[test]
fn a_verifier_refuses_an_empty_secret() {
    assert_eq!(
        Verifier::new(Scheme::GenericHmac, &[""], 300, Some(minimal())).unwrap_err(),
        VerifierError::Key {
            index: 0,
            error: KeyError::Empty
        }
    );
}

#[test]
fn signing_only_fields_needs_a_timestamp() {
    // The rest of the body would be unsigned and replayable for ever.
    assert_invalid(
        &GenericHmac {
            signed_payload: Some("{field:/id}".to_owned()),
            ..minimal()
        },
        "signs only fields of the body and no timestamp",
    );
    let with_timestamp = GenericHmac {
        signed_payload: Some("{timestamp}.{field:/id}".to_owned()),
        ..timestamped()
    };
    assert_eq!(with_timestamp.validate(), Ok(()));
}

//! The generic scheme's verification tests: known vectors, round trips, tolerance, headers,
//! rotation and the signature parser.

use http::HeaderMap;

use super::super::config::Prepared;
use super::super::verify::{parse_signature, verify};
use super::super::{Algorithm, Encoding, GenericHmac};
use super::fixtures::*;
use crate::test_support::{header_map, owned_map};
use crate::Request;
use crate::{Scheme, Verified, Verifier, VerifyError, MAX_HEADER_LEN};

#[test]
fn every_algorithm_and_encoding_verifies_its_known_digest() {
    for (algorithm, encoding, digest) in COMBINATIONS {
        let v = verifier(with(algorithm, encoding), &[SECRET]);
        let headers = header_map(&[("X-Signature", digest)]);
        assert_eq!(
            v.verify(&headers, BODY, 0),
            Ok(Verified { key_index: 0 }),
            "{algorithm:?} {encoding:?}"
        );
        assert_eq!(
            v.sign(0, "", 0, BODY),
            vec![("x-signature".to_owned(), digest.to_owned())],
            "{algorithm:?} {encoding:?}"
        );
    }
}

#[test]
fn every_algorithm_and_encoding_round_trips_and_detects_tampering() {
    for (algorithm, encoding, _) in COMBINATIONS {
        let v = verifier(with(algorithm, encoding), &["another secret"]);
        let headers = owned_map(&v.sign(0, "", T, b"{\"id\":1}"));
        assert_eq!(
            v.verify(&headers, b"{\"id\":1}", T),
            Ok(Verified { key_index: 0 }),
            "{algorithm:?} {encoding:?}"
        );
        assert_eq!(
            v.verify(&headers, b"{\"id\":2}", T),
            Err(VerifyError::NoSignatureMatched),
            "{algorithm:?} {encoding:?}"
        );
    }
}

#[test]
fn a_digest_of_the_other_algorithm_or_encoding_is_malformed() {
    for (algorithm, encoding, _) in COMBINATIONS {
        let v = verifier(with(algorithm, encoding), &[SECRET]);
        for (other_algorithm, other_encoding, digest) in COMBINATIONS {
            if (other_algorithm, other_encoding) == (algorithm, encoding) {
                continue;
            }
            let headers = header_map(&[("X-Signature", digest)]);
            let result = v.verify(&headers, BODY, 0);
            // 64 hex digits happen to be valid base64 of 48 bytes: still not one digest.
            assert_eq!(
                result,
                malformed_sig(),
                "{algorithm:?} {encoding:?} given {other_algorithm:?} {other_encoding:?}"
            );
        }
    }
}

#[test]
fn hex_digests_are_accepted_in_either_case() {
    let v = verifier(minimal(), &[SECRET]);
    let headers = header_map(&[("X-Signature", &SHA256_HEX.to_ascii_uppercase())]);
    assert_eq!(v.verify(&headers, BODY, 0), Ok(Verified { key_index: 0 }));
}

#[test]
fn base64_digests_are_accepted_with_or_without_padding() {
    for (algorithm, digest) in [
        (Algorithm::Sha256, SHA256_BASE64),
        (Algorithm::Sha512, SHA512_BASE64),
    ] {
        let v = verifier(with(algorithm, Encoding::Base64), &[SECRET]);
        let headers = header_map(&[("X-Signature", digest.trim_end_matches('='))]);
        assert_eq!(v.verify(&headers, BODY, 0), Ok(Verified { key_index: 0 }));
    }
}

#[test]
fn malformed_digests_are_malformed_header() {
    let hex = verifier(minimal(), &[SECRET]);
    for value in [
        String::new(),
        SHA256_HEX[..62].to_owned(),
        format!("{SHA256_HEX}00"),
        SHA256_HEX.replace('e', "g"),
        format!(" {SHA256_HEX}"),
        format!("{SHA256_HEX} "),
        format!("sha256={SHA256_HEX}"),
        format!("{SHA256_HEX},{SHA256_HEX}"),
        "a".repeat(MAX_HEADER_LEN + 1),
    ] {
        let headers = header_map(&[("X-Signature", &value)]);
        assert_eq!(hex.verify(&headers, BODY, 0), malformed_sig(), "{value:?}");
    }
    let base64 = verifier(with(Algorithm::Sha256, Encoding::Base64), &[SECRET]);
    for value in [
        String::new(),
        "=".to_owned(),
        SHA256_BASE64.replace('/', "_"),
        SHA256_BASE64.replace('/', "!"),
        format!("{SHA256_BASE64}="),
        format!("{SHA256_BASE64}AAAA"),
        SHA256_BASE64[..40].to_owned(),
        format!(" {SHA256_BASE64}"),
        "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhd=".to_owned(),
        "A".repeat(MAX_HEADER_LEN),
    ] {
        let headers = header_map(&[("X-Signature", &value)]);
        assert_eq!(
            base64.verify(&headers, BODY, 0),
            malformed_sig(),
            "{value:?}"
        );
    }
}

#[test]
fn a_configured_prefix_is_required_and_stripped() {
    let config = GenericHmac {
        prefix: Some("sha256=".to_owned()),
        ..minimal()
    };
    let v = verifier(config, &[SECRET]);
    let check = |value: &str| v.verify(&header_map(&[("X-Signature", value)]), BODY, 0);
    assert_eq!(
        check(&format!("sha256={SHA256_HEX}")),
        Ok(Verified { key_index: 0 })
    );
    for value in [
        SHA256_HEX.to_owned(),
        format!("SHA256={SHA256_HEX}"),
        format!("sha512={SHA256_HEX}"),
        format!(" sha256={SHA256_HEX}"),
        format!("sha256= {SHA256_HEX}"),
        "sha256=".to_owned(),
        "sha256".to_owned(),
        String::new(),
    ] {
        assert_eq!(check(&value), malformed_sig(), "{value:?}");
    }
    assert_eq!(
        v.sign(0, "", 0, BODY),
        vec![("x-signature".to_owned(), format!("sha256={SHA256_HEX}"))]
    );
}

#[test]
fn a_generic_configuration_reproduces_the_github_and_shopify_vectors() {
    let github = GenericHmac {
        signature_header: Some("X-Hub-Signature-256".to_owned()),
        prefix: Some("sha256=".to_owned()),
        ..minimal()
    };
    let headers = header_map(&[("X-Hub-Signature-256", &format!("sha256={SHA256_HEX}"))]);
    assert!(verifier(github, &[SECRET])
        .verify(&headers, BODY, 0)
        .is_ok());
    let shopify = GenericHmac {
        signature_header: Some("X-Shopify-Hmac-Sha256".to_owned()),
        encoding: Encoding::Base64,
        ..minimal()
    };
    let headers = header_map(&[("X-Shopify-Hmac-Sha256", SHA256_BASE64)]);
    assert!(verifier(shopify, &[SECRET])
        .verify(&headers, BODY, 0)
        .is_ok());
}

#[test]
fn a_generic_configuration_reproduces_the_slack_vector() {
    // the published Slack vector, through a template.
    let slack = GenericHmac {
        signature_header: Some("X-Slack-Signature".to_owned()),
        prefix: Some("v0=".to_owned()),
        timestamp_header: Some("X-Slack-Request-Timestamp".to_owned()),
        signed_payload: Some("v0:{timestamp}:{body}".to_owned()),
        ..minimal()
    };
    let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    let headers = header_map(&[
        ("X-Slack-Request-Timestamp", "1531420618"),
        (
            "X-Slack-Signature",
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
        ),
    ]);
    let v = verifier(slack, &["8f742231b10e8888abcd99yyyzzz85a5"]);
    assert_eq!(
        v.verify(&headers, body, 1_531_420_618),
        Ok(Verified { key_index: 0 })
    );
}

#[test]
fn a_timestamp_template_verifies_its_known_digest() {
    assert_eq!(
        check_timestamped(&vector(), TS_BODY, T),
        Ok(Verified { key_index: 0 })
    );
    let sha256 = GenericHmac {
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        prefix: None,
        ..timestamped()
    };
    let headers = timestamped_headers("1700000000", TS_SHA256_HEX);
    assert_eq!(
        verifier(sha256, &[TS_SECRET]).verify(&headers, TS_BODY, T),
        Ok(Verified { key_index: 0 })
    );
}

#[test]
fn sign_sets_the_timestamp_header_then_the_signature_header() {
    assert_eq!(
        verifier(timestamped(), &[TS_SECRET]).sign(0, "ignored", T, TS_BODY),
        vec![
            ("x-timestamp".to_owned(), "1700000000".to_owned()),
            ("x-signature".to_owned(), format!("v1={TS_SHA512_BASE64}")),
        ]
    );
}

#[test]
fn a_timestamp_changed_after_signing_is_no_signature_matched() {
    let headers = timestamped_headers("1700000001", &format!("v1={TS_SHA512_BASE64}"));
    assert_eq!(
        check_timestamped(&headers, TS_BODY, T),
        Err(VerifyError::NoSignatureMatched)
    );
    // A leading zero is other signed text (the timestamp is signed as received).
    let headers = timestamped_headers("01700000000", &format!("v1={TS_SHA512_BASE64}"));
    assert_eq!(
        check_timestamped(&headers, TS_BODY, T),
        Err(VerifyError::NoSignatureMatched)
    );
}

#[test]
fn a_leading_zero_is_refused_where_a_variable_part_comes_right_before_the_timestamp() {
    // `{header:x-id}{timestamp}`: `ab0` + `1700000000` and `ab` + `01700000000` sign alike, so
    // only canonical digits are read there, before any MAC.
    let config = GenericHmac {
        signed_payload: Some("{header:x-id}{timestamp}.{body}".to_owned()),
        ..timestamped()
    };
    let v = verifier(config, &[TS_SECRET]);
    let signed = v.sign(0, "ab0", T, TS_BODY);
    let mut headers = owned_map(&signed);
    headers.insert("x-id", "ab".parse().unwrap());
    headers.insert("x-timestamp", "01700000000".parse().unwrap());
    assert_eq!(
        v.verify(&headers, TS_BODY, T),
        Err(VerifyError::MalformedHeader("x-timestamp".into()))
    );
    // Where a literal comes before it, a leading zero is just other text (Slack, Paddle).
    let literal = GenericHmac {
        signed_payload: Some("v0:{timestamp}:{body}".to_owned()),
        ..timestamped()
    };
    let v = verifier(literal, &[TS_SECRET]);
    let mut headers = owned_map(&v.sign(0, "", T, TS_BODY));
    headers.insert("x-timestamp", "01700000000".parse().unwrap());
    assert_eq!(
        v.verify(&headers, TS_BODY, T),
        Err(VerifyError::NoSignatureMatched)
    );
}

#[test]
fn tampering_one_body_byte_is_no_signature_matched() {
    let mut body = TS_BODY.to_vec();
    body[8] ^= 1;
    assert_eq!(
        check_timestamped(&vector(), &body, T),
        Err(VerifyError::NoSignatureMatched)
    );
}

#[test]
fn exactly_tolerance_away_is_accepted_in_both_directions() {
    assert!(check_timestamped(&vector(), TS_BODY, T + 300).is_ok());
    assert!(check_timestamped(&vector(), TS_BODY, T - 300).is_ok());
}

#[test]
fn one_second_beyond_tolerance_is_rejected_in_both_directions() {
    for now in [T + 301, T - 301] {
        assert_eq!(
            check_timestamped(&vector(), TS_BODY, now),
            Err(VerifyError::TimestampOutsideTolerance)
        );
    }
}

#[test]
fn the_timestamp_is_checked_before_the_signature() {
    let headers = timestamped_headers("1700000000", &format!("v1={SHA512_BASE64}"));
    assert_eq!(
        check_timestamped(&headers, TS_BODY, T + 10_000),
        Err(VerifyError::TimestampOutsideTolerance)
    );
}

#[test]
fn without_a_timestamp_header_time_plays_no_part() {
    let v = Verifier::new(Scheme::GenericHmac, &[SECRET], 0, Some(minimal())).unwrap();
    let headers = header_map(&[("X-Signature", SHA256_HEX), ("X-Timestamp", "garbage")]);
    for now in [i64::MIN, 0, i64::MAX] {
        assert_eq!(v.verify(&headers, BODY, now), Ok(Verified { key_index: 0 }));
    }
}

#[test]
fn each_missing_header_is_reported_by_its_configured_lowercase_name() {
    assert_eq!(
        check_timestamped(&header_map(&[("x-timestamp", "1700000000")]), TS_BODY, T),
        Err(VerifyError::MissingHeader("x-signature".into()))
    );
    assert_eq!(
        check_timestamped(
            &header_map(&[("x-signature", &format!("v1={TS_SHA512_BASE64}"))]),
            TS_BODY,
            T
        ),
        Err(VerifyError::MissingHeader("x-timestamp".into()))
    );
    assert_eq!(
        check_timestamped(&HeaderMap::new(), TS_BODY, T),
        Err(VerifyError::MissingHeader("x-signature".into()))
    );
}

#[test]
fn configured_header_names_match_in_any_case() {
    let config = GenericHmac {
        signature_header: Some("x-SIGNATURE".to_owned()),
        ..minimal()
    };
    let v = verifier(config, &[SECRET]);
    for name in ["X-Signature", "x-signature", "X-SIGNATURE"] {
        let headers = header_map(&[(name, SHA256_HEX)]);
        assert!(v.verify(&headers, BODY, 0).is_ok(), "{name}");
    }
    assert_eq!(v.signature_header(), "x-signature");
}

#[test]
fn a_duplicated_header_is_malformed_even_if_both_are_valid() {
    let signature = format!("v1={TS_SHA512_BASE64}");
    for (name, value) in [
        ("x-signature", signature.as_str()),
        ("x-timestamp", "1700000000"),
    ] {
        let mut headers = vector();
        headers.append(name, http::HeaderValue::from_str(value).unwrap());
        assert_eq!(
            check_timestamped(&headers, TS_BODY, T),
            Err(VerifyError::MalformedHeader(name.into()))
        );
    }
}

#[test]
fn malformed_timestamps_are_malformed_header() {
    for t in [
        "",
        "abc",
        "-1700000000",
        "+1700000000",
        " 1700000000",
        "1700000000.0",
        "2023-11-14T22:13:20Z",
        "99999999999999999999",
    ] {
        let headers = timestamped_headers(t, &format!("v1={TS_SHA512_BASE64}"));
        assert_eq!(
            check_timestamped(&headers, TS_BODY, T),
            Err(VerifyError::MalformedHeader("x-timestamp".into())),
            "{t:?}"
        );
    }
}

#[test]
fn a_malformed_signature_is_reported_before_a_malformed_timestamp() {
    let headers = timestamped_headers("abc", "v1=!!");
    assert_eq!(check_timestamped(&headers, TS_BODY, T), malformed_sig());
}

#[test]
fn rotation_reports_the_index_of_the_key_that_matched() {
    for (algorithm, encoding, digest) in COMBINATIONS {
        let v = verifier(with(algorithm, encoding), &["the new secret", SECRET]);
        let headers = header_map(&[("X-Signature", digest)]);
        assert_eq!(
            v.verify(&headers, BODY, 0),
            Ok(Verified { key_index: 1 }),
            "{algorithm:?} {encoding:?}"
        );
    }
}

#[test]
fn no_keys_is_no_keys() {
    let prepared = Prepared::new(minimal()).unwrap();
    let headers = header_map(&[("X-Signature", SHA256_HEX)]);
    assert_eq!(
        verify(&prepared, &[], &Request::post(&headers, BODY), 0, 300),
        Err(VerifyError::NoKeys)
    );
}

#[test]
fn parse_decodes_a_digest_of_the_configured_length() {
    assert_eq!(
        parse_signature(SHA512_HEX, None, Algorithm::Sha512, Encoding::Hex).map(hex::encode),
        Some(SHA512_HEX.to_owned())
    );
    assert_eq!(
        parse_signature(SHA512_HEX, None, Algorithm::Sha256, Encoding::Hex),
        None
    );
    assert_eq!(
        parse_signature(
            &format!("p{SHA256_BASE64}"),
            Some("p"),
            Algorithm::Sha256,
            Encoding::Base64
        )
        .map(hex::encode),
        Some(SHA256_HEX.to_owned())
    );
}

/// From a hostile review: a list whose separator holds the version's delimiter could never be
/// read (every delivery refused, its own signatures too); refused at start-up now.
#[test]
fn a_list_whose_separator_holds_the_versions_delimiter_is_refused() {
    use super::super::SignatureFormat;
    for (separator, version) in [(",", "v1,"), (", ", "v1,"), (" ", "v1a")] {
        let config = GenericHmac {
            signature_format: SignatureFormat::List {
                separator: separator.into(),
                version: version.into(),
            },
            ..minimal()
        };
        let error = config.validate().unwrap_err();
        assert!(error.contains("must end with the delimiter"), "{error}");
    }
    let fine = GenericHmac {
        signature_format: SignatureFormat::List {
            separator: " ".into(),
            version: "v1,".into(),
        },
        ..minimal()
    };
    assert_eq!(fine.validate(), Ok(()));
}

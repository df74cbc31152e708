//! The crate-level test matrix: every scheme through [`crate::Verifier`], the published
//! vectors, rotation, tolerance and hostile headers.

use crate::generic::{decode_signature, Encoding};
use crate::header::{check_tolerance, parse_unix_seconds, single_value, Malformed};
use crate::key::first_matching_key;
use crate::tag::{AnyTag, TAG_LEN};
use crate::Algorithm;

/// A built-in preset's hex signature (`strict_encoding`).
fn decode_lower_hex(text: &str) -> Option<Vec<u8>> {
    decode_signature(text, Algorithm::Sha256, Encoding::Hex, true)
}

/// A built-in preset's base64 signature (`strict_encoding`).
fn decode_base64_tag(text: &str) -> Option<Vec<u8>> {
    decode_signature(text, Algorithm::Sha256, Encoding::Base64, true)
}

/// A signature header read as every scheme reads it, errors naming it.
fn single_header<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
) -> Result<Option<&'h str>, VerifyError> {
    single_value(headers, name).map_err(|Malformed| VerifyError::MalformedHeader(name.into()))
}
use crate::test_support::{header_map, owned_map, signed_map};
use crate::*;
use http::HeaderMap;
use proptest::prelude::*;

const STRIPE_SECRET: &str = "whsec_test_secret";
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SHOPIFY_SECRET: &str = "It's a Secret to Everybody";
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const PADDLE_SECRET: &str = "pdl_ntfset_test_secret";
const GENERIC_SECRET: &str = "generic secret";

/// Another valid secret per scheme (the "new" secret of a rotation).
fn other_secret(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::StandardWebhooks => "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        _ => "the new secret",
    }
}

fn secret(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Stripe => STRIPE_SECRET,
        Scheme::Github => GITHUB_SECRET,
        Scheme::StandardWebhooks => STANDARD_SECRET,
        Scheme::Shopify => SHOPIFY_SECRET,
        Scheme::Slack => SLACK_SECRET,
        Scheme::Paddle => PADDLE_SECRET,
        _ => GENERIC_SECRET,
    }
}

fn key(scheme: Scheme) -> SigningKey {
    SigningKey::new(scheme, secret(scheme)).unwrap()
}

/// The schemes the free functions handle.
const FIXED: [Scheme; 6] = [
    Scheme::Stripe,
    Scheme::Github,
    Scheme::StandardWebhooks,
    Scheme::Shopify,
    Scheme::Slack,
    Scheme::Paddle,
];

const ALL: [Scheme; 7] = [
    Scheme::Stripe,
    Scheme::Github,
    Scheme::StandardWebhooks,
    Scheme::Shopify,
    Scheme::Slack,
    Scheme::Paddle,
    Scheme::GenericHmac,
];

/// A generic configuration that signs a timestamp, with a prefix, SHA-512 and base64.
fn generic_with_timestamp() -> GenericHmac {
    GenericHmac {
        signature_header: Some("X-Signature".to_owned()),
        algorithm: Algorithm::Sha512,
        encoding: Encoding::Base64,
        prefix: Some("sha512=".to_owned()),
        timestamp_header: Some("X-Timestamp".to_owned()),
        signed_payload: Some("{timestamp}.{body}".to_owned()),
        event_id_pointer: Some("/id".to_owned()),
        ..GenericHmac::default()
    }
}

/// The generic configuration for `scheme` (only [`Scheme::GenericHmac`] has one).
fn generic_for(scheme: Scheme) -> Option<GenericHmac> {
    (scheme == Scheme::GenericHmac).then(generic_with_timestamp)
}

fn verifier(scheme: Scheme, secrets: &[&str], tolerance_secs: u64) -> Verifier {
    Verifier::new(scheme, secrets, tolerance_secs, generic_for(scheme)).unwrap()
}

const T: i64 = 1_700_000_000;

#[test]
fn scheme_names_in_config_are_kebab_case() {
    for (scheme, name) in [
        (Scheme::Stripe, "\"stripe\""),
        (Scheme::Github, "\"github\""),
        (Scheme::StandardWebhooks, "\"standard-webhooks\""),
        (Scheme::Shopify, "\"shopify\""),
        (Scheme::Slack, "\"slack\""),
        (Scheme::Paddle, "\"paddle\""),
        (Scheme::GenericHmac, "\"generic-hmac\""),
    ] {
        assert_eq!(serde_json::to_string(&scheme).unwrap(), name);
        assert_eq!(serde_json::from_str::<Scheme>(name).unwrap(), scheme);
    }
    // The senders that sign with Standard Webhooks are aliases of it.
    for alias in ["svix", "clerk", "resend", "openai", "liveblocks", "brex"] {
        assert_eq!(
            serde_json::from_str::<Scheme>(&format!("\"{alias}\"")).unwrap(),
            Scheme::StandardWebhooks
        );
    }
    for scheme in Scheme::ALL {
        let name = format!("\"{}\"", scheme.name());
        assert_eq!(serde_json::to_string(&scheme).unwrap(), name);
        assert_eq!(serde_json::from_str::<Scheme>(&name).unwrap(), scheme);
    }
    for unknown in ["\"generic\"", "\"generic_hmac\"", "\"Shopify\"", "\"v1a\""] {
        assert!(
            serde_json::from_str::<Scheme>(unknown).is_err(),
            "{unknown}"
        );
    }
}

#[test]
fn the_schemes_that_sign_a_timestamp_are_stripe_standard_webhooks_slack_and_paddle() {
    assert!(Scheme::Stripe.signs_timestamp());
    assert!(!Scheme::Github.signs_timestamp());
    assert!(Scheme::StandardWebhooks.signs_timestamp());
    assert!(!Scheme::Shopify.signs_timestamp());
    assert!(Scheme::Slack.signs_timestamp());
    assert!(Scheme::Paddle.signs_timestamp());
    assert!(!Scheme::GenericHmac.signs_timestamp());
}

#[test]
fn signature_header_names_are_lowercase_and_are_what_sign_sets() {
    for scheme in FIXED {
        let name = scheme.signature_header();
        assert_eq!(name, name.to_ascii_lowercase());
        let signed = sign(scheme, &key(scheme), "msg_1", T, b"{}");
        assert!(signed.iter().any(|(n, _)| *n == name), "{scheme:?}");
    }
}

#[test]
fn the_generic_scheme_signature_header_is_a_placeholder_that_is_not_a_header_name() {
    let placeholder = Scheme::GenericHmac.signature_header();
    assert_eq!(placeholder, generic::CONFIGURED_HEADER);
    assert!(http::HeaderName::from_bytes(placeholder.as_bytes()).is_err());
}

#[test]
fn dispatch_round_trips_every_fixed_scheme() {
    for scheme in FIXED {
        let keys = [key(scheme)];
        let headers = signed_map(&sign(scheme, &keys[0], "msg_1", T, b"{}"));
        assert_eq!(
            verify(scheme, &keys, &headers, b"{}", T, 300),
            Ok(Verified { key_index: 0 }),
            "{scheme:?}"
        );
    }
}

#[test]
fn a_signature_of_one_scheme_does_not_verify_under_another() {
    for signer in FIXED {
        let signed = signed_map(&sign(signer, &key(signer), "msg_1", T, b"{}"));
        for verifier in FIXED.into_iter().filter(|s| *s != signer) {
            assert!(
                verify(verifier, &[key(verifier)], &signed, b"{}", T, 300).is_err(),
                "{signer:?} verified as {verifier:?}"
            );
        }
    }
    let signed = signed_map(&sign(Scheme::Stripe, &key(Scheme::Stripe), "", T, b"{}"));
    assert_eq!(
        verify(
            Scheme::Github,
            &[key(Scheme::Github)],
            &signed,
            b"{}",
            T,
            300
        ),
        Err(VerifyError::MissingHeader("x-hub-signature-256".into()))
    );
}

#[test]
fn empty_keys_are_no_keys_for_every_fixed_scheme_even_without_headers() {
    for scheme in FIXED {
        assert_eq!(
            verify(scheme, &[], &HeaderMap::new(), b"{}", 0, 300),
            Err(VerifyError::NoKeys)
        );
    }
}

#[test]
fn the_free_functions_cannot_verify_or_sign_a_generic_source() {
    let headers = header_map(&[("x-signature", "00")]);
    assert_eq!(
        verify(
            Scheme::GenericHmac,
            &[key(Scheme::GenericHmac)],
            &headers,
            b"{}",
            T,
            300
        ),
        Err(VerifyError::MissingConfig)
    );
    assert_eq!(
        verify(Scheme::GenericHmac, &[], &headers, b"{}", T, 300),
        Err(VerifyError::MissingConfig)
    );
    assert!(sign(
        Scheme::GenericHmac,
        &key(Scheme::GenericHmac),
        "m",
        T,
        b"{}"
    )
    .is_empty());
}

#[test]
fn an_empty_secret_is_an_error_for_every_scheme() {
    for scheme in ALL {
        assert_eq!(SigningKey::new(scheme, "").unwrap_err(), KeyError::Empty);
    }
    for algorithm in [Algorithm::Sha256, Algorithm::Sha512] {
        assert_eq!(
            SigningKey::for_algorithm(algorithm, "", SecretEncoding::Utf8, None).unwrap_err(),
            KeyError::Empty
        );
    }
}

#[test]
fn signing_key_debug_does_not_contain_the_secret() {
    for scheme in ALL {
        let printed = format!("{:?}", key(scheme));
        assert_eq!(printed, "SigningKey([redacted])");
        assert!(!printed.contains("secret") && !printed.contains("MfKQ"));
    }
    let sha512 = SigningKey::for_algorithm(
        Algorithm::Sha512,
        GENERIC_SECRET,
        SecretEncoding::Utf8,
        None,
    )
    .unwrap();
    assert_eq!(format!("{sha512:?}"), "SigningKey([redacted])");
}

#[test]
fn key_error_messages_do_not_contain_the_secret() {
    let secret = "whsec_not*base64!";
    let error = SigningKey::new(Scheme::StandardWebhooks, secret).unwrap_err();
    assert_eq!(error, KeyError::NotBase64);
    assert!(!error.to_string().contains("not*base64"));
}

#[test]
fn reasons_are_the_fixed_strings_sent_to_providers() {
    assert_eq!(
        VerifyError::MissingHeader("stripe-signature".into()).reason(),
        "missing signature header"
    );
    assert_eq!(
        VerifyError::MissingHeader(String::from("x-custom").into()).reason(),
        "missing signature header"
    );
    assert_eq!(
        VerifyError::MalformedHeader("stripe-signature".into()).reason(),
        "malformed signature header"
    );
    assert_eq!(
        VerifyError::TimestampOutsideTolerance.reason(),
        "timestamp outside tolerance"
    );
    assert_eq!(
        VerifyError::NoSignatureMatched.reason(),
        "signature mismatch"
    );
    assert_eq!(VerifyError::NoKeys.reason(), "signature mismatch");
    assert_eq!(VerifyError::MissingConfig.reason(), "signature mismatch");
}

#[test]
fn header_errors_name_the_header_in_the_log_text_only() {
    let error = VerifyError::MalformedHeader(String::from("x-custom-sig").into());
    assert_eq!(error.to_string(), "malformed header x-custom-sig");
    assert!(!error.reason().contains("x-custom-sig"));
}

#[test]
fn tolerance_is_inclusive_in_both_directions() {
    assert_eq!(check_tolerance(1000, 1300, 300), Ok(()));
    assert_eq!(check_tolerance(1000, 700, 300), Ok(()));
    assert_eq!(
        check_tolerance(1000, 1301, 300),
        Err(VerifyError::TimestampOutsideTolerance)
    );
    assert_eq!(
        check_tolerance(1000, 699, 300),
        Err(VerifyError::TimestampOutsideTolerance)
    );
    assert_eq!(check_tolerance(0, i64::MAX, u64::MAX), Ok(()));
    assert_eq!(
        check_tolerance(i64::MAX, i64::MIN, 0),
        Err(VerifyError::TimestampOutsideTolerance)
    );
}

#[test]
fn unix_seconds_are_digits_only() {
    assert_eq!(parse_unix_seconds("1614265330"), Some(1_614_265_330));
    assert_eq!(parse_unix_seconds("0"), Some(0));
    for bad in [
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1.5",
        "1e9",
        "0x10",
        "9223372036854775808",
    ] {
        assert_eq!(parse_unix_seconds(bad), None, "{bad:?}");
    }
}

#[test]
fn hex_tags_are_exactly_64_lowercase_hex_digits() {
    let good = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert!(decode_lower_hex(good).is_some());
    assert!(decode_lower_hex(&good.to_ascii_uppercase()).is_none());
    assert!(decode_lower_hex(&good[..62]).is_none());
    assert!(decode_lower_hex(&format!("{good}00")).is_none());
    assert!(decode_lower_hex(&good.replace('e', "g")).is_none());
    assert!(decode_lower_hex("").is_none());
}

#[test]
fn base64_tags_are_exactly_44_padded_standard_characters() {
    let good = "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=";
    assert_eq!(
        decode_base64_tag(good).map(hex::encode).as_deref(),
        Some("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
    );
    for bad in [
        "",
        "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc",
        "dXEH6g6yUJ_CESIczphLijdXC211hsIsRvQ3nIsEPhc=",
        "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc==",
        " XEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhc=",
        "dXEH6g6yUJ/CESIczphLijdXC211hsIsRvQ3nIsEPhd=",
    ] {
        assert_eq!(decode_base64_tag(bad), None, "{bad:?}");
    }
}

#[test]
fn a_duplicated_header_is_malformed() {
    let headers = header_map(&[("x-a", "1"), ("X-A", "2")]);
    assert_eq!(
        single_header(&headers, "x-a"),
        Err(VerifyError::MalformedHeader("x-a".into()))
    );
}

#[test]
fn a_header_of_exactly_the_maximum_length_is_read_and_one_more_byte_is_malformed() {
    let at_max = "a".repeat(MAX_HEADER_LEN);
    let headers = header_map(&[("x-a", &at_max)]);
    assert_eq!(single_header(&headers, "x-a"), Ok(Some(at_max.as_str())));
    let over = "a".repeat(MAX_HEADER_LEN + 1);
    let headers = header_map(&[("x-a", &over)]);
    assert_eq!(
        single_header(&headers, "x-a"),
        Err(VerifyError::MalformedHeader("x-a".into()))
    );
}

#[test]
fn a_non_ascii_header_value_is_malformed() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-a",
        http::HeaderValue::from_bytes("t=é".as_bytes()).unwrap(),
    );
    assert_eq!(
        single_header(&headers, "x-a"),
        Err(VerifyError::MalformedHeader("x-a".into()))
    );
}

#[test]
fn an_absent_header_is_none() {
    assert_eq!(single_header(&HeaderMap::new(), "x-a"), Ok(None));
}

#[test]
fn the_first_matching_key_is_reported() {
    let a = SigningKey::new(Scheme::Github, "a").unwrap();
    let b = SigningKey::new(Scheme::Github, "b").unwrap();
    let parts: &[&[u8]] = &[b"hello"];
    let tag_b = b.tag(parts);
    assert_eq!(
        first_matching_key(&[a.clone(), b.clone()], parts, &[tag_b]),
        Ok(Verified { key_index: 1 })
    );
    assert_eq!(
        first_matching_key(&[b.clone(), b.clone()], parts, &[tag_b]),
        Ok(Verified { key_index: 0 })
    );
    assert_eq!(
        first_matching_key::<AnyTag>(&[a], parts, &[]),
        Err(VerifyError::NoSignatureMatched)
    );
}

#[test]
fn verification_stops_at_the_first_matching_key_and_tries_every_key_otherwise() {
    use test_support::macs_during;
    let a = SigningKey::new(Scheme::Github, "a").unwrap();
    let b = SigningKey::new(Scheme::Github, "b").unwrap();
    let c = SigningKey::new(Scheme::Github, "c").unwrap();
    let parts: &[&[u8]] = &[b"hello"];
    let keys = [a.clone(), b.clone(), c];
    let (tag_a, tag_b) = (a.tag(parts), b.tag(parts));
    // The current key first (the usual case): one HMAC, not one per configured key.
    assert_eq!(
        macs_during(|| first_matching_key(&keys, parts, &[tag_a])),
        (Ok(Verified { key_index: 0 }), 1)
    );
    assert_eq!(
        macs_during(|| first_matching_key(&keys, parts, &[tag_b])),
        (Ok(Verified { key_index: 1 }), 2)
    );
    // A forgery costs every key, whatever it carries.
    let forged = SigningKey::new(Scheme::Github, "forged")
        .unwrap()
        .tag(parts);
    assert_eq!(
        macs_during(|| first_matching_key(&keys, parts, &[forged])),
        (Err(VerifyError::NoSignatureMatched), 3)
    );
    assert_eq!(
        macs_during(|| first_matching_key::<AnyTag>(&keys, parts, &[])),
        (Err(VerifyError::NoSignatureMatched), 3)
    );
}

#[test]
fn parts_are_macd_as_their_concatenation() {
    let k = key(Scheme::Github);
    assert_eq!(k.tag(&[b"ab", b"", b"c"]), k.tag(&[b"abc"]));
    let k = SigningKey::for_algorithm(Algorithm::Sha512, "k", SecretEncoding::Utf8, None).unwrap();
    assert_eq!(k.tag(&[b"ab", b"", b"c"]), k.tag(&[b"abc"]));
}

// RFC 4231, test case 2 (key "Jefe").
#[test]
fn keys_compute_the_rfc_4231_hmac_sha256_and_hmac_sha512_values() {
    let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
    let sha256 =
        SigningKey::for_algorithm(Algorithm::Sha256, "Jefe", SecretEncoding::Utf8, None).unwrap();
    assert_eq!(
        hex::encode(sha256.tag(data)),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    let sha512 =
        SigningKey::for_algorithm(Algorithm::Sha512, "Jefe", SecretEncoding::Utf8, None).unwrap();
    assert_eq!(
        hex::encode(sha512.tag(data)),
        "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
         9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
    );
    assert_eq!(
        SigningKey::new(Scheme::GenericHmac, "Jefe")
            .unwrap()
            .tag(data),
        sha256.tag(data)
    );
}

#[test]
fn a_tag_of_another_length_never_matches() {
    let sha256 =
        SigningKey::for_algorithm(Algorithm::Sha256, "k", SecretEncoding::Utf8, None).unwrap();
    let sha512 =
        SigningKey::for_algorithm(Algorithm::Sha512, "k", SecretEncoding::Utf8, None).unwrap();
    let parts: &[&[u8]] = &[b"body"];
    let AnyTag::Sha512(long) = sha512.tag(parts) else {
        panic!("a SHA-512 key computes 64 bytes")
    };
    let mut prefix = [0_u8; TAG_LEN];
    prefix.copy_from_slice(&long[..TAG_LEN]);
    assert_eq!(
        first_matching_key(
            std::slice::from_ref(&sha512),
            parts,
            &[AnyTag::Sha256(prefix)]
        ),
        Err(VerifyError::NoSignatureMatched)
    );
    assert_eq!(
        first_matching_key(&[sha256], parts, &[sha512.tag(parts)]),
        Err(VerifyError::NoSignatureMatched)
    );
}

// Verifier.

#[test]
fn a_verifier_round_trips_every_scheme() {
    for scheme in ALL {
        let v = verifier(scheme, &[secret(scheme)], 300);
        let headers = owned_map(&v.sign(0, "msg_1", T, b"{\"id\":\"e\"}"));
        assert_eq!(
            v.verify(&headers, b"{\"id\":\"e\"}", T),
            Ok(Verified { key_index: 0 }),
            "{scheme:?}"
        );
    }
}

#[test]
fn a_verifier_signs_exactly_as_the_free_function_for_fixed_schemes() {
    for scheme in FIXED {
        let v = verifier(scheme, &[secret(scheme)], 300);
        let owned: Vec<(String, String)> = sign(scheme, &key(scheme), "msg_1", T, b"{}")
            .into_iter()
            .map(|(n, value)| (n.to_owned(), value))
            .collect();
        assert_eq!(v.sign(0, "msg_1", T, b"{}"), owned, "{scheme:?}");
    }
}

#[test]
fn tampering_one_body_byte_fails_every_scheme_through_a_verifier() {
    for scheme in ALL {
        let v = verifier(scheme, &[secret(scheme)], 300);
        let headers = owned_map(&v.sign(0, "msg_1", T, b"{\"id\":\"e\"}"));
        assert_eq!(
            v.verify(&headers, b"{\"id\":\"f\"}", T),
            Err(VerifyError::NoSignatureMatched),
            "{scheme:?}"
        );
    }
}

#[test]
fn rotation_through_a_verifier_reports_the_second_key_for_every_scheme() {
    for scheme in ALL {
        let old = verifier(scheme, &[secret(scheme)], 300);
        let rotating = verifier(scheme, &[other_secret(scheme), secret(scheme)], 300);
        assert_eq!(rotating.key_count(), 2);
        let headers = owned_map(&old.sign(0, "msg_1", T, b"{}"));
        assert_eq!(
            rotating.verify(&headers, b"{}", T),
            Ok(Verified { key_index: 1 }),
            "{scheme:?}"
        );
        let headers = owned_map(&rotating.sign(0, "msg_1", T, b"{}"));
        assert_eq!(
            rotating.verify(&headers, b"{}", T),
            Ok(Verified { key_index: 0 }),
            "{scheme:?}"
        );
        assert_eq!(
            old.verify(&headers, b"{}", T),
            Err(VerifyError::NoSignatureMatched),
            "{scheme:?}"
        );
    }
}

#[test]
fn a_verifier_applies_its_tolerance_in_both_directions_where_a_timestamp_is_signed() {
    for scheme in ALL {
        let v = verifier(scheme, &[secret(scheme)], 10);
        let headers = owned_map(&v.sign(0, "msg_1", T, b"{}"));
        assert!(v.verify(&headers, b"{}", T + 10).is_ok(), "{scheme:?}");
        assert!(v.verify(&headers, b"{}", T - 10).is_ok(), "{scheme:?}");
        for now in [T + 11, T - 11] {
            let expected = if v.signs_timestamp() {
                Err(VerifyError::TimestampOutsideTolerance)
            } else {
                Ok(Verified { key_index: 0 })
            };
            assert_eq!(v.verify(&headers, b"{}", now), expected, "{scheme:?}");
        }
    }
}

#[test]
fn a_verifier_reports_its_configuration() {
    let v = verifier(Scheme::Slack, &["a", "b", "c"], 42);
    assert_eq!(v.scheme(), Scheme::Slack);
    assert_eq!(v.tolerance_secs(), 42);
    assert_eq!(v.key_count(), 3);
    assert_eq!(v.generic(), None);
    assert!(v.signs_timestamp());
    assert_eq!(v.signature_header(), "x-slack-signature");

    let v = verifier(Scheme::GenericHmac, &["a"], 300);
    assert_eq!(v.scheme(), Scheme::GenericHmac);
    assert_eq!(v.generic(), Some(&generic_with_timestamp()));
    assert!(v.signs_timestamp());
    assert_eq!(v.signature_header(), "x-signature");

    let mut config = generic_with_timestamp();
    config.timestamp_header = None;
    config.signed_payload = None;
    let v = Verifier::new(Scheme::GenericHmac, &["a"], 300, Some(config)).unwrap();
    assert!(!v.signs_timestamp());
}

#[test]
fn a_verifier_needs_at_least_one_secret() {
    for scheme in ALL {
        assert_eq!(
            Verifier::new(scheme, &[], 300, generic_for(scheme)).unwrap_err(),
            VerifierError::NoSecrets
        );
    }
}

#[test]
fn a_bad_secret_is_reported_with_its_index_for_every_scheme() {
    for scheme in ALL {
        assert_eq!(
            Verifier::new(scheme, &[secret(scheme), ""], 300, generic_for(scheme)).unwrap_err(),
            VerifierError::Key {
                index: 1,
                error: KeyError::Empty
            },
            "{scheme:?}"
        );
    }
    assert_eq!(
        Verifier::new(Scheme::StandardWebhooks, &["whsec_%%%"], 300, None).unwrap_err(),
        VerifierError::Key {
            index: 0,
            error: KeyError::NotBase64
        }
    );
}

#[test]
fn a_generic_configuration_is_required_for_generic_hmac_and_refused_for_the_others() {
    assert_eq!(
        Verifier::new(Scheme::GenericHmac, &["a"], 300, None).unwrap_err(),
        VerifierError::MissingGeneric
    );
    for scheme in FIXED {
        assert_eq!(
            Verifier::new(scheme, &["a"], 300, Some(generic_with_timestamp())).unwrap_err(),
            VerifierError::UnexpectedGeneric(scheme)
        );
    }
}

#[test]
fn an_invalid_generic_configuration_is_refused_with_its_reason() {
    let mut config = generic_with_timestamp();
    config.signature_header = Some("not a header".to_owned());
    let error = Verifier::new(Scheme::GenericHmac, &["a"], 300, Some(config.clone())).unwrap_err();
    assert_eq!(
        error,
        VerifierError::Generic(config.validate().unwrap_err())
    );
    assert!(error.to_string().contains("signature_header"), "{error}");
}

#[test]
fn the_generic_configuration_is_checked_before_the_secrets() {
    let mut config = generic_with_timestamp();
    config.signed_payload = Some("{nobody}".to_owned());
    assert!(matches!(
        Verifier::new(Scheme::GenericHmac, &[], 300, Some(config)),
        Err(VerifierError::Generic(_))
    ));
}

#[test]
fn verifier_errors_and_debug_never_show_a_secret() {
    let secret = "super-secret-value";
    let v = verifier(Scheme::GenericHmac, &[secret], 300);
    let printed = format!("{v:?}");
    assert!(!printed.contains(secret), "{printed}");
    assert!(printed.contains("SigningKey([redacted])"), "{printed}");
    let error =
        Verifier::new(Scheme::StandardWebhooks, &["whsec_super*secret"], 300, None).unwrap_err();
    assert!(!error.to_string().contains("super"), "{error}");
    assert_eq!(error.to_string(), "signing secret #0: signing secret is not base64 (standard-webhooks secrets are whsec_<base64>)");
}

#[test]
#[should_panic(expected = "index out of bounds")]
fn signing_with_a_key_index_beyond_the_keys_panics() {
    let _ = verifier(Scheme::Github, &["a"], 300).sign(1, "m", T, b"{}");
}

#[test]
fn a_verifier_missing_its_signature_header_names_it() {
    for scheme in ALL {
        let v = verifier(scheme, &[secret(scheme)], 300);
        let mut headers = owned_map(&v.sign(0, "msg_1", T, b"{}"));
        headers.remove(v.signature_header());
        assert_eq!(
            v.verify(&headers, b"{}", T),
            Err(VerifyError::MissingHeader(
                v.signature_header().to_owned().into()
            )),
            "{scheme:?}"
        );
    }
}

/// Every header name any scheme (and [`generic_with_timestamp`]) reads.
const HEADER_NAMES: [&str; 14] = [
    "stripe-signature",
    "x-hub-signature-256",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "paddle-signature",
    "x-signature",
    "x-timestamp",
];

proptest! {
    #[test]
    fn unix_seconds_parser_never_panics(value in any::<String>()) {
        let _ = parse_unix_seconds(&value);
    }

    #[test]
    fn hex_decoder_never_panics(value in any::<String>()) {
        let _ = decode_lower_hex(&value);
    }

    #[test]
    fn base64_decoder_never_panics(value in any::<String>()) {
        let _ = decode_base64_tag(&value);
    }

    #[test]
    fn signing_key_new_never_panics(secret in any::<String>()) {
        for scheme in ALL {
            let _ = SigningKey::new(scheme, &secret);
        }
    }

    #[test]
    fn tolerance_check_never_panics(t in any::<i64>(), now in any::<i64>(), tol in any::<u64>()) {
        let _ = check_tolerance(t, now, tol);
    }

    #[test]
    fn verifier_verify_never_panics_on_arbitrary_headers_for_every_scheme(
        pairs in proptest::collection::vec(
            (0..HEADER_NAMES.len(), proptest::collection::vec(any::<u8>(), 0..200)),
            0..10,
        ),
        body in proptest::collection::vec(any::<u8>(), 0..200),
        now in any::<i64>(),
        tolerance in any::<u64>(),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                headers.append(HEADER_NAMES[name], value);
            }
        }
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], tolerance);
            let _ = v.verify(&headers, &body, now);
        }
        let mut plain = generic_with_timestamp();
        plain.timestamp_header = None;
        plain.signed_payload = None;
        plain.prefix = None;
        plain.encoding = Encoding::Hex;
        let v = Verifier::new(Scheme::GenericHmac, &["k"], tolerance, Some(plain)).unwrap();
        let _ = v.verify(&headers, &body, now);
    }

    #[test]
    fn verifier_new_never_panics_on_arbitrary_secrets(
        secrets in proptest::collection::vec(any::<String>(), 0..4),
        tolerance in any::<u64>(),
    ) {
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        for scheme in ALL {
            let _ = Verifier::new(scheme, &secrets, tolerance, generic_for(scheme));
        }
    }

    #[test]
    fn a_verifier_round_trips_any_body_and_timestamp_for_every_scheme(
        body in proptest::collection::vec(any::<u8>(), 0..200),
        timestamp in 0..i64::MAX,
    ) {
        for scheme in ALL {
            let v = verifier(scheme, &[secret(scheme)], 0);
            let headers = owned_map(&v.sign(0, "msg_1", timestamp, &body));
            prop_assert_eq!(v.verify(&headers, &body, timestamp), Ok(Verified { key_index: 0 }));
        }
    }
}

/// From a hostile review: a model's `header_aliases` applied to verification but not to the
/// event's naming, so a Svix-named delivery of a Standard Webhooks-like `generic-hmac` source
/// verified and then had no event id.
#[test]
fn header_aliases_name_the_event_as_they_verify_it() {
    use crate::generic::{Encoding, GenericHmac, SecretEncoding, SignatureFormat};
    use crate::test_support::owned_map;
    const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let config = GenericHmac {
        signature_header: Some("webhook-signature".into()),
        signature_format: SignatureFormat::List {
            separator: " ".into(),
            version: "v1,".into(),
        },
        encoding: Encoding::Base64,
        secret_encoding: SecretEncoding::Base64,
        key_prefix: Some("whsec_".into()),
        timestamp_header: Some("webhook-timestamp".into()),
        signed_payload: Some("{header:webhook-id}.{timestamp}.{body}".into()),
        event_id_header: Some("webhook-id".into()),
        event_type_pointer: Some("/type".into()),
        header_aliases: [
            ("svix-id", "webhook-id"),
            ("svix-timestamp", "webhook-timestamp"),
            ("svix-signature", "webhook-signature"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect(),
        ..GenericHmac::default()
    };
    let v = Verifier::new(Scheme::GenericHmac, &[KEY], 300, Some(config)).unwrap();
    let body = br#"{"type":"invoice.paid"}"#;
    let svix: Vec<(String, String)> = v
        .sign(0, "msg_1", 1_700_000_000, body)
        .into_iter()
        .map(|(name, value)| (name.replace("webhook-", "svix-"), value))
        .collect();
    let headers = owned_map(&svix);
    assert!(v.verify(&headers, body, 1_700_000_000).is_ok());
    match v.extract(&headers, body) {
        Ok(crate::extract::Extracted::Event(meta)) => assert_eq!(meta.event_id, "msg_1"),
        other => panic!("{other:?}"),
    }
}

//! The generic scheme's property tests: the parsers and validation never panic on any input, and
//! sign then verify round-trips any body and timestamp.

use http::HeaderMap;
use proptest::prelude::*;

use super::super::template::{parse_template, Use};
use super::super::verify::parse_signature;
use super::super::{Algorithm, Encoding, GenericHmac};
use super::fixtures::{minimal, timestamped, SECRET};
use crate::test_support::owned_map;
use crate::{Scheme, Verified, Verifier};

/// Strategy for an optional short string drawn from `pattern`.
fn optional(pattern: &'static str) -> impl Strategy<Value = Option<String>> {
    proptest::option::of(proptest::string::string_regex(pattern).unwrap())
}

proptest! {
    #[test]
    fn the_signature_parser_never_panics(
        value in any::<String>(),
        prefix in proptest::option::of(any::<String>()),
        sha512 in any::<bool>(),
        base64 in any::<bool>(),
    ) {
        let algorithm = if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 };
        let encoding = if base64 { Encoding::Base64 } else { Encoding::Hex };
        let _ = parse_signature(&value, prefix.as_deref(), algorithm, encoding);
    }

    #[test]
    fn the_signature_parser_never_panics_on_digest_like_strings(
        value in "(v1=)?[A-Za-z0-9+/=_-]{0,130}",
        sha512 in any::<bool>(),
        base64 in any::<bool>(),
    ) {
        let algorithm = if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 };
        let encoding = if base64 { Encoding::Base64 } else { Encoding::Hex };
        let _ = parse_signature(&value, Some("v1="), algorithm, encoding);
    }

    #[test]
    fn the_template_parser_never_panics(template in any::<String>()) {
        let _ = parse_template("signed_payload", &template, Use::Signed);
    }

    #[test]
    fn the_template_parser_never_panics_on_brace_heavy_strings(
        template in "[{}a-z.:]{0,40}"
    ) {
        let _ = parse_template("signed_payload", &template, Use::Signed);
    }

    #[test]
    fn validate_never_panics(
        signature_header in any::<String>(),
        prefix in proptest::option::of(any::<String>()),
        timestamp_header in optional("[A-Za-z -]{0,12}"),
        signed_payload in optional("[{}a-z.]{0,24}"),
        event_id_header in optional("[A-Za-z -]{0,12}"),
        event_id_pointer in optional("[/~01a-z]{0,12}"),
        event_type_header in optional("[A-Za-z -]{0,12}"),
        event_type_pointer in optional("[/~01a-z]{0,12}"),
    ) {
        let config = GenericHmac {
            signature_header: Some(signature_header),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix,
            timestamp_header,
            signed_payload,
            event_id_header,
            event_id_pointer,
            event_type_header,
            event_type_pointer,
            ..GenericHmac::default()
        };
        let _ = config.validate();
    }

    #[test]
    fn verify_never_panics_on_arbitrary_headers_and_bodies(
        signature in proptest::collection::vec(any::<u8>(), 0..300),
        timestamp in proptest::collection::vec(any::<u8>(), 0..30),
        body in proptest::collection::vec(any::<u8>(), 0..300),
        now in any::<i64>(),
        tolerance in any::<u64>(),
        sha512 in any::<bool>(),
        base64 in any::<bool>(),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in [("x-signature", signature), ("x-timestamp", timestamp)] {
            if let Ok(value) = http::HeaderValue::from_bytes(&value) {
                headers.insert(name, value);
            }
        }
        let config = GenericHmac {
            algorithm: if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 },
            encoding: if base64 { Encoding::Base64 } else { Encoding::Hex },
            ..timestamped()
        };
        for config in [config, minimal()] {
            let v = Verifier::new(Scheme::GenericHmac, &[SECRET], tolerance, Some(config))
                .unwrap();
            let _ = v.verify(&headers, &body, now);
        }
    }

    #[test]
    fn sign_then_verify_round_trips_any_body_and_timestamp(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        timestamp in 0..i64::MAX,
        sha512 in any::<bool>(),
        base64 in any::<bool>(),
    ) {
        let config = GenericHmac {
            algorithm: if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 },
            encoding: if base64 { Encoding::Base64 } else { Encoding::Hex },
            ..timestamped()
        };
        let v = Verifier::new(Scheme::GenericHmac, &[SECRET], 0, Some(config)).unwrap();
        let headers = owned_map(&v.sign(0, "", timestamp, &body));
        prop_assert_eq!(v.verify(&headers, &body, timestamp), Ok(Verified { key_index: 0 }));
    }
}

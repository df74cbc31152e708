//! GitHub App authentication, used both where the configuration is checked (a `github_hook`'s
//! `app_private_key` must parse) and where replay calls GitHub's API: parsing the App's private
//! key and making the RS256 JWT it authenticates with. A leaf: OpenSSL and serde_json only.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::sign::Signer;
use secrecy::{ExposeSecret, SecretString};

/// Why a GitHub App JWT could not be made (never includes the key).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JwtError(String);

/// Parses a GitHub App's private key (PEM, RSA).
///
/// # Errors
/// [`JwtError`] when it is not an RSA private key in PEM (the message has no key material).
pub fn app_key(private_key: &SecretString) -> Result<PKey<Private>, JwtError> {
    let key = PKey::private_key_from_pem(private_key.expose_secret().as_bytes())
        .map_err(|_| JwtError("not a private key in PEM".to_owned()))?;
    if key.rsa().is_err() {
        return Err(JwtError("not an RSA key".to_owned()));
    }
    Ok(key)
}

/// A GitHub App JWT at `now`: RS256 over `{"iat": now - 60, "exp": now + 540, "iss": app_id}`
/// (GitHub: "Generating a JSON Web Token (JWT) for a GitHub App"; `iat` back-dated for clock
/// drift, `exp` under the 10-minute maximum).
///
/// # Errors
/// [`JwtError`] when the key does not parse or OpenSSL cannot sign.
pub fn app_jwt(
    app_id: u64,
    private_key: &SecretString,
    now: SystemTime,
) -> Result<String, JwtError> {
    let key = app_key(private_key)?;
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = b64.encode(
        serde_json::json!({"iat": now.saturating_sub(60), "exp": now + 540, "iss": app_id})
            .to_string(),
    );
    let signing_input = format!("{header}.{claims}");
    let signature = Signer::new(MessageDigest::sha256(), &key)
        .and_then(|mut signer| {
            signer.update(signing_input.as_bytes())?;
            signer.sign_to_vec()
        })
        .map_err(|_| JwtError("OpenSSL could not sign".to_owned()))?;
    Ok(format!("{signing_input}.{}", b64.encode(signature)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_app_jwt_is_rs256_with_the_documented_claims_and_verifies() {
        let rsa = openssl::rsa::Rsa::generate(2048).unwrap();
        let pem = String::from_utf8(rsa.private_key_to_pem().unwrap()).unwrap();
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let jwt = app_jwt(123, &SecretString::from(pem), now).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "RS256");
        let claims: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({"iat": 1_799_999_940u64, "exp": 1_800_000_540u64, "iss": 123})
        );
        let public = PKey::from_rsa(
            openssl::rsa::Rsa::from_public_components(
                rsa.n().to_owned().unwrap(),
                rsa.e().to_owned().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let mut verifier = openssl::sign::Verifier::new(MessageDigest::sha256(), &public).unwrap();
        verifier
            .update(format!("{}.{}", parts[0], parts[1]).as_bytes())
            .unwrap();
        assert!(verifier.verify(&b64.decode(parts[2]).unwrap()).unwrap());
        assert!(app_key(&SecretString::from("not a key".to_owned())).is_err());
    }
}

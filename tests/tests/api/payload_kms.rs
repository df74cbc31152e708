//! Payload sealing through AWS KMS (`shared::privacy`), against the moto emulator that
//! `make test` starts (`scripts/with-moto.sh` exports `AWS_ENDPOINT_URL`, the region and dummy
//! credentials): data keys are generated once per execution environment, unwrapped once per
//! environment, and bound to their row.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::types::{KeySpec, KeyUsageType};
use shared::privacy::seal::{master_key_of, Keyring, SealError, Wrapper, WrapperCalls};
use shared::privacy::wrap::KmsWrapper;

const HOUR: Duration = Duration::from_secs(3600);

/// A KMS client on the moto emulator.
async fn emulator() -> aws_sdk_kms::Client {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL: run with scripts/with-moto.sh (it starts the moto emulator)"
    );
    let config = shared::aws::load().await;
    aws_sdk_kms::Client::new(&config)
}

/// A new symmetric encryption key's id.
async fn create_key(client: &aws_sdk_kms::Client) -> String {
    client
        .create_key()
        .key_usage(KeyUsageType::EncryptDecrypt)
        .key_spec(KeySpec::SymmetricDefault)
        .description("hookledger payload test key")
        .send()
        .await
        .unwrap()
        .key_metadata
        .unwrap()
        .key_id
}

fn kms_keyring(client: &aws_sdk_kms::Client, key_id: &str) -> Keyring {
    Keyring::new(
        Wrapper::Kms(KmsWrapper::new(client.clone(), key_id).unwrap()),
        HOUR,
    )
}

/// Seals `count` values concurrently, row `row-i` holding `payload-i`.
async fn seal_rows(keyring: &Arc<Keyring>, count: usize) -> Vec<(String, Vec<u8>)> {
    let seals: Vec<_> = (0..count)
        .map(|i| {
            let keyring = keyring.clone();
            tokio::spawn(async move {
                let row = format!("row-{i}");
                let sealed = keyring
                    .seal(format!("payload-{i}").as_bytes(), row.as_bytes())
                    .await
                    .unwrap();
                (row, sealed)
            })
        })
        .collect();
    let mut sealed = Vec::with_capacity(count);
    for seal in seals {
        sealed.push(seal.await.unwrap());
    }
    sealed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_generate_data_key_for_many_seals_and_one_decrypt_per_environment() {
    let client = emulator().await;
    let key_id = create_key(&client).await;
    let sealer = Arc::new(kms_keyring(&client, &key_id));
    assert_eq!(sealer.current_master_key(), key_id);

    let sealed = seal_rows(&sealer, 50).await;
    assert_eq!(
        sealer.calls(),
        WrapperCalls {
            generate: 1,
            unwrap: 0
        }
    );
    for (i, (row, sealed)) in sealed.iter().enumerate() {
        assert_eq!(master_key_of(sealed).unwrap(), key_id);
        assert_eq!(sealed[4], 1, "wrapper kind KMS");
        let opened = sealer.open(sealed, row.as_bytes()).await.unwrap();
        assert_eq!(opened, format!("payload-{i}").as_bytes());
    }
    assert_eq!(
        sealer.calls(),
        WrapperCalls {
            generate: 1,
            unwrap: 0
        },
        "its own data key is cached: no Decrypt"
    );

    // Another execution environment opens 100 values under one data key: one Decrypt, in turn
    // or at once.
    let mut more = sealed.clone();
    more.extend(seal_rows(&sealer, 50).await);
    assert_eq!(sealer.calls().generate, 1);
    let reader = kms_keyring(&client, &key_id);
    for (row, sealed) in &more {
        reader.open(sealed, row.as_bytes()).await.unwrap();
    }
    assert_eq!(
        reader.calls(),
        WrapperCalls {
            generate: 0,
            unwrap: 1
        }
    );
    let reader = Arc::new(kms_keyring(&client, &key_id));
    let opens: Vec<_> = more
        .into_iter()
        .map(|(row, sealed)| {
            let reader = reader.clone();
            tokio::spawn(async move { reader.open(&sealed, row.as_bytes()).await })
        })
        .collect();
    for open in opens {
        open.await.unwrap().unwrap();
    }
    assert_eq!(
        reader.calls(),
        WrapperCalls {
            generate: 0,
            unwrap: 1
        }
    );
}

#[tokio::test]
async fn a_ciphertext_under_another_rows_key_is_tampered() {
    let client = emulator().await;
    let key_id = create_key(&client).await;
    let sealer = kms_keyring(&client, &key_id);
    let sealed = sealer
        .seal(b"card ending 4242", b"shop:evt_1")
        .await
        .unwrap();
    assert!(matches!(
        sealer.open(&sealed, b"shop:evt_2").await,
        Err(SealError::Tampered)
    ));
    // Also where the data key must first come from KMS.
    let reader = kms_keyring(&client, &key_id);
    assert!(matches!(
        reader.open(&sealed, b"shop:evt_2").await,
        Err(SealError::Tampered)
    ));
    assert_eq!(
        reader.open(&sealed, b"shop:evt_1").await.unwrap(),
        b"card ending 4242"
    );
    assert_eq!(reader.calls().unwrap, 1);
}

#[tokio::test]
async fn an_altered_wrapped_data_key_is_tampered_not_a_kms_outage() {
    let client = emulator().await;
    let key_id = create_key(&client).await;
    let sealer = kms_keyring(&client, &key_id);
    let sealed = sealer.seal(b"x", b"row").await.unwrap();
    let wrapped_at = 6 + key_id.len() + 2;
    let mut altered = sealed.clone();
    altered[wrapped_at + 40] ^= 1;
    let reader = kms_keyring(&client, &key_id);
    let error = reader.open(&altered, b"row").await.unwrap_err();
    assert!(matches!(error, SealError::Tampered), "{error}");
    assert_eq!(reader.calls().unwrap, 1);
}

#[tokio::test]
async fn after_moving_to_a_new_kms_key_new_seals_use_it_and_old_rows_open() {
    let client = emulator().await;
    let old_key = create_key(&client).await;
    let before = kms_keyring(&client, &old_key);
    let old = before.seal(b"old row", b"row-1").await.unwrap();

    let new_key = create_key(&client).await;
    let after = kms_keyring(&client, &new_key);
    let new = after.seal(b"new row", b"row-2").await.unwrap();
    assert_eq!(master_key_of(&new).unwrap(), new_key);
    assert_eq!(master_key_of(&old).unwrap(), old_key);
    assert_ne!(master_key_of(&old).unwrap(), after.current_master_key());
    // Decrypt names the old key, as the envelope records it.
    assert_eq!(after.open(&old, b"row-1").await.unwrap(), b"old row");
    assert_eq!(after.open(&new, b"row-2").await.unwrap(), b"new row");
    assert_eq!(
        after.calls(),
        WrapperCalls {
            generate: 1,
            unwrap: 1
        }
    );

    // An envelope relabelled with another key's id does not open. (Real KMS answers
    // IncorrectKeyException, mapped to Tampered; moto answers AccessDeniedException.)
    let mut relabelled = header_with_key(&old, &new_key);
    relabelled.extend_from_slice(&old[6 + old_key.len()..]);
    let fresh = kms_keyring(&client, &new_key);
    let error = fresh.open(&relabelled, b"row-1").await.unwrap_err();
    assert!(
        matches!(&error, SealError::Tampered)
            || matches!(&error, SealError::Kms(m) if m.contains(": AccessDeniedException: ")),
        "{error}"
    );
}

/// `sealed`'s first bytes with the master-key id replaced by `key_id` (same length).
fn header_with_key(sealed: &[u8], key_id: &str) -> Vec<u8> {
    let mut header = sealed[..5].to_vec();
    header.push(u8::try_from(key_id.len()).unwrap());
    header.extend_from_slice(key_id.as_bytes());
    header
}

#[tokio::test]
async fn an_alias_moved_to_a_new_key_keeps_old_rows_readable() {
    let client = emulator().await;
    let alias = format!("alias/hookledger-payload-{}", std::process::id());
    let old_key = create_key(&client).await;
    client
        .create_alias()
        .alias_name(&alias)
        .target_key_id(&old_key)
        .send()
        .await
        .unwrap();
    let before = kms_keyring(&client, &alias);
    let old = before.seal(b"old row", b"row-1").await.unwrap();

    let new_key = create_key(&client).await;
    client
        .update_alias()
        .alias_name(&alias)
        .target_key_id(&new_key)
        .send()
        .await
        .unwrap();
    let after = kms_keyring(&client, &alias);
    let new = after.seal(b"new row", b"row-2").await.unwrap();
    // Both record the alias (as configured): the Decrypt names no key.
    assert_eq!(master_key_of(&old).unwrap(), alias);
    assert_eq!(master_key_of(&new).unwrap(), alias);
    assert_eq!(after.open(&old, b"row-1").await.unwrap(), b"old row");
    assert_eq!(after.open(&new, b"row-2").await.unwrap(), b"new row");
    assert_eq!(
        after.calls(),
        WrapperCalls {
            generate: 1,
            unwrap: 1
        }
    );
}

#[tokio::test]
async fn a_refused_generate_data_key_is_a_retryable_kms_error_naming_the_key() {
    let client = emulator().await;
    let missing = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000";
    let keyring = kms_keyring(&client, missing);
    let error = keyring.seal(b"x", b"row").await.unwrap_err();
    let SealError::Kms(message) = &error else {
        panic!("{error}");
    };
    assert!(
        message.starts_with(&format!(
            "GenerateDataKey under {missing}: NotFoundException: "
        )),
        "{message}"
    );
    assert!(error.is_retryable());
    assert_eq!(
        keyring.calls(),
        WrapperCalls {
            generate: 1,
            unwrap: 0
        }
    );
    // The next seal tries again.
    assert!(keyring.seal(b"x", b"row").await.is_err());
    assert_eq!(keyring.calls().generate, 2);

    // (A disabled key is not tried: moto 5.2.5 ignores the key state, so GenerateDataKey and
    // Decrypt under a disabled key succeed there; real KMS answers DisabledException.)
}

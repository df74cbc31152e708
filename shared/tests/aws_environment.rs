//! `shared::aws::load` without `use_shared_config_files`, as every function runs it: the
//! configuration comes from the environment alone. Its own test binary (one process, one
//! test), because it sets the process's environment.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers every request on `listener` with `status` and `body`, keeping each request's head.
fn serve(listener: TcpListener, status: &'static str, body: String) -> Arc<Mutex<Vec<String>>> {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            seen.lock()
                .expect("not poisoned")
                .push(String::from_utf8_lossy(&request).into_owned());
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/x-amz-json-1.1\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    heads
}

/// The access key id a request was signed with (SigV4's `Credential=<id>/...`).
fn signed_by(head: &str) -> Option<String> {
    let at = head.find("Credential=")? + "Credential=".len();
    Some(head[at..].split('/').next()?.to_owned())
}

async fn call_secrets_manager() {
    let config = shared::aws::load().await;
    // The endpoint answers 400 (a modelled error): the call fails, the request was signed.
    let result = aws_sdk_secretsmanager::Client::new(&config)
        .get_secret_value()
        .secret_id("hookledger/test")
        .send()
        .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn the_functions_read_region_credentials_and_endpoints_from_the_environment_alone() {
    let api = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let api_url = format!("http://{}", api.local_addr().expect("addr"));
    let requests = serve(
        api,
        "400 Bad Request",
        r#"{"__type":"ResourceNotFoundException","message":"no such secret"}"#.to_owned(),
    );
    let container = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let container_url = format!(
        "http://{}/credentials",
        container.local_addr().expect("addr")
    );
    let fetches = serve(
        container,
        "200 OK",
        r#"{"AccessKeyId":"AKIDCONTAINER","SecretAccessKey":"container-secret","Token":"container-token","Expiration":"2099-01-01T00:00:00Z"}"#
            .to_owned(),
    );

    // A profile that would say otherwise: the functions never read shared config files.
    let dir = std::env::temp_dir().join(format!("hookledger-aws-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let profile = dir.join("config");
    std::fs::write(
        &profile,
        "[default]\nregion = eu-west-1\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n",
    )
    .expect("write profile");
    std::env::set_var("AWS_CONFIG_FILE", &profile);
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &profile);
    std::env::remove_var("AWS_PROFILE");
    std::env::remove_var("AWS_DEFAULT_REGION");
    std::env::remove_var("AWS_ENDPOINT_URL");
    std::env::set_var("AWS_REGION", "us-west-2");
    std::env::set_var("AWS_ENDPOINT_URL_SECRETS_MANAGER", &api_url);
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");

    // 1. Lambda's way: the execution role's keys in the environment.
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDENVIRONMENT");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "environment-secret");
    std::env::set_var("AWS_SESSION_TOKEN", "environment-token");
    std::env::set_var("AWS_CONTAINER_CREDENTIALS_FULL_URI", &container_url);
    call_secrets_manager().await;
    {
        let requests = requests.lock().expect("not poisoned");
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(signed_by(&requests[0]).as_deref(), Some("AKIDENVIRONMENT"));
        assert!(requests[0].contains("/us-west-2/secretsmanager/aws4_request"));
        assert!(requests[0].contains("environment-token"));
    }
    assert!(fetches.lock().expect("not poisoned").is_empty());

    // 2. No keys in the environment: the container credentials endpoint.
    std::env::remove_var("AWS_ACCESS_KEY_ID");
    std::env::remove_var("AWS_SECRET_ACCESS_KEY");
    std::env::remove_var("AWS_SESSION_TOKEN");
    call_secrets_manager().await;
    {
        let requests = requests.lock().expect("not poisoned");
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(signed_by(&requests[1]).as_deref(), Some("AKIDCONTAINER"));
        assert!(requests[1].contains("container-token"));
    }
    assert_eq!(fetches.lock().expect("not poisoned").len(), 1);

    // 3. Neither: no credentials (the profile's keys are never used), so no request is sent.
    std::env::remove_var("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    call_secrets_manager().await;
    assert_eq!(requests.lock().expect("not poisoned").len(), 2);

    // 4. The operator CLI's way: the shared config files count.
    shared::aws::use_shared_config_files();
    call_secrets_manager().await;
    {
        let requests = requests.lock().expect("not poisoned");
        assert_eq!(requests.len(), 3, "{requests:?}");
        assert_eq!(signed_by(&requests[2]).as_deref(), Some("AKIDPROFILE"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

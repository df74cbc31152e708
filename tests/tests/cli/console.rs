//! `hookledger console`, the built binary: the URL line, the overview with that token, the
//! graceful stop on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use hookledger_tests::{events_dir, test_log, TestDb};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[tokio::test]
async fn hookledger_console_prints_its_url_and_serves_the_overview_with_that_token() {
    let db = TestDb::new(&handlers::examples::migrations())
        .await
        .unwrap();
    let mut child = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        &db.url,
        &events_dir().join("sources.local.json"),
    )
    .args(["console", "--bind", "127.0.0.1:0", "--read-only"])
    .env("RUST_LOG", "info")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true)
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the URL line within 30 s")
        .unwrap()
        .expect("a line on stdout");
    let url = line
        .strip_prefix("hookledger console: ")
        .unwrap_or_else(|| panic!("{line}"));
    let (base, token) = url.split_once("/?token=").unwrap();
    assert!(base.starts_with("http://127.0.0.1:"), "{line}");
    assert_ne!(base, "http://127.0.0.1:0", "{line}");
    assert_eq!(token.len(), 64, "{line}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{line}");

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let response = client
        .get(format!("{base}/"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(html.contains("<h1>Overview</h1>"), "{html}");
    // Every configured source has its row of figures.
    assert!(html.contains("data-source=\"stripe-deferred\""), "{html}");
    let response = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(response.status(), 401);
    // --read-only: no re-drive.
    let response = client
        .post(format!("{base}/redrive"))
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("what=dead&source=stripe&event_id=evt_1&confirmed=1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    // SIGTERM: a graceful stop, exit status 0.
    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("stops within 30 s")
        .unwrap();
    test_log::record("hookledger", &output);
    assert!(output.status.success(), "{output:?}");
    let log = String::from_utf8_lossy(&output.stderr);
    // The request log names the route, never the token or the query.
    assert!(log.contains("console request"), "{log}");
    assert!(!log.contains(token), "{log}");
}

#[tokio::test]
async fn hookledger_console_help_documents_its_pages_and_flags() {
    let output = Command::new(env!("CARGO_BIN_EXE_hookledger-examples"))
        .args(["console", "--help"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "--bind",
        "127.0.0.1:8470",
        "--read-only",
        "HOOKLEDGER_CONSOLE_TOKEN",
        "/events",
        "/dead",
    ] {
        assert!(text.contains(expected), "{expected} missing: {text}");
    }
}

/// `hookledger console --bind ADDRESS EXTRA...` with the local sources and a database that is
/// never reached (the refusal comes first), as a child to read the first line of.
fn console_command(bind: &str, extra: &[&str]) -> Command {
    let mut command = hookledger_tests::hookledger_command(
        env!("CARGO_BIN_EXE_hookledger-examples"),
        "postgres://nobody@127.0.0.1:1/none",
        &events_dir().join("sources.local.json"),
    );
    command
        .args(["console", "--bind", bind])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The console is plain HTTP with the token as its only lock: an address other than loopback
/// is refused with one line naming the flag, and served only with `--allow-remote-http`.
#[tokio::test]
async fn hookledger_console_refuses_a_non_loopback_bind_without_allow_remote_http() {
    for bind in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8470"] {
        // Before the refusal existed the console served on it, and this waited forever.
        let output =
            tokio::time::timeout(Duration::from_secs(30), console_command(bind, &[]).output())
                .await
                .unwrap_or_else(|_| panic!("--bind {bind} was served, not refused"))
                .unwrap();
        test_log::record("hookledger", &output);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(output.stdout.is_empty(), "{output:?}");
        let text = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].starts_with("hookledger: "), "{text}");
        assert!(lines[0].contains("not a loopback address"), "{text}");
        assert!(lines[0].contains("--allow-remote-http"), "{text}");
    }
    let mut child = console_command("0.0.0.0:0", &["--allow-remote-http"])
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the URL line within 30 s")
        .unwrap()
        .expect("a line on stdout");
    assert!(
        line.starts_with("hookledger console: http://0.0.0.0:"),
        "{line}"
    );
    child.kill().await.unwrap();
}

//! The ledger console (`hookledger_console`) in a real browser: headless Chromium from Debian's
//! packages (`hookledger_tests::browser`) clicks through the console over a ledger the receiver
//! and the worker wrote, filters the events by outcome with the select, reads the refused
//! deliveries, re-drives a dead event through the confirmation page, and sees the worker
//! complete it. A PNG of every page lands in `console-screenshots/` of the target dir.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
use hookledger_tests::browser::{screenshot_dir, Browser};
use shared::doorbell::Doorbell;
use shared::handler::Handler;
use shared::Outcome;

use crate::helpers::*;

/// The console's access token in this test (a known one, as `HOOKLEDGER_CONSOLE_TOKEN` gives).
const TOKEN: &str = "browser-test-console-token";

#[tokio::test]
async fn an_operator_clicks_from_the_overview_to_a_dead_event_redrives_it_and_the_worker_completes_it(
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut app = spawn_app().await;
    with_max_attempts(&mut app, 2);
    // Inline deliveries through the receiver: four orders paid, one delivered twice.
    for i in 0..4 {
        let delivery = stripe_payment(&format!("evt_paid_{i}"), &format!("ord_{i}"), 100 + i, NOW);
        assert_eq!(app.receive("stripe", &delivery).await.status, 200);
    }
    let again = app
        .receive("stripe", &stripe_payment("evt_paid_0", "ord_0", 100, NOW))
        .await;
    assert_eq!(again.outcome, Outcome::Replayed);
    // A GitHub event whose type has no handler: completed as the recorded no-op.
    let issue = github("gh_issue_1", "issues", r#"{"action":"opened"}"#);
    assert_eq!(
        app.receive("github", &issue).await.outcome,
        Outcome::Ignored
    );
    // A delivery signed with a secret the sources do not have: refused, and counted.
    let mut forged = stripe_payment("evt_forged", "ord_forged", 1, NOW);
    forged.body = payment_intent_body("evt_forged", "ord_forged", 2);
    assert_eq!(app.receive("stripe", &forged).await.status, 401);
    // A deferred event whose handler fails until it goes dead (two attempts allowed).
    let mut worker = worker_for(&app);
    let handler = Arc::new(FlakyHandler::default());
    handler.failing.store(true, Ordering::SeqCst);
    worker.worker.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let dead = deferred(payment_intent_body("evt_dead", "ord_dead", 500));
    assert_eq!(app.receive("stripe-deferred", &dead).await.status, 202);
    let mut at = SystemTime::now();
    for _ in 0..2 {
        worker.worker.drain(move || at, plenty).await.unwrap();
        at += Duration::from_secs(2 * 3600); // past any backoff
    }
    assert_eq!(row(&app, "evt_dead").await.0, "dead");
    // One more deferred event no worker has run yet: stuck past a short threshold.
    let waiting = deferred(payment_intent_body("evt_waiting", "ord_waiting", 700));
    assert_eq!(app.receive("stripe-deferred", &waiting).await.status, 202);
    let waiting_since = Instant::now();

    let token = AccessToken::new(TOKEN).unwrap();
    let console = Console::new(
        app.settings.clone(),
        app.receiver().pool.clone(),
        handlers::examples::registry(&app.settings.sources),
        Doorbell::off(),
        ConsoleConfig {
            auth: Auth::Token(token.clone()),
            read_only: false,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = console.url(addr);
    tokio::spawn(async move { console.serve(listener, std::future::pending()).await });

    let browser = Browser::start().await?;
    let shots = screenshot_dir();
    let shot = |name: &str| shots.join(format!("{name}.png"));
    let figure =
        |source: &str, key: &str| format!("td[data-source=\"{source}\"][data-figure=\"{key}\"]");

    // The URL `hookledger console` prints: the token becomes a cookie and leaves the address bar.
    browser.goto(&url).await?;
    assert_eq!(browser.url().await?, format!("http://{addr}/"));
    browser.wait_for("svg.chart").await?;
    let dead_letters = figure("stripe-deferred", "dead_letters");
    assert_eq!(browser.text_at(&dead_letters).await?, "1");
    assert_eq!(
        browser.text_at(&figure("stripe", "dead_letters")).await?,
        "0"
    );
    let completed = "td[data-source=\"stripe\"][data-outcome=\"completed\"]";
    assert_eq!(browser.text_at(completed).await?, "4");
    browser.screenshot(&shot("overview")).await?;

    // Events, from the navigation.
    browser.click_link("Events").await?;
    let listed = browser.text_at("table#events").await?;
    for id in [
        "evt_paid_0",
        "evt_paid_3",
        "evt_dead",
        "evt_waiting",
        "gh_issue_1",
    ] {
        assert!(listed.contains(id), "{id} not listed: {listed}");
    }
    browser.screenshot(&shot("events")).await?;

    // Only the ignored events: choose the outcome in the filter's select, submit.
    browser
        .press_on("select[name=\"outcome\"] option[value=\"ignored\"]")
        .await?;
    let outcome = browser.find("select[name=\"outcome\"]").await?;
    assert_eq!(
        browser.property(&outcome, "value").await?.as_deref(),
        Some("ignored")
    );
    browser.click_on("form.filters button").await?;
    let at = browser.url().await?;
    assert!(at.contains("outcome=ignored"), "{at}");
    let listed = browser.text_at("table#events").await?;
    assert!(listed.contains("gh_issue_1"), "{listed}");
    for id in ["evt_paid_0", "evt_paid_3", "evt_dead", "evt_waiting"] {
        assert!(!listed.contains(id), "{id} listed as ignored: {listed}");
    }
    let rows = listed.lines().filter(|l| l.contains("ignored")).count();
    assert_eq!(rows, 1, "one ignored row: {listed}");
    let outcome = browser.find("select[name=\"outcome\"]").await?;
    assert_eq!(
        browser.property(&outcome, "value").await?.as_deref(),
        Some("ignored"),
        "the select keeps the choice"
    );
    browser.screenshot(&shot("events-ignored")).await?;

    // The refused delivery, on the Rejected page.
    browser.click_link("Rejected").await?;
    assert_eq!(
        browser
            .text_at(
                "td[data-source=\"stripe\"][data-reason=\"unauthorized\"][data-window=\"day\"]"
            )
            .await?,
        "1"
    );
    browser.screenshot(&shot("rejected")).await?;

    // Stuck, with the threshold lowered to one second in its form.
    browser.click_link("Stuck").await?;
    let threshold = browser.wait_for("input[name=\"stuck_after_secs\"]").await?;
    if let Some(wait) = Duration::from_millis(1_100).checked_sub(waiting_since.elapsed()) {
        tokio::time::sleep(wait).await;
    }
    browser.type_into(&threshold, "1").await?;
    browser.click_on("form.filters button").await?;
    let stuck = browser.text_at("table#stuck").await?;
    assert!(
        stuck.contains("evt_waiting") && !stuck.contains("evt_dead"),
        "{stuck}"
    );
    browser.screenshot(&shot("stuck")).await?;

    // Overview -> its dead-letter count -> the dead letters of that source.
    browser.click_link("Overview").await?;
    browser.click_on(&format!("{dead_letters} a")).await?;
    let rows = browser.text_at("table#dead-events").await?;
    let at = browser.url().await?;
    assert!(at.ends_with("/dead?source=stripe-deferred"), "{at}");
    assert!(
        rows.contains("evt_dead") && rows.contains("downstream is down"),
        "{rows}"
    );
    browser.screenshot(&shot("dead")).await?;

    // -> the dead event.
    browser.click_link("evt_dead").await?;
    assert_eq!(browser.text_at("td#status").await?, "dead");
    assert_eq!(browser.text_at("td#attempts").await?, "2");
    browser.screenshot(&shot("event")).await?;

    // -> the confirmation: one row, nothing moved yet, and the form carries the CSRF token.
    browser.click_link("Re-drive this dead letter…").await?;
    assert_eq!(browser.text_at("strong#matched").await?, "1");
    let csrf = browser.find("input[name=\"csrf\"]").await?;
    assert_eq!(
        browser.property(&csrf, "value").await?,
        Some(hookledger_console::auth::csrf_token(&token))
    );
    assert_eq!(row(&app, "evt_dead").await.0, "dead");
    browser.screenshot(&shot("confirm")).await?;

    // Re-drive: the button posts the form.
    browser.click_on("form[action=\"/redrive\"] button").await?;
    assert_eq!(browser.text_at("strong#redriven").await?, "1");
    assert_eq!(row(&app, "evt_dead").await, ("claimed".to_owned(), 0, None));
    browser.screenshot(&shot("redrive-done")).await?;

    // The event again, from the list of what moved: back with the worker.
    browser.click_link("evt_dead").await?;
    assert_eq!(browser.text_at("td#status").await?, "claimed");

    // The cause is fixed; the worker's drain (re-driven rows are due at the database's now)
    // runs it once, and the reloaded page says so.
    handler.failing.store(false, Ordering::SeqCst);
    let later = SystemTime::now() + Duration::from_secs(5);
    let summary = worker.worker.drain(move || later, plenty).await?;
    assert_eq!(
        summary.completed, 2,
        "evt_dead and evt_waiting: {summary:?}"
    );
    browser.refresh().await?;
    assert_eq!(browser.text_at("td#status").await?, "completed");
    let timeline = browser.text_at("table#timeline").await?;
    assert!(
        timeline.contains("re-driven by an operator") && timeline.contains("completed"),
        "{timeline}"
    );
    browser.screenshot(&shot("event-completed")).await?;
    assert_eq!(app.order_rows().await, 6);
    browser.quit().await?;

    for name in [
        "overview",
        "events",
        "events-ignored",
        "rejected",
        "event",
        "stuck",
        "dead",
        "confirm",
        "redrive-done",
        "event-completed",
    ] {
        let png = std::fs::read(shot(name))?;
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}.png");
        assert!(png.len() > 5_000, "{name}.png: {} bytes", png.len());
    }
    // Past libtest's capture, so `make test` shows where the pictures are.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "console screenshots: {} ({:.1} s)",
        shots.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

//! Headless Chromium driven over W3C WebDriver, for the tests that look at the console as an
//! operator does: Debian's `chromium` and `chromium-driver` (`/usr/bin/chromedriver`), which
//! `make test` installs when missing (scripts/chromium.sh).
//!
//! [`Browser::start`] runs `chromedriver --port=<free port>` in its own process group and opens one
//! session: `--headless=new`, `--no-sandbox` (the tests run as root), a fixed window of
//! [`WINDOW`], a throwaway profile. Dropping the [`Browser`] kills the whole group (chromedriver
//! and every Chromium process it started) and deletes the profile, also when a test panics.
//!
//! The client is the handful of WebDriver commands these tests use, over reqwest (chromedriver
//! speaks plain HTTP on loopback): navigate, find (CSS or exact link text), click, text,
//! property, type, refresh, screenshot.
//!
//! Without Chromium or chromedriver [`Browser::start`] fails with the command that installs them:
//! a browser test never skips.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use serde_json::{json, Value};

/// The driver, as Debian's `chromium-driver` installs it.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The browser, as Debian's `chromium` installs it.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The window (and so the screenshots), pixels: width, height.
pub const WINDOW: (u32, u32) = (1280, 900);

/// How long [`Browser::wait_for`] and the driver's start wait.
pub const WAIT: Duration = Duration::from_secs(15);

/// The key W3C WebDriver names an element reference by.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// An element of the current page (a WebDriver element reference).
#[derive(Debug, Clone)]
pub struct Element(String);

/// chromedriver's process group and the throwaway profile; killed and deleted on drop.
struct Driver {
    child: Child,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the Chromium processes it started (which stay in
        // its group), so no browser outlives a failed test.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One WebDriver session of headless Chromium.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    // Dropped last: the group is killed after the session's last command.
    _driver: Driver,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("session", &self.session)
            .finish()
    }
}

/// Where the console's screenshots go: `console-screenshots/` in `$CARGO_TARGET_DIR` when set
/// (relative to the repository), else in the repository's `target/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let target = if target.is_absolute() {
        target
    } else {
        crate::repo_root().join(target)
    };
    target.join("console-screenshots")
}

/// A free port on 127.0.0.1 (bound and released: the driver binds it right after).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl Browser {
    /// Starts chromedriver and opens a session (see the module's docs).
    ///
    /// # Errors
    /// Chromium or chromedriver missing (the message says how to install them), the driver not
    /// ready within [`WAIT`], a session refused.
    pub async fn start() -> Result<Self> {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            if !Path::new(path).exists() {
                bail!(
                    "{path} not found: the browser tests need Debian's {package}. `make test` \
                     installs it (scripts/chromium.sh install), or: apt-get install \
                     --no-install-recommends chromium chromium-driver"
                );
            }
        }
        let port = free_port()?;
        let profile =
            std::env::temp_dir().join(format!("hookledger-chromium-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&profile)?;
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {CHROMEDRIVER}"))?;
        let driver = Driver { child, profile };
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let started = Instant::now();
        loop {
            let ready = match http.get(format!("{base}/status")).send().await {
                Ok(response) => response
                    .json::<Value>()
                    .await
                    .is_ok_and(|status| status["value"]["ready"] == true),
                Err(_) => false,
            };
            if ready {
                break;
            }
            if started.elapsed() > WAIT {
                bail!("{CHROMEDRIVER} not ready on port {port} within {WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (width, height) = WINDOW;
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", driver.profile.display()),
                ],
            },
        }}});
        let value = call(
            &http,
            reqwest::Method::POST,
            &format!("{base}/session"),
            Some(capabilities),
        )
        .await
        .context("opening a Chromium session")?;
        let id = value["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow!("no sessionId in {value}"))?;
        Ok(Self {
            http,
            session: format!("{base}/session/{id}"),
            _driver: driver,
        })
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        call(
            &self.http,
            reqwest::Method::POST,
            &format!("{}{path}", self.session),
            Some(body),
        )
        .await
    }

    async fn get(&self, path: &str) -> Result<Value> {
        call(
            &self.http,
            reqwest::Method::GET,
            &format!("{}{path}", self.session),
            None,
        )
        .await
    }

    /// Opens `url` (waits for the page to load).
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("/url", json!({ "url": url })).await.map(drop)
    }

    /// The address bar.
    pub async fn url(&self) -> Result<String> {
        text_of(self.get("/url").await?)
    }

    /// The page's title.
    pub async fn title(&self) -> Result<String> {
        text_of(self.get("/title").await?)
    }

    /// Reloads the page.
    pub async fn refresh(&self) -> Result<()> {
        self.post("/refresh", json!({})).await.map(drop)
    }

    async fn find_by(&self, using: &str, value: &str) -> Result<Element> {
        let found = match self
            .post("/element", json!({ "using": using, "value": value }))
            .await
        {
            Ok(found) => found,
            Err(e) => {
                return Err(e.context(format!(
                    "finding {using} {value:?} on {}",
                    self.here().await
                )))
            }
        };
        found[ELEMENT_KEY]
            .as_str()
            .map(|id| Element(id.to_owned()))
            .ok_or_else(|| anyhow!("no element reference in {found}"))
    }

    /// The first element matching the CSS `selector`.
    pub async fn find(&self, selector: &str) -> Result<Element> {
        self.find_by("css selector", selector).await
    }

    /// The first link whose text is exactly `text`.
    pub async fn link(&self, text: &str) -> Result<Element> {
        self.find_by("link text", text).await
    }

    /// Waits up to [`WAIT`] for an element matching `selector` (a page that a click is still
    /// loading), then returns it.
    pub async fn wait_for(&self, selector: &str) -> Result<Element> {
        let started = Instant::now();
        loop {
            match self.find(selector).await {
                Ok(element) => return Ok(element),
                Err(e) if started.elapsed() > WAIT => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Clicks `element`, a link or a submit button, and waits up to [`WAIT`] for the page it
    /// opens to be loaded.
    ///
    /// chromedriver waits for a navigation only when it has started by the time the click
    /// returns; on a busy machine it may not have, and the next `find` would read the old page
    /// (whose tables carry the same ids). So the current document is marked before the click,
    /// and the wait ends when a document without the mark is `complete`.
    ///
    /// # Errors
    /// The click refused, or no new page loaded within [`WAIT`].
    pub async fn click(&self, element: &Element) -> Result<()> {
        self.post(
            "/execute/sync",
            json!({ "script": "window.__hookledgerBeforeClick = true;", "args": [] }),
        )
        .await?;
        self.press(element).await?;
        let started = Instant::now();
        loop {
            let loaded = self
                .post(
                    "/execute/sync",
                    json!({
                        "script": "return !window.__hookledgerBeforeClick \
                                   && document.readyState === 'complete';",
                        "args": [],
                    }),
                )
                .await;
            // An error here is the page between documents: try again.
            if matches!(loaded, Ok(Value::Bool(true))) {
                return Ok(());
            }
            if started.elapsed() > WAIT {
                bail!(
                    "no new page loaded within {WAIT:?} of a click, still on {}",
                    self.here().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks `element` without waiting for a navigation (an `<option>`, a checkbox).
    pub async fn press(&self, element: &Element) -> Result<()> {
        self.post(&format!("/element/{}/click", element.0), json!({}))
            .await
            .map(drop)
    }

    /// Waits for the first element matching `selector` ([`Browser::wait_for`]) and clicks it
    /// without waiting for a navigation ([`Browser::press`]).
    pub async fn press_on(&self, selector: &str) -> Result<()> {
        let element = self.wait_for(selector).await?;
        self.press(&element).await
    }

    /// Clicks the first link whose text is exactly `text`.
    pub async fn click_link(&self, text: &str) -> Result<()> {
        let link = self.link(text).await?;
        self.click(&link).await
    }

    /// Waits for the first element matching `selector` ([`Browser::wait_for`]), clicks it and
    /// waits for the page it opens ([`Browser::click`]).
    pub async fn click_on(&self, selector: &str) -> Result<()> {
        let element = self.wait_for(selector).await?;
        self.click(&element).await
    }

    /// The rendered text of `element`.
    pub async fn text(&self, element: &Element) -> Result<String> {
        text_of(self.get(&format!("/element/{}/text", element.0)).await?)
    }

    /// The text of the first element matching `selector`, waited for ([`Browser::wait_for`]).
    pub async fn text_at(&self, selector: &str) -> Result<String> {
        let element = self.wait_for(selector).await?;
        self.text(&element).await
    }

    /// The DOM property `name` of `element` (e.g. an input's `value`), `None` when unset.
    pub async fn property(&self, element: &Element, name: &str) -> Result<Option<String>> {
        let value = self
            .get(&format!("/element/{}/property/{name}", element.0))
            .await?;
        Ok(match value {
            Value::Null => None,
            Value::String(text) => Some(text),
            other => Some(other.to_string()),
        })
    }

    /// Empties the input `element` and types `text` into it.
    pub async fn type_into(&self, element: &Element, text: &str) -> Result<()> {
        self.post(&format!("/element/{}/clear", element.0), json!({}))
            .await?;
        self.post(
            &format!("/element/{}/value", element.0),
            json!({ "text": text }),
        )
        .await
        .map(drop)
    }

    /// A PNG of the window written to `path` (its folder created).
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let png = base64::engine::general_purpose::STANDARD
            .decode(text_of(self.get("/screenshot").await?)?)
            .context("the screenshot's base64")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))
    }

    /// Ends the session (Chromium quits); the drop then stops the driver.
    pub async fn quit(self) -> Result<()> {
        call(&self.http, reqwest::Method::DELETE, &self.session, None)
            .await
            .map(drop)
    }

    /// The address bar, for error messages.
    async fn here(&self) -> String {
        self.url()
            .await
            .unwrap_or_else(|e| format!("(no URL: {e})"))
    }
}

/// One WebDriver command: its `value`, or its error and message.
async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value> {
    let mut request = http.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("WebDriver {method} {url}"))?;
    let status = response.status();
    let mut answer: Value = response
        .json()
        .await
        .with_context(|| format!("WebDriver {method} {url}: not JSON"))?;
    let value = answer["value"].take();
    if !status.is_success() {
        let error = value["error"].as_str().unwrap_or("unknown error");
        let message = value["message"].as_str().unwrap_or("");
        let first_line = message.lines().next().unwrap_or("");
        bail!("WebDriver {method} {url}: {status} {error}: {first_line}");
    }
    Ok(value)
}

fn text_of(value: Value) -> Result<String> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(anyhow!("expected text from WebDriver, got {other}")),
    }
}

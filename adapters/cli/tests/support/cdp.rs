//! A minimal Chrome DevTools Protocol client for the browser tests: it starts the system's
//! headless Chromium (Debian's `chromium` package; nothing is downloaded) with a fresh profile
//! and `--remote-debugging-port=0`, reads the port Chromium picked from `DevToolsActivePort`,
//! and speaks CDP over one websocket (tungstenite, no TLS): one page target, attached with a
//! flat session; commands are matched to their answers by id and events are read past.
//!
//! Why not the `headless_chrome` crate: even with its default features off it brings a large
//! dependency tree (and a fetcher for browser builds this project must never use); these tests
//! need six CDP methods, which this file implements in about two hundred lines.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// The flags every test browser runs with.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1280,1000",
];

/// The Chromium binary: `$COXSWAIN_CHROMIUM`, else the first of `chromium`,
/// `chromium-browser`, `google-chrome` on `PATH`.
pub(crate) fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("COXSWAIN_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// What the browser tests need, and whether this machine has it ([`find_chromium`]): they run
/// through `coxswain_test_harness::run`, which reports them ignored without it (failed with
/// `CI=true`).
pub(crate) fn needs() -> coxswain_test_harness::Needs {
    coxswain_test_harness::Needs {
        what: "Chromium",
        install: "apt-get install chromium, or set COXSWAIN_CHROMIUM",
        present: find_chromium().is_some(),
    }
}

/// The browser for a test; a missing one fails it (the harness ran it: `CI=true`).
pub(crate) fn browser(test: &str) -> Browser {
    match find_chromium() {
        Some(binary) => Browser::launch(&binary).unwrap_or_else(|e| panic!("{test}: {e}")),
        None => panic!(
            "{test}: no chromium on PATH (CI=true: the browser tests must run; `.ci/run` installs it)"
        ),
    }
}

/// A running headless Chromium with one page, driven over CDP. Killed when dropped.
pub(crate) struct Browser {
    child: Child,
    bare: Bare,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium with a fresh profile and attaches to a new blank page.
    pub(crate) fn launch(binary: &Path) -> Result<Browser, String> {
        let profile = tempfile::tempdir().map_err(|e| format!("profile dir: {e}"))?;
        let child = Command::new(binary)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut child = child;
        let (bare, session) = match Browser::connect(profile.path()) {
            Ok(connected) => connected,
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(error);
            }
        };
        let mut browser = Browser {
            child,
            bare,
            session,
            _profile: profile,
        };
        browser.page(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        )?;
        Ok(browser)
    }

    /// Waits for `DevToolsActivePort`, opens the websocket, makes and attaches a page target.
    fn connect(profile: &Path) -> Result<(Bare, String), String> {
        let file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break (port.trim().to_owned(), path.trim().to_owned());
                }
            }
            if Instant::now() > deadline {
                return Err("chromium wrote no DevToolsActivePort within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stream = TcpStream::connect(format!("127.0.0.1:{port}"))
            .map_err(|e| format!("connect to the DevTools port {port}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let (socket, _) = tungstenite::client(format!("ws://127.0.0.1:{port}{path}"), stream)
            .map_err(|e| format!("websocket handshake: {e}"))?;
        let mut bare = Bare { socket, next_id: 0 };
        let target = bare.call("Target.createTarget", json!({"url": "about:blank"}), None)?;
        let target_id = target["targetId"].as_str().ok_or("no targetId")?.to_owned();
        let attached = bare.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
            None,
        )?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or("no sessionId")?
            .to_owned();
        Ok((bare, session))
    }

    /// Sends a command to the page and returns its result.
    pub(crate) fn page(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.bare.call(method, params, Some(&self.session))
    }

    /// Loads `url` and waits until the document is complete.
    pub(crate) fn navigate(&mut self, url: &str) -> Result<(), String> {
        self.page("Page.navigate", json!({"url": url}))?;
        std::thread::sleep(Duration::from_millis(100));
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(60),
        )
    }

    /// Evaluates a JavaScript expression in the page; its value as JSON.
    pub(crate) fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let answer = self.page(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(exception) = answer.get("exceptionDetails") {
            return Err(format!("`{expression}` threw: {exception}"));
        }
        Ok(answer["result"]
            .get("value")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// Evaluates `expression` until it is `true`.
    pub(crate) fn wait_for(&mut self, expression: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.eval(expression)? == Value::Bool(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("`{expression}` still not true after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the centre of the first element `selector` matches, as a user would (mouse
    /// pressed and released there).
    pub(crate) fn click(&mut self, selector: &str) -> Result<(), String> {
        let expression = format!(
            "(() => {{ const e = document.querySelector({selector:?}); if (!e) return null; \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        );
        let point = self.eval(&expression)?;
        let (Some(x), Some(y)) = (point[0].as_f64(), point[1].as_f64()) else {
            return Err(format!("nothing matches {selector}"));
        };
        for kind in ["mousePressed", "mouseReleased"] {
            self.page(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )?;
        }
        Ok(())
    }

    /// Types `text` into the focused element.
    pub(crate) fn type_text(&mut self, text: &str) -> Result<(), String> {
        self.page("Input.insertText", json!({"text": text}))?;
        Ok(())
    }

    /// Saves a PNG of the viewport.
    pub(crate) fn screenshot(&mut self, path: &Path) -> Result<(), String> {
        let shot = self.page("Page.captureScreenshot", json!({"format": "png"}))?;
        let data = shot["data"].as_str().ok_or("no screenshot data")?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.bare.socket.close(None);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The websocket and the id counter: one command at a time, its answer matched by id.
struct Bare {
    socket: WebSocket<TcpStream>,
    next_id: u64,
}

impl Bare {
    fn call(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            command["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(command.to_string()))
            .map_err(|e| format!("{method}: send: {e}"))?;
        loop {
            let message = self
                .socket
                .read()
                .map_err(|e| format!("{method}: read: {e}"))?;
            let Message::Text(text) = message else {
                continue;
            };
            let answer: Value =
                serde_json::from_str(text.as_str()).map_err(|e| format!("{method}: {e}"))?;
            if answer.get("id").and_then(Value::as_u64) != Some(id) {
                continue; // an event, or an answer to nothing we wait for
            }
            if let Some(error) = answer.get("error") {
                return Err(format!("{method}: {error}"));
            }
            return Ok(answer.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}

//! The pages in a real browser: headless Chromium (Debian's `chromium`), driven over the
//! DevTools protocol (tests/support/cdp.rs). Each test keeps a screenshot under
//! `$CARGO_TARGET_TMPDIR/browser/`. Without chromium the tests are reported ignored (through
//! `coxswain-test-harness`), unless `CI=true`, where they fail.
//!
//! * `coxswain view`: a page made from a real log (`coxswain run` on an example script): the
//!   auditor's verdict, a message found by id and its life followed to the turn that claimed it
//!   (S28) with its fate (S58), a step's folded host events opened.
//! * `coxswain check --explore`: stateright's Explorer on a free port shows the compact state,
//!   names transitions by their input, and follows one.
//! * An ignored test measures a 1M-record page (its size and the time to first render).

#[path = "support/cdp.rs"]
mod cdp;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cdp::{browser, Browser};
use coxswain_test_harness::Test;
use serde_json::{json, Value};

/// The tests of this binary, through the harness: ignored without Chromium (failed with
/// `CI=true`).
fn main() -> std::process::ExitCode {
    coxswain_test_harness::run(
        &cdp::needs(),
        &[
            Test::new(
                "view_finds_a_message_and_opens_host_events",
                view_finds_a_message_and_opens_host_events,
            ),
            Test::new(
                "explorer_shows_compact_states_and_named_transitions",
                explorer_shows_compact_states_and_named_transitions,
            ),
            Test::ignored(
                "a_million_records_stay_usable",
                a_million_records_stay_usable,
            ),
        ],
    )
}

const WAIT: Duration = Duration::from_secs(60);

fn coxswain() -> Command {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
}

fn shots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser")
}

fn text(browser: &mut Browser, selector: &str) -> String {
    let expression = format!(
        "(() => {{ const e = document.querySelector({selector:?}); return e ? e.innerText : null; }})()"
    );
    match browser.eval(&expression) {
        Ok(Value::String(text)) => text,
        other => panic!("{selector}: {other:?}"),
    }
}

/// Runs `coxswain run SCRIPT --log DIR/session.jsonl` and `coxswain view` on the log; returns
/// the page's path.
fn page_of_example(dir: &Path, script: &str) -> PathBuf {
    let log = dir.join("session.jsonl");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(script);
    let run = coxswain()
        .arg("run")
        .arg(&script)
        .arg("--log")
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = dir.join("session.html");
    // `COXSWAIN_VIEW_BIN=target/release/coxswain` measures a release build.
    let binary = std::env::var_os("COXSWAIN_VIEW_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_coxswain")),
        PathBuf::from,
    );
    let view = Command::new(binary)
        .arg("view")
        .arg(&log)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );
    let said = String::from_utf8(view.stdout).unwrap();
    assert!(
        said.starts_with(&format!("wrote {} (46 records, ", page.display())),
        "{said}"
    );
    page
}

/// `coxswain view` on the cancel-and-resume example: the verdict at the top, `s1` found by id
/// (delivered during turn 1, which a cancel aborted; claimed by turn 3, S28, S39), the claim
/// followed to its row, and step 1.1's folded host event opened.
fn view_finds_a_message_and_opens_host_events() {
    let mut browser = browser("view_finds_a_message_and_opens_host_events");
    let dir = tempfile::tempdir().unwrap();
    let page = page_of_example(dir.path(), "cancel-and-resume.json");
    browser
        .navigate(&format!("file://{}", page.display()))
        .unwrap();
    browser
        .wait_for("document.body.dataset.ready === '1'", WAIT)
        .unwrap();

    assert_eq!(
        text(&mut browser, "#verdict"),
        "Auditor: ok (46 events, 6 turns)"
    );
    assert_eq!(
        text(&mut browser, "#summary"),
        "46 records · 2 host · 6 turns · 6 steps · 7 messages · 6 claimed · 1 discarded · \
         0 pending · 1 aborted · 0 errors · 1 interrupted"
    );

    browser.click("#search").unwrap();
    browser.type_text("s1").unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('#life .card').length === 1",
            WAIT,
        )
        .unwrap();
    assert_eq!(
        text(&mut browser, "#life"),
        "s1 — next-turn, waking, from user: Actually, rename it to `syntax` first\n\
         inserted at #8 (during turn 1)\n\
         claimed at #18 by turn 3\n\
         entered step 3.1 at #20\n\
         fate: {\"claimed\":{\"end\":\"completed\",\"step\":1,\"turn\":3}}"
    );
    browser.screenshot(&shots().join("view.png")).unwrap();

    // Follow the claim to its row.
    browser.click("#life li.end-claimed a.jump").unwrap();
    browser
        .wait_for("document.querySelector('tr.hit') !== null", WAIT)
        .unwrap();
    assert_eq!(
        text(&mut browser, "tr.hit td.text"),
        "inbox next-turn @0 claim ×1: s1 by turn 3"
    );
    assert_eq!(
        browser
            .eval("document.querySelector('tr.hit').dataset.seq")
            .unwrap(),
        json!("18")
    );

    // A discarded message says so (dispose, S45).
    browser
        .eval("document.getElementById('search').value = ''")
        .unwrap();
    browser.click("#search").unwrap();
    browser.type_text("c1").unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('#life .card').length === 1",
            WAIT,
        )
        .unwrap();
    assert_eq!(
        text(&mut browser, "#life li.end-discarded"),
        "discarded at #46: removed from next-step with outcome canceled (remove, clear, cancel or dispose, S12)"
    );
    // Its fate, as the core answers it on the restored log (S58).
    assert_eq!(text(&mut browser, "#life li.fate"), "fate: \"discarded\"");

    // Step 1.1's host event is folded until opened.
    let fold = "tr.fold[data-row='5']";
    assert_eq!(
        text(&mut browser, &format!("{fold} td.text")),
        "▸ 1 host event: tool/call"
    );
    assert_eq!(
        browser
            .eval("document.querySelectorAll('tr.k-h').length")
            .unwrap(),
        json!(0)
    );
    browser.click(fold).unwrap();
    browser
        .wait_for("document.querySelectorAll('tr.k-h').length === 1", WAIT)
        .unwrap();
    assert_eq!(
        text(&mut browser, "tr.k-h td.text"),
        "tool/call {\"file\":\"src/parser.rs\",\"name\":\"edit\"}"
    );
    assert_eq!(
        text(&mut browser, &format!("{fold} td.text")),
        "▾ 1 host event: tool/call"
    );
    assert_eq!(
        browser
            .eval("document.querySelector('tr.k-h').dataset.seq")
            .unwrap(),
        json!("6")
    );
    browser
        .screenshot(&shots().join("view-host-events.png"))
        .unwrap();
}

/// A port nothing listens on (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const STATE: &str = "document.querySelector('section.main-flex-right div.font-small').innerText";

fn links(browser: &mut Browser, heading: &str) -> Vec<String> {
    let expression = format!(
        "[...[...document.querySelectorAll('h2')].find(h => h.innerText === {heading:?})\
         .nextElementSibling.querySelectorAll('a')].map(a => a.innerText)"
    );
    serde_json::from_value(browser.eval(&expression).unwrap()).unwrap()
}

/// Clicks the next-action link named `name`.
fn follow(browser: &mut Browser, name: &str) {
    let mark = format!(
        "(() => {{ const a = [...document.querySelectorAll('a.font-code')].find(a => a.innerText === {name:?} && a.getAttribute('href')); \
         if (!a) return false; document.querySelectorAll('#follow-me').forEach(e => e.removeAttribute('id')); a.id = 'follow-me'; return true; }})()"
    );
    assert_eq!(
        browser.eval(&mark).unwrap(),
        json!(true),
        "no action {name}"
    );
    browser.click("#follow-me").unwrap();
}

/// The Explorer names each transition by its input and shows the compact state; following
/// `followup m1` opens turn 1 at once (S24), claiming m1 (S28); entering the batch starts the
/// step (S30).
fn explorer_shows_compact_states_and_named_transitions() {
    let mut browser = browser("explorer_shows_compact_states_and_named_transitions");
    let port = free_port();
    let child = coxswain()
        .args(["check", "--explore", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _reaped = Reaped(child);
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the Explorer never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    browser
        .navigate(&format!("http://127.0.0.1:{port}/"))
        .unwrap();
    // Load the initial state, as a user would: its link is `Init 0`.
    browser
        .wait_for(
            "[...document.querySelectorAll('a.font-code')].some(a => a.innerText === 'Init 0')",
            WAIT,
        )
        .unwrap();
    follow(&mut browser, "Init 0");
    browser
        .wait_for(&format!("({STATE}).startsWith('phase')"), WAIT)
        .unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('a.font-code[href^=\"#/steps/0/\"]').length > 10",
            WAIT,
        )
        .unwrap();
    assert_eq!(
        browser.eval(STATE).unwrap(),
        json!(
            "phase      idle\nnext-turn  []\nnext-step  []\nrequest    none\nlatch      none\n\
             cancel     none\nlast turn  0\nbudget     5 operations, 2 tool steps left\n\
             checks     every invariant holds; the spec agrees\nlog        0 events"
        )
    );
    let choices = links(&mut browser, "Next Action Choices");
    for name in [
        "followup m1",
        "steer m1",
        "inject m1",
        "send m1 to next-turn, quiet",
        "replace m1 with m2",
        "cancel (user, keep inbox)",
        "crash, repair the log (A = 1), restore",
        "step: continue (tools ran)",
    ] {
        assert!(
            choices.iter().any(|c| c == name),
            "{name} not in {choices:?}"
        );
    }

    follow(&mut browser, "followup m1");
    browser
        .wait_for(&format!("({STATE}).startsWith('phase      running')"), WAIT)
        .unwrap();
    let state = browser.eval(STATE).unwrap();
    let state = state.as_str().unwrap();
    assert!(
        state.starts_with(
            "phase      running\nnext-turn  []\nnext-step  []\nrequest    pre-step (turn 1, step 1)\n\
             latch      none\ncancel     none\nlast turn  1\n"
        ),
        "{state}"
    );
    assert!(
        state.contains(
            "this input appended:\n  {\"data\":{\"inserted\":[{\"content\":\"hello\",\"id\":\"m1\""
        ),
        "{state}"
    );
    assert_eq!(
        links(&mut browser, "Path of Actions"),
        vec!["Pre-init", "Init 0", "followup m1"]
    );

    follow(&mut browser, "pre-step: enter the claimed batch");
    browser
        .wait_for(&format!("({STATE}).includes('request    step 1.1')"), WAIT)
        .unwrap();
    assert_eq!(
        links(&mut browser, "Path of Actions"),
        vec![
            "Pre-init",
            "Init 0",
            "followup m1",
            "pre-step: enter the claimed batch"
        ]
    );
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser.screenshot(&shots().join("explorer.png")).unwrap();
}

/// A session of about `records` records, made by driving the real core (so every record is
/// one the machine would write): followups, injected context every 5th turn, a steer and a tool
/// step every 3rd, a user cancel mid-step every 11th (S39), two host events per step.
fn long_session(records: u64) -> Vec<u8> {
    use coxswain_core::{
        Batch, CancelCause, Effect, Machine, Message, Outstanding, PreStepAnswer, Rejected,
        Request, StepAnswer, Transition, TurnStoppingAnswer,
    };
    use coxswain_log::{encode, Entry, HostEvent};

    struct Log {
        out: Vec<u8>,
        seq: u64,
    }
    impl Log {
        fn entry(&mut self, entry: &Entry) {
            self.seq += 1;
            encode(self.seq, entry, &mut self.out).unwrap();
        }
        fn host(&mut self, kind: &str, data: Value) {
            self.entry(&Entry::Host(HostEvent::new(kind, data).unwrap()));
        }
        /// Persists a transition's events; the batch a pre-step request carries.
        fn settle(&mut self, transition: Result<Transition<'_>, Rejected>) -> Batch {
            let transition = transition.unwrap();
            for event in transition.events() {
                self.entry(&Entry::Machine(event.clone()));
            }
            let mut batch = Batch::new();
            for effect in transition.persisted() {
                if let Effect::Request(Request::PreStep { messages, .. }) = effect {
                    batch = messages;
                }
            }
            batch
        }
    }
    let mut log = Log {
        out: Vec::new(),
        seq: 0,
    };
    let mut machine = Machine::new();
    let mut k = 0u64;
    while log.seq < records {
        k += 1;
        if k.is_multiple_of(5) {
            let context = Message::new(format!("c{k}"), json!({"kind": "plugin"}), json!("tick"));
            log.settle(machine.inject(context));
        }
        let prompt = Message::user(format!("m{k}"), format!("prompt number {k}"));
        let batch = log.settle(machine.followup(prompt));
        log.settle(machine.answer_pre_step(PreStepAnswer::Enter(batch)));
        log.host("model/output", json!(format!("answer to {k}")));
        log.host(
            "tool/call",
            json!({"name": "grep", "args": format!("pattern {k}")}),
        );
        if k.is_multiple_of(11) {
            log.settle(machine.cancel(CancelCause::User, false));
            // The aborted work still answers; the turn ends `aborted` (S39, S40).
            while let Some(outstanding) = machine.outstanding() {
                match outstanding {
                    Outstanding::PreStep { .. } => {
                        log.settle(machine.answer_pre_step(PreStepAnswer::Reject))
                    }
                    Outstanding::Step { .. } => {
                        log.settle(machine.answer_step(StepAnswer::Completed))
                    }
                    Outstanding::TurnStopping { .. } => {
                        log.settle(machine.answer_turn_stopping(TurnStoppingAnswer::Done))
                    }
                };
            }
            continue;
        }
        if k.is_multiple_of(3) {
            log.settle(machine.steer(Message::user(format!("s{k}"), "look elsewhere")));
            let batch = log.settle(machine.answer_step(StepAnswer::Continue));
            log.settle(machine.answer_pre_step(PreStepAnswer::Enter(batch)));
            log.host("model/output", json!("done"));
        }
        log.settle(machine.answer_step(StepAnswer::Completed));
        log.settle(machine.answer_turn_stopping(TurnStoppingAnswer::Done));
    }
    log.out
}

/// Measures a 1M-record page: `coxswain view`'s time, the page's size, the time to first
/// render in Chromium, and a search and a jump to the log's end. Not run by default (or in CI):
/// `cargo test -p coxswain --test browser -- --ignored --nocapture` (with
/// `COXSWAIN_VIEW_BIN=$CARGO_TARGET_DIR/release/coxswain` to time a release build of the view).
// Ignored (a measurement: writes a 1M-record log, about 200 MB with its page).
fn a_million_records_stay_usable() {
    let records: u64 = std::env::var("COXSWAIN_VIEW_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("long.jsonl");
    let started = Instant::now();
    std::fs::write(&log, long_session(records)).unwrap();
    let log_bytes = std::fs::metadata(&log).unwrap().len();
    println!(
        "log: {} bytes, written in {:.1?}",
        log_bytes,
        started.elapsed()
    );
    let page = dir.path().join("long.html");
    let started = Instant::now();
    // `COXSWAIN_VIEW_BIN=target/release/coxswain` measures a release build.
    let binary = std::env::var_os("COXSWAIN_VIEW_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_coxswain")),
        PathBuf::from,
    );
    let view = Command::new(binary)
        .arg("view")
        .arg(&log)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        view.status.success(),
        "{}",
        String::from_utf8_lossy(&view.stderr)
    );
    println!(
        "coxswain view: {:.1?}: {}",
        started.elapsed(),
        String::from_utf8_lossy(&view.stdout).trim()
    );
    let page_bytes = std::fs::metadata(&page).unwrap().len();
    let mut browser = browser("a_million_records_stay_usable");
    let started = Instant::now();
    browser
        .navigate(&format!("file://{}", page.display()))
        .unwrap();
    browser
        .wait_for(
            "document.body.dataset.ready === '1'",
            Duration::from_secs(600),
        )
        .unwrap();
    let wall = started.elapsed();
    let first = browser.eval("window.coxswainFirstRender").unwrap();
    let rows = browser.eval("window.coxswainView.rows").unwrap();
    let pages = browser.eval("window.coxswainView.pages").unwrap();
    println!(
        "page: {page_bytes} bytes; first render {first} ms after navigation start \
         (load + ready {wall:.1?} wall); {rows} rows in {pages} pages"
    );
    let last = format!("m{}", records / 12);
    let started = Instant::now();
    browser.click("#search").unwrap();
    browser.type_text(&last).unwrap();
    browser
        .wait_for("document.querySelectorAll('#life .card').length >= 1", WAIT)
        .unwrap();
    browser.click("#life li.end-claimed a.jump").unwrap();
    browser
        .wait_for("document.querySelector('tr.hit') !== null", WAIT)
        .unwrap();
    println!(
        "search {last} and jump to its claim: {:.1?}",
        started.elapsed()
    );
    let hit = text(&mut browser, "tr.hit td.text");
    assert!(hit.contains(&format!("{last} by turn")), "{hit}");
    browser.eval("window.scrollTo(0, 0)").unwrap();
    browser
        .screenshot(&shots().join("view-million.png"))
        .unwrap();
}

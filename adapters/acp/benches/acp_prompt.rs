//! Bench 12: `session/prompt` → its response at ACP v2 (issue 53 §6), over a real stdio pipe to a
//! child process, for
//!
//! * the coxswain ACP agent (`coxswain_acp::serve`, one file log per session in a temporary
//!   `--dir`) with the echo host (`coxswain_acp::echo::EchoHost`), with the file log's sync
//!   policy `every-append` (the binary's default: every append `fdatasync`ed), `per-turn` and
//!   `never`;
//! * the same with a host that writes only the step ([`QuietHost`]: no pre-step call, so a
//!   prompt's `user/message` is durable one append after it arrives instead of two), at
//!   `every-append` and `never`;
//! * a minimal ACP v2 agent on the same crate (`agent-client-protocol`) that keeps no inbox: it
//!   answers each prompt at once with a fresh `messageId`, after one `user_message` update (the
//!   crate's `examples/simple_agent_v2.rs` without the holding, the history or the turn): the
//!   baseline of every ratio;
//! * the same minimal agent sending a `running` state update first (`minimal +running`): the
//!   three messages the coxswain agent writes before a v2 response, without the agent behind
//!   them (the wire's share).
//!
//! Every child is this bench's own executable, re-executed with [`ROLE`] set (`echo`, `quiet`
//! or `minimal`), so no test binary ships in the crate. The client (this process, one tokio
//! thread, the crate's v2 client over the crate's process transport) opens one session on each,
//! warms them up, then runs rounds that interleave the agents, each round every agent in turn
//! (who goes first rotates):
//!
//! * **sequential**: one prompt at a time; a v2 prompt's response means *inserted*, not *turn
//!   over*, so before the next prompt the client waits for the turn that entered it to end (its
//!   `running` then `idle` state updates; the minimal agent has no turn). Every prompt thus
//!   meets an idle agent and the figure is the pure prompt → response time. Its phases are
//!   timed too: send → the turn's `running` update, → its `user_message` update, → `idle`.
//! * **8 in flight**: 8 prompts outstanding at all times, a new one sent as each response
//!   arrives; the coxswain agent queues them behind the running turn (each is answered when a
//!   turn enters it: one turn a prompt, S2), the minimal one answers each at once.
//!
//! Each round trip is timed from just before the request is written to its response; the
//! figures are the p50, p90 and p99 over every round, and the ratio
//! p50(agent) / p50(minimal) of the same run (goal: ≤ 1.5×). Then, in this process and
//! without ACP ([`driver_alone`]), the same hosts and logs through `coxswain-tokio`: how much
//! of a prompt is the driver and the log. The logs go in `$COXSWAIN_BENCH_DIR` (default: a
//! temporary directory under the target directory, i.e. the build's disk, not a tmpfs). A smoke
//! run (`cargo test --benches`) or `-- --quick` uses tiny sizes and writes no figures.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v2::{schema, ConnectionTo, Responder};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, Error, Stdio};
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

/// The environment variable that makes this executable a child agent: `echo` or `minimal`.
const ROLE: &str = "COXSWAIN_ACP_BENCH_ROLE";
/// The echo child's log directory (its `--dir`).
const LOGS: &str = "COXSWAIN_ACP_BENCH_LOGS";
/// The echo child's sync policy: `every-append`, `per-turn` or `never`.
const SYNC: &str = "COXSWAIN_ACP_BENCH_SYNC";

/// Set (to anything) for the minimal agent that sends a `running` state update first.
const RUNNING: &str = "COXSWAIN_ACP_BENCH_RUNNING";

/// The longest any one wait may take (a response, a turn's end) before the run fails with a
/// message naming what it waited for: a bench never hangs.
const LIMIT: Duration = Duration::from_secs(20);

/// Prompts kept outstanding in the second series.
const DEPTH: usize = 8;

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// Prompts per agent before any is timed (sequential, then in flight).
    warmup: usize,
    /// Interleaved rounds.
    rounds: usize,
    /// Sequential prompts per agent per round.
    sequential: usize,
    /// Prompts per agent per round of the in-flight series.
    in_flight: usize,
}

const FULL: Sizes = Sizes {
    warmup: 200,
    rounds: 5,
    sequential: 300,
    in_flight: 600,
};

const QUICK: Sizes = Sizes {
    warmup: 4,
    rounds: 1,
    sequential: 10,
    in_flight: 16,
};

fn main() {
    match std::env::var(ROLE) {
        Err(std::env::VarError::NotPresent) => parent(),
        Ok(role) if role == "echo" => child(coxswain_agent(coxswain_acp::echo::EchoHost::new)),
        Ok(role) if role == "quiet" => child(coxswain_agent(|| QuietHost)),
        Ok(role) if role == "minimal" => child(minimal_agent()),
        Ok(role) => {
            eprintln!("{ROLE}={role}: not `echo`, `quiet` or `minimal`");
            std::process::exit(2);
        }
        Err(std::env::VarError::NotUnicode(role)) => {
            eprintln!("{ROLE}={role:?}: not `echo`, `quiet` or `minimal`");
            std::process::exit(2);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The children.

/// Runs one child agent to the end of its stdin on the runtime the `coxswain-acp` binary uses
/// (multi-threaded, 2 workers); a failure goes to stderr with exit status 1.
fn child(agent: impl std::future::Future<Output = Result<(), String>>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let outcome = match runtime {
        Ok(runtime) => runtime.block_on(agent),
        Err(error) => Err(format!("a tokio runtime: {error}")),
    };
    if let Err(error) = outcome {
        eprintln!("acp_prompt child: {error}");
        std::process::exit(1);
    }
}

/// The coxswain ACP agent on a directory of file logs, with `host`.
async fn coxswain_agent<H: coxswain_tokio::Host>(
    host: impl Fn() -> H + Send + Sync + 'static,
) -> Result<(), String> {
    let dir = std::env::var_os(LOGS).ok_or_else(|| format!("{LOGS} is not set"))?;
    let sync = match std::env::var(SYNC).as_deref() {
        Ok("every-append") => coxswain_tokio::SyncPolicy::EveryAppend,
        Ok("per-turn") => coxswain_tokio::SyncPolicy::PerTurn,
        Ok("never") => coxswain_tokio::SyncPolicy::Never,
        other => {
            return Err(format!(
                "{SYNC}={other:?}: not every-append, per-turn or never"
            ))
        }
    };
    let mut config = coxswain_acp::Config::new(coxswain_acp::Storage::Dir(PathBuf::from(dir)));
    config.sync = sync;
    coxswain_acp::serve(config, move |_session| host(), coxswain_acp::stdio())
        .await
        .map_err(|error| format!("coxswain_acp::serve: {error}"))
}

/// A host that writes only the step ([`Hooks::NONE`](coxswain_tokio::Hooks::NONE)): the
/// session enters the claimed prompt inside the batch that claimed it, with no pre-step call
/// and no append of its own, so the prompt's `user/message` is durable one append after its
/// follow-up arrives (the echo host, which writes `pre_step` for its `/sleep-pre` and
/// `/refuse`, takes two). Each step records one `agent_message_chunk` and completes.
#[derive(Debug)]
struct QuietHost;

impl coxswain_tokio::Host for QuietHost {
    fn hooks(&self) -> coxswain_tokio::Hooks {
        coxswain_tokio::Hooks::NONE
    }

    async fn step(&self, cx: coxswain_tokio::StepContext) -> coxswain_core::StepAnswer {
        let message_id = format!("a-{}-{}", cx.turn, cx.step);
        match coxswain_acp::updates::record_text(&cx, message_id, "ok").await {
            Ok(()) => coxswain_core::StepAnswer::Completed,
            Err(error) => coxswain_core::StepAnswer::Fail(coxswain_core::ErrorInfo::new(
                error.to_string(),
                "bench-record",
            )),
        }
    }
}

/// The minimal v2 agent: no inbox, no turn, no log. `initialize` and `session/new` as the
/// crate's example answers them; each `session/prompt` gets a fresh `messageId`, one
/// `user_message` update with its content, then its response, at once (in the dispatch loop).
/// With [`RUNNING`] set, a `running` state update goes first: the same three messages the
/// coxswain agent writes before a v2 prompt's response (`running`, `user_message`, the
/// response), to tell the wire's share of its time from its own.
async fn minimal_agent() -> Result<(), String> {
    let running = std::env::var_os(RUNNING).is_some();
    let next_session = std::sync::atomic::AtomicU64::new(0);
    let next_message = std::sync::atomic::AtomicU64::new(0);
    let next_session = &next_session;
    let next_message = &next_message;
    Agent
        .v2()
        .name("minimal-agent-v2")
        .on_receive_request(
            async |request: schema::InitializeRequest,
                   responder: Responder<schema::InitializeResponse>,
                   _connection: ConnectionTo<Client>| {
                responder.respond(
                    schema::InitializeResponse::new(
                        request.protocol_version,
                        schema::Implementation::new("minimal-agent-v2", "0"),
                    )
                    .capabilities(
                        schema::AgentCapabilities::new()
                            .session(schema::SessionCapabilities::new()),
                    ),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |_request: schema::NewSessionRequest,
                   responder: Responder<schema::NewSessionResponse>,
                   _connection: ConnectionTo<Client>| {
                let n = next_session.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                responder.respond(schema::NewSessionResponse::new(format!("minimal-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |request: schema::PromptRequest,
                   responder: Responder<schema::PromptResponse>,
                   connection: ConnectionTo<Client>| {
                if request.prompt.is_empty() {
                    return responder
                        .respond_with_error(Error::invalid_params().data("an empty prompt"));
                }
                let n = next_message.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let message_id = schema::MessageId::new(format!("m-{n}"));
                if running {
                    connection.send_notification(schema::UpdateSessionNotification::new(
                        request.session_id.clone(),
                        schema::SessionUpdate::StateUpdate(schema::StateUpdate::Running(
                            schema::RunningStateUpdate::new(),
                        )),
                    ))?;
                }
                connection.send_notification(schema::UpdateSessionNotification::new(
                    request.session_id,
                    schema::SessionUpdate::UserMessage(
                        schema::UserMessage::new(message_id.clone()).content(request.prompt),
                    ),
                ))?;
                responder.respond(schema::PromptResponse::new(message_id))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Stdio::new())
        .await
        .map_err(|error| format!("the minimal agent's connection: {error}"))
}

// ---------------------------------------------------------------------------------------------
// The client.

/// Turns seen on one connection, from its `state_update`s.
#[derive(Clone, Copy, Debug, Default)]
struct Turns {
    running: u64,
    idle: u64,
    /// When the last `running` state update, `user_message` update and `idle` state update
    /// arrived.
    running_at: Option<Instant>,
    user_at: Option<Instant>,
    idle_at: Option<Instant>,
}

/// The sequential series' phases, each from the prompt's send to the arrival of: its turn's
/// `running` state update, its `user_message` update, its turn's `idle` state update.
#[derive(Debug, Default)]
struct Phases {
    running: Vec<Duration>,
    user: Vec<Duration>,
    idle: Vec<Duration>,
}

/// One child agent, its connection and its session.
struct Peer {
    name: &'static str,
    connection: ConnectionTo<Agent>,
    session: schema::SessionId,
    turns: watch::Receiver<Turns>,
    /// Whether the agent runs turns (the client waits for them between series).
    has_turns: bool,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

/// Spawns this executable as the child `role` with `env`, connects as a v2 client, initializes
/// (protocol version 2) and opens one session.
async fn start(
    name: &'static str,
    role: &str,
    env: &[(&str, String)],
    cwd: &Path,
) -> Result<Peer, String> {
    let exe = std::env::current_exe().map_err(|error| format!("this executable: {error}"))?;
    let mut config = AcpAgentConfig::new(exe).env(ROLE, role);
    for (key, value) in env {
        config = config.env(*key, value.clone());
    }
    let (turns_tx, turns) = watch::channel(Turns::default());
    let (ready_tx, ready_rx) = oneshot::channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let cwd = cwd.to_path_buf();
    let task = tokio::spawn(async move {
        Client
            .v2()
            .name("acp-prompt-bench")
            .on_receive_notification(
                async move |notification: schema::UpdateSessionNotification,
                            _connection: ConnectionTo<Agent>| {
                    let now = Instant::now();
                    match notification.update {
                        schema::SessionUpdate::StateUpdate(schema::StateUpdate::Idle(_)) => {
                            turns_tx.send_modify(|turns| {
                                turns.idle += 1;
                                turns.idle_at = Some(now);
                            });
                        }
                        schema::SessionUpdate::StateUpdate(_) => {
                            turns_tx.send_modify(|turns| {
                                turns.running += 1;
                                turns.running_at = Some(now);
                            });
                        }
                        schema::SessionUpdate::UserMessage(_) => {
                            turns_tx.send_modify(|turns| turns.user_at = Some(now));
                        }
                        _ => {}
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(AcpAgent::new(config), async move |connection| {
                let initialized = connection
                    .send_request(schema::InitializeRequest::new(
                        ProtocolVersion::V2,
                        schema::Implementation::new("acp-prompt-bench", "0"),
                    ))
                    .block_task()
                    .await?;
                // The crate's v2 connection normalizes `protocolVersion` to 2 both ways today;
                // kept so that a crate that stops doing so cannot bench v1 unnoticed.
                if initialized.protocol_version != ProtocolVersion::V2 {
                    return Err(Error::internal_error().data(format!(
                        "the agent answered protocol version {:?}, not 2",
                        initialized.protocol_version
                    )));
                }
                let session = connection
                    .send_request(schema::NewSessionRequest::new(cwd))
                    .block_task()
                    .await?
                    .session_id;
                let _ = ready_tx.send((connection.clone(), session));
                let _ = stop_rx.await;
                Ok(())
            })
            .await
    });
    match tokio::time::timeout(LIMIT, ready_rx).await {
        Ok(Ok((connection, session))) => Ok(Peer {
            name,
            connection,
            session,
            turns,
            has_turns: role != "minimal",
            stop: Some(stop),
            task,
        }),
        Ok(Err(_)) => Err(format!(
            "{name}: the connection ended before its session opened: {}",
            match task.await {
                Ok(Err(error)) => error.to_string(),
                Ok(Ok(())) => "no error".to_owned(),
                Err(error) => error.to_string(),
            }
        )),
        Err(_) => Err(format!(
            "{name}: no session within {LIMIT:?} (initialize, session/new)"
        )),
    }
}

impl Peer {
    /// A one-block text prompt (the echo host echoes it and completes).
    fn prompt(&self, i: usize) -> schema::PromptRequest {
        schema::PromptRequest::new(
            self.session.clone(),
            vec![format!("bench prompt {i}").into()],
        )
    }

    /// Waits until every turn that started has ended, and nothing started for 10 ms after:
    /// the agent is idle (between series; untimed).
    async fn settle(&mut self) -> Result<(), String> {
        if !self.has_turns {
            return Ok(());
        }
        loop {
            let seen = self.wait_for(|turns| turns.idle >= turns.running).await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
            let now = *self.turns.borrow();
            if now.running == seen.running && now.idle >= now.running {
                return Ok(());
            }
        }
    }

    /// Waits until more than `running` turns have started and every started one has ended.
    async fn wait_idle(&mut self, running: u64) -> Result<Turns, String> {
        self.wait_for(|turns| turns.running > running && turns.idle >= turns.running)
            .await
    }

    /// Waits until the turns seen satisfy `done` (at most [`LIMIT`]).
    async fn wait_for(&mut self, done: impl FnMut(&Turns) -> bool) -> Result<Turns, String> {
        let name = self.name;
        let waited = tokio::time::timeout(LIMIT, self.turns.wait_for(done))
            .await
            .map(|seen| seen.map(|turns| *turns));
        match waited {
            Ok(Ok(turns)) => Ok(turns),
            Ok(Err(_)) => Err(format!("{name}: the connection closed while a turn ran")),
            Err(_) => Err(format!(
                "{name}: no idle state_update within {LIMIT:?} (turns: {:?})",
                *self.turns.borrow()
            )),
        }
    }

    /// `n` prompts one at a time, each timed (with its [`Phases`]); between them, the turn it
    /// started ends.
    async fn sequential(
        &mut self,
        n: usize,
        times: &mut Vec<Duration>,
        phases: &mut Phases,
    ) -> Result<(), String> {
        for i in 0..n {
            let before = self.turns.borrow().running;
            let request = self.prompt(i);
            let start = Instant::now();
            let response = round_trip(self.name, &self.connection, request).await?;
            times.push(start.elapsed());
            black_box(response);
            let turns = if self.has_turns {
                self.wait_idle(before).await?
            } else {
                *self.turns.borrow()
            };
            let since = |at: Option<Instant>| at.and_then(|at| at.checked_duration_since(start));
            phases.running.extend(since(turns.running_at));
            phases.user.extend(since(turns.user_at));
            phases.idle.extend(since(turns.idle_at));
        }
        Ok(())
    }

    /// `n` prompts with [`DEPTH`] outstanding, each timed; then the agent settles. Returns the
    /// turns they ran in.
    async fn in_flight(&mut self, n: usize, times: &mut Vec<Duration>) -> Result<u64, String> {
        let before = self.turns.borrow().running;
        let mut outstanding = JoinSet::new();
        let mut sent = 0;
        let send = |outstanding: &mut JoinSet<Result<Duration, String>>, i: usize| {
            let connection = self.connection.clone();
            let request = self.prompt(i);
            let name = self.name;
            outstanding.spawn(async move {
                let start = Instant::now();
                black_box(round_trip(name, &connection, request).await?);
                Ok(start.elapsed())
            });
        };
        while sent < n.min(DEPTH) {
            send(&mut outstanding, sent);
            sent += 1;
        }
        while let Some(done) = outstanding.join_next().await {
            let time = done.map_err(|error| format!("{}: a prompt's task: {error}", self.name))?;
            times.push(time?);
            if sent < n {
                send(&mut outstanding, sent);
                sent += 1;
            }
        }
        self.settle().await?;
        Ok(self.turns.borrow().running - before)
    }

    /// Closes the connection (the child sees its stdin end and exits) and reports how it ended.
    async fn stop(mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(LIMIT, self.task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(format!("{}: the connection failed: {error}", self.name)),
            Ok(Err(error)) => Err(format!("{}: the client task: {error}", self.name)),
            Err(_) => Err(format!("{}: did not stop within {LIMIT:?}", self.name)),
        }
    }
}

/// One `session/prompt` and its response (an error response fails the run, naming the agent).
async fn round_trip(
    name: &str,
    connection: &ConnectionTo<Agent>,
    request: schema::PromptRequest,
) -> Result<schema::MessageId, String> {
    match tokio::time::timeout(LIMIT, connection.send_request(request).block_task()).await {
        Ok(Ok(response)) => Ok(response.message_id),
        Ok(Err(error)) => Err(format!("{name}: session/prompt failed: {error}")),
        Err(_) => Err(format!(
            "{name}: no session/prompt response within {LIMIT:?}"
        )),
    }
}

/// p50, p90, p99 (nearest rank) of `times`, in µs.
fn percentiles(times: &mut [Duration]) -> [f64; 3] {
    times.sort_unstable();
    [0.50, 0.90, 0.99].map(|q| {
        if times.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
        times[rank - 1].as_secs_f64() * 1e6
    })
}

fn parent() {
    let full = full_run();
    let quick = std::env::args().any(|arg| arg == "--quick");
    let sizes = if full && !quick { FULL } else { QUICK };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let outcome = match runtime {
        Ok(runtime) => runtime.block_on(run(sizes)),
        Err(error) => Err(format!("a tokio runtime: {error}")),
    };
    // The same agents without ACP, on the children's runtime (2 workers).
    let outcome = outcome.and_then(|mut figures| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|error| format!("a tokio runtime: {error}"))?;
        let alone = runtime.block_on(driver_alone(sizes))?;
        if let Value::Object(figures) = &mut figures {
            figures.insert("without ACP".to_owned(), alone);
        }
        Ok(figures)
    });
    match outcome {
        Ok(figures) => {
            if full && !quick {
                save("acp_prompt", &figures);
            }
        }
        Err(error) => {
            eprintln!("acp_prompt: {error}");
            std::process::exit(1);
        }
    }
}

/// The series, by name.
const SERIES: [&str; 2] = ["sequential", "in_flight_8"];

/// A fresh temporary directory for the logs, under `$COXSWAIN_BENCH_DIR` (default: beside the
/// figures, on the target directory's disk).
fn logs_dir() -> Result<tempfile::TempDir, String> {
    let base = std::env::var_os("COXSWAIN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| results_dir().join("acp-prompt-tmp"));
    std::fs::create_dir_all(&base)
        .map_err(|error| format!("the bench directory {}: {error}", base.display()))?;
    tempfile::tempdir_in(&base)
        .map_err(|error| format!("a temporary directory in {}: {error}", base.display()))
}

/// Where the time of a prompt goes without ACP: the same hosts on the same file logs, opened
/// with the adapter's options (`Config::options`), driven in this process through
/// `coxswain-tokio`: `followup` of the message the adapter makes of a prompt, timed to its
/// return (durable), to the `user/message` record reaching a subscriber (what the adapter
/// answers a v2 prompt on) and to the `turn/end` record; one prompt at a time.
async fn driver_alone(sizes: Sizes) -> Result<Value, String> {
    let dir = logs_dir()?;
    let mut figures = serde_json::Map::new();
    for (name, sync) in [
        ("echo every-append", coxswain_tokio::SyncPolicy::EveryAppend),
        ("echo never", coxswain_tokio::SyncPolicy::Never),
        (
            "quiet every-append",
            coxswain_tokio::SyncPolicy::EveryAppend,
        ),
        ("quiet never", coxswain_tokio::SyncPolicy::Never),
    ] {
        let path = dir.path().join(format!("{}.jsonl", name.replace(' ', "-")));
        let n = sizes.warmup + sizes.rounds * sizes.sequential;
        let mut times = if name.starts_with("echo") {
            drive(name, coxswain_acp::echo::EchoHost::new(), sync, &path, n).await?
        } else {
            drive(name, QuietHost, sync, &path, n).await?
        };
        let [durable, user, end] = times
            .each_mut()
            .map(|times| percentiles(&mut times[sizes.warmup..])[0]);
        println!(
            "{:>22}   without ACP, p50 from `followup` to: its return (durable) {durable:.1} µs, \
             the `user/message` record {user:.1} µs, `turn/end` {end:.1} µs",
            name
        );
        figures.insert(
            name.to_owned(),
            json!({ "p50_us_to": { "durable": durable, "user_message": user, "turn_end": end } }),
        );
    }
    Ok(Value::Object(figures))
}

/// `n` prompts through one agent on a file log at `path` (see [`driver_alone`]): per prompt,
/// the times to `followup`'s return, to its `user/message` record, to its `turn/end` record.
async fn drive<H: coxswain_tokio::Host>(
    name: &str,
    host: H,
    sync: coxswain_tokio::SyncPolicy,
    path: &Path,
    n: usize,
) -> Result<[Vec<Duration>; 3], String> {
    use coxswain_acp::updates::{updates_of, AcpUpdate};
    use coxswain_tokio::Update;
    let log = coxswain_tokio::FileLog::open_with(path, sync)
        .await
        .map_err(|error| format!("{name}: the log {}: {error}", path.display()))?;
    let mut config = coxswain_acp::Config::new(coxswain_acp::Storage::Dir(PathBuf::new()));
    config.sync = sync;
    let (agent, _) = coxswain_tokio::Agent::open_with(config.options(), host, log)
        .await
        .map_err(|error| format!("{name}: opening the agent: {error}"))?;
    let mut updates = agent.subscribe();
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..n {
        let id = format!("p-{i}");
        let prompt = json!([{ "type": "text", "text": format!("bench prompt {i}") }]);
        let start = Instant::now();
        agent
            .followup(coxswain_core::Message::user(id.as_str(), prompt))
            .await
            .map_err(|error| format!("{name}: followup: {error}"))?;
        times[0].push(start.elapsed());
        let mut user = None;
        let end = loop {
            let update = tokio::time::timeout(LIMIT, updates.recv()).await;
            let entry = match update {
                Ok(Ok(Update::Recorded { entry, .. })) => entry,
                Ok(Ok(Update::Ended(ending))) => {
                    return Err(format!("{name}: the agent ended: {ending:?}"))
                }
                Ok(Ok(_)) => continue,
                Ok(Err(error)) => return Err(format!("{name}: the updates: {error}")),
                Err(_) => return Err(format!("{name}: no turn end within {LIMIT:?}")),
            };
            let now = start.elapsed();
            let mut ended = false;
            for update in updates_of(&entry) {
                match update {
                    AcpUpdate::UserMessage { message_id, .. } if message_id == id => {
                        user = Some(now);
                    }
                    AcpUpdate::TurnEnded { .. } if user.is_some() => ended = true,
                    _ => {}
                }
            }
            if ended {
                break now;
            }
        };
        times[1].extend(user);
        times[2].push(end);
    }
    agent
        .close()
        .await
        .map_err(|error| format!("{name}: close: {error}"))?;
    Ok(times)
}

async fn run(sizes: Sizes) -> Result<Value, String> {
    let dir = logs_dir()?;
    println!("logs under {} ({sizes:?})", dir.path().display());

    let mut peers = Vec::new();
    for (name, role, sync) in [
        ("echo every-append", "echo", "every-append"),
        ("echo per-turn", "echo", "per-turn"),
        ("echo never", "echo", "never"),
        ("quiet every-append", "quiet", "every-append"),
        ("quiet never", "quiet", "never"),
    ] {
        let logs = dir.path().join(name.replace(' ', "-"));
        let env = [
            (LOGS, logs.to_string_lossy().into_owned()),
            (SYNC, sync.to_owned()),
        ];
        peers.push(start(name, role, &env, dir.path()).await?);
    }
    let running = [(RUNNING, "1".to_owned())];
    peers.push(start("minimal +running", "minimal", &running, dir.path()).await?);
    // The baseline of every ratio: the last peer.
    peers.push(start("minimal", "minimal", &[], dir.path()).await?);
    let minimal = peers.len() - 1;

    let mut discard = Vec::new();
    for peer in &mut peers {
        peer.settle().await?;
        peer.sequential(sizes.warmup, &mut discard, &mut Phases::default())
            .await?;
        peer.in_flight(sizes.warmup, &mut discard).await?;
    }

    // times[peer][series]
    let mut times: Vec<[Vec<Duration>; 2]> = peers.iter().map(|_| Default::default()).collect();
    let mut phases: Vec<Phases> = peers.iter().map(|_| Phases::default()).collect();
    let mut turns = vec![0u64; peers.len()];
    for round in 0..sizes.rounds {
        // Rotate who goes first, so no agent always follows the same one.
        for k in 0..peers.len() {
            let p = (round + k) % peers.len();
            let peer = &mut peers[p];
            peer.sequential(sizes.sequential, &mut times[p][0], &mut phases[p])
                .await?;
            let ran = peer.in_flight(sizes.in_flight, &mut times[p][1]).await?;
            if peer.has_turns {
                turns[p] += ran;
            }
        }
    }

    let stats: Vec<[[f64; 3]; 2]> = times
        .iter_mut()
        .map(|[sequential, in_flight]| [percentiles(sequential), percentiles(in_flight)])
        .collect();
    let mut figures = serde_json::Map::new();
    for (p, peer) in peers.iter().enumerate() {
        let mut agent = serde_json::Map::new();
        for (s, series) in SERIES.iter().enumerate() {
            let [p50, p90, p99] = stats[p][s];
            let ratio = p50 / stats[minimal][s][0];
            println!(
                "{:>22} {series:>11}: p50 {p50:8.1} µs  p90 {p90:8.1} µs  p99 {p99:8.1} µs  \
                 p50 ÷ minimal's {ratio:.2}×",
                peer.name
            );
            agent.insert(
                (*series).to_owned(),
                json!({
                    "prompts": times[p][s].len(),
                    "p50_us": p50,
                    "p90_us": p90,
                    "p99_us": p99,
                    "p50_ratio_to_minimal": ratio,
                }),
            );
        }
        let phases = &mut phases[p];
        let [running, user, idle] = [&mut phases.running, &mut phases.user, &mut phases.idle]
            .map(|times| percentiles(times)[0]);
        let turns_per_prompt = turns[p] as f64 / times[p][1].len().max(1) as f64;
        println!(
            "{:>22}   sequential, p50 from the send to its `running` {running:.1} µs, \
             `user_message` {user:.1} µs, `idle` {idle:.1} µs; in flight: {turns_per_prompt:.2} \
             turns a prompt",
            peer.name
        );
        agent.insert(
            "sequential_p50_us_to".to_owned(),
            json!({ "running": running, "user_message": user, "idle": idle }),
        );
        agent.insert(
            "in_flight_turns_per_prompt".to_owned(),
            json!(turns_per_prompt),
        );
        figures.insert(peer.name.to_owned(), Value::Object(agent));
    }
    for peer in peers {
        peer.stop().await?;
    }
    Ok(Value::Object(figures))
}

/// Where this bench writes its figures (`<target>/criterion/coxswain/`, beside the root
/// workspace's benches), whether this is a full run (`cargo bench` passes `--bench`; the smoke
/// run of `cargo test --benches` does not), and the writing: the same as `coxswain-benches`'
/// `report_file`, which this crate (a workspace of its own, see its Cargo.toml) cannot depend on.
fn results_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            let mut dir = exe.parent()?;
            if dir.file_name()? == "deps" {
                dir = dir.parent()?;
            }
            Some(dir.parent()?.to_path_buf())
        })
        .unwrap_or_else(|| std::path::PathBuf::from("target"));
    target.join("criterion").join("coxswain")
}

fn full_run() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

fn save(name: &str, value: &serde_json::Value) {
    let dir = results_dir();
    let path = dir.join(format!("{name}.json"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(value).unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => println!("figures written to {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}

//! The worker process of a fail-over run ([`serve_worker`]): it serves the sessions the
//! coordinator opens on it, claims this run's expired sessions (a dead worker's) as they come
//! free, and answers in the line protocol of the parent module.

use super::*;

/// Serves one worker process: connects, then obeys the lines of `input` (see the module's
/// documentation; read on a thread of its own) and answers on `output` (written on another)
/// until `input` ends; then shuts the worker down (it releases its sessions) and writes its
/// `stats` line.
pub async fn serve_worker<R, W>(config: &WorkerConfig, input: R, output: W) -> Result<(), LoadError>
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let mut options = StoreOptions::owned_by(config.owner.clone());
    options.lease = config.lease;
    options.pool_size = 8;
    let store = Store::connect(&config.url, options).await?;
    let tally = Arc::new(Tally::default());
    let workload = Workload::Turns(Turns {
        step: config.step,
        steer_every: 0,
        cancel_every: 0,
    });
    let mut worker = Worker::new(store.clone(), Options::default(), move |_| {
        LoadHost::new(workload, &tally)
    });
    let (out, lines_out) = mpsc::unbounded_channel::<String>();
    let writer = std::thread::spawn(move || write_lines(lines_out, output));
    // Follow-ups are delivered as they come, to the agents in `served`, while the worker opens
    // and claims: a claim restoring its batch never holds up a delivery to a session served.
    let served = Served::default();
    let (opens, mut to_open) = mpsc::unbounded_channel::<std::io::Result<String>>();
    {
        let (served, out) = (served.clone(), out.clone());
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            for line in input.lines() {
                let line = match line {
                    Ok(line) => line,
                    Err(error) => {
                        let _ = opens.send(Err(error));
                        return;
                    }
                };
                match line.split_whitespace().collect::<Vec<_>>()[..] {
                    ["followup", session, id] => {
                        runtime.spawn(deliver(
                            served.get(session),
                            session.to_owned(),
                            id.to_owned(),
                            out.clone(),
                        ));
                    }
                    ["open", _] => {
                        if opens.send(Ok(line)).is_err() {
                            return;
                        }
                    }
                    _ => eprintln!("coxswain load-worker: ignoring the line {line:?}"),
                }
            }
            // Dropping `opens` ends the worker.
        });
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(CLAIM_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ended = loop {
        tokio::select! {
            line = to_open.recv() => match line {
                Some(Ok(line)) => {
                    if let Some(session) = line.strip_prefix("open ") {
                        open(&mut worker, session.trim(), &served, &out).await;
                    }
                }
                None => break Ok(()),
                Some(Err(error)) => {
                    break Err(LoadError::Io { path: PathBuf::from("(stdin)"), error });
                }
            },
            _ = tick.tick() => claim(&mut worker, config, &served, &out).await,
        }
    };
    let stats = store.stats();
    let seconds = started.elapsed().as_secs_f64();
    let released = worker.shutdown().await;
    send(
        &out,
        format!(
            "stats {}",
            json!({"owner": config.owner, "seconds": seconds, "released": released,
                   "statements": stats.statements, "lease_renewals": stats.lease_renewals,
                   "appends": stats.appends})
        ),
    );
    drop(out);
    let written = tokio::task::spawn_blocking(move || writer.join())
        .await
        .map_err(|error| LoadError::Task(error.to_string()))?
        .map_err(|_| LoadError::Task("the output thread panicked".to_owned()))?;
    ended?;
    written.map_err(|error| LoadError::Io {
        path: PathBuf::from("(stdout)"),
        error,
    })
}

/// The agents a worker serves, by session, for the deliveries.
#[derive(Clone, Default)]
struct Served(Arc<Mutex<BTreeMap<String, Agent>>>);

impl Served {
    fn get(&self, session: &str) -> Option<Agent> {
        self.0.lock().ok()?.get(session).cloned()
    }

    fn set(&self, session: &str, agent: Option<Agent>) {
        if let Ok(mut served) = self.0.lock() {
            match agent {
                Some(agent) => served.insert(session.to_owned(), agent),
                None => served.remove(session),
            };
        }
    }
}

/// Opens `session` now, announcing it.
async fn open(
    worker: &mut Worker<LoadHost>,
    session: &str,
    served: &Served,
    out: &mpsc::UnboundedSender<String>,
) {
    match worker.open(session).await {
        Ok(_) => {
            served.set(session, worker.agent(session).cloned());
            send(out, format!("opened {session}"));
        }
        Err(error) => send(out, format!("open-failed {session} {}", one_line(&error))),
    }
}

/// A worker's tick: drops the sessions whose agent ended, then claims this run's sessions
/// whose lease expired (a dead worker's), announcing each.
async fn claim(
    worker: &mut Worker<LoadHost>,
    config: &WorkerConfig,
    served: &Served,
    out: &mpsc::UnboundedSender<String>,
) {
    for (session, ending) in worker.reap().await {
        served.set(&session, None);
        eprintln!("{}: {session} ended: {ending:?}", config.owner);
    }
    match worker
        .claim_expired_under(&config.prefix, config.claim)
        .await
    {
        Ok(claimed) => {
            for (session, result) in claimed {
                match result {
                    Ok(_) => {
                        served.set(&session, worker.agent(&session).cloned());
                        send(out, format!("claimed {session}"));
                    }
                    Err(error) => eprintln!("{}: claiming {session}: {error}", config.owner),
                }
            }
        }
        Err(error) => eprintln!("{}: claiming: {error}", config.owner),
    }
}

/// Delivers follow-up `id` to `session`'s agent, if served here, and answers.
async fn deliver(
    agent: Option<Agent>,
    session: String,
    id: String,
    out: mpsc::UnboundedSender<String>,
) {
    let Some(agent) = agent else {
        send(&out, format!("failed {id} {session} is not served here"));
        return;
    };
    let message = Message::user(id.clone(), "load");
    match tokio::time::timeout(DELIVERY_TIMEOUT, agent.followup(message)).await {
        Ok(Ok(())) => send(&out, format!("acked {id}")),
        Ok(Err(error)) if error.was_delivered() => send(&out, format!("acked {id}")),
        Ok(Err(error)) => send(&out, format!("failed {id} {}", one_line(&error))),
        Err(_) => send(&out, format!("failed {id} no answer within 10 s")),
    }
}

fn send(out: &mpsc::UnboundedSender<String>, line: String) {
    let _ = out.send(line);
}

/// Writes every line it is sent, flushing whenever none waits.
fn write_lines<W: Write>(
    mut lines: mpsc::UnboundedReceiver<String>,
    output: W,
) -> std::io::Result<()> {
    let mut output = std::io::BufWriter::new(output);
    while let Some(line) = lines.blocking_recv() {
        writeln!(output, "{line}")?;
        while let Ok(line) = lines.try_recv() {
            writeln!(output, "{line}")?;
        }
        output.flush()?;
    }
    output.flush()
}

fn one_line(error: &impl std::fmt::Display) -> String {
    error.to_string().replace(['\n', '\r'], " ")
}

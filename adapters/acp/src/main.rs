//! `coxswain-acp`: coxswain behind the Agent Client Protocol, on stdin/stdout (docs/acp.md,
//! "Running it"). JSON-RPC goes to stdout only; diagnostics go to stderr. A bad option, an
//! unreadable `--dir` or an unreachable `--store` exits with status 2 and one line on stderr.

use std::process::ExitCode;

use coxswain_acp::echo::EchoHost;
use coxswain_acp::{serve, stdio, Config, ServeError, Storage};
use coxswain_tokio::SyncPolicy;

const USAGE: &str = "\
usage: coxswain-acp --echo (--dir DIR | --store postgres://…) [options]

Serves the Agent Client Protocol (v1 and v2) on stdin/stdout, one durable coxswain log per
session.

options:
  --dir DIR          a directory of file logs, one DIR/<sessionId>.jsonl per session
  --store URL        PostgreSQL (postgres://…): one fenced session per ACP session
  --echo             the deterministic demo host (the only host this binary has)
  --max-pending N    the admission bound: the most prompts one list may hold (default 10000)
  --redelivery A     crash repair's redelivery allowance (default 1)
  --max-sessions N   the most sessions open at once on the connection (default 64)
  --update-capacity N  how far a session's updates may run ahead of the client before the
                     missed ones are read back from the log (default 1024)
  --sync POLICY      every-append, per-turn or never (file logs; default every-append)
  --help             this text
";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Command {
    Help,
    Serve(Config),
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let mut storage: Option<Storage> = None;
    let mut echo = false;
    let mut max_pending = Config::DEFAULT_MAX_PENDING;
    let mut redelivery = Config::DEFAULT_REDELIVERY;
    let mut max_sessions = Config::DEFAULT_MAX_SESSIONS;
    let mut update_capacity = Config::DEFAULT_UPDATE_CAPACITY;
    let mut sync = SyncPolicy::default();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                (name.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next()) {
                Some(value) => Ok(value),
                None => Err(format!("{name} needs a value")),
            }
        };
        match name.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--echo" if inline.is_none() => echo = true,
            "--dir" | "--store" => {
                let given = value(&name)?;
                if given.is_empty() {
                    return Err(format!("{name} needs a non-empty value"));
                }
                if storage.is_some() {
                    return Err("give one of --dir and --store, once".into());
                }
                storage = Some(if name == "--dir" {
                    Storage::Dir(given.into())
                } else if given.starts_with("postgres://") || given.starts_with("postgresql://") {
                    Storage::Postgres(given)
                } else {
                    return Err(format!(
                        "--store {given}: not a PostgreSQL URL (postgres://…)"
                    ));
                });
            }
            "--max-pending" => {
                let given = value(&name)?;
                max_pending = match given.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("--max-pending {given}: not a whole number ≥ 1")),
                };
            }
            "--max-sessions" => {
                let given = value(&name)?;
                max_sessions = match given.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("--max-sessions {given}: not a whole number ≥ 1")),
                };
            }
            "--update-capacity" => {
                let given = value(&name)?;
                update_capacity = match given.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("--update-capacity {given}: not a whole number ≥ 1")),
                };
            }
            "--redelivery" => {
                let given = value(&name)?;
                redelivery = given
                    .parse::<u64>()
                    .map_err(|_| format!("--redelivery {given}: not a whole number ≥ 0"))?;
            }
            "--sync" => {
                let given = value(&name)?;
                sync = given
                    .parse::<SyncPolicy>()
                    .map_err(|_| format!("--sync {given}: not every-append, per-turn or never"))?;
            }
            _ => return Err(format!("unknown option {arg} (see --help)")),
        }
    }
    let Some(storage) = storage else {
        return Err("one of --dir DIR and --store URL is required (see --help)".into());
    };
    if !echo {
        return Err("--echo is required: the demo host is the only host this binary has".into());
    }
    let mut config = Config::new(storage);
    config.max_pending = max_pending;
    config.redelivery = redelivery;
    config.max_sessions = max_sessions;
    config.update_capacity = update_capacity;
    config.sync = sync;
    if let Err(invalid) = config.options().validate() {
        return Err(format!("invalid options: {invalid}"));
    }
    Ok(Command::Serve(config))
}

fn main() -> ExitCode {
    let config = match parse(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Serve(config)) => config,
        Err(error) => {
            eprintln!("coxswain-acp: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("coxswain-acp: cannot start the runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let served = runtime.block_on(serve(config, |_session| EchoHost::new(), stdio()));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(ServeError::Store(error)) => {
            eprintln!("coxswain-acp: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("coxswain-acp: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Command, String> {
        parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn the_options_of_the_doc() {
        let mut expected = Config::new(Storage::Dir("d".into()));
        expected.max_pending = 5;
        expected.redelivery = 0;
        expected.sync = SyncPolicy::PerTurn;
        expected.max_sessions = 3;
        expected.update_capacity = 7;
        assert_eq!(
            args("--echo --dir d --max-pending 5 --redelivery 0 --sync per-turn --max-sessions 3 --update-capacity 7"),
            Ok(Command::Serve(expected))
        );
        assert_eq!(
            args("--echo --store=postgres://u@h/db"),
            Ok(Command::Serve(Config::new(Storage::Postgres(
                "postgres://u@h/db".into()
            ))))
        );
        assert_eq!(args("--dir d --help"), Ok(Command::Help));
    }

    #[test]
    fn bad_options_say_what_was_wrong() {
        assert_eq!(
            args("--echo"),
            Err("one of --dir DIR and --store URL is required (see --help)".into())
        );
        assert_eq!(
            args("--dir d"),
            Err("--echo is required: the demo host is the only host this binary has".into())
        );
        assert_eq!(
            args("--echo --dir d --store postgres://x"),
            Err("give one of --dir and --store, once".into())
        );
        assert_eq!(args("--echo --dir"), Err("--dir needs a value".into()));
        assert_eq!(
            args("--echo --dir d --max-pending 0"),
            Err("--max-pending 0: not a whole number ≥ 1".into())
        );
        assert_eq!(
            args("--echo --dir d --max-sessions 0"),
            Err("--max-sessions 0: not a whole number ≥ 1".into())
        );
        assert_eq!(
            args("--echo --dir d --redelivery x"),
            Err("--redelivery x: not a whole number ≥ 0".into())
        );
        assert_eq!(
            args("--echo --dir d --sync always"),
            Err("--sync always: not every-append, per-turn or never".into())
        );
        assert_eq!(
            args("--echo --store mysql://x"),
            Err("--store mysql://x: not a PostgreSQL URL (postgres://…)".into())
        );
        assert_eq!(
            args("--echo --dir d --bogus"),
            Err("unknown option --bogus (see --help)".into())
        );
        assert!(
            matches!(args("--echo --dir d --redelivery 1001"), Err(e) if e.starts_with("invalid options: "))
        );
    }
}

//! Runs the `coxswain` binary under test with a deadline, capturing what it printed (shared by
//! the integration tests that need only its exit code and output).

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a run of the CLI printed, and its exit code.
#[derive(Debug, PartialEq)]
pub(crate) struct Ran {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs the CLI with `args` (and `envs`, in `dir` if given); fails if it has not exited within
/// 20 s (it is killed then).
pub(crate) fn run_cli<S: AsRef<OsStr> + std::fmt::Debug>(
    args: &[S],
    dir: Option<&Path>,
    envs: &[(&str, &Path)],
) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coxswain"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`coxswain {args:?}` did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ran {
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

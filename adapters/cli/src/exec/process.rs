//! A port's process: `sh -c CMD` in its own process group, one request line in, one reply line
//! out, with a deadline; its stderr's last lines kept for the report.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How many of the port's last stderr lines a report shows.
pub(crate) const STDERR_LINES: usize = 5;

/// Why a request got no reply.
#[derive(Debug)]
pub(crate) enum Fault {
    /// stdout closed or stdin could not be written: the process is gone (its status).
    Exited(String),
    /// No reply within the deadline; the process group was killed.
    Silent,
}

/// A running port.
pub(crate) struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Option<String>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    /// Starts `sh -c command` with piped stdin/stdout/stderr, in a process group of its own (so
    /// a kill reaches whatever the shell started).
    pub(crate) fn spawn(command: &str) -> std::io::Result<Process> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let (stdout, stderr) = match (child.stdout.take(), child.stderr.take()) {
            (Some(stdout), Some(stderr)) => (stdout, stderr),
            _ => return Err(std::io::Error::other("the port's pipes are missing")),
        };
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => {
                        let _ = sender.send(None);
                        return;
                    }
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                        }
                        let text = String::from_utf8_lossy(&line).into_owned();
                        if sender.send(Some(text)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let keep = Arc::clone(&tail);
        thread::spawn(move || keep_tail(stderr, &keep));
        Ok(Process {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: tail,
        })
    }

    /// Sends one line and waits up to `timeout` for the reply line.
    pub(crate) fn request(&mut self, line: &str, timeout: Duration) -> Result<String, Fault> {
        let written = match self.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|()| stdin.flush()),
            None => Err(std::io::Error::other("stdin closed")),
        };
        if written.is_err() {
            return Err(Fault::Exited(self.exit_status()));
        }
        match self.lines.recv_timeout(timeout) {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                Err(Fault::Exited(self.exit_status()))
            }
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(Fault::Silent)
            }
        }
    }

    /// The port's last stderr lines (at most [`STDERR_LINES`]).
    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        // Give the stderr thread a moment to read what a dying port wrote last.
        thread::sleep(Duration::from_millis(50));
        self.stderr
            .lock()
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The status of a process whose stdout closed: waits up to a second for it to exit, then
    /// kills it.
    fn exit_status(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return describe(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    self.kill();
                    return "stdout closed; killed".into();
                }
                Err(e) => return format!("status unknown: {e}"),
            }
        }
    }

    /// Kills the whole process group and reaps the shell.
    pub(crate) fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("sh")
            .args(["-c", "kill -9 \"$0\" 2>/dev/null", &group])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin (end of session, PORTS.md) and waits up to `grace` for a clean exit; a port
    /// still running then is killed. Returns the exit status.
    pub(crate) fn finish(mut self, grace: Duration) -> String {
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return describe(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => {
                    self.kill();
                    return "killed: still running after stdin closed".into();
                }
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

fn describe(status: ExitStatus) -> String {
    status.to_string()
}

/// Keeps the last [`STDERR_LINES`] lines of `stderr`.
fn keep_tail(stderr: impl Read, tail: &Mutex<VecDeque<String>>) {
    let mut reader = BufReader::new(stderr);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                let Ok(mut tail) = tail.lock() else { return };
                if tail.len() == STDERR_LINES {
                    tail.pop_front();
                }
                tail.push_back(text);
            }
        }
    }
}

//! [`PgLog`]: one session's records in PostgreSQL, behind the [`DurableLog`] trait.
//!
//! An append is **one statement**, so one transaction and one round trip (the statement is
//! prepared once per connection; Bind/Execute/Sync go out together):
//!
//! ```sql
//! WITH s AS (UPDATE coxswain.sessions SET length = length + $n
//!            WHERE session = $1 AND epoch = $2 AND length = $expected
//!            RETURNING length - $n AS base)
//! INSERT INTO coxswain.records (session, seq, epoch, type, data)
//! SELECT $1, s.base + r.ord, $2, r.type, r.data::jsonb
//! FROM s, unnest($types, $datas) WITH ORDINALITY AS r(type, data, ord)
//! ```
//!
//! The `UPDATE` re-checks the epoch under the session row's lock, which a takeover also takes:
//! no row updated means another writer holds the session ([`LogError::Fenced`]), and nothing is
//! inserted.

use std::ops::ControlFlow;
use std::sync::Arc;

use coxswain_log::{encode, CorruptLine, Entry, Problem, Reader, Record};
use coxswain_tokio::{DurableLog, LogError, ReadBack};
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::committer::{Batch, Committed, Committer};
use crate::error::{append_error, chain, not_sent, other};
use crate::stats::Sent;
use crate::Store;

/// Whether a [`PgLog`] may append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// It holds the session at this epoch.
    Writer(i64),
    /// It only reads.
    ReadOnly,
}

/// One session's log in PostgreSQL. Made by [`Store::open`] or [`Store::claim_expired`] (a
/// writer under a new epoch, whose lease of its own it renews in the background while it
/// lives), by a [`Worker`](crate::Worker) (a writer under a new epoch whose lease is the
/// worker's: nothing to renew per session), or by [`Store::open_read_only`].
#[derive(Debug)]
pub struct PgLog {
    store: Store,
    session: Arc<str>,
    mode: Mode,
    /// The next record's `seq`; known once read back.
    next_seq: Option<u64>,
    failed: bool,
    renewal: Option<JoinHandle<()>>,
    /// The worker's committer, for a session a worker serves.
    committer: Option<Committer>,
}

const APPEND: &str = "WITH s AS (
        UPDATE coxswain.sessions SET length = length + $3
        WHERE session = $1 AND epoch = $2 AND length = $4
        RETURNING length - $3 AS base)
    INSERT INTO coxswain.records (session, seq, epoch, type, data)
    SELECT $1, s.base + r.ord, $2, r.type, r.data::jsonb
    FROM s, unnest($5::text[], $6::text[]) WITH ORDINALITY AS r(type, data, ord)";

impl PgLog {
    pub(crate) fn new(store: Store, session: &str, mode: Mode) -> PgLog {
        let session: Arc<str> = Arc::from(session);
        let renewal = match mode {
            Mode::Writer(epoch) => Some(tokio::spawn(renew(
                store.clone(),
                Arc::clone(&session),
                epoch,
            ))),
            Mode::ReadOnly => None,
        };
        PgLog {
            store,
            session,
            mode,
            next_seq: None,
            failed: false,
            renewal,
            committer: None,
        }
    }

    /// A writer at `epoch` of a session a worker holds: the worker renews the lease, and its
    /// committer writes the appends, many sessions' in one transaction.
    pub(crate) fn in_worker(
        store: Store,
        session: &str,
        epoch: i64,
        committer: Committer,
    ) -> PgLog {
        PgLog {
            store,
            session: Arc::from(session),
            mode: Mode::Writer(epoch),
            next_seq: None,
            failed: false,
            renewal: None,
            committer: Some(committer),
        }
    }

    /// The session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The epoch this writer holds (`None` when read-only).
    pub fn epoch(&self) -> Option<i64> {
        match self.mode {
            Mode::Writer(epoch) => Some(epoch),
            Mode::ReadOnly => None,
        }
    }

    fn fenced(&self, epoch: i64) -> LogError {
        LogError::Fenced {
            session: self.session.to_string(),
            epoch: u64::try_from(epoch).unwrap_or(0),
        }
    }

    /// Reads the session's records in `seq` order, in one snapshot with the session's length.
    async fn read(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<(usize, u64), LogError> {
        let mut client = self
            .store
            .client()
            .await
            .map_err(|error| other(error.to_string()))?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|error| other(chain(&error)))?;
        self.store.sent(Sent::Other);
        let length: i64 = tx
            .query_opt(
                "SELECT length FROM coxswain.sessions WHERE session = $1",
                &[&&*self.session],
            )
            .await
            .map_err(|error| other(chain(&error)))?
            .map_or(0, |row| row.get(0));
        let portal = tx
            .bind(
                "SELECT seq, type, data::text FROM coxswain.records
                 WHERE session = $1 ORDER BY seq",
                &[&&*self.session],
            )
            .await
            .map_err(|error| other(chain(&error)))?;
        let mut reader = Reader::new();
        let mut line = Vec::new();
        let mut read = 0u64;
        loop {
            self.store.sent(Sent::Other);
            let rows = tx
                .query_portal(&portal, 1024)
                .await
                .map_err(|error| other(chain(&error)))?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                let seq: i64 = row.get(0);
                let kind: String = row.get(1);
                let data: Option<String> = row.get(2);
                read += 1;
                if u64::try_from(seq).ok() != Some(read) {
                    return Err(LogError::Corrupt(CorruptLine {
                        line: read as usize,
                        problem: Problem::SeqGap {
                            previous: read - 1,
                            found: u64::try_from(seq).unwrap_or(0),
                        },
                    }));
                }
                line.clear();
                write_line(seq, &kind, data.as_deref(), &mut line);
                let record = reader.line(&line)?;
                if visit(record).is_break() {
                    return Ok((reader.records(), reader.next_seq()));
                }
            }
        }
        if i64::try_from(read).ok() != Some(length) {
            return Err(other(format!(
                "corrupt log: session {} claims {length} records but holds {read}",
                self.session
            )));
        }
        Ok((reader.records(), reader.next_seq()))
    }
}

/// `{"seq":…,"type":…,"data":…}`: the JSON-lines log's record, so the reader that checks a file's
/// lines checks these.
fn write_line(seq: i64, kind: &str, data: Option<&str>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(seq.to_string().as_bytes());
    out.extend_from_slice(b",\"type\":");
    out.extend_from_slice(Value::from(kind).to_string().as_bytes());
    if let Some(data) = data {
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(data.as_bytes());
    }
    out.push(b'}');
}

/// The record's `type` and `data` (JSON text; `None` when the record has no `data`), checked
/// as the file log checks a line, plus what PostgreSQL cannot hold (NUL in text). `data` is cut
/// from the line the one encoder wrote (no second serialisation).
fn split(
    seq: u64,
    entry: &Entry,
    scratch: &mut Vec<u8>,
) -> Result<(String, Option<String>), LogError> {
    scratch.clear();
    encode(seq, entry, scratch)?;
    let kind = entry.kind().to_owned();
    let data = data_of(scratch);
    if kind.contains('\0') || data.is_some_and(has_nul) {
        return Err(LogError::Encode(
            "PostgreSQL cannot store a NUL character (\\u0000) in text or jsonb".to_owned(),
        ));
    }
    let data = data
        .map(|data| std::str::from_utf8(data).map(str::to_owned))
        .transpose()
        .map_err(|error| LogError::Encode(error.to_string()))?;
    Ok((kind, data))
}

/// The `data` of a line `{"seq":…,"type":…,"data":…}\n` as [`encode`] writes it: the text after
/// its first `,"data":` (inside a string every `"` is escaped, so the type cannot hold one),
/// without the closing `}\n`.
fn data_of(line: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b",\"data\":";
    let at = line.windows(KEY.len()).position(|window| window == KEY)?;
    line.get(at + KEY.len()..line.len().checked_sub(2)?)
}

/// Whether JSON text holds a NUL character: an escape `\u0000` (the encoder writes every
/// control character escaped; a `\\` is an escaped backslash, skipped whole).
fn has_nul(json: &[u8]) -> bool {
    let mut at = 0;
    while let Some(offset) = json
        .get(at..)
        .and_then(|rest| rest.iter().position(|&byte| byte == b'\\'))
    {
        let escape = at + offset + 1;
        if json
            .get(escape..)
            .is_some_and(|rest| rest.starts_with(b"u0000"))
        {
            return true;
        }
        at = escape + 1;
    }
    false
}

impl DurableLog for PgLog {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        self.next_seq = None;
        let (records, next_seq) = self.read(visit).await?;
        self.next_seq = Some(next_seq);
        Ok(ReadBack::new(records, None))
    }

    /// A transaction leaves no torn tail: nothing to repair.
    async fn repair_tail(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let Mode::Writer(epoch) = self.mode else {
            return Err(other(format!("session {} is open read-only", self.session)));
        };
        if self.failed {
            return Err(LogError::Failed);
        }
        let first = match self.next_seq {
            Some(next) => next,
            None => self.read(&mut |_| ControlFlow::Continue(())).await?.1,
        };
        self.next_seq = Some(first);
        if batch.is_empty() {
            return Ok(first);
        }
        let next = first
            .checked_add(batch.len() as u64)
            .ok_or(LogError::SeqExhausted)?;
        let mut types = Vec::with_capacity(batch.len());
        let mut datas = Vec::with_capacity(batch.len());
        let mut scratch = Vec::new();
        for (offset, entry) in batch.iter().enumerate() {
            let (kind, data) = split(first + offset as u64, entry, &mut scratch)?;
            types.push(kind);
            datas.push(data);
        }
        let count = i64::try_from(batch.len()).map_err(|_| LogError::SeqExhausted)?;
        let expected = i64::try_from(first - 1).map_err(|_| LogError::SeqExhausted)?;
        i64::try_from(next).map_err(|_| LogError::SeqExhausted)?;
        if let Some(committer) = &self.committer {
            let batch = Batch {
                session: Arc::clone(&self.session),
                epoch,
                expected,
                types,
                datas,
            };
            return match committer.commit(batch).await {
                Committed::Written => {
                    self.next_seq = Some(next);
                    Ok(first)
                }
                Committed::Fenced => {
                    self.failed = true;
                    Err(self.fenced(epoch))
                }
                Committed::Failed(error) => {
                    self.failed = error.is_indeterminate();
                    Err(error)
                }
            };
        }
        let client = match self.store.client().await {
            Ok(client) => client,
            Err(error) => return Err(not_sent(error.to_string())),
        };
        let statement = match client.prepare_cached(APPEND).await {
            Ok(statement) => statement,
            Err(error) => return Err(not_sent(chain(&error))),
        };
        let session: &str = &self.session;
        self.store.sent(Sent::Append);
        let result = client
            .execute(
                &statement,
                &[&session, &epoch, &count, &expected, &types, &datas],
            )
            .await;
        match result {
            Ok(inserted) if inserted == batch.len() as u64 => {
                self.next_seq = Some(next);
                Ok(first)
            }
            Ok(_) => {
                self.failed = true;
                Err(self.fenced(epoch))
            }
            Err(error) => {
                // An `ERROR` answer rolled the transaction back: nothing of it is in the log, and
                // the next append is tried afresh; a commit of unknown outcome takes no more.
                let error = append_error(&error);
                self.failed = error.is_indeterminate();
                Err(error)
            }
        }
    }

    /// A committed transaction is durable (with the server's `synchronous_commit`): nothing to
    /// do.
    async fn sync(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

impl Drop for PgLog {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
    }
}

/// Renews the lease every third of its length while the log lives; stops once fenced.
async fn renew(store: Store, session: Arc<str>, epoch: i64) {
    let period = store.lease() / 3;
    loop {
        tokio::time::sleep(period).await;
        match store.renew(&session, epoch).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(%session, epoch, "lease not renewed: the session was taken over");
                return;
            }
            Err(error) => tracing::warn!(%session, epoch, %error, "lease renewal failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{Event, Message};
    use coxswain_log::HostEvent;
    use serde_json::json;

    #[test]
    fn a_row_reads_as_the_json_lines_record() {
        let mut line = Vec::new();
        write_line(7, "model/output", Some(r#"{"text": "a\"b"}"#), &mut line);
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            r#"{"seq":7,"type":"model/output","data":{"text": "a\"b"}}"#
        );
        line.clear();
        write_line(1, "x\"y", None, &mut line);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"seq":1,"type":"x\"y"}"#
        );
    }

    #[test]
    fn a_nul_anywhere_is_refused_and_a_backslash_u_is_not() {
        let entry = |data| Entry::Host(HostEvent::new("model/output", data).unwrap());
        let mut scratch = Vec::new();
        for data in [
            json!("a\u{0}"),
            json!({"k\u{0}": 1}),
            json!([[{"x": "\u{0}"}]]),
        ] {
            let error = split(1, &entry(data), &mut scratch).unwrap_err();
            assert!(matches!(error, LogError::Encode(_)), "{error:?}");
        }
        let (kind, data) = split(1, &entry(json!({"text": "\\u0000"})), &mut scratch).unwrap();
        assert_eq!(
            (kind.as_str(), data.as_deref()),
            ("model/output", Some(r#"{"text":"\\u0000"}"#))
        );
        // A NUL after an escaped backslash is still a NUL; a backslash at the end is not one.
        for data in [json!("\\\u{0}"), json!({"\\": "\\\\\u{0}"})] {
            let error = split(1, &entry(data), &mut scratch).unwrap_err();
            assert!(matches!(error, LogError::Encode(_)), "{error:?}");
        }
        let (_, data) = split(1, &entry(json!(["\\", "u0000\\"])), &mut scratch).unwrap();
        assert_eq!(data.as_deref(), Some(r#"["\\","u0000\\"]"#));
        // `data` is the line's own text: a message's `id` first, as the file log writes it.
        let message = Arc::new(Message::user("m1", "hi"));
        let (kind, data) = split(
            3,
            &Entry::Machine(Event::UserMessage(message)),
            &mut scratch,
        )
        .unwrap();
        assert_eq!(
            (kind.as_str(), data.as_deref()),
            (
                "user/message",
                Some(r#"{"id":"m1","content":"hi","source":{"kind":"user"}}"#)
            )
        );
        assert!(!has_nul(b"\\"));
        assert_eq!(data_of(b"}"), None);
        assert!(matches!(
            split(u64::MAX, &entry(json!(1)), &mut scratch),
            Err(LogError::SeqExhausted)
        ));
    }
}

//! Reading a session's records after a `seq` (the dispatcher's lag recovery), from a file or
//! PostgreSQL, and discarding an empty PostgreSQL session a failed `create` left.

#[allow(clippy::wildcard_imports)]
use super::*;

/// `(seq, entry)` of `session`'s records above `after`, at most `max`, from file `path`.
pub(super) fn file_records_after(
    session: &str,
    path: &Path,
    after: u64,
    max: usize,
) -> Result<Vec<(u64, Entry)>, StoreError> {
    use std::io::Read;

    let failed = |text: &dyn std::fmt::Display| {
        StoreError::Failed(format!("session {session}: {}: {text}", path.display()))
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(StoreError::UnknownSession(session.to_owned()))
        }
        Err(error) => return Err(failed(&format!("cannot read it: {error}"))),
    };
    let mut found = Vec::new();
    if max == 0 {
        return Ok(found);
    }
    let mut lines = LineBuffer::new();
    let mut reader = Reader::new();
    let mut chunk = vec![0; 64 * 1024];
    loop {
        let read = match file.read(&mut chunk) {
            Ok(0) => return Ok(found),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(failed(&format!("cannot read it: {error}"))),
        };
        let flow = lines.feed(&chunk[..read], |line| {
            let record = reader
                .line(line)
                .map_err(|error| LineError::Corrupt(LogError::Corrupt(error).to_string()))?;
            let seq = record.seq.unwrap_or(record.line as u64);
            if seq <= after {
                return Ok(ControlFlow::Continue(()));
            }
            let entry = entry_of(&record).ok_or_else(|| {
                LineError::Corrupt(format!("line {}: not a record of this log", record.line))
            })?;
            found.push((seq, entry));
            Ok(if found.len() >= max {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        });
        match flow {
            Ok(ControlFlow::Continue(())) => {}
            Ok(ControlFlow::Break(())) => return Ok(found),
            Err(LineError::TooLong(error)) => return Err(failed(&error)),
            Err(LineError::Corrupt(text)) => return Err(failed(&text)),
        }
    }
}

/// Why [`file_records_after`] stopped at a line.
enum LineError {
    TooLong(LineTooLong),
    Corrupt(String),
}

impl From<LineTooLong> for LineError {
    fn from(error: LineTooLong) -> Self {
        LineError::TooLong(error)
    }
}

/// `(seq, entry)` of PostgreSQL session `session`'s records above `after`, at most `max`.
pub(super) async fn pg_records_after(
    store: &Store,
    session: &str,
    after: u64,
    max: usize,
) -> Result<Vec<(u64, Entry)>, StoreError> {
    let failed =
        |text: &dyn std::fmt::Display| StoreError::Failed(format!("session {session}: {text}"));
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let client = store
        .client_for_tools()
        .await
        .map_err(|error| failed(&error))?;
    let rows = client
        .query(
            "SELECT seq, type, data::text FROM coxswain.records
             WHERE session = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[&session, &after, &limit],
        )
        .await
        .map_err(|error| failed(&error))?;
    if rows.is_empty() {
        // No record past `after`, or no such session.
        match client
            .query_opt(
                "SELECT 1 FROM coxswain.sessions WHERE session = $1",
                &[&session],
            )
            .await
        {
            Ok(Some(_)) => {}
            Ok(None) => return Err(StoreError::UnknownSession(session.to_owned())),
            Err(error) => return Err(failed(&error)),
        }
    }
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        let seq: i64 = row.get(0);
        let kind: String = row.get(1);
        let data: Option<String> = row.get(2);
        let data = match data
            .as_deref()
            .map(serde_json::from_str::<serde_json::Value>)
        {
            None => serde_json::Value::Null,
            Some(Ok(data)) => data,
            Some(Err(error)) => return Err(failed(&format!("record {seq}: {error}"))),
        };
        let record = Record {
            line: 0,
            seq: u64::try_from(seq).ok(),
            event: serde_json::json!({"type": kind, "data": data}),
        };
        let entry = entry_of(&record)
            .ok_or_else(|| failed(&format!("record {seq}: not a record of this log")))?;
        found.push((u64::try_from(seq).unwrap_or(0), entry));
    }
    Ok(found)
}

/// Deletes PostgreSQL session `session` if it holds no record (a session just created whose
/// agent did not open). `true` if it was deleted.
pub(super) async fn discard_empty_session(store: &Store, session: &str) -> Result<bool, String> {
    let client = store
        .client_for_tools()
        .await
        .map_err(|error| error.to_string())?;
    let deleted = client
        .execute(
            "DELETE FROM coxswain.sessions s WHERE s.session = $1 AND s.length = 0
             AND NOT EXISTS (SELECT 1 FROM coxswain.records r WHERE r.session = $1)",
            &[&session],
        )
        .await
        .map_err(|error| error.to_string())?;
    Ok(deleted == 1)
}

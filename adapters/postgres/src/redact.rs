//! [`redact`]: a connection string as an error message may show it.

/// `conninfo` (a connection string [`Store::connect`](crate::Store::connect) takes) with every
/// password replaced by `***`, so an error message or a log line can name the database.
///
/// * A URL (`postgres://…`, `postgresql://…`): the password of its user info, read as the
///   driver (`tokio-postgres`) reads it: everything between the first `:` and the first `@`
///   after `://` (so a password holding `/`, `?` or `:` is hidden whole), and the value of a
///   `password` query parameter.
/// * A `key=value` string (`host=/tmp user=me password=secret`): the value of `password`,
///   quoted (`'a b\'c'`) or not. A `password` key without a value hides the rest of the string.
///
/// Anything else is returned as it is.
///
/// ```
/// use coxswain_postgres::redact;
///
/// assert_eq!(redact("postgres://me:secret@db/app?sslmode=disable"), "postgres://me:***@db/app?sslmode=disable");
/// assert_eq!(redact("postgres://me@db/app?password=secret&x=1"), "postgres://me@db/app?password=***&x=1");
/// assert_eq!(redact("postgres://me@db/app"), "postgres://me@db/app");
/// assert_eq!(redact("host=/tmp password='s e\\'c' user=me"), "host=/tmp password=*** user=me");
/// ```
pub fn redact(conninfo: &str) -> String {
    match conninfo.split_once("://") {
        Some((scheme, rest)) => redact_url(scheme, rest),
        None => redact_key_values(conninfo),
    }
}

/// `scheme://rest`: the user info's password, then the query's `password`.
fn redact_url(scheme: &str, rest: &str) -> String {
    // The driver takes the credentials up to the first `@` wherever it is.
    let (credentials, tail) = match rest.find('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _)) => (format!("{user}:***"), &rest[at..]),
            None => (String::new(), rest),
        },
        None => (String::new(), rest),
    };
    let tail = match tail.split_once('?') {
        Some((head, query)) => {
            let parameters: Vec<String> = query
                .split('&')
                .map(|parameter| match parameter.split_once('=') {
                    Some((key, _)) if key == "password" => format!("{key}=***"),
                    _ => parameter.to_owned(),
                })
                .collect();
            format!("{head}?{}", parameters.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{credentials}{tail}")
}

/// `key=value …`: `password`'s value hidden, everything else (spacing included) as it was.
fn redact_key_values(conninfo: &str) -> String {
    let mut out = String::with_capacity(conninfo.len());
    let mut rest = conninfo;
    loop {
        let trimmed = rest.trim_start();
        out.push_str(&rest[..rest.len() - trimmed.len()]);
        rest = trimmed;
        if rest.is_empty() {
            return out;
        }
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        out.push_str(key);
        rest = &rest[key_end..];
        let after_space = rest.trim_start();
        let Some(value) = after_space.strip_prefix('=') else {
            if key == "password" {
                // Malformed: whatever follows may be the password.
                if !rest.is_empty() {
                    out.push_str(" ***");
                }
                return out;
            }
            continue;
        };
        out.push_str(&rest[..rest.len() - value.len()]);
        let value_start = value.len() - value.trim_start().len();
        out.push_str(&value[..value_start]);
        let value = &value[value_start..];
        let value_end = value_len(value);
        if key == "password" {
            out.push_str("***");
        } else {
            out.push_str(&value[..value_end]);
        }
        rest = &value[value_end..];
    }
}

/// The length of the value `s` starts with: a quoted one up to its closing quote (`\` escapes
/// the next character; unterminated: all of it), else up to the next whitespace.
fn value_len(s: &str) -> usize {
    let mut chars = s.char_indices();
    match chars.next() {
        Some((_, '\'')) => {
            let mut escaped = false;
            for (at, c) in chars {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '\'' => return at + 1,
                    _ => {}
                }
            }
            s.len()
        }
        _ => s.find(char::is_whitespace).unwrap_or(s.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn urls_lose_their_passwords_and_nothing_else() {
        for (url, shown) in [
            (
                "postgres://me:secret@db.example/app?sslmode=disable",
                "postgres://me:***@db.example/app?sslmode=disable",
            ),
            ("postgres://me@db/app", "postgres://me@db/app"),
            ("postgres://db/app", "postgres://db/app"),
            ("postgresql://u:p:q@h", "postgresql://u:***@h"),
            // The driver's reading: the credentials end at the first `@`, wherever it is.
            ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p?w@h/db", "postgres://u:***@h/db"),
            ("postgres://u:p@ss@h/db", "postgres://u:***@ss@h/db"),
            (
                "postgres://u@h/db?application_name=a@b",
                "postgres://u@h/db?application_name=a@b",
            ),
            (
                "postgres://h/db?sslmode=disable&password=x%26y&user=u",
                "postgres://h/db?sslmode=disable&password=***&user=u",
            ),
            ("postgres://u:@h", "postgres://u:***@h"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn key_value_strings_lose_the_password_value() {
        for (conninfo, shown) in [
            ("host=/tmp user=me", "host=/tmp user=me"),
            (
                "host=/tmp password=secret user=me",
                "host=/tmp password=*** user=me",
            ),
            ("password = secret", "password = ***"),
            ("password='a b\\' c' dbname=x", "password=*** dbname=x"),
            ("password='unterminated", "password=***"),
            ("host=h password", "host=h password"),
            ("host=h password secret", "host=h password ***"),
            ("", ""),
        ] {
            assert_eq!(redact(conninfo), shown, "{conninfo}");
        }
    }
}

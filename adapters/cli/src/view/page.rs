//! The page: the template (assets/page.html, .css, .js, included at build time) with the
//! session's facts embedded as JSON. Nothing is fetched when the page opens.

use serde::Serialize;

use super::facts::{collect, Facts};
use super::Session;
use crate::verify::{verify_records, Verdict};

const TEMPLATE: &str = include_str!("assets/page.html");
const STYLE: &str = include_str!("assets/page.css");
const SCRIPT: &str = include_str!("assets/page.js");

/// The auditor's verdict as the page's banner shows it.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Banner {
    /// The log is sound.
    pub(crate) ok: bool,
    /// `coxswain verify`'s words.
    pub(crate) text: String,
    /// What crash repair would still do (S50).
    pub(crate) repair: Vec<String>,
    /// The first broken line, if any.
    pub(crate) line: Option<usize>,
}

impl Banner {
    fn of(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Ok {
                events,
                turns,
                repair,
            } => Banner {
                ok: true,
                text: format!("ok ({events} events, {turns} turns)"),
                repair,
                line: None,
            },
            Verdict::Violation { line, message } => Banner {
                ok: false,
                text: format!("line {line}: {message}"),
                repair: Vec::new(),
                line: Some(line),
            },
        }
    }
}

#[derive(Serialize)]
struct Data<'a> {
    name: &'a str,
    verdict: Banner,
    #[serde(flatten)]
    facts: Facts,
}

/// Embeds JSON in a `<script>` element: `<` only occurs inside JSON strings, where `\u003c` is
/// the same character, so no `</script>` or `<!--` can end the element early.
fn embed(json: &str) -> String {
    json.replace('<', "\\u003c")
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The facts a session's page embeds, as JSON.
pub(crate) fn data_json(session: &Session) -> String {
    let data = Data {
        name: &session.name,
        verdict: Banner::of(verify_records(&session.records, session.torn)),
        facts: collect(&session.records),
    };
    serde_json::to_string(&data).unwrap_or_else(|_| "{}".into())
}

/// The whole page for a session.
pub(crate) fn render(session: &Session) -> String {
    let data = embed(&data_json(session));
    let mut page = String::with_capacity(data.len() + TEMPLATE.len() + STYLE.len() + SCRIPT.len());
    // Split on the placeholders once each, so nothing in the data is ever substituted again.
    for (index, piece) in TEMPLATE.split("{{").enumerate() {
        if index == 0 {
            page.push_str(piece);
            continue;
        }
        let (name, rest) = piece.split_once("}}").unwrap_or(("", piece));
        match name {
            "title" => page.push_str(&escape_html(&session.name)),
            "style" => page.push_str(STYLE),
            "script" => page.push_str(SCRIPT),
            "data" => page.push_str(&data),
            _ => {}
        }
        page.push_str(rest);
    }
    page
}

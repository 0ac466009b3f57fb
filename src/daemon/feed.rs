//! Atom feeds of incidents (RFC 4287): `GET /feed.atom` for every target, `GET
//! /feed/<target>.atom` for one. One entry per incident: published when it opened, updated when
//! it was resolved, with the same id throughout, so a reader shows the resolution in place.
//!
//! Written by hand: a feed is a dozen elements, and a feed crate would bring a date library
//! beside jiff. Every foreign text is escaped, and characters XML 1.0 forbids (controls a
//! hostile server may send) are dropped, so the document always parses.

use std::fmt::Write;

use jiff::Timestamp;

use super::status_page::{lasted, when};
use crate::sinks::incidents::Incident;

/// Entries in a feed at most, the most recently updated.
pub(crate) const ENTRIES: usize = 50;

/// `s` as XML character data or a quoted attribute value.
fn xml(out: &mut String, s: &str) {
    let allowed: String = s
        .chars()
        .filter(|&c| matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..))
        .collect();
    // Writing into a String cannot fail; `escape_html` escapes & < > " ', all XML knows.
    let _ = pulldown_cmark_escape::escape_html(&mut *out, &allowed);
}

/// The `tag:` URI (RFC 4151) that names a thing of this agent's for good.
fn tag(agent: &str, what: &str) -> String {
    let agent: String = url::form_urlencoded::byte_serialize(agent.as_bytes()).collect();
    format!("tag:llm-canary,2025:{agent}/{what}")
}

/// The feed of `incidents` (newest first), of one target when `target` is given.
pub(crate) fn atom(
    agent: &str,
    target: Option<&str>,
    incidents: &[Incident],
    now: Timestamp,
) -> String {
    let mut entries: Vec<&Incident> = incidents.iter().collect();
    entries.sort_by(|a, b| b.updated_at().cmp(&a.updated_at()).then(a.id.cmp(&b.id)));
    entries.truncate(ENTRIES);
    let updated = entries.first().map_or(now, |i| i.updated_at());
    let mut o = String::with_capacity(1024 + entries.len() * 1024);
    o.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">\n<id>");
    let (scope, self_path) = match target {
        Some(t) => (format!("incidents/{t}"), format!("/feed/{t}.atom")),
        None => ("incidents".to_string(), "/feed.atom".to_string()),
    };
    xml(&mut o, &tag(agent, &scope));
    o.push_str("</id>\n<title>llm-canary incidents: ");
    xml(&mut o, agent);
    if let Some(t) = target {
        o.push_str(", ");
        xml(&mut o, t);
    }
    let _ = write!(
        o,
        "</title>\n<updated>{}</updated>\n<author><name>llm-canary ",
        when(updated)
    );
    xml(&mut o, agent);
    o.push_str(
        "</name></author>\n<link rel=\"alternate\" href=\"/\"/>\n<link rel=\"self\" href=\"",
    );
    xml(&mut o, &self_path);
    o.push_str("\"/>\n<generator>llm-canary</generator>\n");
    for i in entries {
        entry(&mut o, agent, i);
    }
    o.push_str("</feed>\n");
    o
}

fn entry(o: &mut String, agent: &str, i: &Incident) {
    let state = i.state.as_str();
    o.push_str("<entry>\n<id>");
    xml(o, &tag(agent, &format!("incident/{}", i.id)));
    o.push_str("</id>\n<title>");
    xml(o, &i.target);
    let _ = write!(
        o,
        " {state}{}</title>\n<published>{}</published>\n<updated>{}</updated>\n<link rel=\"alternate\" href=\"/#incident-",
        if i.is_open() { "" } else { ", resolved" },
        when(i.started_at),
        when(i.updated_at()),
    );
    xml(o, &i.id);
    let _ = write!(
        o,
        "\"/>\n<category term=\"{state}\"/>\n<category term=\"{}\"/>\n<content type=\"text\">",
        if i.is_open() { "open" } else { "resolved" }
    );
    let lasted = lasted(i);
    let mut text = match i.ended_at {
        Some(end) => format!(
            "{} was {state} from {} to {} ({lasted}).",
            i.target,
            when(i.started_at),
            when(end)
        ),
        None => format!(
            "{} is {state} since {} ({lasted} so far).",
            i.target,
            when(i.started_at)
        ),
    };
    let outcomes: Vec<String> = i
        .outcomes
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    let _ = write!(
        text,
        " Failed runs: {}. First error: {}",
        outcomes.join(", "),
        i.first_error
    );
    xml(o, &text);
    o.push_str("</content>\n</entry>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::state::State;

    #[test]
    fn hostile_text_is_escaped_and_forbidden_characters_dropped() {
        let i = Incident {
            id: "t-1".into(),
            target: "t".into(),
            state: State::Down,
            started_at: Timestamp::UNIX_EPOCH,
            ended_at: None,
            duration_seconds: 90,
            outcomes: [("http_error".to_string(), 2)].into(),
            first_error: "HTTP 502: <b>\u{1}\u{0}bad</b> & \"x\"\u{FFFF}".into(),
        };
        let feed = atom("eu <1>", None, &[i], Timestamp::UNIX_EPOCH);
        assert!(
            feed.contains("&lt;b&gt;bad&lt;/b&gt; &amp; &quot;x&quot;</content>"),
            "{feed}"
        );
        assert!(!feed.contains('\u{1}') && !feed.contains('\u{0}') && !feed.contains('\u{FFFF}'));
        assert!(feed.contains("<id>tag:llm-canary,2025:eu+%3C1%3E/incident/t-1</id>"));
        assert!(feed.contains("<title>t down</title>"));
        assert!(
            feed.contains(
                "t is down since 1970-01-01T00:00:00Z (1m 30s so far). Failed runs: http_error ×2."
            ),
            "{feed}"
        );
    }
}

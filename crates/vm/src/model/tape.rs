//! The tape: scripted model turns, replayed offline.
//!
//! A tape is a YAML list; each entry is one model answer, with optional matchers:
//!
//! ```yaml
//! - state: identify-case          # the state the call is made in
//!   role: agent                   # agent | grader | judge | summarizer
//!   workflow: support-desk        # the calling session's workflow
//!   variables: { order_id: NW-1 } # a partial match on the session's variables (schema::matcher)
//!   text: Routing your question.
//!   tool_calls:
//!     - { name: archmax_advance, args: { to: orders-question, reason: an order question } }
//!   usage: { input: 120, output: 30 }
//! ```
//!
//! Each call takes the first entry its session has not consumed whose matchers all fit;
//! an entry without matchers fits any call but a summarizer's, which takes only entries
//! that say `role: summarizer`. So a plain tape replays strictly in order,
//! while concurrent children of a fan-out each find their own entries. A call no entry
//! fits is an error naming the call, workflow, state and role; entries left at the end
//! are reported.
//!
//! The one thing to know: **every root session reads the tape from its own start**. The
//! reading position is kept per root session (a child `<id>~<n>` shares its root's, as
//! the fan-out needs), so a host running many sessions on one tape (`archmax serve
//! --tape`) replays the same script for each, as `archmax run` does for its one. Each
//! answer hands back the session's [`TapeReading`] (the tape's digest and the entries
//! used), which the session keeps; a later process given the same tape (the same
//! digest) continues from it, so `run` then `decide` with one tape reads on instead of
//! starting over. A different tape starts from its top.

use std::collections::HashMap;
use std::sync::Mutex;

use archmax_compiler::schema::matcher::Matcher;
use serde::Deserialize;
use serde_json::Value;

use sha2::{Digest, Sha256};

use super::{ModelAdapter, ModelError, ModelFuture, ModelRequest, ModelResponse, Role, TapeReading, TokenUsage};
use crate::session::ToolCall;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    role: Option<Role>,
    #[serde(default)]
    workflow: Option<String>,
    /// Matched partially: the keys it names must match, others are ignored.
    #[serde(default, deserialize_with = "variables_pattern")]
    variables: Option<Matcher>,
    #[serde(default)]
    text: Option<String>,
    /// The text in the pieces a stream would bring (instead of `text`).
    #[serde(default)]
    chunks: Option<Vec<String>>,
    #[serde(default)]
    tool_calls: Vec<TapeCall>,
    #[serde(default)]
    usage: Option<TapeUsage>,
    #[serde(default)]
    model: Option<String>,
    /// The answer's provider id, as an endpoint would give it.
    #[serde(default)]
    id: Option<String>,
    /// The answer stopped at the output limit (an endpoint's `finish_reason: length`).
    #[serde(default)]
    truncated: bool,
}

fn variables_pattern<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Matcher>, D::Error> {
    Ok(Some(Matcher::from_json(&Value::deserialize(deserializer)?)))
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TapeCall {
    name: String,
    #[serde(default)]
    args: Value,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TapeUsage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cache_read: u64,
    #[serde(default)]
    cache_write: u64,
}

/// Why a tape could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TapeError(pub String);

/// A tape being replayed.
pub struct Tape {
    entries: Vec<Entry>,
    /// SHA-256 (hex) of the tape's text.
    digest: String,
    /// Each root session's reading, by its id.
    readings: Mutex<HashMap<String, Reading>>,
}

/// How far one root session (with its children) has read the tape.
struct Reading {
    used: Vec<bool>,
    calls: u64,
}

/// The session whose reading a call advances: a child reads with its root.
fn root_session(session: &str) -> &str {
    session.split('~').next().unwrap_or(session)
}

impl Tape {
    /// Parses a tape from YAML text (through the compiler's YAML loader).
    pub fn parse(name: &str, text: &str) -> Result<Tape, TapeError> {
        let document = archmax_compiler::syntax::yaml::load(archmax_program::source::FileId(0), text);
        if let Some(problem) = document.diagnostics.first() {
            return Err(TapeError(format!("the tape `{name}` is not valid YAML: {}", problem.message)));
        }
        let value = match document.root {
            Some(root) => root.to_json(),
            None => Value::Array(Vec::new()),
        };
        let entries: Vec<Entry> = serde_json::from_value(value)
            .map_err(|error| TapeError(format!("the tape `{name}` is malformed: {error}")))?;
        if let Some(index) = entries.iter().position(|entry| entry.text.is_some() && entry.chunks.is_some()) {
            return Err(TapeError(format!(
                "the tape `{name}` is malformed: entry {} has both `text` and `chunks`; keep one (`chunks` is the text in pieces)",
                index + 1
            )));
        }
        let digest = archmax_program::hex::hex(&Sha256::digest(text.as_bytes()));
        Ok(Tape { entries, digest, readings: Mutex::new(HashMap::new()) })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `entry` may answer `request`: its state, role, workflow and variables,
    /// where it names them, are the call's ([`Tape::misfit`] says which is not).
    fn fits(entry: &Entry, request: &ModelRequest<'_>) -> bool {
        Tape::misfit(entry, request).is_none()
    }

    /// Why `entry` does not answer `request`, as the end of "the next unused one is …";
    /// `None` when it does. An entry without a role is for every role but the
    /// summarizer: a summary is only ever scripted on purpose, so a tape written before
    /// compaction never feeds an agent's answer to the summarizer.
    fn misfit(entry: &Entry, request: &ModelRequest<'_>) -> Option<String> {
        if let Some(state) = entry.state.as_deref().filter(|state| *state != request.state) {
            return Some(format!("for state `{state}`"));
        }
        match entry.role {
            Some(role) if role != request.role => return Some(format!("for role {}", role.as_str())),
            None if request.role == Role::Summarizer => {
                return Some(
                    "for any role but the summarizer (a summary is scripted with `role: summarizer`)".to_string(),
                );
            }
            _ => {}
        }
        if let Some(workflow) = entry.workflow.as_deref().filter(|workflow| *workflow != request.workflow) {
            return Some(format!("for workflow `{workflow}`"));
        }
        if entry.variables.as_ref().is_some_and(|pattern| !pattern.matches(request.variables)) {
            return Some("for sessions whose variables match its `variables`, and this one's do not".to_string());
        }
        None
    }

    fn answer(&self, request: &ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut readings = self.readings.lock().map_err(|_| ModelError::Tape("the tape is unusable".to_string()))?;
        let state = readings.entry(root_session(request.session).to_string()).or_insert_with(|| {
            // A session this process has not seen continues where it read this tape before.
            // Only the root's own record seeds the reading: a child keeps a copy of the
            // family's reading that may be older than its root's.
            let mut used = vec![false; self.entries.len()];
            let is_root = !request.session.contains('~');
            let saved = request.tape.filter(|saved| is_root && saved.digest == self.digest);
            for &index in saved.map(|saved| saved.used.as_slice()).unwrap_or_default() {
                if let Some(slot) = used.get_mut(index as usize) {
                    *slot = true;
                }
            }
            let calls = used.iter().filter(|used| **used).count() as u64;
            Reading { used, calls }
        });
        state.calls += 1;
        let call = state.calls;
        let index = self
            .entries
            .iter()
            .enumerate()
            .position(|(index, entry)| !state.used[index] && Tape::fits(entry, request))
            .ok_or_else(|| {
                let next = self.entries.iter().enumerate().find(|(index, _)| !state.used[*index]);
                let hint = match next {
                    Some((index, entry)) => format!(
                        "; the next unused one, entry {}, is {}",
                        index + 1,
                        Tape::misfit(entry, request).unwrap_or_else(|| "for another call".to_string())
                    ),
                    None => "; add an entry for this call".to_string(),
                };
                ModelError::Tape(format!(
                    "the tape has no entry for model call {call} (workflow `{}`, state `{}`, role {}); {} of {} entries are used{hint}",
                    request.workflow,
                    request.state,
                    request.role.as_str(),
                    state.used.iter().filter(|used| **used).count(),
                    self.entries.len()
                ))
            })?;
        state.used[index] = true;
        let entry = &self.entries[index];
        let tool_calls = entry
            .tool_calls
            .iter()
            .enumerate()
            .map(|(position, call_entry)| ToolCall {
                // Numbered by the conversation's length (its whole length, however
                // much of it the model is shown), so ids stay unique across the processes
                // that continue one session and across compactions.
                id: call_entry.id.clone().unwrap_or_else(|| format!("call-{}-{}", request.history + 1, position + 1)),
                name: call_entry.name.clone(),
                args: if call_entry.args.is_null() {
                    Value::Object(Default::default())
                } else {
                    call_entry.args.clone()
                },
            })
            .collect();
        let usage = entry
            .usage
            .as_ref()
            .map(|usage| TokenUsage {
                input: usage.input,
                output: usage.output,
                cache_read: usage.cache_read,
                cache_write: usage.cache_write,
            })
            .unwrap_or_default();
        let used = state.used.iter().enumerate().filter(|(_, used)| **used).map(|(index, _)| index as u32).collect();
        // Pieces reach a watcher as a stream would bring them.
        if let (Some(chunks), Some(sink)) = (&entry.chunks, request.on_text) {
            chunks.iter().filter(|chunk| !chunk.is_empty()).for_each(|chunk| sink.send(chunk, entry.id.as_deref()));
        }
        let text = match &entry.chunks {
            Some(chunks) => chunks.concat(),
            None => entry.text.clone().unwrap_or_default(),
        };
        Ok(ModelResponse {
            text,
            tool_calls,
            usage,
            model: entry.model.clone().or_else(|| request.model.map(str::to_string)),
            id: entry.id.clone(),
            truncated: entry.truncated,
            tape: Some(TapeReading { digest: self.digest.clone(), used }),
            ..ModelResponse::default()
        })
    }
}

impl ModelAdapter for Tape {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        let answer = self.answer(&request);
        Box::pin(async move { answer })
    }

    /// A tape stands in for a provider: its answers were recorded, none is made.
    fn provider(&self, _model: Option<&str>) -> &str {
        "archmax.tape"
    }

    /// Entries no session has read (with one session, the ones it left).
    fn leftover(&self) -> usize {
        let Ok(readings) = self.readings.lock() else {
            return 0;
        };
        (0..self.entries.len()).filter(|index| !readings.values().any(|reading| reading.used[*index])).count()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn request<'a>(state: &'a str, variables: &'a Value) -> ModelRequest<'a> {
        in_session("s1", state, variables)
    }

    /// A request for tests of adapters: no prompt, no tools, workflow `desk`.
    pub(crate) fn in_session<'a>(session: &'a str, state: &'a str, variables: &'a Value) -> ModelRequest<'a> {
        ModelRequest {
            model: None,
            role: Role::Agent,
            session,
            workflow: "desk",
            state,
            variables,
            system_static: "",
            system_volatile: "",
            messages: &[],
            history: 0,
            tools: &[],
            prompt_cache: crate::model::PromptCache::OFF,
            timeout: None,
            sampling: crate::model::Sampling::default(),
            tape: None,
            on_text: None,
        }
    }

    #[test]
    fn only_an_entry_that_says_summarizer_answers_a_summarizer() {
        let text = "- { text: an agent's answer }\n- { role: summarizer, text: the summary }\n";
        let none = Value::Null;
        let tape = Tape::parse("t", text).expect("tape");
        let summarizer = ModelRequest { role: Role::Summarizer, ..request("a", &none) };
        assert_eq!(tape.answer(&summarizer).expect("answer").text, "the summary");
        assert_eq!(tape.answer(&request("a", &none)).expect("answer").text, "an agent's answer");
        let plain = Tape::parse("t", "- { text: an agent's answer }\n").expect("tape");
        assert!(plain.answer(&summarizer).is_err(), "an entry without a role is not a summary");
    }

    #[test]
    fn a_later_process_given_the_same_tape_continues_where_the_session_read_it_to() {
        let text = "- { text: one }\n- { text: two }\n- { text: three }\n";
        let none = Value::Null;
        let first_process = Tape::parse("t", text).expect("tape");
        let first = first_process.answer(&request("a", &none)).expect("answer");
        let reading = first.tape.expect("a tape hands back its reading");
        assert_eq!(reading.used, [0]);
        assert_eq!(first_process.answer(&request("a", &none)).expect("answer").tape.expect("reading").used, [0, 1]);

        // A new process: the session's saved reading (after "one") continues at "two".
        let next_process = Tape::parse("t", text).expect("tape");
        let continued = ModelRequest { tape: Some(&reading), ..request("a", &none) };
        let answer = next_process.answer(&continued).expect("answer");
        assert_eq!(answer.text, "two");
        assert_eq!(answer.tape.expect("reading").used, [0, 1]);
        // Once the process knows the session, its own reading counts, not the saved one.
        assert_eq!(next_process.answer(&continued).expect("answer").text, "three");

        // Another tape (another digest) starts from its top; a bad index is ignored.
        let other = Tape::parse("t", "- { text: first }\n- { text: second }\n").expect("tape");
        let stale = TapeReading { digest: reading.digest.clone(), used: vec![0, 99] };
        assert_eq!(
            other.answer(&ModelRequest { tape: Some(&stale), ..request("a", &none) }).expect("answer").text,
            "first"
        );
        let same = Tape::parse("t", text).expect("tape");
        let odd = TapeReading { digest: reading.digest, used: vec![0, 99] };
        assert_eq!(same.answer(&ModelRequest { tape: Some(&odd), ..request("a", &none) }).expect("answer").text, "two");
    }

    #[test]
    fn entries_are_taken_in_order_unless_matchers_pick_one() {
        let tape = Tape::parse(
            "t",
            "- { state: b, text: for b }\n- text: first\n- { variables: { id: 2 }, text: two }\n- text: last\n",
        )
        .expect("tape");
        let none = json!({});
        let two = json!({ "id": 2, "other": true });
        assert_eq!(tape.answer(&request("a", &none)).expect("answer").text, "first");
        assert_eq!(tape.answer(&request("b", &none)).expect("answer").text, "for b");
        assert_eq!(tape.answer(&request("a", &two)).expect("answer").text, "two");
        assert_eq!(tape.answer(&request("a", &none)).expect("answer").text, "last");
        let error = tape.answer(&request("a", &none)).expect_err("exhausted").to_string();
        assert!(error.contains("model call 5") && error.contains("state `a`"), "{error}");
        assert!(error.ends_with("; add an entry for this call"), "{error}");
        assert_eq!(tape.leftover(), 0);
    }

    #[test]
    fn a_call_no_entry_answers_is_told_why_the_next_unused_entry_does_not() {
        let none = json!({});
        let misses = [
            ("- { state: granted, text: yes }\n", "entry 1, is for state `granted`"),
            ("- { role: grader, text: pass }\n", "entry 1, is for role grader"),
            ("- { workflow: other, text: hi }\n", "entry 1, is for workflow `other`"),
            ("- { variables: { id: 2 }, text: two }\n", "entry 1, is for sessions whose variables match"),
        ];
        for (text, said) in misses {
            let tape = Tape::parse("t", text).expect("tape");
            let error = tape.answer(&request("read-request", &none)).expect_err("no entry fits").to_string();
            assert!(
                error.contains("0 of 1 entries are used; the next unused one, ") && error.contains(said),
                "{error}"
            );
        }
    }

    #[test]
    fn a_variables_matcher_written_312_0_picks_a_session_started_with_312() {
        let tape =
            Tape::parse("t", "- { variables: { amount: 312.0 }, text: the big one }\n- text: any\n").expect("tape");
        let sent = json!({ "amount": 312 });
        assert_eq!(tape.answer(&request("a", &sent)).expect("answer").text, "the big one");
        let other = json!({ "amount": 312.5 });
        assert_eq!(tape.answer(&request("a", &other)).expect("answer").text, "any");
    }

    #[test]
    fn every_root_session_reads_the_tape_from_its_own_start_and_children_read_with_their_root() {
        let tape = Tape::parse("t", "- text: one\n- text: two\n- text: three\n").expect("tape");
        let none = json!({});
        let answer = |session: &str| tape.answer(&in_session(session, "a", &none)).expect("answer").text;
        assert_eq!(answer("a1"), "one");
        assert_eq!(answer("b2"), "one", "another session starts at the top");
        assert_eq!(answer("a1~1"), "two", "a child continues its root's reading");
        assert_eq!(answer("b2"), "two");
        assert_eq!(answer("a1"), "three");
        assert_eq!(tape.leftover(), 0, "every entry was read by some session");
        let error = tape.answer(&in_session("a1", "a", &none)).expect_err("a1 read it all").to_string();
        assert!(error.contains("3 of 3 entries are used"), "{error}");
        assert_eq!(answer("c3"), "one", "a fresh session is not held up by the others");
    }

    #[test]
    fn tool_calls_get_ids() {
        let tape =
            Tape::parse("t", "- tool_calls: [{ name: archmax_advance, args: { to: x, reason: y } }]\n").expect("tape");
        let none = json!({});
        let answer = tape.answer(&request("a", &none)).expect("answer");
        assert_eq!(answer.tool_calls[0].id, "call-1-1");
        assert_eq!(answer.tool_calls[0].args["to"], "x");
    }

    #[test]
    fn malformed_tapes_are_refused() {
        assert!(Tape::parse("t", "- { txt: typo }\n").is_err());
        assert!(Tape::parse("t", "- text: [unclosed\n").is_err());
        let both = Tape::parse("t", "- text: Hello\n- text: Hi\n  chunks: [H, i]\n").err().expect("refused");
        assert!(both.0.contains("entry 2 has both `text` and `chunks`"), "{}", both.0);
    }

    #[test]
    fn chunks_reach_a_watcher_piece_by_piece_and_make_the_text() {
        let tape = Tape::parse("t", "- id: msg-3\n  chunks: [\"Your parcel \", \"\", \"is here.\"]\n").expect("tape");
        let none = json!({});
        let seen = std::sync::Mutex::new(Vec::new());
        let keep = |text: &str, id: Option<&str>| seen.lock().unwrap().push((text.to_string(), id.map(str::to_string)));
        let request = ModelRequest { on_text: Some(crate::model::TextSink(&keep)), ..request("a", &none) };
        let answer = tape.answer(&request).expect("answer");
        assert_eq!(answer.text, "Your parcel is here.");
        let msg = Some("msg-3".to_string());
        assert_eq!(
            seen.into_inner().unwrap(),
            [("Your parcel ".to_string(), msg.clone()), ("is here.".to_string(), msg)]
        );
    }
}

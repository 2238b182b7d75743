//! Recording tapes: a live model's answers written as a tape, so a live run becomes an
//! offline case.
//!
//! A [`Recorder`] wraps any adapter. Each answer it passes on is appended to the tape file
//! as one entry with the matchers filled in (`workflow`, `state`, `role`) and everything a
//! replay needs to give the same answer back: text, tool calls with their provider ids,
//! usage, the reported model, the answer's id and whether it was cut off. Replaying the
//! tape (`--tape`) therefore reproduces the recorded session's events.
//!
//! The file is rewritten whole after every answer (a temporary file renamed over it), so
//! a crash leaves the answers recorded so far, never half an entry. An existing tape is
//! kept and added to: `run --record t.yaml` then `decide --record t.yaml` make one tape
//! that replays both commands. A file that is not a tape is refused before any call.
//!
//! Entries are block YAML whose values are JSON scalars and JSON flow collections (both
//! valid YAML), so what a model wrote — newlines, quotes, `#`, leading spaces — comes back
//! byte for byte.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{CachePlan, ModelAdapter, ModelFuture, ModelRequest, ModelResponse, PromptCache, tape::Tape};

/// The first line of a recorded tape.
const HEADER: &str = "# Recorded by `archmax --record`: one entry per model call, in call order.\n";

/// Why a tape cannot be recorded to a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error(
        "`{path}` is not a tape, so a recording will not add to it ({problem}); name a new file or an existing tape"
    )]
    NotATape { path: String, problem: String },
    #[error("could not read `{path}` to add to it: {error}")]
    Unreadable { path: String, error: std::io::Error },
}

/// An adapter whose answers are also written to a tape file.
pub struct Recorder {
    inner: Arc<dyn ModelAdapter>,
    path: PathBuf,
    /// The file's text so far: what it held before, then each recorded entry.
    text: Mutex<String>,
    /// The first write that failed, reported once by [`Recorder::problem`].
    failed: Mutex<Option<String>>,
    count: Mutex<usize>,
}

impl Recorder {
    /// Records `inner`'s answers to `path`, after what a tape already there holds.
    pub fn new(inner: Arc<dyn ModelAdapter>, path: &Path) -> Result<Recorder, RecordError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => {
                Tape::parse(&shown, &text)
                    .map_err(|error| RecordError::NotATape { path: shown.clone(), problem: error.to_string() })?;
                text
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(RecordError::Unreadable { path: shown, error }),
        };
        let mut text = text;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if text.trim().is_empty() || text.trim() == "[]" {
            text = HEADER.to_string();
        }
        Ok(Recorder {
            inner,
            path: path.to_path_buf(),
            text: Mutex::new(text),
            failed: Mutex::new(None),
            count: Mutex::new(0),
        })
    }

    /// The first failure to write the tape, if any (the run itself went on).
    pub fn problem(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|failed| failed.clone())
    }

    /// Records `inner`'s answers to `path` as a new tape, replacing what the file held
    /// once the first answer is written (`archmax test --record` re-recording a case).
    pub fn afresh(inner: Arc<dyn ModelAdapter>, path: &Path) -> Recorder {
        Recorder {
            inner,
            path: path.to_path_buf(),
            text: Mutex::new(HEADER.to_string()),
            failed: Mutex::new(None),
            count: Mutex::new(0),
        }
    }

    /// How many answers this recorder wrote.
    pub fn recorded(&self) -> usize {
        self.count.lock().map(|count| *count).unwrap_or(0)
    }

    fn keep(&self, request: &ModelRequest<'_>, response: &ModelResponse) {
        let entry = entry(request, response);
        let Ok(mut text) = self.text.lock() else { return };
        text.push_str(&entry);
        match write_whole(&self.path, &text) {
            Ok(()) => {
                if let Ok(mut count) = self.count.lock() {
                    *count += 1;
                }
            }
            Err(error) => {
                if let Ok(mut failed) = self.failed.lock() {
                    failed.get_or_insert_with(|| {
                        format!(
                            "could not write the tape `{}`: {error}; the run went on unrecorded",
                            self.path.display()
                        )
                    });
                }
            }
        }
    }
}

impl ModelAdapter for Recorder {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let answer = self.inner.call(request.clone()).await?;
            self.keep(&request, &answer);
            Ok(answer)
        })
    }

    fn cache_plan(&self, model: Option<&str>, cache: PromptCache<'_>) -> CachePlan {
        self.inner.cache_plan(model, cache)
    }

    fn provider(&self, model: Option<&str>) -> &str {
        self.inner.provider(model)
    }

    fn leftover(&self) -> usize {
        self.inner.leftover()
    }

    fn report(&self) -> Option<String> {
        if let Some(problem) = self.problem() {
            return Some(format!("warning: {problem}"));
        }
        let count = self.recorded();
        Some(format!(
            "recorded {count} model answer{} to the tape {}",
            if count == 1 { "" } else { "s" },
            self.path.display()
        ))
    }
}

/// Writes `text` to `path` through a new temporary file beside it, renamed over it. The
/// temporary file has a random name and is created only if nothing is there (no link is
/// followed), and the rename replaces `path` itself, even when `path` is a link.
fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    for _ in 0..16 {
        let random = getrandom::u64().map_err(|error| std::io::Error::other(error.to_string()))?;
        let temporary = path.with_file_name(format!(".{name}.{random:016x}.recording"));
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        };
        if let Err(error) = file.write_all(text.as_bytes()).and_then(|()| std::fs::rename(&temporary, path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
        return Ok(());
    }
    Err(std::io::Error::other("no free name for the temporary file beside the tape"))
}

/// One tape entry for an answer, as YAML text.
fn entry(request: &ModelRequest<'_>, response: &ModelResponse) -> String {
    let mut out = String::new();
    let mut field = |first: bool, key: &str, value: String| {
        out.push_str(if first { "- " } else { "  " });
        out.push_str(key);
        out.push_str(": ");
        out.push_str(&value);
        out.push('\n');
    };
    field(true, "workflow", scalar(request.workflow));
    field(false, "state", scalar(request.state));
    field(false, "role", request.role.as_str().to_string());
    if !response.text.is_empty() {
        field(false, "text", scalar(&response.text));
    }
    if !response.tool_calls.is_empty() {
        let calls: Vec<String> = response
            .tool_calls
            .iter()
            .map(|call| {
                format!(
                    "\n    - {{ name: {}, args: {}, id: {} }}",
                    scalar(&call.name),
                    flow(&call.args),
                    scalar(&call.id)
                )
            })
            .collect();
        field(false, "tool_calls", calls.concat().trim_start_matches(' ').to_string());
    }
    let usage = response.usage;
    field(
        false,
        "usage",
        format!(
            "{{ input: {}, output: {}, cache_read: {}, cache_write: {} }}",
            usage.input, usage.output, usage.cache_read, usage.cache_write
        ),
    );
    if let Some(model) = &response.model {
        field(false, "model", scalar(model));
    }
    if let Some(id) = &response.id {
        field(false, "id", scalar(id));
    }
    if response.truncated {
        field(false, "truncated", "true".to_string());
    }
    out
}

/// A string as a double-quoted scalar: JSON's escapes are YAML's.
fn scalar(text: &str) -> String {
    Value::from(text).to_string()
}

/// A JSON value as a YAML flow collection (`{"a": 1, "b": [true, null]}`), with a space
/// after every `:` and `,` so no YAML reader can take a key and value for one scalar.
fn flow(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let pairs: Vec<String> =
                map.iter().map(|(key, value)| format!("{}: {}", scalar(key), flow(value))).collect();
            format!("{{{}}}", pairs.join(", "))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(flow).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TokenUsage;
    use crate::session::ToolCall;
    use serde_json::json;

    /// Answers each call with the next scripted response.
    struct Scripted(Mutex<Vec<ModelResponse>>);

    impl ModelAdapter for Scripted {
        fn call<'a>(&'a self, _request: ModelRequest<'a>) -> ModelFuture<'a> {
            let next = self
                .0
                .lock()
                .map(|mut answers| answers.remove(0))
                .map_err(|_| crate::model::ModelError::Response("poisoned".to_string()));
            Box::pin(async move { next })
        }
    }

    fn request<'a>(state: &'a str, variables: &'a Value, session: &'a str) -> ModelRequest<'a> {
        crate::model::tape::tests::in_session(session, state, variables)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("archmax-record-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    #[tokio::test]
    async fn what_is_recorded_replays_byte_for_byte_and_a_second_command_adds_to_it() {
        let hostile = "Line one\n  # not a comment: \"quoted\" \\ back\u{1b}[31m é\n- not a list";
        let answers = vec![
            ModelResponse {
                text: hostile.to_string(),
                tool_calls: vec![ToolCall {
                    id: "call_9".to_string(),
                    name: "read_file".to_string(),
                    args: json!({ "file_path": "a: b.md", "limit": 3, "nested": { "list": [1, null, "x,y"] } }),
                }],
                usage: TokenUsage { input: 1200, output: 30, cache_read: 1000, cache_write: 0 },
                model: Some("gpt-test-2025".to_string()),
                id: Some("chatcmpl-1".to_string()),
                truncated: true,
                ..ModelResponse::default()
            },
            ModelResponse { text: "Done.".to_string(), ..ModelResponse::default() },
        ];
        let dir = scratch("replay");
        let path = dir.join("recorded.yaml");
        let variables = json!({});
        let recorder = Recorder::new(Arc::new(Scripted(Mutex::new(answers.clone()))), &path).expect("recorder");
        let first = recorder.call(request("triage", &variables, "s1")).await.expect("answer");
        assert_eq!(first, answers[0], "the recorder passes the answer on unchanged");
        drop(recorder);
        // A second command records after the first one's entries.
        let recorder = Recorder::new(Arc::new(Scripted(Mutex::new(answers[1..].to_vec()))), &path).expect("recorder");
        recorder.call(request("done", &variables, "s1")).await.expect("answer");
        assert_eq!(recorder.problem(), None);
        assert_eq!(recorder.recorded(), 1);
        assert!(recorder.report().is_some_and(|report| report.starts_with("recorded 1 model answer to the tape")));

        let text = std::fs::read_to_string(&path).expect("the tape");
        let tape = Tape::parse("recorded.yaml", &text).expect("a recorded tape is a tape");
        assert_eq!(tape.len(), 2);
        let replayed = tape.call(request("triage", &variables, "s2")).await.expect("replayed");
        assert_eq!(
            (
                replayed.text.as_str(),
                &replayed.tool_calls,
                replayed.usage,
                &replayed.model,
                &replayed.id,
                replayed.truncated
            ),
            (hostile, &answers[0].tool_calls, answers[0].usage, &answers[0].model, &answers[0].id, true)
        );
        // The matchers were filled in: the `done` entry does not answer `triage`.
        let error = tape.call(request("triage", &variables, "s2")).await.expect_err("only `done` is left");
        assert!(error.to_string().contains("state `triage`"), "{error}");
        assert_eq!(tape.call(request("done", &variables, "s2")).await.expect("replayed").text, "Done.");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_link_planted_where_a_tape_goes_is_replaced_never_followed() {
        let dir = scratch("link");
        let target = dir.join("precious.txt");
        std::fs::write(&target, "keep me\n").expect("write");
        let path = dir.join("case.tape.yaml");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        write_whole(&path, "- text: recorded\n").expect("written");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep me\n", "the link's target is untouched");
        assert!(!std::fs::symlink_metadata(&path).expect("stat").file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "- text: recorded\n");
        let leftovers = std::fs::read_dir(&dir).expect("list").filter_map(Result::ok);
        assert!(leftovers.filter(|entry| entry.file_name().to_string_lossy().ends_with(".recording")).count() == 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_is_not_a_tape_is_refused_and_left_alone() {
        let dir = scratch("refuse");
        let path = dir.join("notes.yaml");
        std::fs::write(&path, "title: my notes\n").expect("write");
        let inner: Arc<dyn ModelAdapter> = Arc::new(Scripted(Mutex::new(Vec::new())));
        match Recorder::new(inner, &path) {
            Err(RecordError::NotATape { path: named, problem }) => {
                assert!(named.ends_with("notes.yaml") && !problem.is_empty(), "{named}: {problem}")
            }
            Err(other) => panic!("expected a refusal naming the file, got {other}"),
            Ok(_) => panic!("a non-tape file was accepted"),
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "title: my notes\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

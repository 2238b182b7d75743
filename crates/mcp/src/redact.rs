//! Keeping a server's secrets out of everything the host says: the redactor, and the
//! bounded ring that holds the tail of a stdio child's stderr.
//!
//! The one thing to know: redaction happens before text leaves the host (an error, a
//! catalog problem, a log line, an answer), never when it is stored, and a tail cut out of
//! a longer stream also hides the part of a secret the cut left at either edge.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// How much of a child's stderr is kept.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// What a hidden value is replaced by.
pub const REDACTED: &str = "[redacted]";

/// The values one server must never reveal: its `env` table's values, the values of its
/// `env_vars` and its bearer token.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// Longest first, so a value containing another is hidden whole.
    secrets: Arc<Vec<String>>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = values.into_iter().filter(|value| !value.is_empty()).collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets: Arc::new(secrets) }
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in self.secrets.iter() {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// A fragment cut out of a longer text: also hides a secret's end at its start (when
    /// `cut_at_start`) and a secret's beginning at its end.
    fn redact_fragment(&self, text: &str, cut_at_start: bool) -> String {
        let mut text = self.redact(text);
        for secret in self.secrets.iter() {
            if cut_at_start && let Some(overlap) = edge_overlap(secret, &text, Edge::Start) {
                text.replace_range(..overlap, REDACTED);
            }
            if let Some(overlap) = edge_overlap(secret, &text, Edge::End) {
                let start = text.len() - overlap;
                text.replace_range(start.., REDACTED);
            }
        }
        text
    }
}

enum Edge {
    Start,
    End,
}

/// Parts of a secret shorter than this at a fragment's edge are left alone: they reveal
/// next to nothing, and hiding them would mangle ordinary text.
const MIN_EDGE_OVERLAP: usize = 4;

/// The length of the longest proper part of `secret` that `text` starts with (its end)
/// or ends with (its beginning).
fn edge_overlap(secret: &str, text: &str, edge: Edge) -> Option<usize> {
    let longest = secret.len().saturating_sub(1).min(text.len());
    (MIN_EDGE_OVERLAP..=longest).rev().find(|&length| match edge {
        Edge::Start => {
            secret.is_char_boundary(secret.len() - length) && text.starts_with(&secret[secret.len() - length..])
        }
        Edge::End => secret.is_char_boundary(length) && text.ends_with(&secret[..length]),
    })
}

#[derive(Default)]
struct Ring {
    bytes: VecDeque<u8>,
    /// Bytes were dropped from the front.
    wrapped: bool,
}

/// The last [`STDERR_TAIL_BYTES`] a child wrote to stderr.
#[derive(Clone)]
pub struct StderrTail {
    ring: Arc<Mutex<Ring>>,
    finished: watch::Receiver<bool>,
}

impl StderrTail {
    /// Starts draining `stderr` into a ring (the task ends at end of file).
    pub fn capture(mut stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> StderrTail {
        let ring = Arc::new(Mutex::new(Ring::default()));
        let (finish, finished) = watch::channel(false);
        let filling = Arc::clone(&ring);
        tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(read @ 1..) = stderr.read(&mut chunk).await {
                let mut ring = filling.lock().unwrap_or_else(PoisonError::into_inner);
                ring.bytes.extend(&chunk[..read]);
                let excess = ring.bytes.len().saturating_sub(STDERR_TAIL_BYTES);
                if excess > 0 {
                    ring.bytes.drain(..excess);
                    ring.wrapped = true;
                }
            }
            let _ = finish.send(true);
        });
        StderrTail { ring, finished }
    }

    /// Waits (at most `wait`) for the child to close its stderr, so a tail read after a
    /// crash holds its last words.
    pub async fn settle(&self, wait: std::time::Duration) {
        let mut finished = self.finished.clone();
        let _ = tokio::time::timeout(wait, finished.wait_for(|done| *done)).await;
    }

    /// The tail as text, redacted and trimmed; empty when the child wrote nothing.
    pub fn text(&self, redactor: &Redactor) -> String {
        let (bytes, wrapped) = {
            let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            (ring.bytes.iter().copied().collect::<Vec<u8>>(), ring.wrapped)
        };
        let whole = String::from_utf8_lossy(&bytes);
        // After a wrap the first line is a fragment: drop it when a whole line follows;
        // otherwise the front is cut mid-line and may hold the end of a secret.
        let (text, cut_at_start) = match whole.find('\n') {
            Some(newline) if wrapped && newline + 1 < whole.len() => (&whole[newline + 1..], false),
            _ => (&whole[..], wrapped),
        };
        redactor.redact_fragment(text, cut_at_start).trim().to_string()
    }
}

/// `message`, then the stderr tail when there is one.
pub fn with_tail(message: String, tail: &str) -> String {
    if tail.is_empty() { message } else { format!("{message}; its stderr ends with:\n{tail}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_replaced_longest_first() {
        let redactor = Redactor::new(["hunter2".to_string(), "hunter2-long".to_string(), String::new()]);
        assert_eq!(redactor.redact("a hunter2-long b hunter2 c"), "a [redacted] b [redacted] c");
        assert_eq!(redactor.redact("nothing here"), "nothing here");
    }

    #[test]
    fn a_fragment_hides_secrets_cut_at_its_edges() {
        let redactor = Redactor::new(["s3cr3t-value".to_string()]);
        assert_eq!(redactor.redact_fragment("t-value rest", true), "[redacted] rest");
        assert_eq!(redactor.redact_fragment("t-value rest", false), "t-value rest");
        assert_eq!(redactor.redact_fragment("rest s3cr", false), "rest [redacted]");
    }

    #[tokio::test]
    async fn the_tail_keeps_the_last_bytes_and_whole_lines() {
        let mut text = String::new();
        for line in 0..1000 {
            text.push_str(&format!("line {line} with TOKEN123\n"));
        }
        let tail = StderrTail::capture(std::io::Cursor::new(text.into_bytes()));
        tail.settle(std::time::Duration::from_secs(5)).await;
        let shown = tail.text(&Redactor::new(["TOKEN123".to_string()]));
        // Whole lines of the last 4 KiB only (each line is at most 23 bytes before redaction).
        let lines = shown.lines().count();
        assert!(lines <= STDERR_TAIL_BYTES / "line 999 with TOKEN123\n".len(), "{lines}");
        assert!(shown.ends_with("line 999 with [redacted]"), "{shown}");
        assert!(shown.starts_with("line "), "{shown}");
        assert!(!shown.contains("TOKEN"), "{shown}");
    }
}

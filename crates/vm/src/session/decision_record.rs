//! What a person saw when they decided: the decision record kept on the trail step the
//! decision made.
//!
//! The one thing to know: evidence files stay writable after a decision (the next state
//! may rewrite the memo the approver read), so the record keeps its own copy of what
//! was shown: each file's text head, its size and its SHA-256 digest (an image keeps its
//! digest and size only). The copy is bounded ([`EVIDENCE_KEPT`] bytes of text per
//! file, [`MAX_EVIDENCE`] files), and a trail step written before records existed
//! simply has none.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{DecisionChoice, PendingDecision};
use archmax_stdlib::vfs::Vfs;

/// The most bytes of one evidence file's text a record keeps.
pub const EVIDENCE_KEPT: usize = 64 * 1024;
/// The most evidence files a record keeps (a decision declares a few).
pub const MAX_EVIDENCE: usize = 16;
/// The largest file whose digest a record keeps (a larger one keeps its text head and
/// size: reading all of it at every decision is not worth its digest).
pub const HASHED_MAX: usize = 32 * 1024 * 1024;

/// The decision record a person decided on, as it stood then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// The human state decided.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The record's number in the session ([`PendingDecision::seq`]).
    pub seq: u64,
    /// The instructions shown, as written then.
    pub instructions: String,
    /// The transition taken, with its description.
    pub choice: DecisionChoice,
    /// When the record was opened (RFC 3339).
    pub opened_at: String,
    /// The evidence files as shown when the decision was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceSeen>,
}

/// One evidence file as the decider saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceSeen {
    pub path: String,
    /// The file's size in bytes (0 when it could not be read).
    #[serde(default)]
    pub size: u64,
    /// The SHA-256 of the whole file, hex, when it was read (and not over [`HASHED_MAX`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The file's first [`EVIDENCE_KEPT`] bytes as text (none for an image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why the file could not be read then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

impl DecisionRecord {
    /// The record of deciding `choice` on `decision`, its evidence read from `files`.
    pub fn of(decision: &PendingDecision, choice: &DecisionChoice, files: Option<&dyn Vfs>) -> DecisionRecord {
        let evidence = decision
            .evidence
            .iter()
            .take(MAX_EVIDENCE)
            .map(|path| match files {
                Some(files) => EvidenceSeen::read(files, path),
                None => EvidenceSeen::unreadable(path, "the session's files could not be opened"),
            })
            .collect();
        DecisionRecord {
            state: decision.state.clone(),
            title: decision.title.clone(),
            seq: decision.seq,
            instructions: decision.instructions.clone(),
            choice: choice.clone(),
            opened_at: decision.created_at.clone(),
            evidence,
        }
    }
}

impl EvidenceSeen {
    fn read(files: &dyn Vfs, path: &str) -> EvidenceSeen {
        match files.read_head(path, HASHED_MAX) {
            Ok((bytes, size)) => {
                let sha256 = (size <= bytes.len() as u64).then(|| archmax_program::hex::hex(&Sha256::digest(&bytes)));
                let text = (!is_image(path)).then(|| {
                    let head = &bytes[..bytes.len().min(EVIDENCE_KEPT)];
                    // A cut may split a character: keep the whole ones.
                    match std::str::from_utf8(head) {
                        Ok(text) => text.to_string(),
                        Err(error) if error.error_len().is_none() => {
                            String::from_utf8_lossy(&head[..error.valid_up_to()]).into_owned()
                        }
                        Err(_) => String::from_utf8_lossy(head).into_owned(),
                    }
                });
                EvidenceSeen { path: path.to_string(), size, sha256, text, unreadable: None }
            }
            Err(error) => EvidenceSeen::unreadable(path, &error.to_string()),
        }
    }

    fn unreadable(path: &str, why: &str) -> EvidenceSeen {
        EvidenceSeen { path: path.to_string(), size: 0, sha256: None, text: None, unreadable: Some(why.to_string()) }
    }
}

/// Whether `path` names an image (kept by digest, not by text).
fn is_image(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp"].iter().any(|extension| lower.ends_with(extension))
}

#[cfg(test)]
mod tests {
    use super::*;
    use archmax_stdlib::vfs::MemoryVfs;

    fn decision() -> PendingDecision {
        PendingDecision {
            state: "review".into(),
            title: Some("Review".into()),
            seq: 2,
            instructions: "Check the memo.".into(),
            approvers: Vec::new(),
            transitions: Vec::new(),
            evidence: vec!["memo.md".into(), "chart.png".into(), "gone.md".into()],
            created_at: "2025-03-08T12:00:00Z".into(),
            child: None,
        }
    }

    #[test]
    fn a_record_keeps_the_text_and_digest_of_what_was_shown() {
        let files = MemoryVfs::default();
        files.write("memo.md", "Refund 64.00 EUR €".as_bytes()).unwrap();
        files.write("chart.png", b"\x89PNG").unwrap();
        let choice = DecisionChoice { to: "send".into(), description: Some("Send it.".into()), kind: "approve".into() };
        let record = DecisionRecord::of(&decision(), &choice, Some(&files));
        assert_eq!(
            (record.seq, record.instructions.as_str(), record.choice.to.as_str()),
            (2, "Check the memo.", "send")
        );
        assert_eq!(record.evidence[0].text.as_deref(), Some("Refund 64.00 EUR €"));
        assert_eq!(record.evidence[0].sha256.as_deref().map(str::len), Some(64));
        assert_eq!((record.evidence[1].text.clone(), record.evidence[1].size), (None, 4), "an image by digest");
        assert!(record.evidence[2].unreadable.is_some());
        // A later rewrite of the memo does not change what the record says.
        files.write("memo.md", b"rewritten").unwrap();
        assert_eq!(record.evidence[0].text.as_deref(), Some("Refund 64.00 EUR €"));
    }

    #[test]
    fn a_long_file_is_cut_on_a_character() {
        let files = MemoryVfs::default();
        let mut text = "a".repeat(EVIDENCE_KEPT - 1);
        text.push('é');
        files.write("memo.md", text.as_bytes()).unwrap();
        let seen = EvidenceSeen::read(&files, "memo.md");
        assert_eq!(seen.text.map(|text| text.len()), Some(EVIDENCE_KEPT - 1));
        assert_eq!(seen.size, EVIDENCE_KEPT as u64 + 1);
    }
}

//! Shared records: small values with an expiry that every runner on one store sees.
//!
//! Runners that share a store (one sessions folder, one database) also need to agree on
//! a little state that is not a session: which signed webhook requests were already
//! accepted (so a replay is refused by every runner, also after a restart), and who is
//! signed in to the inbox (so a cookie works on every runner and signing out ends it
//! everywhere). A [`Record`] is such a value: a [`RecordKind`], a key, at most
//! [`MAX_RECORD_BYTES`] of value, and the instant it expires. The store offers three
//! operations on them ([`SessionStore::claim_record`], [`SessionStore::read_record`],
//! [`SessionStore::remove_record`]):
//!
//! - **claim**: keep the record unless a live one holds its key; exactly one of several
//!   runners claiming one key at once wins, whatever process each runs in;
//! - **read**: the value of a live record (an expired one reads as absent);
//! - **remove**: forget it.
//!
//! The one thing to know: records are bounded. Each kind holds at most
//! [`RecordKind::capacity`] live records; expired ones are pruned as claims are made, and
//! a claim past the capacity is refused with [`StoreError::RecordsFull`] instead of
//! growing the store, so a flood cannot fill the disk or the database. Times are
//! milliseconds since the epoch as the caller's clock tells them.
//!
//! [`SessionStore::claim_record`]: super::SessionStore::claim_record
//! [`SessionStore::read_record`]: super::SessionStore::read_record
//! [`SessionStore::remove_record`]: super::SessionStore::remove_record

use super::StoreError;

/// The largest value a record holds, in bytes.
pub(crate) const MAX_RECORD_BYTES: usize = 4096;
/// The longest key, in bytes.
pub(crate) const MAX_RECORD_KEY_BYTES: usize = 128;

/// What a record is for; each kind has its own keys and its own capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    /// A webhook signature accepted within its timestamp's tolerance (key: the
    /// signature's digest), kept until the tolerance has passed.
    WebhookReplay,
    /// A signed-in inbox session (key: the digest of the cookie's session id).
    InboxSession,
    /// A key every runner of the inbox shares (the sign-in form's CSRF key).
    InboxKey,
    /// A `waiting` notification claimed for one pending decision (key: a digest of the
    /// notifier, the session and the decision's number), so that of the runners on one
    /// store exactly one sends it.
    NotifyWait,
    /// Records the conformance suite claims; a small capacity, so the bound is tested.
    Conformance,
}

impl RecordKind {
    pub const ALL: [RecordKind; 5] = [
        RecordKind::WebhookReplay,
        RecordKind::InboxSession,
        RecordKind::InboxKey,
        RecordKind::NotifyWait,
        RecordKind::Conformance,
    ];

    /// Whether a record of this kind still holds its key against a claim after the
    /// filesystem store's seal key is rotated (when the previous key is still listed).
    /// True for replays, where claimed-once is the point; other kinds start afresh under
    /// the new key (a sign-in key is simply made again).
    pub fn holds_across_rotation(self) -> bool {
        matches!(self, RecordKind::WebhookReplay | RecordKind::NotifyWait | RecordKind::Conformance)
    }

    /// The kind's name, as stores keep it (a folder name, a column value).
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::WebhookReplay => "webhook-replay",
            RecordKind::InboxSession => "inbox-session",
            RecordKind::InboxKey => "inbox-key",
            RecordKind::NotifyWait => "notify-wait",
            RecordKind::Conformance => "conformance",
        }
    }

    /// The most live records of this kind a store holds.
    pub fn capacity(self) -> usize {
        match self {
            RecordKind::WebhookReplay => 100_000,
            RecordKind::InboxSession => 10_000,
            RecordKind::InboxKey => 16,
            RecordKind::NotifyWait => 100_000,
            RecordKind::Conformance => 8,
        }
    }
}

/// One record to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    /// Letters, digits, `-` and `_`; at most [`MAX_RECORD_KEY_BYTES`].
    pub key: String,
    pub value: Vec<u8>,
    /// When the record stops being live, in milliseconds since the epoch.
    pub expires_ms: u64,
}

impl Record {
    /// Refuses a key a store could not keep as it is, or a value over the size bound.
    pub fn check(&self) -> Result<(), StoreError> {
        check_record_key(self.kind, &self.key)?;
        if self.value.len() > MAX_RECORD_BYTES {
            return Err(StoreError::Record {
                kind: self.kind.as_str(),
                key: self.key.clone(),
                message: format!("its value is {} bytes; at most {MAX_RECORD_BYTES} are kept", self.value.len()),
            });
        }
        Ok(())
    }
}

/// Refuses a key that is empty, too long, or holds anything but letters, digits, `-`
/// and `_` (so it is a safe file name and never a path).
pub fn check_record_key(kind: RecordKind, key: &str) -> Result<(), StoreError> {
    let plain = !key.is_empty()
        && key.len() <= MAX_RECORD_KEY_BYTES
        && key.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if plain {
        Ok(())
    } else {
        Err(StoreError::Record {
            kind: kind.as_str(),
            key: key.chars().take(MAX_RECORD_KEY_BYTES).collect(),
            message: format!("a record key is 1 to {MAX_RECORD_KEY_BYTES} letters, digits, `-` or `_`"),
        })
    }
}

/// The refusal of a claim past `kind`'s capacity.
pub fn records_full(kind: RecordKind) -> StoreError {
    StoreError::RecordsFull { kind: kind.as_str(), capacity: kind.capacity() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_key_is_a_plain_name_and_a_value_is_bounded() {
        let record = |key: &str, bytes: usize| Record {
            kind: RecordKind::Conformance,
            key: key.to_string(),
            value: vec![0; bytes],
            expires_ms: 1,
        };
        assert!(record("ab-12_CD", MAX_RECORD_BYTES).check().is_ok());
        for bad in ["", "a/b", "..", "a.b", "é", &"a".repeat(MAX_RECORD_KEY_BYTES + 1)] {
            assert!(matches!(record(bad, 0).check(), Err(StoreError::Record { .. })), "{bad:?}");
        }
        let large = record("a", MAX_RECORD_BYTES + 1).check().expect_err("too large");
        assert!(large.to_string().contains("at most 4096"), "{large}");
    }

    #[test]
    fn kinds_have_distinct_names() {
        let mut names: Vec<&str> = RecordKind::ALL.iter().map(|kind| kind.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RecordKind::ALL.len());
    }
}

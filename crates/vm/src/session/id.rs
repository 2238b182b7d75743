//! Session ids: minting them, checking the ones callers supply, and naming children.
//!
//! [`SessionId`] is an id that passed the check (or was minted, or named after a
//! checked parent): code past the turn boundary works with it and never re-checks.
//!
//! A session id doubles as a directory name in the filesystem store and as the first
//! segment of the session's workspace paths, so [`check_session_id`] is the gate every
//! caller-supplied id must pass before it reaches a store: it refuses ids that could
//! escape the store, collide with a reserved workspace root or shadow a mount.

/// Workspace root names no session id may start with (the compiler's zone table).
pub use archmax_program::zones::RESERVED_ROOTS;

/// A session's id, checked: parsed from a caller's text ([`SessionId::parse`]), minted
/// ([`SessionId::mint`]) or derived from a checked parent ([`SessionId::child`]).
/// Stored as its plain text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Checks a caller-supplied id ([`check_session_id`]).
    pub fn parse(id: &str, mount_names: &[&str]) -> Result<SessionId, String> {
        check_session_id(id, mount_names)?;
        Ok(SessionId(id.to_string()))
    }

    /// An id a store already holds (listed or loaded), taken as the store has it: the
    /// store accepted it when the session was created. Not for text from a caller.
    pub fn from_store(id: impl Into<String>) -> SessionId {
        SessionId(id.into())
    }

    /// A fresh random id ([`new_session_id`]).
    pub fn mint() -> Result<SessionId, MintError> {
        new_session_id().map(SessionId)
    }

    /// The id of this session's `ordinal`-th sub-workflow call: `<id>~<ordinal>`.
    pub fn child(&self, ordinal: u64) -> SessionId {
        SessionId(child_session_id(&self.0, ordinal))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.pad(&self.0)
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for SessionId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

/// The longest session id accepted, in bytes.
pub(crate) const MAX_SESSION_ID_BYTES: usize = 200;

/// The operating system could not supply the random bits a fresh id needs.
#[derive(Debug, thiserror::Error)]
#[error("cannot mint a session id: the operating system's random source failed ({0}); pass an id of your own")]
pub struct MintError(getrandom::Error);

/// Mints a fresh id: `session-` and 32 lowercase hex digits (128 bits from the operating
/// system's random source). There is no weaker fallback: an id that could be guessed
/// would let one caller reach another's session, so a failing source is an error.
pub fn new_session_id() -> Result<String, MintError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(MintError)?;
    Ok(format!("session-{:032x}", u128::from_le_bytes(bytes)))
}

/// The shape of every session id, as refusals name it. Beside it, an id is never `.` or
/// `..` and never starts with a reserved workspace root or a mount's name.
pub const SESSION_ID_PATTERN: &str = "^[A-Za-z0-9._~:@-]{1,200}$";

/// Checks a caller-supplied session id; the error says in one sentence why it is
/// refused, then names [`SESSION_ID_PATTERN`].
///
/// `mount_names` are the workspace's mount keys or their first segments (`skills`,
/// `/catalogs/eu/`); an id whose first segment names one is refused. An id is a name,
/// never a path: a `/` anywhere, a leading one included, is refused, so no id can
/// reach outside the store or into another session's folder.
pub fn check_session_id(id: &str, mount_names: &[&str]) -> Result<(), String> {
    id_problem(id, mount_names)
        .map_or(Ok(()), |problem| Err(format!("{problem} A session id matches `{SESSION_ID_PATTERN}`.")))
}

/// What is wrong with `id`, in one sentence, or `None` when it is a usable id.
fn id_problem(id: &str, mount_names: &[&str]) -> Option<String> {
    if id.is_empty() {
        return Some("A session id must not be empty.".to_string());
    }
    if id.len() > MAX_SESSION_ID_BYTES {
        return Some(format!("The session id is {} bytes long; at most {MAX_SESSION_ID_BYTES} are allowed.", id.len()));
    }
    if id.starts_with('/') {
        return Some("The session id starts with `/`: an id is a name, not a path.".to_string());
    }
    if let Some(bad) = id.chars().find(|&c| !is_session_id_char(c)) {
        return Some(format!(
            "The session id contains `{}`; only letters, digits, `.`, `_`, `~`, `:`, `@` and `-` are allowed.",
            bad.escape_default()
        ));
    }
    if id == "." || id == ".." {
        return Some(format!("A session id must not be `{id}`."));
    }
    if RESERVED_ROOTS.contains(&id) {
        return Some(format!("A session id must not be `{id}`, a reserved workspace root."));
    }
    if mount_names.iter().any(|mount| mount_first_segment(mount) == id) {
        return Some(format!("A session id must not be `{id}`, the name of a workspace mount."));
    }
    None
}

/// `/` is not among them: an id names one folder of the store, and a nested id would
/// land inside another session's folder.
fn is_session_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | ':' | '@' | '-')
}

fn mount_first_segment(mount: &str) -> &str {
    mount.trim_start_matches('/').split('/').next().unwrap_or("")
}

/// The id of a session's `ordinal`-th sub-workflow call: `<parent>~<ordinal>`.
pub(crate) fn child_session_id(parent: &str, ordinal: u64) -> String {
    format!("{parent}~{ordinal}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_have_the_documented_shape_and_differ() {
        let first = new_session_id().expect("random source");
        let second = new_session_id().expect("random source");
        assert_ne!(first, second);
        for id in [&first, &second] {
            let hex = id.strip_prefix("session-").expect("prefix");
            assert_eq!(hex.len(), 32);
            assert!(hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)), "{id}");
            assert_eq!(check_session_id(id, &[]), Ok(()));
        }
    }

    #[test]
    fn accepts_ordinary_ids() {
        for id in ["abc", "tenant-1.conv:42@x", "a.b_c~1", "s~review:triage:2", "scratchpad-not-quite"] {
            assert_eq!(check_session_id(id, &["skills"]), Ok(()), "{id}");
        }
    }

    #[test]
    fn refuses_bad_ids_with_one_sentence() {
        let mounts = ["skills", "/catalogs/eu/", "/AGENTS.md"];
        let long = "a".repeat(MAX_SESSION_ID_BYTES + 1);
        for id in [
            "",
            "/abs",
            "///",
            "a/../b",
            "..",
            "./a",
            "a//b",
            "a/",
            "scratchpad",
            "/artifacts/x",
            "_specs",
            "workflows/w",
            "skills/x",
            "catalogs",
            "AGENTS.md",
            "has space",
            "tab\t",
            "é",
            "back\\slash",
            "tenant/nested",
            long.as_str(),
        ] {
            let reason = check_session_id(id, &mounts).expect_err(id);
            assert!(reason.ends_with('.') && !reason.contains('\n'), "{id}: {reason}");
            assert!(reason.contains(SESSION_ID_PATTERN), "{id}: the pattern is named: {reason}");
        }
        assert_eq!(check_session_id(&"a".repeat(MAX_SESSION_ID_BYTES), &[]), Ok(()));
    }

    #[test]
    fn a_session_id_is_only_made_from_text_that_passes_the_check() {
        assert_eq!(SessionId::parse("tenant-1.conv:42", &[]).expect("ordinary").as_str(), "tenant-1.conv:42");
        assert!(SessionId::parse("a/../b", &[]).is_err());
        assert!(SessionId::parse("skills", &["skills"]).is_err());
        let minted = SessionId::mint().expect("random source");
        assert!(SessionId::parse(&minted, &[]).is_ok());
        assert_eq!(SessionId::parse("p", &[]).expect("ok").child(2), "p~2");
        let stored = serde_json::to_string(&minted).expect("json");
        assert_eq!(stored, format!("\"{minted}\""), "stored as its plain text");
    }

    #[test]
    fn child_ids_append_the_ordinal() {
        assert_eq!(child_session_id("session-1", 3), "session-1~3");
        assert_eq!(child_session_id("p~1", 2), "p~1~2");
        assert_eq!(check_session_id(&child_session_id("p", 1), &[]), Ok(()));
    }
}

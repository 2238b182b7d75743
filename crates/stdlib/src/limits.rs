//! Resource caps: how much one tool call may read, write, scan, list or expand, how
//! much a session may keep in its own writable areas, and how much a writable host mount
//! may hold.
//!
//! The one thing to know: every bound is checked *before* the work it bounds (a size from
//! `stat`, a head of the file, or arithmetic on lengths), so exceeding one is a tool
//! error the model reads, never an allocation the process cannot survive. The defaults
//! below are the documented values; a host changes them through [`Limits`], which the
//! runtime carries on every [`crate::tools::ToolContext`]. The workflow schema has no
//! keys for them.

/// One mebibyte, the unit the defaults are written in.
pub const MIB: u64 = 1024 * 1024;

/// Largest file a tool reads, writes, copies, moves or edits (`read_file`, `grep` per
/// file, `write_file` content, the result of `edit_file`, a copy's source): 10 MiB.
pub const MAX_FILE_BYTES: u64 = 10 * MIB;

/// Largest total size of one call's string arguments after `${{…}}` substitution:
/// 10 MiB, the most any one file could take of it.
pub const MAX_SUBSTITUTED_BYTES: u64 = 10 * MIB;

/// Most bytes one `grep` call reads across all the files it searches: 64 MiB.
pub const MAX_GREP_SCANNED_BYTES: u64 = 64 * MIB;

/// Most lines one `ls`, `glob` or `grep` answer lists: 1000.
pub const MAX_LISTED_ENTRIES: usize = 1000;

/// Largest total size of the files a session keeps in its own writable areas (the
/// session folder outside the runtime's folders; host mounts are not counted): 256 MiB.
pub const MAX_SESSION_BYTES: u64 = 256 * MIB;

/// Most files a session keeps in its own writable areas: 10 000.
pub const MAX_SESSION_FILES: usize = 10_000;

/// Largest total size of the files one writable host mount holds: 256 MiB, the same
/// bound as a session's own files. A write that would take a writable mount past it is
/// refused; what the mount already held when the host mounted it counts too.
pub const MAX_MOUNT_BYTES: u64 = 256 * MIB;

/// Most files one writable host mount holds: 10 000.
pub const MAX_MOUNT_FILES: usize = 10_000;

/// Longest glob pattern (`glob`'s `pattern`, `grep`'s `glob`) a model may pass, in
/// characters: 1000.
pub const MAX_GLOB_PATTERN_CHARS: usize = 1000;
/// Largest total size of a session's variables (each name plus its value as JSON):
/// 10 MiB. `archmax_set_variables` refuses a write that would pass it, so a model cannot
/// multiply one large value into many (`{v2: "${{v1}}"}`, `{v3: "${{v1}}"}`, …).
pub const MAX_VARIABLE_BYTES: u64 = 10 * MIB;

/// Most items a `write_todos` plan holds: 100. Fixed; the plan is kept in the session's
/// state and shown to the model again, so it stays small.
pub const MAX_TODOS: usize = 100;

/// Most characters of one todo's `content`: 1000. Fixed, like [`MAX_TODOS`].
pub const MAX_TODO_CHARS: usize = 1000;

/// Bytes of a file read to tell text from binary before deciding to read the rest.
pub const CLASSIFY_HEAD_BYTES: usize = 8 * 1024;

/// The bounds one tool call runs under. [`Limits::default`] holds the constants above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// [`MAX_FILE_BYTES`].
    pub file_bytes: u64,
    /// [`MAX_SUBSTITUTED_BYTES`].
    pub substituted_bytes: u64,
    /// [`MAX_GREP_SCANNED_BYTES`].
    pub grep_scanned_bytes: u64,
    /// [`MAX_LISTED_ENTRIES`].
    pub listed_entries: usize,
    /// [`MAX_SESSION_BYTES`].
    pub session_bytes: u64,
    /// [`MAX_SESSION_FILES`].
    pub session_files: usize,
    /// [`MAX_MOUNT_BYTES`].
    pub mount_bytes: u64,
    /// [`MAX_MOUNT_FILES`].
    pub mount_files: usize,
    /// [`MAX_GLOB_PATTERN_CHARS`].
    pub glob_pattern_chars: usize,
    /// [`MAX_VARIABLE_BYTES`].
    pub variable_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            file_bytes: MAX_FILE_BYTES,
            substituted_bytes: MAX_SUBSTITUTED_BYTES,
            grep_scanned_bytes: MAX_GREP_SCANNED_BYTES,
            listed_entries: MAX_LISTED_ENTRIES,
            session_bytes: MAX_SESSION_BYTES,
            session_files: MAX_SESSION_FILES,
            mount_bytes: MAX_MOUNT_BYTES,
            mount_files: MAX_MOUNT_FILES,
            glob_pattern_chars: MAX_GLOB_PATTERN_CHARS,
            variable_bytes: MAX_VARIABLE_BYTES,
        }
    }
}

/// A bound's value as an error names it: `10 MiB (10485760 bytes)`, or the bytes alone
/// when they are not a whole number of mebibytes.
pub fn bound_in_words(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB ({bytes} bytes)", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_documented_constants() {
        let limits = Limits::default();
        assert_eq!(limits.file_bytes, 10_485_760);
        assert_eq!(limits.substituted_bytes, 10_485_760);
        assert_eq!(limits.grep_scanned_bytes, 67_108_864);
        assert_eq!(limits.listed_entries, 1000);
        assert_eq!(limits.session_bytes, 268_435_456);
        assert_eq!(limits.session_files, 10_000);
        assert_eq!(limits.mount_bytes, 268_435_456);
        assert_eq!(limits.mount_files, 10_000);
        assert_eq!(limits.glob_pattern_chars, 1000);
        assert_eq!(limits.variable_bytes, 10_485_760);
    }

    #[test]
    fn bounds_read_in_mebibytes_when_whole() {
        assert_eq!(bound_in_words(MAX_FILE_BYTES), "10 MiB (10485760 bytes)");
        assert_eq!(bound_in_words(1500), "1500 bytes");
    }
}

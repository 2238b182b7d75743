//! # archmax-stdlib
//!
//! The runtime's standard library: the platform prompt every governed session reads
//! (how to move, wait, decide and fail), the agent's workspace as a virtual file system
//! ([`vfs`]), and the built-in tools ([`tools`]) with their JSON schemas. The tool
//! *vocabulary* (names, default grants, path-argument declarations) is data in
//! `archmax_program::tools`, so the compiler and the runtime agree on it. Every size a
//! tool reads, writes, scans or lists is bounded by [`limits`].

pub mod limits;
pub mod tools;
pub mod vfs;

/// The compiled-in platform prompt, Markdown. Blocks between `<!-- top-level-only -->`
/// and `<!-- /top-level-only -->` are dropped for sub-workflow children. A workspace
/// replaces it with `.platform/system/GRAPH_STATE.md`.
pub const PLATFORM_PROMPT: &str = include_str!("platform-prompt.md");

#[cfg(test)]
mod tests {
    use super::PLATFORM_PROMPT;

    #[test]
    fn top_level_blocks_are_balanced() {
        let opens = PLATFORM_PROMPT.matches("<!-- top-level-only -->").count();
        let closes = PLATFORM_PROMPT.matches("<!-- /top-level-only -->").count();
        assert_eq!(opens, closes);
        assert!(opens > 0);
    }
}

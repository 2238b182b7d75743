//! Attacks on a session, as tables. [`attacks`] holds what a hostile model does: each row
//! is a small workspace holding a protected file, a scripted tape playing the attacker,
//! and a [`Setup`] (sessions in memory or on disk, the runtime's limits, files planted
//! before the run). Every row runs through the whole runtime and must end with (a) the
//! attack refused as its [`Refusal`] says, (b) the turn finished, and (c) the protected
//! text in no event, no session's record and no file a session holds, on disk or not.
//! [`tamperings`] holds what a malicious local user does to a session's files between
//! turns; the next turn must be refused as corrupt, with nothing rewritten and the same
//! no-leak check. The last
//! test edits a built artifact as an attacker with no key would.
//!
//! To add a row: write its workspace with [`workspace`] (or your own files), its tape, and
//! push an [`Attack`] onto one of the row lists [`attacks`] gathers. `Refusal::Neither` is
//! for attacks that must succeed silently without the secret (a search over a folder
//! skips a file it may not read); `unnamed` lists text no answer that worked may contain
//! (a hidden file's name).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use archmax_compiler::artifact::{self, ArtifactError, SecretKey, TrustedKeys};
use archmax_compiler::program::Sym;
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::runtime::{Outcome, RunError};
use archmax_vm::session::SessionStore;
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::stdlib::limits::Limits;
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

/// The text inside every protected file; it must never reach the model or the record.
const SECRET: &str = "zq-7731-negotiated-rate-3.85";
/// The protected file.
const PROTECTED: &str = "reference/internal/rates.md";
/// The file outside the workspace that holds the secret too; links planted in a session
/// point at it.
const OUTSIDE_FILE: &str = "secret.md";
/// The session every row runs.
const SESSION: &str = "s1";

/// One attack.
pub struct Attack {
    pub name: &'static str,
    /// The workflow the session starts.
    pub workflow: &'static str,
    /// Every file of the workspace, `archmax.toml` and mount contents included.
    pub files: Vec<(&'static str, String)>,
    /// The attacker's tape (YAML).
    pub tape: &'static str,
    /// How the attack must be turned away.
    pub refusal: Refusal,
    /// Text no tool answer may contain.
    pub unnamed: &'static [&'static str],
    pub setup: Setup,
}

/// How an attack is turned away.
#[derive(Clone, Copy, Debug)]
pub enum Refusal {
    /// The kernel blocks a call under this rule id.
    Rule(&'static str),
    /// A tool (or the store beneath it) answers every call of the row with an error
    /// containing this text; the row's calls are all attacks.
    ToolError(&'static str),
    /// Nothing is refused; the answers must simply not leak.
    Neither,
}

/// Where a row's sessions live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sessions {
    /// A [`MemoryStore`]: the session's own files are in memory; mounts are on disk.
    Memory,
    /// An [`FsStore`] under the workspace's `sessions/`: the session's files are real, so
    /// a row can plant a pipe or a link among them.
    Disk,
}

/// The folders of one row's run.
pub struct Site {
    /// The workspace root (mount sources live below it).
    pub root: PathBuf,
    /// A folder outside the workspace holding [`OUTSIDE_FILE`].
    pub outside: PathBuf,
    /// The session's folder when sessions are on disk (it may not exist yet).
    pub session: PathBuf,
}

/// What surrounds an attack: the store, the runtime's limits, and what is planted in the
/// workspace or the session's folder before the first turn.
#[derive(Clone, Copy)]
pub struct Setup {
    pub sessions: Sessions,
    pub limits: Limits,
    pub plant: fn(&Site) -> io::Result<()>,
    /// Checked after the run (a link's target unchanged); `Err` says what is wrong.
    pub check: fn(&Site) -> Result<(), String>,
}

impl Setup {
    /// Sessions in memory, default limits, nothing planted.
    pub fn memory() -> Setup {
        Setup { sessions: Sessions::Memory, limits: Limits::default(), plant: |_| Ok(()), check: |_| Ok(()) }
    }

    /// Sessions on disk, default limits, nothing planted.
    pub fn disk() -> Setup {
        Setup { sessions: Sessions::Disk, ..Setup::memory() }
    }

    pub fn limits(self, limits: Limits) -> Setup {
        Setup { limits, ..self }
    }

    pub fn planting(self, plant: fn(&Site) -> io::Result<()>) -> Setup {
        Setup { plant, ..self }
    }

    pub fn checking(self, check: fn(&Site) -> Result<(), String>) -> Setup {
        Setup { check, ..self }
    }
}

/// A workspace: a writable ungoverned mount `reference/` holding a public file and the
/// protected one, and the given workflows.
pub fn workspace(workflows: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut files = vec![
        ("archmax.toml", "[mounts.\"reference/\"]\nread_only = false\n".to_string()),
        ("reference/public.md", "# Carriers\n\nDHL, DPD and GLS.\n".to_string()),
        (PROTECTED, format!("# Rates (confidential)\n\nDHL: {SECRET}\n")),
    ];
    files.extend(workflows.iter().map(|(path, text)| (*path, text.to_string())));
    files
}

/// Every row of every class.
fn attacks() -> Vec<Attack> {
    let mut rows = grant_attacks();
    rows.extend(special_file_attacks());
    rows.extend(cap_attacks());
    rows.extend(link_attacks());
    rows
}

/// A root workflow `desk` whose one state `review` has these `tools` entries.
fn desk(tools: &str) -> String {
    format!(
        "title: Desk\ninstructions: Prepare the carrier sheet.\nskills: {{ allow_always: [] }}\nstates:\n  review:\n    triggers:\n      manual:\n        description: Prepare the sheet.\n    instructions: Work.\n    tools:\n{tools}"
    )
}

/// A child `sheet` taking a `file` argument `terms`, limited to reading its scratchpad.
const SHEET: &str = r#"title: Sheet
instructions: Sum up carrier terms.
skills: { allow_always: [] }
states:
  write:
    triggers:
      manual:
        description: Sum up a terms file.
        requires:
          - { name: terms, type: file, description: The terms. }
    instructions: Read the terms and sum them up.
    tools:
      allow:
        - { tool: read_file, paths: ["scratchpad/**"] }
"#;

/// A child `digest` returning a `file`, limited to reading its scratchpad.
const DIGEST: &str = r#"title: Digest
instructions: Produce a digest.
skills: { allow_always: [] }
states:
  write:
    triggers:
      manual:
        description: Produce a digest file.
        returns:
          - { name: sheet, type: file, description: The digest. }
    instructions: Write the digest and set `sheet`.
    tools:
      allow:
        - { tool: read_file, paths: ["scratchpad/**"] }
        - archmax_set_variables
"#;

/// Reads are limited to the scratchpad.
const SCRATCH_ONLY: &str = "      allow:\n        - { tool: read_file, paths: [\"scratchpad/**\"] }\n        - archmax_workflow_sheet\n        - archmax_workflow_digest\n        - archmax_eval\n";

/// Everything is granted, but reading `reference/internal/**` is denied.
const READ_DENIED: &str = "      allow: [read_file, grep, glob, ls, copy_file, move_file, edit_file, archmax_eval]\n      forbid:\n        - { tool: read_file, paths: [\"reference/internal/**\"] }\n";

/// Rows of issue 11's items 1 and 2: file passing and read denials.
fn grant_attacks() -> Vec<Attack> {
    let limited = desk(SCRATCH_ONLY);
    let denied = desk(READ_DENIED);
    let both = |desk: &str| {
        workspace(&[
            ("workflows/desk/workflow.yaml", desk),
            ("workflows/sheet/workflow.yaml", SHEET),
            ("workflows/digest/workflow.yaml", DIGEST),
        ])
    };
    vec![
        Attack {
            name: "a child's file argument names a file the caller's grants do not reach",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_sheet, args: { terms: reference/internal/rates.md } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "a child returns a file its own grants do not reach",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_digest, args: {} }]
- { workflow: digest, tool_calls: [{ name: archmax_set_variables, args: { variables: { sheet: reference/internal/rates.md } } }] }
- { workflow: digest, text: Done. }
- { workflow: desk, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: desk, text: Done. }
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "a script delegates with a file the caller may not read",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_eval, args: { code: "await tools.archmaxWorkflowSheet({ terms: 'reference/internal/rates.md' })" } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- { workflow: desk, text: Done. }
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "`..` walks a guarded read out of the scratchpad",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: read_file, args: { file_path: scratchpad/../reference/internal/rates.md } }]
- text: Done.
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "`..` walks a delegation's guarded file argument out of the scratchpad",
            workflow: "desk",
            files: both(&desk(
                "      allow:\n        - read_file\n        - { tool: archmax_workflow_sheet, args: { terms: [\"scratchpad/**\"] } }\n",
            )),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_sheet, args: { terms: scratchpad/../reference/internal/rates.md } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- { workflow: desk, text: Done. }
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "grep in content mode names the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: grep, args: { pattern: "DHL", path: reference/internal/rates.md, output_mode: content } }]
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "grep in content mode over the folder holding the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: grep, args: { pattern: "DHL", path: reference, output_mode: content } }]
- text: Done.
"#,
            refusal: Refusal::Neither,
            unnamed: &[PROTECTED],
            setup: Setup::memory(),
        },
        Attack {
            name: "grep in count mode over the denied file and its folder",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: grep, args: { pattern: "7731", path: reference/internal/rates.md, output_mode: count } }
    - { name: grep, args: { pattern: "7731", path: "", output_mode: count } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[PROTECTED],
            setup: Setup::memory(),
        },
        Attack {
            name: "grep in files mode probes the denied file's content",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: grep, args: { pattern: "zq-77", path: reference/internal/rates.md } }
    - { name: grep, args: { pattern: "zq-77", path: reference } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[PROTECTED],
            setup: Setup::memory(),
        },
        Attack {
            name: "copy_file takes the denied file into the scratchpad",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: copy_file, args: { source: reference/internal/rates.md, destination: scratchpad/rates.md } }
    - { name: read_file, args: { file_path: scratchpad/rates.md } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "move_file takes the denied file into the scratchpad",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: move_file, args: { source: reference/internal/rates.md, destination: scratchpad/rates.md } }
    - { name: read_file, args: { file_path: scratchpad/rates.md } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "edit_file probes the denied file for a string",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: edit_file, args: { file_path: reference/internal/rates.md, old_string: "DHL: zq", new_string: "DHL: zq" } }]
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "a script's tools.readFile of the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: archmax_eval, args: { code: "await tools.readFile({ file_path: 'reference/internal/rates.md' })" } }]
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[],
            setup: Setup::memory(),
        },
        Attack {
            name: "a script's tools.grep of the denied file and its folder",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: archmax_eval, args: { code: "await tools.grep({ pattern: 'DHL', path: 'reference/internal/rates.md', output_mode: 'content' })" } }
    - { name: archmax_eval, args: { code: "await tools.grep({ pattern: 'DHL', path: 'reference', output_mode: 'content' })" } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.forbidden-here"),
            unnamed: &[PROTECTED],
            setup: Setup::memory(),
        },
        Attack {
            name: "a variable the model sets tries to widen a guard",
            workflow: "desk",
            files: both(&desk(
                "      allow:\n        - { tool: read_file, paths: [\"scratchpad/${{area}}/*\"] }\n        - archmax_set_variables\n",
            )),
            tape: r#"
- tool_calls:
    - { name: archmax_set_variables, args: { variables: { area: "../reference/internal" } } }
- tool_calls:
    - { name: read_file, args: { file_path: scratchpad/../reference/internal/rates.md } }
    - { name: archmax_set_variables, args: { variables: { area: "**" } } }
- tool_calls:
    - { name: read_file, args: { file_path: reference/internal/rates.md } }
- text: Done.
"#,
            refusal: Refusal::Rule("tool.not-allowed"),
            unnamed: &[],
            setup: Setup::memory(),
        },
    ]
}

/// Everything is granted that reads or writes a file, but reading `reference/internal/**`
/// is denied, so the protected file stays protected while the row attacks something else.
const FILE_TOOLS: &str = "      allow: [read_file, write_file, grep, ls, copy_file, edit_file, archmax_set_variables]\n      forbid:\n        - { tool: read_file, paths: [\"reference/internal/**\"] }\n";

/// A workspace whose `desk` grants [`FILE_TOOLS`], plus `extra` files.
fn file_desk(extra: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let mut files = workspace(&[("workflows/desk/workflow.yaml", &desk(FILE_TOOLS))]);
    files.extend(extra);
    files
}

/// An attack on the `desk` of [`file_desk`]; the caller sets the rest.
fn file_attack(name: &'static str, tape: &'static str, refusal: Refusal, setup: Setup) -> Attack {
    Attack { name, workflow: "desk", files: file_desk(Vec::new()), tape, refusal, unnamed: &[], setup }
}

/// Makes a named pipe; nobody ever opens its other end, so a blocking open would hang.
fn make_fifo(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let status = std::process::Command::new("mkfifo").arg(path).status()?;
    if status.success() { Ok(()) } else { Err(io::Error::other(format!("mkfifo {} failed", path.display()))) }
}

/// Rows of issue 11's item 4: named pipes where a file is expected.
fn special_file_attacks() -> Vec<Attack> {
    let answers = Refusal::ToolError("is not a regular file but a named pipe");
    vec![
        file_attack(
            "a named pipe in a mount is read and copied",
            r#"
- tool_calls:
    - { name: read_file, args: { file_path: reference/pipe } }
    - { name: copy_file, args: { source: reference/pipe, destination: scratchpad/pipe.md } }
- text: Done.
"#,
            answers,
            Setup::memory().planting(|site| make_fifo(&site.root.join("reference/pipe"))),
        ),
        file_attack(
            "a named pipe planted in the session's scratchpad is read and copied",
            r#"
- tool_calls:
    - { name: read_file, args: { file_path: scratchpad/pipe } }
    - { name: copy_file, args: { source: scratchpad/pipe, destination: scratchpad/pipe.md } }
- text: Done.
"#,
            answers,
            Setup::disk().planting(|site| make_fifo(&site.session.join("scratchpad/pipe"))),
        ),
        file_attack(
            "grep of named pipes and of the folders holding them",
            r#"
- tool_calls:
    - { name: grep, args: { pattern: "DHL", path: reference/pipe, output_mode: content } }
    - { name: grep, args: { pattern: "DHL", path: scratchpad/pipe, output_mode: content } }
    - { name: grep, args: { pattern: "DHL", path: reference, output_mode: content } }
    - { name: grep, args: { pattern: "DHL", path: scratchpad, output_mode: content } }
- text: Done.
"#,
            // grep skips files it cannot read, even the one it is pointed at (it answers "No
            // matches"), so this row shows only that the turn finishes and nothing leaks.
            Refusal::Neither,
            Setup::disk().planting(|site| {
                make_fifo(&site.root.join("reference/pipe"))?;
                make_fifo(&site.session.join("scratchpad/pipe"))
            }),
        ),
    ]
}

/// A mount file of 100 `a`s, for `replace_all` to multiply.
const SEED: &str = "reference/seed.txt";
/// A mount file holding the secret many times over, past the small per-file bound.
const BIG: &str = "reference/big.md";
/// The small per-file bound of the cap rows.
const SMALL_FILE_BYTES: u64 = 1024;

/// Limits with a small per-file bound.
fn small_files() -> Limits {
    Limits { file_bytes: SMALL_FILE_BYTES, ..Limits::default() }
}

/// A file's text, or why it could not be read.
fn text_of(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

/// Rows of issue 11's item 5: calls that would make a tool read, write or build too much.
fn cap_attacks() -> Vec<Attack> {
    let with_big = |mut attack: Attack| {
        attack.files = file_desk(vec![(SEED, "a".repeat(100)), (BIG, format!("DHL: {SECRET}\n").repeat(100))]);
        attack
    };
    vec![
        with_big(file_attack(
            "edit_file with replace_all multiplies a file past the bound",
            r#"
- tool_calls:
    - { name: edit_file, args: { file_path: reference/seed.txt, old_string: "a", new_string: "0123456789012345678901234567890123456789", replace_all: true } }
- text: Done.
"#,
            Refusal::ToolError(
                "replacing 100 occurrences would make 'reference/seed.txt' 4000 bytes, over edit_file's limit",
            ),
            Setup::memory().limits(small_files()).checking(|site| match text_of(&site.root.join(SEED))? {
                text if text == "a".repeat(100) => Ok(()),
                text => Err(format!("the seed file changed to {} bytes", text.len())),
            }),
        )),
        file_attack(
            "a variable quoted many times in one call's arguments",
            r#"
- tool_calls:
    - { name: archmax_set_variables, args: { variables: { big: "0123456789012345678901234567890123456789012345678901234567890123" } } }
- tool_calls:
    - { name: write_file, args: { file_path: scratchpad/out.md, content: "${{big}}${{big}}${{big}}${{big}}${{big}}${{big}}${{big}}${{big}}" } }
- text: Done.
"#,
            Refusal::Rule("argument.too-large"),
            Setup::memory().limits(Limits { substituted_bytes: 256, ..Limits::default() }),
        ),
        with_big(file_attack(
            "read_file of a file over the bound",
            r#"
- tool_calls: [{ name: read_file, args: { file_path: reference/big.md } }]
- text: Done.
"#,
            Refusal::ToolError("over read_file's limit of 1024 bytes per file"),
            Setup::memory().limits(small_files()),
        )),
        with_big(file_attack(
            "copy_file of a file over the bound into the scratchpad",
            r#"
- tool_calls: [{ name: copy_file, args: { source: reference/big.md, destination: scratchpad/big.md } }]
- text: Done.
"#,
            Refusal::ToolError("over copy_file's limit of 1024 bytes per file; it cannot be copied or moved"),
            Setup::disk().limits(small_files()).checking(|site| absent(&site.session.join("scratchpad/big.md"))),
        )),
        file_attack(
            "a write past the session's quota",
            r#"
- tool_calls: [{ name: write_file, args: { file_path: scratchpad/more.md, content: "twenty bytes of text" } }]
- text: Done.
"#,
            Refusal::ToolError("over the session's limit of 1000 bytes"),
            Setup::disk()
                .limits(Limits { session_bytes: 1000, ..Limits::default() })
                .planting(|site| {
                    std::fs::create_dir_all(site.session.join("scratchpad"))?;
                    std::fs::write(site.session.join("scratchpad/notes.md"), "n".repeat(990))
                })
                .checking(|site| absent(&site.session.join("scratchpad/more.md"))),
        ),
    ]
}

/// `Ok` when nothing is at `path`, not even a dangling link.
fn absent(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        _ => Err(format!("{} exists", path.display())),
    }
}

/// Plants links in the session's scratchpad: `log.md` to the session's log (absolute),
/// `seal.md` to its seal (relative), `secret.md` to the file outside the workspace.
fn plant_session_links(site: &Site) -> io::Result<()> {
    let scratchpad = site.session.join("scratchpad");
    std::fs::create_dir_all(&scratchpad)?;
    std::os::unix::fs::symlink(site.session.join("checkpoints/log"), scratchpad.join("log.md"))?;
    std::os::unix::fs::symlink("../checkpoints/seal", scratchpad.join("seal.md"))?;
    std::os::unix::fs::symlink(site.outside.join(OUTSIDE_FILE), scratchpad.join("secret.md"))
}

/// `Ok` when the planted links are still links to where they pointed.
fn links_unchanged(site: &Site) -> Result<(), String> {
    let scratchpad = site.session.join("scratchpad");
    let expected = [
        ("log.md", site.session.join("checkpoints/log")),
        ("seal.md", PathBuf::from("../checkpoints/seal")),
        ("secret.md", site.outside.join(OUTSIDE_FILE)),
    ];
    for (name, target) in expected {
        match std::fs::read_link(scratchpad.join(name)) {
            Ok(found) if found == target => {}
            found => return Err(format!("scratchpad/{name} is no longer a link to {}: {found:?}", target.display())),
        }
    }
    Ok(())
}

/// Rows of issue 11's item 6: symbolic links planted where the session's files are.
fn link_attacks() -> Vec<Attack> {
    let through_links = Refusal::ToolError("a symbolic link is on the way");
    let linked = Setup::disk().planting(plant_session_links).checking(links_unchanged);
    vec![
        file_attack(
            "reads through links in the scratchpad to the session's log and to a file outside",
            r#"
- tool_calls:
    - { name: read_file, args: { file_path: scratchpad/log.md } }
    - { name: read_file, args: { file_path: scratchpad/seal.md } }
    - { name: read_file, args: { file_path: scratchpad/secret.md } }
    - { name: grep, args: { pattern: "DHL", path: scratchpad/secret.md, output_mode: content } }
    - { name: copy_file, args: { source: scratchpad/secret.md, destination: scratchpad/copy.md } }
    - { name: copy_file, args: { source: scratchpad/log.md, destination: scratchpad/log-copy.md } }
- text: Done.
"#,
            through_links,
            linked,
        ),
        file_attack(
            "writes through links in the scratchpad to the session's seal and to a file outside",
            r#"
- tool_calls:
    - { name: write_file, args: { file_path: scratchpad/seal.md, content: "{}" } }
    - { name: write_file, args: { file_path: scratchpad/secret.md, content: "overwritten" } }
    - { name: edit_file, args: { file_path: scratchpad/secret.md, old_string: "DHL", new_string: "UPS" } }
    - { name: copy_file, args: { source: reference/public.md, destination: scratchpad/log.md, overwrite: true } }
- text: Done.
"#,
            through_links,
            linked,
        ),
        file_attack(
            "grep over a scratchpad holding links to the outside",
            r#"
- tool_calls:
    - { name: grep, args: { pattern: "DHL", path: scratchpad, output_mode: content } }
    - { name: grep, args: { pattern: "DHL", path: "", output_mode: content } }
- text: Done.
"#,
            Refusal::Neither,
            linked,
        ),
        file_attack(
            "a link in a mount to a file outside the workspace",
            r#"
- tool_calls:
    - { name: read_file, args: { file_path: reference/leak.md } }
    - { name: copy_file, args: { source: reference/leak.md, destination: scratchpad/leak.md } }
- text: Done.
"#,
            Refusal::ToolError("links are never followed, in the session's folder or in a mount"),
            Setup::memory().planting(|site| {
                std::os::unix::fs::symlink(site.outside.join(OUTSIDE_FILE), site.root.join("reference/leak.md"))
            }),
        ),
    ]
}

/// What a malicious local user does to a session's files between two turns.
pub struct Tampering {
    pub name: &'static str,
    /// Damages the session's folder, given the log as it was after the first of the two
    /// turns that ran before.
    pub damage: fn(&Path, &[u8]) -> io::Result<()>,
    /// Text the second turn's refusal must contain besides the session's name.
    pub refusal: &'static str,
}

/// The session's log, read whole.
fn log_of(session: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(session.join("checkpoints/log"))
}

/// Rows of issue 11's item 7: a damaged log must never load as an older or a fresh session.
fn tamperings() -> Vec<Tampering> {
    vec![
        Tampering {
            name: "the log truncated to a few bytes",
            damage: |session, _| {
                let log = log_of(session)?;
                std::fs::write(session.join("checkpoints/log"), &log[..log.len().min(5)])
            },
            refusal: "is unreadable",
        },
        Tampering {
            name: "a bit flipped in the last complete record",
            damage: |session, _| {
                let mut log = log_of(session)?;
                if let Some(last) = log.last_mut() {
                    *last ^= 0x01;
                }
                std::fs::write(session.join("checkpoints/log"), log)
            },
            refusal: "is unreadable",
        },
        Tampering {
            name: "the log deleted",
            damage: |session, _| std::fs::remove_file(session.join("checkpoints/log")),
            refusal: "is unreadable",
        },
        Tampering {
            name: "the log rolled back to an earlier turn's whole records",
            damage: |session, earlier| std::fs::write(session.join("checkpoints/log"), earlier),
            refusal: "is unreadable",
        },
    ]
}

/// A fresh folder for one row's workspace and its outside file.
fn scratch_site(label: &str, index: usize) -> Site {
    let base = std::env::temp_dir().join(format!("archmax-adversarial-{}-{label}-{index}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("workspace");
    let session = root.join("sessions").join(SESSION);
    Site { root, outside: base.join("outside"), session }
}

impl Site {
    fn base(&self) -> &Path {
        self.outside.parent().unwrap_or(&self.outside)
    }
}

fn write_files(root: &Path, files: &[(&'static str, String)]) -> io::Result<()> {
    for (path, text) in files {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, text)?;
    }
    Ok(())
}

/// Every file's text below `dir` of a session's workspace, read through the VFS.
fn texts_below(workspace: &archmax_vm::stdlib::vfs::Workspace, dir: &str, out: &mut Vec<(String, String)>) {
    let Ok(entries) = workspace.list(dir) else {
        return;
    };
    for entry in entries {
        let path = if dir.is_empty() { entry.name.clone() } else { format!("{dir}/{}", entry.name) };
        if entry.is_dir {
            texts_below(workspace, &path, out);
        } else if let Ok(bytes) = workspace.read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).to_string()));
        }
    }
}

/// Every regular file below `dir` on disk (links and pipes are neither followed nor
/// opened), with its text.
fn disk_texts_below(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_dir() => disk_texts_below(&path, out),
            Ok(metadata) if metadata.is_file() => {
                if let Ok(bytes) = std::fs::read(&path) {
                    out.push((path, String::from_utf8_lossy(&bytes).to_string()));
                }
            }
            _ => {}
        }
    }
}

/// A runtime over one row's workspace, recording its events.
struct Harness {
    site: Site,
    runtime: Runtime,
    events: EventSink,
    executor: tokio::runtime::Runtime,
}

impl Harness {
    /// Writes the files and the outside secret, plants what the setup plants, and builds
    /// the runtime.
    fn new(site: Site, files: &[(&'static str, String)], tape: (&str, &str), setup: &Setup) -> Result<Harness, String> {
        let failed = |what: &'static str| move |error: io::Error| format!("{what}: {error}");
        write_files(&site.root, files).map_err(failed("writing the workspace"))?;
        write_files(&site.outside, &[(OUTSIDE_FILE, outside_text())]).map_err(failed("writing the outside file"))?;
        (setup.plant)(&site).map_err(failed("planting"))?;
        let borrowed: Vec<(&str, &str)> = files.iter().map(|(path, text)| (*path, text.as_str())).collect();
        let program = compile(&borrowed);
        let events = EventSink::new();
        events.record();
        let store: Arc<dyn SessionStore> = match setup.sessions {
            Sessions::Memory => Arc::new(MemoryStore::new()),
            Sessions::Disk => Arc::new(FsStore::for_workspace(&site.root).expect("the site's seal key")),
        };
        let tape = Tape::parse(tape.0, tape.1).map_err(|error| format!("the tape: {error}"))?;
        let runtime = Runtime::builder(RuntimeParts {
            program: Arc::new(program),
            store,
            model: Arc::new(tape),
            events: events.clone(),
            clock: Arc::new(FixedClock(1_767_605_400_000)),
            root: site.root.clone(),
            pricing: PricingTable::default(),
        })
        .limits(setup.limits)
        .build();
        let executor =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| error.to_string())?;
        Ok(Harness { site, runtime, events, executor })
    }

    /// Runs one turn of the session with a message.
    fn turn(&self, workflow: &str) -> Result<Outcome, RunError> {
        let request = TurnRequest {
            workflow: workflow.to_string(),
            session: Some(SESSION.to_string()),
            message: Some("Prepare this quarter's carrier sheet.".to_string()),
            variables: Map::new(),
            ..TurnRequest::default()
        };
        self.executor.block_on(self.runtime.run_turn(request))
    }

    fn recorded(&self) -> Vec<Value> {
        self.events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect()
    }

    /// Every place the secret or an unnamed text showed up, and every session that no
    /// longer loads.
    fn leaks(&self, unnamed: &[&str]) -> Vec<String> {
        let mut problems = Vec::new();
        for event in self.recorded() {
            let text = event.to_string();
            if text.contains(SECRET) {
                problems.push(format!("an event carries the secret: {text}"));
            }
            // A refusal may echo the path the attacker typed; an answer that worked may not.
            if event["event"] == "tool-result" && event["status"] == "ok" {
                for name in unnamed {
                    if event["output"].as_str().is_some_and(|output| output.contains(name)) {
                        problems.push(format!("a tool answer names `{name}`: {text}"));
                    }
                }
            }
        }
        let store = &self.runtime.store();
        let ids = match self.executor.block_on(store.list()) {
            Ok(ids) => ids,
            Err(error) => return [problems, vec![format!("the store cannot list its sessions: {error}")]].concat(),
        };
        for id in ids {
            match self.executor.block_on(store.read(&id)) {
                Ok(Some(session)) if serde_json::to_string(&session).unwrap_or_default().contains(SECRET) => {
                    problems.push(format!("the session `{id}` carries the secret in its record"));
                }
                Ok(_) => {}
                Err(error) => problems.push(format!("the session `{id}` no longer loads: {error}")),
            }
            let mut files = Vec::new();
            match self.runtime.workspace(&id) {
                Ok(workspace) => texts_below(&workspace, "scratchpad", &mut files),
                Err(error) => problems.push(format!("the session `{id}` has no files: {error}")),
            }
            problems.extend(
                files
                    .iter()
                    .filter(|(_, text)| text.contains(SECRET))
                    .map(|(path, _)| format!("the session `{id}` holds the secret in `{path}`")),
            );
        }
        problems.extend(self.disk_leaks());
        problems
    }

    /// The secret in any file of the on-disk store, and the outside file changed.
    fn disk_leaks(&self) -> Vec<String> {
        let mut files = Vec::new();
        disk_texts_below(&self.site.root.join("sessions"), &mut files);
        let mut problems: Vec<String> = files
            .iter()
            .filter(|(_, text)| text.contains(SECRET))
            .map(|(path, _)| format!("the store's file {} holds the secret", path.display()))
            .collect();
        match text_of(&self.site.outside.join(OUTSIDE_FILE)) {
            Ok(text) if text == outside_text() => {}
            found => problems.push(format!("the file outside the workspace changed: {found:?}")),
        }
        problems
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.site.base());
    }
}

/// The text of the file outside the workspace.
fn outside_text() -> String {
    format!("# Outside the workspace\n\nDHL: {SECRET}\n")
}

/// Whether the recorded events show the refusal.
fn refused(recorded: &[Value], refusal: Refusal) -> Result<(), String> {
    let results: Vec<&Value> = recorded.iter().filter(|event| event["event"] == "tool-result").collect();
    match refusal {
        Refusal::Rule(rule) => {
            let found = recorded.iter().any(|event| {
                (event["event"] == "tool-blocked" && event["rule"] == rule)
                    || (event["event"] == "sub-workflow-result"
                        && event["reason"].as_str().is_some_and(|reason| reason.contains(&format!("({rule})"))))
            });
            if found { Ok(()) } else { Err(format!("no refusal under `{rule}`")) }
        }
        // Every call of the row is an attack, so every answer must be the refusal.
        Refusal::ToolError(text) => {
            let answered = |event: &&Value| {
                event["status"] == "error" && event["output"].as_str().is_some_and(|output| output.contains(text))
            };
            match results.iter().find(|event| !answered(event)) {
                _ if results.is_empty() => Err(format!("no tool answered, so nothing was refused with `{text}`")),
                Some(other) => Err(format!("a call was not refused with `{text}`: {other}")),
                None => Ok(()),
            }
        }
        Refusal::Neither => Ok(()),
    }
}

/// Runs one attack; `Err` says what went wrong.
fn run(index: usize, attack: &Attack) -> Result<(), String> {
    let site = scratch_site("attack", index);
    let harness = Harness::new(site, &attack.files, (attack.name, attack.tape), &attack.setup)?;
    let outcome = harness.turn(attack.workflow);
    let mut problems = Vec::new();
    match &outcome {
        Err(error) if error.to_string().contains(SECRET) => {
            problems.push(format!("the run's error carries the secret: {error}"));
        }
        Err(error) => problems.push(format!("the turn did not finish: {error}")),
        Ok(_) => {}
    }
    if let Err(problem) = refused(&harness.recorded(), attack.refusal) {
        problems.push(problem);
    }
    if let Err(problem) = (attack.setup.check)(&harness.site) {
        problems.push(problem);
    }
    problems.extend(harness.leaks(attack.unnamed));
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n    ")) }
}

#[test]
fn every_attack_is_refused_and_leaks_nothing() {
    let mut failures = Vec::new();
    for (index, attack) in attacks().iter().enumerate() {
        if let Err(problem) = run(index, attack) {
            failures.push(format!("{}:\n    {problem}", attack.name));
        }
    }
    assert!(failures.is_empty(), "{} attack(s) got through:\n{}", failures.len(), failures.join("\n"));
}

/// Runs one tampering: two turns, the damage, a third turn that must be refused as corrupt
/// without the store writing anything.
fn tamper(index: usize, tampering: &Tampering) -> Result<(), String> {
    let site = scratch_site("tamper", index);
    let files = file_desk(Vec::new());
    let tape = (tampering.name, "- text: First.\n- text: Second.\n- text: Third.\n");
    let harness = Harness::new(site, &files, tape, &Setup::disk())?;
    let session = harness.site.session.clone();
    harness.turn("desk").map_err(|error| format!("the first turn failed: {error}"))?;
    let earlier = log_of(&session).map_err(|error| format!("reading the log: {error}"))?;
    harness.turn("desk").map_err(|error| format!("the second turn failed: {error}"))?;
    if log_of(&session).ok().is_none_or(|log| log.len() <= earlier.len()) {
        return Err("the second turn appended nothing to the log, so there is nothing to roll back".to_string());
    }
    (tampering.damage)(&session, &earlier).map_err(|error| format!("damaging the session: {error}"))?;
    let damaged = disk_snapshot(&session.join("checkpoints"));
    let mut problems = Vec::new();
    match harness.turn("desk") {
        Ok(outcome) => problems.push(format!("the damaged session ran on: {}", outcome.reply)),
        Err(error) => {
            let message = error.to_string();
            if !(message.contains(tampering.refusal) && message.contains(&format!("`{SESSION}`"))) {
                problems.push(format!("the refusal does not say `{}` about `{SESSION}`: {message}", tampering.refusal));
            }
        }
    }
    if disk_snapshot(&session.join("checkpoints")) != damaged {
        problems.push("the refused turn rewrote the session's files".to_string());
    }
    let leaks = harness.leaks(&[]);
    let loads = format!("the session `{SESSION}` no longer loads");
    if !leaks.iter().any(|leak| leak.starts_with(&loads)) {
        problems.push("a read of the damaged session did not refuse it".to_string());
    }
    problems.extend(leaks.into_iter().filter(|leak| !leak.starts_with(&loads)));
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n    ")) }
}

/// Every regular file's bytes below `dir`, by path.
fn disk_snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    disk_texts_below(dir, &mut files);
    files.sort();
    files
}

#[test]
fn a_damaged_session_log_is_refused_not_rolled_back() {
    let mut failures = Vec::new();
    for (index, tampering) in tamperings().iter().enumerate() {
        if let Err(problem) = tamper(index, tampering) {
            failures.push(format!("{}:\n    {problem}", tampering.name));
        }
    }
    assert!(failures.is_empty(), "{} tampering(s) got through:\n{}", failures.len(), failures.join("\n"));
}

/// A re-hashed artifact whose mount source reaches out of the workspace is refused on load,
/// signed trust or not, before any session could run.
#[test]
fn a_rehashed_artifact_with_an_escaping_mount_source_is_refused_on_load() {
    let files = file_desk(Vec::new());
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(path, text)| (*path, text.as_str())).collect();
    let built = compile(&borrowed);
    let signer = SecretKey::from_seed(&[7; 32]);
    let trusting = TrustedKeys::new([signer.public()]);
    assert!(artifact::load(&artifact::encode(&built), &TrustedKeys::default()).is_ok(), "the untouched build loads");
    for hostile in ["/", "../..", "reference/../../outside"] {
        let mut tampered = artifact::decode(&artifact::encode(&built)).expect("decodes");
        let mount = tampered.mounts.iter().position(|mount| tampered.str(mount.key) == "reference/").expect("mount");
        // A string of its own: the source's default text is shared with the mount's name.
        tampered.strings.push(hostile.to_string());
        tampered.mounts[mount].source = Sym(u32::try_from(tampered.strings.len() - 1).expect("few strings"));
        // `encode` writes a fresh digest: the edit is re-hashed as an attacker would.
        let forged = artifact::encode(&tampered);
        let refusal = artifact::load(&forged, &TrustedKeys::default()).expect_err(hostile);
        assert!(matches!(refusal, ArtifactError::Table { table: "mounts", .. }), "{hostile:?}: {refusal}");
        assert!(refusal.to_string().contains("`reference/`"), "{hostile:?}: {refusal}");
        assert_eq!(artifact::load(&forged, &trusting).expect_err(hostile), ArtifactError::Unsigned, "{hostile:?}");
    }
}

/// Variables amplify: one 4 KB value, a second that repeats it 2500 times (10 MB, under
/// the substitution bound), then a short call per copy of the second. The bound on the
/// session's variables refuses the first copy before it is applied.
#[test]
fn copying_a_large_variable_is_refused_at_the_session_bound() {
    let files = workspace(&[("workflows/desk/workflow.yaml", &desk("      allow: [archmax_set_variables]\n"))]);
    let site = scratch_site("variables", 0);
    let root = site.root.clone();
    write_files(&root, &files).expect("the workspace is written");
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(path, text)| (*path, text.as_str())).collect();
    let seed = "a".repeat(4096);
    let repeated = "${{v0}}".repeat(2500);
    let copies: String = (2..6)
        .map(|index| {
            format!("    - {{ name: archmax_set_variables, args: {{ variables: {{ v{index}: \"${{{{v1}}}}\" }} }} }}\n")
        })
        .collect();
    let tape = format!(
        "- tool_calls:\n    - {{ name: archmax_set_variables, args: {{ variables: {{ v0: \"{seed}\" }} }} }}\n    - {{ name: archmax_set_variables, args: {{ variables: {{ v1: \"{repeated}\" }} }} }}\n{copies}- text: Done.\n"
    );
    let events = EventSink::new();
    events.record();
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&borrowed)),
        store: store.clone(),
        model: Arc::new(Tape::parse("variables", &tape).expect("tape")),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: root.clone(),
        pricing: PricingTable::default(),
    })
    .build();
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Go.".to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    };
    executor.block_on(runtime.run_turn(request)).expect("the turn runs");
    let _ = std::fs::remove_dir_all(site.base());

    let results: Vec<Value> = events
        .recorded()
        .iter()
        .filter_map(|envelope| serde_json::to_value(envelope).ok())
        .filter(|event| event["event"] == "tool-result")
        .collect();
    assert_eq!(results.len(), 6, "{results:?}");
    assert!(results[..2].iter().all(|event| event["status"] == "ok"), "the seeds fit: {results:?}");
    for event in &results[2..] {
        let output = event["output"].as_str().unwrap_or_default();
        assert!(output.contains("over the bound of 10 MiB (10485760 bytes)"), "{output}");
        assert!(output.contains("nothing was written"), "{output}");
    }
    let session = store.read("s1").expect("the session");
    let stored = serde_json::to_value(&session).expect("session json");
    let variables = &stored["variables"];
    assert!(variables.get("v1").is_some() && variables.get("v2").is_none(), "no copy was applied");
    assert!(serde_json::to_string(variables).expect("json").len() < 11 * 1024 * 1024);
}

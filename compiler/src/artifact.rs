//! The artifact file (`.amx`): a verified envelope around a bincode-encoded [`Program`].
//!
//! ```text
//! offset  size  field
//! 0       8     magic "ARCHMAX\0"
//! 8       4     format version (u32, little-endian)
//! 12      2+n   compiler version (u16 length, UTF-8)
//! ..      2+n   runtime contract (u16 length, UTF-8)
//! ..      8     payload length (u64)
//! ..      32    SHA-256 of the payload
//! ..      n     payload: bincode 2, standard configuration
//! ```
//!
//! [`decode`] checks the magic, the format version, the compiler and the contract, the
//! payload length and its hash before it decodes anything, bounds the decoder by the
//! payload's size, and then checks that every index inside the program is in range, so a
//! truncated, corrupted, tampered, foreign or future file is refused with one sentence,
//! never a panic. Encoding is deterministic: the same program gives the same bytes.

use sha2::{Digest, Sha256};

use crate::program::{GuardTable, Op, Program, Rule, ScriptId, StateId, SurfaceId, Sym, TemplatePart, ToolKind};

pub const MAGIC: &[u8; 8] = b"ARCHMAX\0";
/// Bumped whenever the layout of [`Program`] changes.
pub const FORMAT_VERSION: u32 = 1;
/// The largest payload the decoder accepts.
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// The file extension of artifacts.
pub const EXTENSION: &str = "amx";

/// Why an artifact was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArtifactError {
    #[error("not an archmax artifact (the file does not start with the artifact magic)")]
    Foreign,
    #[error("the artifact is truncated: {0}")]
    Truncated(&'static str),
    #[error("the artifact uses format {found}, newer than the format {supported} this archmax reads; upgrade archmax")]
    FutureFormat { found: u32, supported: u32 },
    #[error("the artifact uses the retired format {found}; rebuild it with `archmax build`")]
    OldFormat { found: u32 },
    #[error(
        "the artifact was built by archmax {found}, but this is archmax {current}; rebuild it with `archmax build`"
    )]
    CompilerMismatch { found: String, current: String },
    #[error("the artifact targets runtime contract \"{found}\"; this runtime runs contract \"{supported}\"")]
    Contract { found: String, supported: String },
    #[error(
        "the artifact's payload is {found} bytes but its header says {declared}: the file is truncated or has trailing bytes"
    )]
    Length { declared: u64, found: u64 },
    #[error("the artifact's payload does not match its checksum: the file is corrupted or was modified")]
    Checksum,
    #[error("the artifact's payload cannot be decoded: {0}")]
    Payload(String),
    #[error("the artifact is inconsistent: {0}")]
    Inconsistent(String),
}

/// The artifact header, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub format: u32,
    pub compiler: String,
    pub contract: String,
    pub payload_length: u64,
    pub checksum: [u8; 32],
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes a program into artifact bytes.
pub fn encode(program: &Program) -> Vec<u8> {
    let payload = bincode::serde::encode_to_vec(program, config()).unwrap_or_default();
    let checksum: [u8; 32] = Sha256::digest(&payload).into();
    let mut out = Vec::with_capacity(payload.len() + 96);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    for text in [&program.compiler, &program.contract] {
        let bytes = text.as_bytes();
        out.extend_from_slice(&(bytes.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&bytes[..bytes.len().min(u16::MAX as usize)]);
    }
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum);
    out.extend_from_slice(&payload);
    out
}

struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, count: usize, what: &'static str) -> Result<&'b [u8], ArtifactError> {
        let end = self.at.checked_add(count).ok_or(ArtifactError::Truncated(what))?;
        let slice = self.bytes.get(self.at..end).ok_or(ArtifactError::Truncated(what))?;
        self.at = end;
        Ok(slice)
    }

    fn text(&mut self, what: &'static str) -> Result<String, ArtifactError> {
        let length = u16::from_le_bytes(self.take(2, what)?.try_into().map_err(|_| ArtifactError::Truncated(what))?);
        let bytes = self.take(length as usize, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ArtifactError::Payload(format!("the {what} is not UTF-8")))
    }
}

/// Reads and checks the header; returns it with the payload slice.
pub fn read_header(bytes: &[u8]) -> Result<(Header, &[u8]), ArtifactError> {
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) && !bytes.is_empty() {
            Err(ArtifactError::Truncated("the file ends inside the magic"))
        } else {
            Err(ArtifactError::Foreign)
        };
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(ArtifactError::Foreign);
    }
    let mut cursor = Cursor { bytes, at: MAGIC.len() };
    let format = u32::from_le_bytes(
        cursor.take(4, "the file ends inside the header").map(|slice| [slice[0], slice[1], slice[2], slice[3]])?,
    );
    if format > FORMAT_VERSION {
        return Err(ArtifactError::FutureFormat { found: format, supported: FORMAT_VERSION });
    }
    if format < FORMAT_VERSION {
        return Err(ArtifactError::OldFormat { found: format });
    }
    let compiler = cursor.text("the file ends inside the header")?;
    let contract = cursor.text("the file ends inside the header")?;
    let length_bytes = cursor.take(8, "the file ends inside the header")?;
    let payload_length = u64::from_le_bytes(length_bytes.try_into().map_err(|_| ArtifactError::Truncated("header"))?);
    let checksum: [u8; 32] = cursor
        .take(32, "the file ends inside the header")?
        .try_into()
        .map_err(|_| ArtifactError::Truncated("the file ends inside the header"))?;
    let payload = &bytes[cursor.at..];
    let header = Header { format, compiler, contract, payload_length, checksum };
    Ok((header, payload))
}

/// Verifies and decodes artifact bytes.
pub fn decode(bytes: &[u8]) -> Result<Program, ArtifactError> {
    let (header, payload) = read_header(bytes)?;
    if header.compiler != env!("CARGO_PKG_VERSION") {
        return Err(ArtifactError::CompilerMismatch {
            found: header.compiler,
            current: env!("CARGO_PKG_VERSION").to_string(),
        });
    }
    if header.contract != crate::schema::CONTRACT {
        return Err(ArtifactError::Contract { found: header.contract, supported: crate::schema::CONTRACT.to_string() });
    }
    if header.payload_length != payload.len() as u64 {
        return Err(ArtifactError::Length { declared: header.payload_length, found: payload.len() as u64 });
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(ArtifactError::Payload(format!("{} bytes is over the {MAX_PAYLOAD} byte limit", payload.len())));
    }
    let checksum: [u8; 32] = Sha256::digest(payload).into();
    if checksum != header.checksum {
        return Err(ArtifactError::Checksum);
    }
    let limited = config().with_limit::<MAX_PAYLOAD>();
    let (program, used): (Program, usize) = bincode::serde::decode_from_slice(payload, limited)
        .map_err(|error| ArtifactError::Payload(error.to_string()))?;
    if used != payload.len() {
        return Err(ArtifactError::Payload(format!("{} trailing bytes after the program", payload.len() - used)));
    }
    verify(&program)?;
    Ok(program)
}

/// Checks every index inside a decoded program, so the VM can index without panicking.
pub fn verify(program: &Program) -> Result<(), ArtifactError> {
    let strings = program.strings.len();
    let sym = |sym: Sym, what: &str| {
        if (sym.0 as usize) < strings {
            Ok(())
        } else {
            Err(ArtifactError::Inconsistent(format!("{what} names string {} of {strings}", sym.0)))
        }
    };
    let rule = |rule: &Rule| -> Result<(), ArtifactError> {
        if let Some(tool) = rule.tool {
            sym(tool, "a rule")?;
        }
        for (argument, _) in &rule.args {
            sym(*argument, "a rule argument")?;
        }
        sym(rule.display, "a rule")
    };
    for mount in &program.mounts {
        for value in [mount.key, mount.name, mount.source] {
            sym(value, "a mount")?;
        }
    }
    for skill in &program.skills {
        for value in [skill.slug, skill.description, skill.manifest] {
            sym(value, "a skill")?;
        }
    }
    let workflows = program.workflows.len();
    for workflow in &program.workflows {
        let states = workflow.states.len();
        let surfaces = workflow.surfaces.len();
        let scripts = workflow.scripts.len();
        let state_id = |id: StateId| {
            if (id.0 as usize) < states {
                Ok(())
            } else {
                Err(ArtifactError::Inconsistent(format!("a reference to state {} of {states}", id.0)))
            }
        };
        let surface_id = |id: SurfaceId| {
            if (id.0 as usize) < surfaces {
                Ok(())
            } else {
                Err(ArtifactError::Inconsistent(format!("a reference to surface {} of {surfaces}", id.0)))
            }
        };
        let script_id = |id: ScriptId| {
            if (id.0 as usize) < scripts {
                Ok(())
            } else {
                Err(ArtifactError::Inconsistent(format!("a reference to script {} of {scripts}", id.0)))
            }
        };
        if states == 0 {
            return Err(ArtifactError::Inconsistent("a workflow without states".to_string()));
        }
        sym(workflow.slug, "a workflow")?;
        for value in [workflow.prompt_prefix, workflow.child_prompt_prefix, workflow.settings.prompt_cache_ttl] {
            sym(value, "a workflow")?;
        }
        state_id(workflow.entry)?;
        for rule_entry in &workflow.forbid_always {
            rule(rule_entry)?;
        }
        for value in workflow
            .skills_forbid_always
            .iter()
            .chain(&workflow.mounts_forbid_always)
            .chain(&workflow.mounts_read_write)
            .chain(workflow.title.iter())
            .chain(workflow.settings.model.iter())
        {
            sym(*value, "a workflow setting")?;
        }
        for callee in &workflow.callees {
            if callee.workflow.0 as usize >= workflows {
                return Err(ArtifactError::Inconsistent(format!(
                    "a callee names workflow {} of {workflows}",
                    callee.workflow.0
                )));
            }
            for value in [callee.tool, callee.description, callee.parameters].iter().chain(&callee.returns) {
                sym(*value, "a callee")?;
            }
        }
        for script in &workflow.scripts {
            sym(script.path, "a script")?;
            sym(script.source, "a script")?;
        }
        for surface in &workflow.surfaces {
            for tool in &surface.tools {
                sym(tool.name, "a surface")?;
                for (argument, _) in &tool.paths {
                    sym(*argument, "a surface")?;
                }
                if let ToolKind::Delegation(index) = tool.kind
                    && index as usize >= workflow.callees.len()
                {
                    return Err(ArtifactError::Inconsistent("a delegation tool without its callee".to_string()));
                }
            }
        }
        for trigger in &workflow.triggers {
            state_id(trigger.entry)?;
            for value in [trigger.id, trigger.schema, trigger.signature_prompt, trigger.child_signature_prompt]
                .iter()
                .chain(trigger.connection.iter())
                .chain(trigger.description.iter())
            {
                sym(*value, "a trigger")?;
            }
            for entry in trigger.requires.iter().chain(&trigger.returns) {
                sym(entry.name, "a signature entry")?;
                for value in entry
                    .description
                    .iter()
                    .chain(entry.rules.format.iter())
                    .chain(entry.rules.pattern.iter())
                    .chain(entry.rules.content.iter())
                    .chain(entry.rules.enumeration.iter().flatten())
                    .chain(entry.rules.accept.iter().flatten())
                {
                    sym(*value, "a signature rule")?;
                }
            }
        }
        for state in &workflow.states {
            sym(state.slug, "a state")?;
            surface_id(state.surface)?;
            if let Some(on_error) = state.on_error {
                state_id(on_error)?;
            }
            if let Some(script) = state.script {
                script_id(script)?;
            }
            for op in &state.ops {
                match op {
                    Op::RunAgent(surface) | Op::RunGrader(surface) => surface_id(*surface)?,
                    Op::RunCode(script, surface) => {
                        script_id(*script)?;
                        surface_id(*surface)?;
                    }
                    Op::ParkForDecision | Op::Complete => {}
                }
            }
            for transition in &state.transitions {
                state_id(transition.target)?;
                for value in transition.description.iter().chain(transition.marker.iter()) {
                    sym(*value, "a transition")?;
                }
            }
            for value in state
                .requires
                .iter()
                .chain(&state.locks)
                .chain(&state.skills)
                .chain(state.title.iter())
                .chain(state.model.iter())
                .chain(state.skill_access.iter().map(|(name, _)| name))
                .chain(state.mount_access.iter().map(|(name, _)| name))
            {
                sym(*value, "a state")?;
            }
            let GuardTable { forbid, controls, grants } = &state.guards;
            for rule_entry in forbid.iter().chain(grants.iter().flat_map(|grant| grant.entries.iter())) {
                rule(rule_entry)?;
            }
            for value in controls.iter().chain(grants.iter().map(|grant| &grant.tool)) {
                sym(*value, "a guard table")?;
            }
            for part in &state.template {
                if let TemplatePart::Text(text) = part {
                    sym(*text, "a template")?;
                }
            }
            if let Some(decision) = &state.decision {
                for value in
                    std::iter::once(&decision.instructions).chain(&decision.evidence).chain(&decision.approvers)
                {
                    sym(*value, "a decision record")?;
                }
            }
        }
    }
    Ok(())
}

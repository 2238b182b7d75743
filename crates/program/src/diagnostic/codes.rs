//! The registry of every diagnostic code.
//!
//! One table defines each `AMX` code: its stable number, a kebab-case rule name, the
//! severity it is always reported at, a one-line title, and a long explanation kept in
//! `crates/program/explain/<CODE>.md` (what the rule checks, why, an example, the fix).
//! `archmax explain` and the golden tests read this table; nothing else defines codes.
//!
//! Codes are grouped by area: `00xx` files and YAML, `01xx` document shape, `02xx` states,
//! `03xx` transitions, `04xx` triggers and signatures, `05xx` `${{…}}` references, `06xx`
//! tool governance, `07xx` skills and mounts, `08xx` sub-workflows, `09xx` cases, `10xx`
//! flow documents (`archmax flow plan|run`, read by archmax-flow).
//! A code never changes meaning once released; retire one by leaving its number unused.

use super::Severity;

/// Everything the registry knows about one code.
#[derive(Debug)]
pub struct CodeInfo {
    /// `AMX` plus four digits.
    pub code: &'static str,
    /// A kebab-case name for the rule, stable like the code.
    pub name: &'static str,
    pub severity: Severity,
    /// One line saying what the rule is about.
    pub title: &'static str,
    /// Markdown: what the rule checks, why, an example and the fix.
    pub explanation: &'static str,
}

macro_rules! codes {
    ($( $variant:ident = $code:literal, $severity:ident, $name:literal, $title:literal; )*) => {
        /// A diagnostic code. See the module docs for the numbering.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($variant,)* }

        impl Code {
            /// Every code, in numeric order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            pub fn info(self) -> &'static CodeInfo {
                match self {
                    $(Code::$variant => {
                        const INFO: CodeInfo = CodeInfo {
                            code: $code,
                            name: $name,
                            severity: Severity::$severity,
                            title: $title,
                            explanation: include_str!(concat!("../../explain/", $code, ".md")),
                        };
                        &INFO
                    })*
                }
            }
        }
    };
}

codes! {
    // 00xx: files and YAML
    YamlSyntax = "AMX0001", Error, "yaml-syntax", "The file is not valid YAML 1.2";
    DuplicateKey = "AMX0002", Error, "duplicate-key", "A mapping repeats a key";
    YamlLimit = "AMX0003", Error, "yaml-limit", "The document exceeds a size, nesting or alias-expansion limit";
    NotUtf8 = "AMX0004", Error, "not-utf8", "The file is not UTF-8 text";
    MultipleDocuments = "AMX0005", Error, "multiple-documents", "The file holds more than one YAML document";
    NotAMapping = "AMX0006", Error, "not-a-mapping", "The document is not a mapping";
    MissingWorkflowFile = "AMX0007", Error, "missing-workflow-file", "A workflow directory has no workflow.yaml";
    WorkflowSlug = "AMX0008", Error, "workflow-slug", "A workflow directory name is not a kebab-case slug";
    WorkflowMdFrontmatter = "AMX0009", Error, "workflow-md-frontmatter", "WORKFLOW.md opens with a frontmatter block";
    TestsConfigJs = "AMX0010", Error, "tests-config-js", "tests.config.js is no longer read";
    HostConfig = "AMX0011", Error, "host-config", "archmax.toml is malformed";
    SkillManifest = "AMX0012", Error, "skill-manifest", "A skill bundle's SKILL.md is missing or malformed";
    SkillNameMismatch = "AMX0013", Error, "skill-name-mismatch", "A SKILL.md names a different slug than its directory";
    FileRead = "AMX0014", Error, "file-read", "A workspace file could not be read";
    LinkInMount = "AMX0015", Warning, "link-in-mount", "A mount's source holds a symbolic link sessions will not follow";
    HostConfigSuspect = "AMX0016", Warning, "host-config-suspect", "archmax.toml holds a setting that works but is likely a mistake";
    UnknownProvider = "AMX0017", Error, "unknown-provider", "A model route names a provider archmax.toml does not declare";
    ProviderKeyUnset = "AMX0018", Warning, "provider-key-unset", "A provider's key variable is not set in this environment";
    UnroutedModel = "AMX0019", Warning, "unrouted-model", "A model id a workflow names is served by no route";
    UnpricedUnderCostLimit = "AMX0020", Warning, "unpriced-under-cost-limit", "A cost limit bounds a workflow whose model has no price";

    // 01xx: document shape
    UnknownKey = "AMX0100", Error, "unknown-key", "A key the schema does not define";
    RemovedKey = "AMX0101", Error, "removed-key", "A key that contract 3 removed";
    WrongType = "AMX0102", Error, "wrong-type", "A value has the wrong type";
    MissingKey = "AMX0103", Error, "missing-key", "A required key is missing";
    UnsupportedRuntime = "AMX0104", Error, "unsupported-runtime", "The runtime contract is not \"3\"";
    DisabledNotBoolean = "AMX0105", Error, "disabled-not-boolean", "`disabled` is not a boolean";
    EmptyValue = "AMX0106", Error, "empty-value", "A value that must be non-empty is empty";
    InvalidValue = "AMX0107", Error, "invalid-value", "A value is outside its allowed set or range";
    MissingInstructions = "AMX0108", Warning, "missing-instructions", "The workflow has no top-level instructions";
    DisabledWorkflow = "AMX0109", Warning, "disabled-workflow", "The workflow is disabled";
    ModelNotId = "AMX0110", Error, "model-not-id", "A model is configured as a block instead of an id";

    // 02xx: states
    StateSlug = "AMX0200", Error, "state-slug", "A state key is not a kebab-case slug";
    UnknownStateType = "AMX0201", Error, "unknown-state-type", "A state has an unknown type";
    KeyRefusedOnType = "AMX0202", Error, "key-refused-on-type", "A state carries a key its type refuses";
    KeyInertOnType = "AMX0203", Warning, "key-inert-on-type", "A state carries a key its type ignores";
    TypeRequiresKey = "AMX0204", Error, "type-requires-key", "A state lacks a key its type requires";
    NeedsTransition = "AMX0205", Error, "needs-transition", "A human or grader state has no transition";
    HumanSelfTransition = "AMX0206", Error, "human-self-transition", "A human state has a transition to itself";
    HumanDuplicateType = "AMX0207", Error, "human-duplicate-type", "A human state has two transitions of one labelled type";
    ScriptPath = "AMX0208", Error, "script-path", "A code state's script path is malformed";
    ScriptMissing = "AMX0209", Error, "script-missing", "A code state's script file does not exist";
    ScriptImport = "AMX0210", Error, "script-import", "A script imports something other than @archmax-ai/harness";
    LockReserved = "AMX0211", Error, "lock-reserved", "A state locks a reserved variable";
    LockOwner = "AMX0212", Error, "lock-owner", "Two states lock the same variable";
    NoStartState = "AMX0213", Error, "no-start-state", "No state declares a trigger";
    NoStates = "AMX0214", Error, "no-states", "The workflow declares no states";
    DuplicateName = "AMX0215", Warning, "duplicate-name", "A list names the same variable twice";
    UnreachableState = "AMX0216", Warning, "unreachable-state", "No trigger can reach a state";
    RedundantModel = "AMX0217", Warning, "redundant-model", "A state's model repeats settings.model";
    VariableName = "AMX0218", Error, "variable-name", "A variable name does not have the required shape";
    ScriptSyntax = "AMX0219", Error, "script-syntax", "A code-state script does not compile";
    ScriptAdvanceTarget = "AMX0220", Warning, "script-advance-target", "A code-state script advances to a state its state has no transition to";

    // 03xx: transitions
    UnknownTarget = "AMX0300", Error, "unknown-target", "A transition or on_error names an undeclared state";
    DescriptionRequired = "AMX0301", Error, "description-required", "A transition needs a description";
    DuplicateTransition = "AMX0302", Warning, "duplicate-transition", "Two transitions of one state lead to the same target";
    OnErrorSelf = "AMX0303", Warning, "on-error-self", "A state routes its own failures to itself";

    // 04xx: triggers and signatures
    DuplicateTrigger = "AMX0400", Error, "duplicate-trigger", "Two states declare the same trigger id";
    TriggerKeyRefused = "AMX0401", Error, "trigger-key-refused", "A trigger declaration names its entry or its id";
    UnknownTriggerKey = "AMX0402", Warning, "unknown-trigger-key", "A trigger declaration carries a key the runtime does not read";
    TriggerPath = "AMX0403", Error, "trigger-path", "A trigger's session or message path is malformed";
    TriggerId = "AMX0404", Error, "trigger-id", "A trigger id is empty or retired";
    SignatureEntry = "AMX0405", Error, "signature-entry", "A requires or returns entry is malformed";
    DuplicateSignatureName = "AMX0406", Error, "duplicate-signature-name", "A signature list names a variable twice";
    RuleNotApplicable = "AMX0407", Error, "rule-not-applicable", "A signature rule on a type that does not take it";
    InconsistentBounds = "AMX0408", Error, "inconsistent-bounds", "A signature entry's lower bound exceeds its upper bound";
    FormatWithPattern = "AMX0409", Error, "format-with-pattern", "A signature entry has both format and pattern";
    InvalidPattern = "AMX0410", Error, "invalid-pattern", "A pattern is not a valid RE2 regular expression";
    ReservedReturn = "AMX0411", Error, "reserved-return", "returns names trigger, title or note";
    InvalidRuleValue = "AMX0412", Error, "invalid-rule-value", "A signature rule has a malformed value";

    // 05xx: references
    MalformedReference = "AMX0500", Error, "malformed-reference", "A ${{…}} reference is malformed";
    UnguaranteedReference = "AMX0501", Warning, "unguaranteed-reference", "A guard reads a variable nothing guarantees";
    MisspeltReference = "AMX0502", Warning, "misspelt-reference", "A reference in instructions names an undeclared variable close to a declared one";
    UnsubstitutedReference = "AMX0503", Error, "unsubstituted-reference", "A ${{…}} reference sits where nothing substitutes it";

    // 06xx: tool governance
    WildcardInAllow = "AMX0600", Error, "wildcard-in-allow", "The tool \"*\" appears in an allow list";
    UngrantableTool = "AMX0601", Error, "ungrantable-tool", "An allow list names `task`, which no state may have";
    WithheldTool = "AMX0602", Error, "withheld-tool", "A grader or code state allows a tool its type never has";
    GovernancePlane = "AMX0603", Error, "governance-plane", "A tool entry reaches into workflows/";
    AdvanceForbidden = "AMX0604", Error, "advance-forbidden", "archmax_advance is forbidden while a state has transitions";
    ScratchpadNarrowing = "AMX0605", Warning, "scratchpad-narrowing", "An allow entry narrows only inside scratchpad/";
    RuntimeZone = "AMX0606", Error, "runtime-zone", "An allow entry writes into a runtime-owned area";
    ReadOnlyZone = "AMX0607", Error, "read-only-zone", "An allow entry writes into a read-only mount";
    ScriptOutsideSkills = "AMX0608", Error, "script-outside-skills", "An archmax_run entry names scripts outside every skill bundle";
    GrantDenied = "AMX0609", Error, "grant-denied", "A forbid list denies everything an allow entry grants";
    InertEntry = "AMX0610", Warning, "inert-entry", "A tool entry can have no effect";
    ReservedPrefix = "AMX0611", Error, "reserved-prefix", "A tool name claims the archmax_ prefix without being a runtime tool";
    UnprefixedControl = "AMX0612", Warning, "unprefixed-control", "A tool entry names a control tool without its archmax_ prefix";
    AdvanceGuardNoEdge = "AMX0613", Warning, "advance-guard-no-edge", "An archmax_advance guard names a target with no edge";
    SkillPathNotEnabled = "AMX0614", Error, "skill-path-not-enabled", "A tool entry reaches into a skill bundle the state does not enable";
    MountPathNotEnabled = "AMX0615", Warning, "mount-path-not-enabled", "A tool entry reaches only into a mount the state does not have";
    ReadDenialUnbound = "AMX0616", Warning, "read-denial-unbound", "A state's read denial does not bind the sub-workflows it calls";
    HostToolNotProvided = "AMX0617", Error, "host-tool-not-provided", "A granted host tool is provided by no configured server";

    // 07xx: skills and mounts
    UnknownSkill = "AMX0700", Error, "unknown-skill", "A skills list names a bundle the workspace does not serve";
    SkillEntryShape = "AMX0701", Error, "skill-entry-shape", "A skills entry is not a bundle slug";
    UnknownMount = "AMX0702", Error, "unknown-mount", "A mounts list names a mount the host does not serve";
    MountEntryShape = "AMX0703", Error, "mount-entry-shape", "A mounts entry is malformed";
    RedundantGrant = "AMX0704", Warning, "redundant-grant", "A state grants what the workflow already grants everywhere";
    EmptyAllow = "AMX0705", Warning, "empty-allow", "A state's empty allow list subtracts nothing";
    MissingSkillsBlock = "AMX0706", Warning, "missing-skills-block", "The workspace serves skills but the workflow has no skills block";
    MissingMountsBlock = "AMX0707", Warning, "missing-mounts-block", "The workspace governs mounts but the workflow has no mounts block";
    UngovernedMountGrant = "AMX0708", Warning, "ungoverned-mount-grant", "A grant names a mount every state already sees";
    ReadWriteOnReadOnly = "AMX0709", Warning, "read-write-on-read-only", "read_write is asked of a mount the host serves read-only";
    ForbidAlwaysGranted = "AMX0710", Warning, "forbid-always-granted", "A name is both granted and forbidden workflow-wide";
    ForbidNothing = "AMX0711", Warning, "forbid-nothing", "A forbid entry takes away something nothing grants";
    AllowAndForbid = "AMX0712", Warning, "allow-and-forbid", "A state both allows and forbids the same name";
    HostPathsOverLink = "AMX0713", Error, "host-paths-over-link", "A host tool is granted paths in a mount whose source holds a symbolic link";

    // 08xx: sub-workflows
    UnknownWorkflowTarget = "AMX0800", Error, "unknown-workflow-target", "A delegation tool names a workflow the workspace does not have";
    TargetNoManual = "AMX0801", Error, "target-no-manual", "A delegation target has no manual trigger";
    DelegationCycle = "AMX0802", Error, "delegation-cycle", "Workflows call each other in a cycle";
    DelegationDepth = "AMX0803", Error, "delegation-depth", "A chain of sub-workflow calls is deeper than 3";
    DisabledTarget = "AMX0804", Warning, "disabled-target", "A state may call a disabled workflow";
    InvalidTarget = "AMX0805", Error, "invalid-target", "A delegation target does not validate";

    // 09xx: cases
    CaseSchema = "AMX0900", Error, "case-schema", "A case file does not follow the case schema";
    CaseTitle = "AMX0901", Error, "case-title", "A case title is missing, multi-line or longer than 60 characters";
    CaseDescription = "AMX0902", Error, "case-description", "A case description is missing or longer than 200 characters";
    AssertionBeforeAction = "AMX0903", Error, "assertion-before-action", "A case asserts before any action";
    MalformedRegex = "AMX0904", Error, "malformed-regex", "A /regex/flags string does not compile";
    UnknownCaseTrigger = "AMX0905", Error, "unknown-case-trigger", "A case names a trigger the workflow does not declare";
    FixtureMissing = "AMX0906", Error, "fixture-missing", "A case fixture is missing or outside tests/";
    UnseedablePath = "AMX0907", Error, "unseedable-path", "A case seeds a path that is not a session path";
    CaseUnknownState = "AMX0908", Error, "case-unknown-state", "A case names a state the workflow does not declare";
    CaseUnknownWorkflow = "AMX0909", Error, "case-unknown-workflow", "A case names a workflow the workspace does not have";
    GradeWithoutJudge = "AMX0910", Warning, "grade-without-judge", "A case grades without tests.judge";
    TapeSchema = "AMX0911", Error, "tape-schema", "A case's tape does not follow the tape format";
    TapeUnknownState = "AMX0912", Error, "tape-unknown-state", "A tape entry names a state or workflow the workspace does not have";
    TapeAdvanceTarget = "AMX0913", Warning, "tape-advance-target", "A tape scripts an archmax_advance its state cannot take";

    // 10xx: flow documents (archmax-flow)
    FlowFile = "AMX1000", Error, "flow-file", "A flow document cannot be read: its extension, its text or its JSON";
    FlowShape = "AMX1001", Error, "flow-shape", "A flow document's key is unknown, missing or of the wrong type";
    FlowNodeId = "AMX1002", Error, "flow-node-id", "A node id is missing, repeated among its siblings or holds a dot";
    FlowUnknownNeed = "AMX1003", Error, "flow-unknown-need", "A node needs something that is not one of its siblings";
    FlowNeedsCycle = "AMX1004", Error, "flow-needs-cycle", "Sibling nodes need each other in a cycle";
    FlowRepeat = "AMX1005", Error, "flow-repeat", "A repeat is not `{max: N}` with N at least 1, or sits on a step";
    FlowGives = "AMX1006", Error, "flow-gives", "A gives list is malformed or sits on a step";
    FlowStepKind = "AMX1007", Error, "flow-step-kind", "A step's kind is not llm, command or operator";
    FlowCommand = "AMX1008", Error, "flow-command", "A command step's command is missing, empty or not a list of strings";
    FlowOperatorPrompt = "AMX1009", Error, "flow-operator-prompt", "An operator step has no non-empty prompt";
    FlowScope = "AMX1010", Error, "flow-scope", "A step's write scope cannot be read";
    FlowContext = "AMX1011", Error, "flow-context", "A step's context is not a list of relative file paths";
    FlowRunKeyUnread = "AMX1012", Warning, "flow-run-key-unread", "A step's run payload holds a key archmax does not read";
}

impl Code {
    /// Looks a code up by its `AMX` number, case-insensitively.
    pub fn from_code(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|code| code.info().code.eq_ignore_ascii_case(text.trim()))
    }

    pub fn as_str(self) -> &'static str {
        self.info().code
    }
}

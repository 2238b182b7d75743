//! The small closed vocabularies a compiled program shares with its source: state
//! types, transition types, mount access and signature value types. The front end parses
//! them out of YAML (`schema::ast` re-exports them); the program and the VM match on them.

/// How a mount is granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    ReadWrite,
}

/// The four state types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateKind {
    Agent,
    Human,
    Grader,
    Code,
}

impl StateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StateKind::Agent => "agent",
            StateKind::Human => "human",
            StateKind::Grader => "grader",
            StateKind::Code => "code",
        }
    }

    /// Grader and code states run on entry, without the agent's model.
    pub fn is_automated(self) -> bool {
        matches!(self, StateKind::Grader | StateKind::Code)
    }
}

/// A transition's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionType {
    None,
    Approve,
    Reject,
    Refine,
}

impl TransitionType {
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionType::None => "none",
            TransitionType::Approve => "approve",
            TransitionType::Reject => "reject",
            TransitionType::Refine => "refine",
        }
    }
}

/// The nine value types of a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueType {
    String,
    Integer,
    Number,
    Boolean,
    Date,
    DateTime,
    Object,
    Array,
    File,
}

impl ValueType {
    pub const ALL: [ValueType; 9] = [
        ValueType::String,
        ValueType::Integer,
        ValueType::Number,
        ValueType::Boolean,
        ValueType::Date,
        ValueType::DateTime,
        ValueType::Object,
        ValueType::Array,
        ValueType::File,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Integer => "integer",
            ValueType::Number => "number",
            ValueType::Boolean => "boolean",
            ValueType::Date => "date",
            ValueType::DateTime => "date-time",
            ValueType::Object => "object",
            ValueType::Array => "array",
            ValueType::File => "file",
        }
    }

    pub fn parse(text: &str) -> Option<ValueType> {
        ValueType::ALL.into_iter().find(|ty| ty.as_str() == text)
    }
}

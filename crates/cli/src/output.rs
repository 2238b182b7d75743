//! Terminal conventions shared by every command: colour, usage errors, failures, and
//! [`terminal_safe`], the one filter every text a model, a tool or a session holds
//! passes through before the CLI prints it as text.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::OnceLock;

/// `--color`: when stderr is painted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// The global flags, set once by `main` before any command runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Terminal {
    pub color: ColorChoice,
    /// `--quiet`: only results and problems; no headers, flows, progress or footers.
    pub quiet: bool,
}

static TERMINAL: OnceLock<Terminal> = OnceLock::new();

pub fn configure(terminal: Terminal) {
    let _ = TERMINAL.set(terminal);
}

fn terminal() -> Terminal {
    TERMINAL.get().copied().unwrap_or_default()
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    terminal().quiet
}

/// Colour as `--color` says; `auto` paints only a terminal, and never under `NO_COLOR`.
pub fn stderr_color() -> bool {
    match terminal().color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty()) && std::io::stderr().is_terminal()
        }
    }
}

/// An informational line on stderr, left out under `--quiet`.
macro_rules! note {
    ($($arg:tt)*) => {
        if !$crate::output::quiet() {
            eprintln!($($arg)*);
        }
    };
}
pub(crate) use note;

/// Help and version go to stdout with exit 0; any other parse error is one line on
/// stderr naming what is wrong (the missing arguments, the accepted values), what was
/// probably meant ("did you mean"), a pointer to the `--help` of the command that was
/// being parsed, and exit 2 — exit 1 under `archmax flow`, whose every refusal of the
/// command line or the document is 1, so 2 stays a walk that finished unclean. `cli`
/// is the whole command tree.
pub fn usage_error(error: clap::Error, cli: &clap::Command) -> ExitCode {
    use clap::error::ErrorKind;
    let words: Vec<String> = std::env::args_os().skip(1).map(|word| word.to_string_lossy().into_owned()).collect();
    let (path, command) = command_path(cli, &words);
    let refused = ExitCode::from(if path.starts_with(&[FLOW_COMMAND]) { 1 } else { 2 });
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            refused
        }
        _ => {
            let elsewhere = flag_of_another_command(&error, cli, &path);
            let path = std::iter::once(cli.get_name()).chain(path.iter().copied()).collect::<Vec<_>>().join(" ");
            eprintln!("error: {}; try `{path} --help`", usage_sentence(&error, command, elsewhere));
            refused
        }
    }
}

/// The command whose usage errors exit 1 instead of 2.
const FLOW_COMMAND: &str = "flow";

/// One sentence for a parse error: what is wrong, the accepted values when a value was
/// wrong or missing, and what was meant as "did you mean": clap's suggestion, else the
/// nearest subcommand or flag of `command` (the one being parsed) by edit distance,
/// which catches short slips clap's similarity misses (`flow rn`); when `command` has
/// no such flag, `elsewhere`: the command beside it that has ([`flag_of_another_command`]).
fn usage_sentence(error: &clap::Error, command: &clap::Command, elsewhere: Option<String>) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let strings = |kind: ContextKind| -> Vec<String> {
        match error.get(kind) {
            Some(ContextValue::String(one)) => vec![one.clone()],
            Some(ContextValue::Strings(many)) => many.clone(),
            _ => Vec::new(),
        }
    };
    let quoted = |items: &[String]| items.iter().map(|item| format!("`{item}`")).collect::<Vec<_>>();
    let mut sentence = match error.kind() {
        ErrorKind::MissingRequiredArgument => {
            match strings(ContextKind::InvalidArg).iter().map(|item| either_of(item)).collect::<Vec<_>>().as_slice() {
                [] => "a required argument is missing".to_string(),
                [one] => format!("the required argument {one} is missing"),
                many => format!("the required arguments {} are missing", many.join(", ")),
            }
        }
        _ => {
            let rendered = error.render().to_string();
            rendered
                .lines()
                .find(|line| !line.trim().is_empty())
                .unwrap_or("invalid arguments")
                .trim()
                .trim_start_matches("error: ")
                .to_string()
        }
    };
    let mut suggested: Vec<String> =
        [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg, ContextKind::SuggestedValue]
            .into_iter()
            .flat_map(strings)
            .collect();
    if suggested.is_empty() {
        suggested.extend(nearest_name(error, command));
    }
    if !suggested.is_empty() {
        sentence.push_str(&format!(" (did you mean {}?)", quoted(&suggested).join(" or ")));
    } else if let Some(elsewhere) = elsewhere {
        sentence.push_str(&format!("; {elsewhere}"));
    }
    let accepted = strings(ContextKind::ValidValue);
    if error.kind() == ErrorKind::InvalidValue && !accepted.is_empty() {
        sentence.push_str(&format!("; the values are {}", accepted.join(", ")));
    }
    if error.kind() == ErrorKind::ArgumentConflict {
        sentence.push_str("; give only one of them");
    }
    sentence
}

/// A missing argument as the sentence names it: `` `--input <TEXT>` ``, and a group
/// clap writes `<--flow <FILE>|FLOW>` as `` `--flow <FILE>` (or `FLOW`) ``.
fn either_of(item: &str) -> String {
    let alternatives =
        item.strip_prefix('<').and_then(|inner| inner.strip_suffix('>')).filter(|inner| inner.contains('|'));
    match alternatives.map(|inner| inner.split('|').collect::<Vec<_>>()) {
        Some(choices) if choices.len() > 1 => {
            let rest: Vec<String> = choices[1..].iter().map(|choice| format!("`{choice}`")).collect();
            format!("`{}` (or {})", choices[0], rest.join(" or "))
        }
        _ => format!("`{item}`"),
    }
}

/// The subcommand or long flag of `command` nearest to the unknown word of `error`.
fn nearest_name(error: &clap::Error, command: &clap::Command) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let word = |kind: ContextKind| match error.get(kind) {
        Some(ContextValue::String(one)) => Some(one.clone()),
        _ => None,
    };
    match error.kind() {
        ErrorKind::InvalidSubcommand => {
            let typed = word(ContextKind::InvalidSubcommand)?;
            let names: Vec<&str> = command.get_subcommands().map(clap::Command::get_name).collect();
            archmax_program::diagnostic::did_you_mean(&typed, names).map(str::to_string)
        }
        ErrorKind::UnknownArgument => {
            let typed = unknown_long(error)?;
            let longs: Vec<&str> = command.get_arguments().filter_map(clap::Arg::get_long).collect();
            archmax_program::diagnostic::did_you_mean(&typed, longs).map(|long| format!("--{long}"))
        }
        _ => None,
    }
}

/// The long flag (without `--`) of an unknown-argument error.
fn unknown_long(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(typed)) => Some(typed.strip_prefix("--")?.split('=').next()?.to_string()),
        _ => None,
    }
}

/// For an unknown long flag of the subcommand at `path`, the sibling subcommand that has
/// it (or one near it): "`--parallel` is a flag of `archmax flow run`" for `flow plan
/// --paralel`.
fn flag_of_another_command(error: &clap::Error, cli: &clap::Command, path: &[&str]) -> Option<String> {
    let typed = unknown_long(error)?;
    let (here, above) = path.split_last()?;
    let parent = above.iter().try_fold(cli, |command, name| command.find_subcommand(name))?;
    parent.get_subcommands().filter(|sibling| sibling.get_name() != *here).find_map(|sibling| {
        let longs: Vec<&str> = sibling.get_arguments().filter_map(clap::Arg::get_long).collect();
        let long = archmax_program::diagnostic::did_you_mean(&typed, longs)?;
        let words: Vec<&str> = std::iter::once(cli.get_name()).chain(above.iter().copied()).collect();
        Some(format!("`--{long}` is a flag of `{} {}`", words.join(" "), sibling.get_name()))
    })
}

/// The subcommands named in `words`, as deep as they go (`["flow", "run"]`), and the
/// command they lead to. A flag's separate value is never taken for a subcommand
/// (`--root flow validate` is `validate`).
fn command_path<'c>(cli: &'c clap::Command, words: &[String]) -> (Vec<&'c str>, &'c clap::Command) {
    let mut path = Vec::new();
    let mut current = cli;
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if word.starts_with('-') {
            if !word.contains('=') && takes_value(cli, current, word) {
                words.next();
            }
            continue;
        }
        // Anything else is a positional argument, or a subcommand.
        if let Some(next) = current.find_subcommand(word) {
            path.push(next.get_name());
            current = next;
        }
    }
    (path, current)
}

/// Whether `flag` (`--root`, `-o`) is an option of `command`, or a global one of `cli`,
/// that takes a value.
fn takes_value(cli: &clap::Command, command: &clap::Command, flag: &str) -> bool {
    let matches = |arg: &&clap::Arg| match flag.strip_prefix("--") {
        Some(long) => arg.get_long() == Some(long),
        None => flag.len() == 2 && flag.chars().nth(1).is_some_and(|short| arg.get_short() == Some(short)),
    };
    command.get_arguments().chain(cli.get_arguments()).find(matches).is_some_and(|arg| arg.get_action().takes_values())
}

/// A usage problem found after parsing (bad JSON, an empty prompt): one line, exit 2.
pub fn usage(command: &str, message: &str) -> ExitCode {
    let message = message.trim_end().trim_end_matches('.');
    eprintln!("error: {message}; try `archmax {command} --help`");
    ExitCode::from(2)
}

/// What a control character is shown as: the replacement character, visible and inert.
pub const CONTROL_REPLACEMENT: char = '\u{FFFD}';

/// `text` as a terminal can show it without acting on it: every control character
/// other than newline and tab (ESC and so every CSI/OSC escape sequence, BEL, a carriage
/// return, backspace, DEL, and the C1 controls U+0080–U+009F, 8-bit CSI and OSC
/// included) becomes [`CONTROL_REPLACEMENT`]. Model and tool text cannot retitle,
/// clear or repaint the reader's terminal, nor hide what came before it on the line.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let acts = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(|c| if acts(c) { CONTROL_REPLACEMENT } else { c }).collect())
}

/// `text` kept to one line a terminal shows without acting on it: [`terminal_safe`], and
/// its newlines and tabs shown as spaces, so text a model wrote cannot start a line of
/// its own (a forged `next:` command above the real one).
pub fn one_terminal_line(text: &str) -> String {
    terminal_safe(text).replace(['\n', '\t'], " ")
}

/// A failure established after parsing: one line, exit 1.
pub fn failure(message: impl std::fmt::Display) -> ExitCode {
    // A reply that was streaming when the command failed keeps its own line.
    crate::reply::end_line();
    eprintln!("error: {message}");
    ExitCode::from(1)
}

/// `20369` → `20,369`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod control_characters {
    use super::{CONTROL_REPLACEMENT, terminal_safe};

    #[test]
    fn escape_sequences_and_other_controls_are_shown_as_replacement_characters() {
        let hostile = "a\x1b]0;pwned\x07\x1b[2Jb\r\x08\x7f\u{9b}31m\u{9d}x";
        let shown = terminal_safe(hostile);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert_eq!(shown.chars().filter(|&c| c == CONTROL_REPLACEMENT).count(), 8, "{shown:?}");
        assert!(shown.starts_with('a') && shown.contains("]0;pwned") && shown.ends_with('x'));
        assert_eq!(terminal_safe("line one\n\tline two"), "line one\n\tline two");
    }
}

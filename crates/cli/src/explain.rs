//! `archmax explain AMX0301`, `archmax explain tool.not-allowed` and `archmax explain
//! --list`: the long explanation of a diagnostic code or a kernel rule.
//!
//! Both vocabularies come from their registries (`archmax_compiler::Code`,
//! `archmax_vm::kernel::Rule`); this file only renders them.

use std::process::ExitCode;

use archmax_compiler::diagnostic::{Code, did_you_mean, edit_distance};
use archmax_vm::kernel::Rule;

use crate::output::failure;

pub fn run(name: Option<&str>, list: bool) -> ExitCode {
    if list {
        for code in Code::ALL {
            let info = code.info();
            println!("{}  {:<7}  {:<26}  {}", info.code, info.severity.as_str(), info.name, info.title);
        }
        let width = Rule::ALL.iter().map(|rule| rule.as_str().len()).max().unwrap_or(0);
        for rule in Rule::ALL {
            let info = rule.info();
            println!("{:<width$}  {:<7}  {}", info.id, info.outcome.as_str(), info.title);
        }
        return ExitCode::SUCCESS;
    }
    let Some(text) = name else {
        return failure(
            "name a code or a rule, such as `archmax explain AMX0301` or `archmax explain tool.not-allowed`",
        );
    };
    if let Some(code) =
        Code::from_code(text).or_else(|| Code::ALL.iter().copied().find(|code| code.info().name == text))
    {
        let info = code.info();
        print_explanation(&format!("{} ({}): {}", info.code, info.severity.as_str(), info.title), info.explanation);
        return ExitCode::SUCCESS;
    }
    if let Ok(rule) = text.parse::<Rule>() {
        let info = rule.info();
        print_explanation(
            &format!(
                "{} ({}, {}): {}",
                info.id,
                if rule.is_flow_gate() { "flow rule" } else { "kernel rule" },
                info.outcome.as_str(),
                info.title
            ),
            info.explanation,
        );
        return ExitCode::SUCCESS;
    }
    let hint = suggestion(text)
        .map(|close| format!("; did you mean `{close}`?"))
        .unwrap_or_else(|| "; `archmax explain --list` lists every code and rule".to_string());
    failure(format!("there is no diagnostic code or kernel rule `{text}`{hint}"))
}

/// The code or rule `text` is most likely a typo of. A code's identity is its four
/// digits, so only one edit away counts (a wrong, missing, extra or swapped digit):
/// `AMX9999` is two edits from `AMX0909` but is not a typo of it.
fn suggestion(text: &str) -> Option<&'static str> {
    let codes = Code::ALL.iter().map(|code| code.info().code);
    if text.get(..3).is_some_and(|prefix| prefix.eq_ignore_ascii_case("AMX")) {
        let typed = text.to_ascii_uppercase();
        return codes
            .map(|code| (edit_distance(&typed, code), code))
            .filter(|(distance, _)| *distance <= 1)
            .min()
            .map(|(_, code)| code);
    }
    did_you_mean(text, codes.chain(Rule::ALL.iter().map(|rule| rule.as_str())))
}

/// The heading line, a blank line, then the Markdown explanation ending in a new line.
fn print_explanation(heading: &str, explanation: &str) {
    println!("{heading}\n");
    print!("{explanation}");
    if !explanation.ends_with('\n') {
        println!();
    }
}

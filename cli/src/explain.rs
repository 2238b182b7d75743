//! `archmax explain AMX0301` and `archmax explain --list`.

use std::process::ExitCode;

use archmax_compiler::diagnostic::{Code, did_you_mean};

use crate::output::failure;

pub fn run(code: Option<&str>, list: bool) -> ExitCode {
    if list {
        for code in Code::ALL {
            let info = code.info();
            println!("{}  {:<7}  {:<26}  {}", info.code, info.severity.as_str(), info.name, info.title);
        }
        return ExitCode::SUCCESS;
    }
    let Some(text) = code else {
        return failure("name a code, such as `archmax explain AMX0301`");
    };
    let found = Code::from_code(text).or_else(|| Code::ALL.iter().copied().find(|code| code.info().name == text));
    match found {
        Some(code) => {
            let info = code.info();
            println!("{} ({}): {}\n", info.code, info.severity.as_str(), info.title);
            print!("{}", info.explanation);
            if !info.explanation.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        None => {
            let names: Vec<&str> = Code::ALL.iter().map(|code| code.info().code).collect();
            let hint = did_you_mean(text, names.iter().copied())
                .map(|close| format!("; did you mean `{close}`?"))
                .unwrap_or_else(|| "; `archmax explain --list` lists every code".to_string());
            failure(format!("there is no diagnostic code `{text}`{hint}"))
        }
    }
}

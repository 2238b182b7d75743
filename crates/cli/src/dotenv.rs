//! `.env` files: the variables a workspace keeps beside itself (an endpoint, a key, a
//! model), loaded before any command runs.
//!
//! The real environment always wins. A `.env` in the current directory is read first,
//! then the workspace root's `.env` replaces its keys (keys only in the first survive).
//! A line is `KEY=VALUE` (an `export ` prefix allowed), a value may be quoted with `'` or
//! `"`, and `#` starts a comment line. A line that is none of these is named in a
//! warning and skipped, never guessed at. Trust is the operator's alone: a `.env` never
//! sets `ARCHMAX_TRUSTED_KEYS` (a workspace naming its own signing key would have its
//! bytecode run unchecked), the session seal key (`ARCHMAX_SEAL_KEY`,
//! `ARCHMAX_SEAL_KEY_FILE`: a file in the workspace naming the key would let whoever
//! writes it forge seals) nor the test-fault `ARCHMAX_TEST_*` variables.

use std::collections::BTreeMap;
use std::path::Path;

/// What two `.env` files hold, merged: later files win. Each problem is one warning line.
pub fn read(files: &[&Path]) -> (BTreeMap<String, String>, Vec<String>) {
    let mut values = BTreeMap::new();
    let mut warnings = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (index, line) in text.lines().enumerate() {
            match parse_line(line) {
                Ok(Some((key, _))) if operator_only(&key) => warnings.push(format!(
                    "warning: {}:{}: `{key}` is never read from a .env file; set it in the environment",
                    file.display(),
                    index + 1
                )),
                Ok(Some((key, value))) => {
                    values.insert(key, value);
                }
                Ok(None) => {}
                Err(problem) => {
                    warnings.push(format!("warning: {}:{}: {problem}; the line is skipped", file.display(), index + 1))
                }
            }
        }
    }
    (values, warnings)
}

/// Variables only the operator's real environment may set.
fn operator_only(key: &str) -> bool {
    matches!(key, "ARCHMAX_TRUSTED_KEYS" | "ARCHMAX_SEAL_KEY" | "ARCHMAX_SEAL_KEY_FILE")
        || key.starts_with("ARCHMAX_TEST_")
}

/// One line: `Ok(None)` for a blank or comment line.
fn parse_line(line: &str) -> Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let Some((key, value)) = line.split_once('=') else {
        return Err("it is not `KEY=VALUE`".to_string());
    };
    let key = key.trim();
    if key.is_empty()
        || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || key.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!("`{key}` is not a variable name"));
    }
    let value = value.trim();
    let value = match (value.chars().next(), value.chars().last()) {
        (Some(quote @ ('"' | '\'')), Some(last)) if value.len() >= 2 && last == quote => &value[1..value.len() - 1],
        (Some('"' | '\''), _) => return Err("its value opens a quote it never closes".to_string()),
        _ => value,
    };
    Ok(Some((key.to_string(), value.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_the_module_says() {
        assert_eq!(parse_line("  # a comment"), Ok(None));
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("ARCHMAX_MODEL=gpt-test"), Ok(Some(("ARCHMAX_MODEL".into(), "gpt-test".into()))));
        assert_eq!(parse_line("export KEY = 'a b'"), Ok(Some(("KEY".into(), "a b".into()))));
        assert_eq!(parse_line("URL=\"http://x/?a=b\""), Ok(Some(("URL".into(), "http://x/?a=b".into()))));
        assert!(parse_line("no equals sign").is_err());
        assert!(parse_line("1KEY=x").is_err());
        assert!(parse_line("KEY=\"open").is_err());
    }

    #[test]
    fn the_later_file_wins_and_keys_only_in_the_first_survive() {
        let dir = std::env::temp_dir().join(format!("archmax-dotenv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch");
        let (first, second) = (dir.join("cwd.env"), dir.join("root.env"));
        std::fs::write(&first, "A=cwd\nB=cwd\nbroken line\n").expect("write");
        std::fs::write(&second, "B=root\nARCHMAX_TRUSTED_KEYS=ed25519:00\nARCHMAX_TEST_ABORT_AFTER_COMMITS=1\n")
            .expect("write");
        let (values, warnings) = read(&[&first, &second, &dir.join("missing.env")]);
        assert_eq!(values.get("A").map(String::as_str), Some("cwd"));
        assert_eq!(values.get("B").map(String::as_str), Some("root"));
        assert!(
            !values.contains_key("ARCHMAX_TRUSTED_KEYS") && !values.contains_key("ARCHMAX_TEST_ABORT_AFTER_COMMITS")
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("cwd.env:3"), "{warnings:?}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_dotenv_file_never_names_the_session_seal_key() {
        let dir = std::env::temp_dir().join(format!("archmax-dotenv-seal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch");
        let file = dir.join(".env");
        let key = "00".repeat(32);
        std::fs::write(&file, format!("ARCHMAX_SEAL_KEY={key}\nARCHMAX_SEAL_KEY_FILE=/tmp/mine\nKEPT=1\n"))
            .expect("write");
        let (values, warnings) = read(&[&file]);
        assert!(!values.contains_key("ARCHMAX_SEAL_KEY") && !values.contains_key("ARCHMAX_SEAL_KEY_FILE"));
        assert_eq!(values.get("KEPT").map(String::as_str), Some("1"));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

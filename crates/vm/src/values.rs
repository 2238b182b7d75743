//! Whether a value satisfies a typed signature entry: its type, then its rules.
//!
//! Nothing is coerced (`"4"` is not an `integer`) and a typed entry never takes `null`.
//! The first broken rule is reported, phrased for the model or the caller:
//! `'quantity' must be at most 100`. File entries are checked for shape here and for a
//! readable file by the caller, which has the workspace.

use serde_json::Value;

use archmax_program::program::{BoundProgram, Program, SignatureEntry, ValueType};
use archmax_program::values::{
    date_of_day, day_number, format_date, instant, parse_date, parse_date_time, rfc3339_utc, utc, utc_second,
};

/// `today` and `now`, for date bounds.
pub struct Today {
    pub day: i64,
    pub epoch_seconds: i64,
}

impl Today {
    /// The UTC day and the second of an instant in milliseconds since the epoch.
    pub fn at(ms: u64) -> Today {
        let at = instant(ms);
        Today { day: day_number(utc(ms).date()), epoch_seconds: at.as_second() }
    }
}

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !text.chars().any(char::is_whitespace)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain.split('.').all(|label| !label.is_empty())
}

fn is_url(text: &str) -> bool {
    let rest = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !text.chars().any(char::is_whitespace)
    })
}

fn is_phone(text: &str) -> bool {
    let Some(digits) = text.strip_prefix('+') else {
        return false;
    };
    (2..=15).contains(&digits.len()) && digits.bytes().all(|byte| byte.is_ascii_digit()) && !digits.starts_with('0')
}

fn bound_value(bound: &BoundProgram, today: &Today) -> f64 {
    match bound {
        BoundProgram::Number(value) => *value,
        BoundProgram::Date(day) => *day as f64,
        BoundProgram::DateTime(seconds) => *seconds as f64,
        BoundProgram::Today => today.day as f64,
        BoundProgram::Now => today.epoch_seconds as f64,
    }
}

fn bound_text(bound: &BoundProgram) -> String {
    match bound {
        BoundProgram::Number(value) => value.to_string(),
        BoundProgram::Date(day) => date_of_day(*day).map(format_date).unwrap_or_else(|| day.to_string()),
        BoundProgram::DateTime(seconds) => rfc3339_utc(utc_second(*seconds)),
        BoundProgram::Today => "today".to_string(),
        BoundProgram::Now => "now".to_string(),
    }
}

/// Checks `value` against `entry`; `Err` says what is wrong, naming the entry.
pub fn check(program: &Program, entry: &SignatureEntry, value: &Value, today: &Today) -> Result<(), String> {
    let name = program.str(entry.name);
    let Some(ty) = entry.ty else {
        return Ok(());
    };
    let wrong = || Err(format!("'{name}' must be {}, not {}", describe(ty), archmax_stdlib::tools::type_name(value)));
    // The comparable magnitude for minimum/maximum.
    let magnitude: Option<f64> = match (ty, value) {
        (ValueType::String | ValueType::File, Value::String(_)) => None,
        (ValueType::Integer, Value::Number(number)) => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.is_finite() => Some(float),
            _ => return Err(format!("'{name}' must be a whole number")),
        },
        (ValueType::Number, Value::Number(number)) => match number.as_f64() {
            Some(float) if float.is_finite() => Some(float),
            _ => return Err(format!("'{name}' must be a finite number")),
        },
        (ValueType::Boolean, Value::Bool(_)) => None,
        (ValueType::Date, Value::String(text)) => match parse_date(text) {
            Some(day) => Some(day as f64),
            None => return Err(format!("'{name}' must be a calendar date written YYYY-MM-DD, not `{text}`")),
        },
        (ValueType::DateTime, Value::String(text)) => match parse_date_time(text) {
            Some((seconds, _)) => Some(seconds as f64),
            None => return Err(format!("'{name}' must be an RFC 3339 date-time with an offset, not `{text}`")),
        },
        (ValueType::Object, Value::Object(_)) => None,
        (ValueType::Array, Value::Array(_)) => None,
        _ => return wrong(),
    };
    let rules = &entry.rules;
    if let Value::String(text) = value {
        if let Some(format) = rules.format {
            let ok = match program.str(format) {
                "email" => is_email(text),
                "url" => is_url(text),
                "phone" => is_phone(text),
                _ => true,
            };
            if !ok {
                return Err(format!("'{name}' must be a valid {} address", program.str(format))
                    .replace("phone address", "phone number in E.164 form (+15551234567)")
                    .replace("url address", "absolute http(s) URL"));
            }
        }
        if let Some(pattern) = rules.pattern {
            match program.pattern(pattern) {
                Some(regex) if !regex.is_match(text) => {
                    return Err(format!("'{name}' must match the pattern `{}`", program.str(pattern)));
                }
                _ => {}
            }
        }
        let length = text.chars().count() as u64;
        if let Some(minimum) = rules.min_length
            && length < minimum
        {
            return Err(format!("'{name}' must be at least {minimum} characters long"));
        }
        if let Some(maximum) = rules.max_length
            && length > maximum
        {
            return Err(format!("'{name}' must be at most {maximum} characters long"));
        }
        if let Some(allowed) = &rules.enumeration
            && !allowed.iter().any(|option| program.str(*option) == text)
        {
            let options: Vec<&str> = allowed.iter().map(|option| program.str(*option)).collect();
            return Err(format!("'{name}' must be one of {}", options.join(", ")));
        }
        if ty == ValueType::File {
            // Where the path points first: a path out of the workspace is refused as that,
            // whatever it ends in.
            if !text.trim().is_empty()
                && let Err(problem) = workspace_file_path(text, name)
            {
                return Err(format!("'{name}' {problem}"));
            }
            if let Some(accept) = &rules.accept {
                let lower = text.to_ascii_lowercase();
                if !accept.iter().any(|extension| lower.ends_with(&program.str(*extension).to_ascii_lowercase())) {
                    let options: Vec<&str> = accept.iter().map(|extension| program.str(*extension)).collect();
                    return Err(format!("'{name}' must be a file ending in {}", options.join(", ")));
                }
            }
            if text.trim().is_empty() {
                return Err(format!("'{name}' must name a file"));
            }
        }
    }
    if let Some(magnitude) = magnitude {
        if let Some(minimum) = &rules.minimum
            && magnitude < bound_value(minimum, today)
        {
            return Err(format!("'{name}' must be at least {}", bound_text(minimum)));
        }
        if let Some(maximum) = &rules.maximum
            && magnitude > bound_value(maximum, today)
        {
            return Err(format!("'{name}' must be at most {}", bound_text(maximum)));
        }
    }
    if let Value::Array(items) = value {
        let count = items.len() as u64;
        if let Some(minimum) = rules.min_items
            && count < minimum
        {
            return Err(format!("'{name}' must hold at least {minimum} items"));
        }
        if let Some(maximum) = rules.max_items
            && count > maximum
        {
            return Err(format!("'{name}' must hold at most {maximum} items"));
        }
    }
    Ok(())
}

/// A `file` value names a file of the session's workspace by a path relative to its
/// root, inside an area a workflow may hand over: never an absolute path or one that
/// climbs with `..` (which would name the host's files), and never a runtime-owned area
/// (`checkpoints/`, `artifacts/`, `_specs/`) or a name reserved on the host
/// (`sessions/`, `.archmax/`). `Err` says what is wrong and what to write instead.
/// `input` names the input, for the example of what to write.
pub fn workspace_file_path(path: &str, input: &str) -> Result<(), String> {
    let instead = format!(
        "write a path relative to the workspace root, such as `scratchpad/inputs/{input}`, or hand the file over (`--file`, an upload)"
    );
    // Control characters first: the messages below quote the path.
    if path.contains('\\') || path.chars().any(char::is_control) {
        return Err(format!("must be a path with `/` between its parts and no control characters; {instead}"));
    }
    if path.starts_with(['/', '~']) || path.as_bytes().get(1) == Some(&b':') {
        return Err(format!("must name a file inside the workspace, not the absolute path `{path}`; {instead}"));
    }
    if path.split('/').any(|segment| segment == "..") {
        return Err(format!("must not climb out of the workspace with `..` (`{path}`); {instead}"));
    }
    let first = path.split('/').find(|segment| !segment.is_empty() && *segment != ".").unwrap_or("");
    if let Some(area) = archmax_program::zones::reserved_area(first)
        && (area.zone.is_none() || (area.owner == archmax_program::zones::Owner::Runtime && !area.is_offload()))
    {
        return Err(format!("names `{first}/`, an area the runtime keeps for itself; {instead}"));
    }
    Ok(())
}

fn describe(ty: ValueType) -> &'static str {
    match ty {
        ValueType::String => "a string",
        ValueType::Integer => "an integer",
        ValueType::Number => "a number",
        ValueType::Boolean => "a boolean",
        ValueType::Date => "a date (YYYY-MM-DD)",
        ValueType::DateTime => "a date-time with an offset",
        ValueType::Object => "an object",
        ValueType::Array => "a list",
        ValueType::File => "a workspace path to a file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_value_stays_inside_the_workspace_areas_a_workflow_may_hand_over() {
        for good in
            ["scratchpad/inputs/receipt.pdf", "reference/policy.md", "./scratchpad/a.txt", "workflows/x/notes.md"]
        {
            assert_eq!(workspace_file_path(good, "receipt"), Ok(()), "{good}");
        }
        let refused = [
            ("../../x.txt", "climb"),
            ("scratchpad/../../etc/passwd", "climb"),
            ("/etc/passwd", "absolute"),
            ("~/secrets", "absolute"),
            ("C:/Windows/win.ini", "absolute"),
            ("scratchpad\\a.txt", "`/`"),
            ("scratchpad/a\u{0}b", "control"),
            ("checkpoints/1.json", "runtime keeps"),
            (".archmax/seal.key", "runtime keeps"),
            ("sessions/other/scratchpad/a", "runtime keeps"),
        ];
        for (path, says) in refused {
            let problem = workspace_file_path(path, "receipt").expect_err(path);
            assert!(problem.contains(says), "{path}: {problem}");
            assert!(problem.contains("relative to the workspace root"), "{path}: {problem}");
        }
    }

    #[test]
    fn formats() {
        assert!(is_email("ana@example.com"));
        assert!(!is_email("ana@example"));
        assert!(!is_email("a b@example.com"));
        assert!(is_url("https://example.com/x"));
        assert!(!is_url("ftp://example.com"));
        assert!(is_phone("+15551234567"));
        assert!(!is_phone("5551234567"));
    }
}

//! Hooks: `--hooks FILE`, the operator's programs asked at four points of a walk.
//!
//! The file is `{"version": 1, "hooks": [{"on": POINT, "command": [...],
//! "timeout_ms"?: N}]}`, declared by the operator and never found in the workspace.
//! The points are `transition` (before a section is entered and after it leaves: the
//! walker asks them), `before-call` and `after-call` (around every gated call of a step:
//! [`crate::gate`] asks them) and `stop` (once, when the walk finishes). A hook gets
//! one JSON document on stdin. Exit 0 proceeds; exit 2 refuses, with
//! `{"reason": "..."}` on stdout or else its stderr as the reason; any other status, a
//! start failure, a timeout or an output past the bound is a failed hook, read as a
//! refusal (a governor that could not answer did not say yes). A file naming a point
//! this build does not know is refused rather than ignored. A relative program is
//! found beside the hooks file ([`Hooks::place_programs`]), never in the workspace.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::process::{self, Bounds, ProcessError};

/// A hook's timeout when its entry sets none.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a hook may print on each of stdout and stderr.
pub const HOOK_OUTPUT_BYTES: usize = 64 * 1024;

/// One declared hook: an argv and its timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

/// The name transition hooks had when they were the only point.
pub type TransitionHook = Hook;

/// The hooks of a run, by point, each in the order the file declares them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    pub transition: Vec<Hook>,
    pub before_call: Vec<Hook>,
    pub after_call: Vec<Hook>,
    pub stop: Vec<Hook>,
}

/// What one hook said.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookAnswer {
    pub proceed: bool,
    /// The reason of a refusal.
    pub reason: Option<String>,
    pub status: Option<i32>,
}

impl Hooks {
    /// Reads a hooks file's text; the error is one sentence.
    pub fn parse(text: &str) -> Result<Hooks, String> {
        let document: Value =
            serde_json::from_str(text).map_err(|error| format!("the hooks file is not JSON: {error}"))?;
        let object = document.as_object().ok_or("the hooks file is not a JSON object")?;
        for key in object.keys() {
            if !matches!(key.as_str(), "version" | "hooks") {
                return Err(format!("the hooks file has the key `{key}`; it has `version` and `hooks`"));
            }
        }
        if object.get("version").and_then(Value::as_u64) != Some(1) {
            return Err("the hooks file's `version` is not 1".to_string());
        }
        let entries = object.get("hooks").and_then(Value::as_array).ok_or("the hooks file's `hooks` is not a list")?;
        let mut hooks = Hooks::default();
        for (index, entry) in entries.iter().enumerate() {
            let entry = entry.as_object().ok_or(format!("hook {index} is not an object"))?;
            for key in entry.keys() {
                if !matches!(key.as_str(), "on" | "command" | "timeout_ms") {
                    return Err(format!(
                        "hook {index} has the key `{key}`; a hook has `on`, `command` and `timeout_ms`"
                    ));
                }
            }
            let point = match entry.get("on").and_then(Value::as_str) {
                Some(point @ ("transition" | "before-call" | "after-call" | "stop")) => point,
                Some(point) => {
                    return Err(format!(
                        "hook {index} is for the point `{point}`, which `flow run` does not know; the points are `transition`, `before-call`, `after-call` and `stop`"
                    ));
                }
                None => return Err(format!("hook {index} has no `on`")),
            };
            let argv: Option<Vec<String>> = entry
                .get("command")
                .and_then(Value::as_array)
                .and_then(|items| items.iter().map(|item| item.as_str().map(str::to_string)).collect());
            let argv = argv.filter(|argv| argv.first().is_some_and(|program| !program.is_empty())).ok_or(format!(
                "hook {index}'s `command` is not a non-empty list of strings (an argv, never a shell line)"
            ))?;
            let timeout = match entry.get("timeout_ms") {
                None => HOOK_TIMEOUT,
                Some(value) => Duration::from_millis(
                    value
                        .as_u64()
                        .filter(|ms| *ms > 0)
                        .ok_or(format!("hook {index}'s `timeout_ms` is not a positive whole number"))?,
                ),
            };
            let list = match point {
                "transition" => &mut hooks.transition,
                "before-call" => &mut hooks.before_call,
                "after-call" => &mut hooks.after_call,
                _ => &mut hooks.stop,
            };
            list.push(Hook { argv, timeout });
        }
        Ok(hooks)
    }

    /// Places every hook's relative program (one holding a `/`, such as
    /// `./policy.sh`) in `base`, the hooks file's folder. Hooks run in the workspace,
    /// which the steps write: a program found there could be one a model wrote. A bare
    /// name is still looked up on PATH, and the arguments are left as written.
    pub fn place_programs(&mut self, base: &Path) {
        for hook in
            self.transition.iter_mut().chain(&mut self.before_call).chain(&mut self.after_call).chain(&mut self.stop)
        {
            if let Some(program) = hook.argv.first_mut() {
                *program = placed(program, base);
            }
        }
    }
}

/// `program` as run from `base`: a relative path (one holding a `/`) joined onto
/// `base` with its `.` segments dropped; a bare name or an absolute path unchanged.
pub fn placed(program: &str, base: &Path) -> String {
    let path = Path::new(program);
    if !program.contains('/') || path.is_absolute() {
        return program.to_string();
    }
    base.join(path).components().collect::<std::path::PathBuf>().display().to_string()
}

impl Hook {
    /// Asks the hook about `document`, from `cwd`, without the `remove`d variables.
    pub fn ask(&self, document: &Value, cwd: &Path, remove: &[String]) -> HookAnswer {
        ask_program(&self.argv, self.timeout, document, cwd, remove, "the hook")
    }
}

/// Asks the program `argv` about `document` on its stdin, by the hooks' exit-code rules:
/// 0 proceeds, 2 refuses with a reason, anything else fails closed. `who` names the
/// program in a reason (`the hook`, `the approver`).
pub fn ask_program(
    argv: &[String],
    timeout: Duration,
    document: &Value,
    cwd: &Path,
    remove: &[String],
    who: &str,
) -> HookAnswer {
    let input = serde_json::to_vec(document).unwrap_or_default();
    let bounds = Bounds { timeout, output_bytes: HOOK_OUTPUT_BYTES };
    match process::run(argv, cwd, &input, remove, bounds) {
        Ok(finished) => match finished.status {
            Some(0) => HookAnswer { proceed: true, reason: None, status: Some(0) },
            Some(2) => {
                let stated = serde_json::from_slice::<Value>(&finished.stdout)
                    .ok()
                    .and_then(|answer| answer.get("reason").and_then(Value::as_str).map(str::to_string));
                let reason = stated.unwrap_or_else(|| String::from_utf8_lossy(&finished.stderr).trim().to_string());
                let reason = if reason.is_empty() { format!("{who} refused without a reason") } else { reason };
                HookAnswer { proceed: false, reason: Some(reason), status: Some(2) }
            }
            other => HookAnswer {
                proceed: false,
                reason: Some(match other {
                    Some(code) => format!("{who} failed with exit status {code}"),
                    None => format!("{who} was ended by a signal"),
                }),
                status: other,
            },
        },
        Err(error) => {
            let reason = match error {
                ProcessError::Start { .. } => format!("{who} failed: {error}"),
                other => format!("{who} failed: {other}"),
            };
            HookAnswer { proceed: false, reason: Some(reason), status: None }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_is_read_into_its_list_and_an_unknown_point_is_refused() {
        let text = r#"{"version": 1, "hooks": [
            {"on": "before-call", "command": ["a"]}, {"on": "after-call", "command": ["b"]},
            {"on": "stop", "command": ["c"], "timeout_ms": 5}, {"on": "transition", "command": ["d"]},
            {"on": "before-call", "command": ["e"]}]}"#;
        let hooks = Hooks::parse(text).unwrap();
        let programs = |list: &[Hook]| list.iter().map(|hook| hook.argv[0].clone()).collect::<Vec<_>>();
        assert_eq!(programs(&hooks.before_call), ["a", "e"]);
        assert_eq!(programs(&hooks.after_call), ["b"]);
        assert_eq!(programs(&hooks.stop), ["c"]);
        assert_eq!(hooks.stop[0].timeout, Duration::from_millis(5));
        assert_eq!(programs(&hooks.transition), ["d"]);
        let unknown = r#"{"version": 1, "hooks": [{"on": "session-start", "command": ["true"]}]}"#;
        let refusal = Hooks::parse(unknown).unwrap_err();
        assert!(refusal.contains("`session-start`") && refusal.contains("`before-call`"), "{refusal}");
        let shell_line = r#"{"version": 1, "hooks": [{"on": "transition", "command": "policy --check"}]}"#;
        assert!(Hooks::parse(shell_line).err().is_some_and(|error| error.contains("argv")));
        let wrong_version = r#"{"version": 2, "hooks": []}"#;
        assert!(Hooks::parse(wrong_version).is_err());
    }

    #[test]
    fn exit_two_refuses_with_the_stated_reason_and_other_statuses_fail_closed() {
        let hook = |script: &str| Hook { argv: vec!["sh".into(), "-c".into(), script.into()], timeout: HOOK_TIMEOUT };
        let here = Path::new(".");
        let document = serde_json::json!({"hook": "transition"});
        assert!(hook("cat >/dev/null; exit 0").ask(&document, here, &[]).proceed);
        let refused = hook(r#"echo '{"reason":"not now"}'; exit 2"#).ask(&document, here, &[]);
        assert_eq!(refused.reason.as_deref(), Some("not now"));
        let from_stderr = hook("echo busy >&2; exit 2").ask(&document, here, &[]);
        assert_eq!(from_stderr.reason.as_deref(), Some("busy"));
        let crashed = hook("exit 7").ask(&document, here, &[]);
        assert!(!crashed.proceed && crashed.reason.is_some_and(|reason| reason.contains('7')));
    }
}

//! How `archmax sessions` shows a session a flow walk filed ([`FlowPart`]): the walk's
//! record (its id is the flow-run id) or one (section, attempt).

use archmax_vm::session::{FlowPart, Head, Status};

/// The words a listing row adds: `  flow run=<run> record[ paused=<key>]`, or
/// `  flow run=<run> path=<section> attempt=<n>`.
pub fn row_words(flow: &FlowPart) -> String {
    match (&flow.path, flow.attempt) {
        (Some(path), Some(attempt)) => format!("  flow run={} path={path} attempt={attempt}", flow.run),
        (Some(path), None) => format!("  flow run={} path={path}", flow.run),
        (None, _) => {
            let paused = flow.paused.as_ref().map(|key| format!(" paused={key}")).unwrap_or_default();
            format!("  flow run={} record{paused}", flow.run)
        }
    }
}

/// The `flow` lines of a session's detail: what the session is to its walk, and for a
/// record, what the walk waits for and how it goes on.
pub fn detail_lines(head: &Head, flow: &FlowPart) -> String {
    let Some(path) = &flow.path else {
        let mut out = format!("flow      run {} · the walk's record\n", flow.run);
        if let Some(key) = &flow.paused {
            out.push_str(&format!("          waits for the operator at {key}\n"));
        }
        if head.status == Status::Completed && head.resumable {
            // A walk waiting for the operator goes on only with their verdict.
            let verdict = if flow.paused.is_some() { " --operator passed|failed" } else { "" };
            out.push_str(&format!(
                "          the walk can go on: `archmax flow run <its document> --resume {}{verdict}`\n",
                flow.run
            ));
        }
        return out;
    };
    let attempt = flow.attempt.map(|attempt| format!(", attempt {attempt}")).unwrap_or_default();
    let mut out = format!("flow      run {} · section {path}{attempt}\n", flow.run);
    if flow.turns > 0 || flow.cost_microunits > 0 {
        out.push_str(&format!("          {} model turn(s), cost {} microunits\n", flow.turns, flow.cost_microunits));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(path: Option<&str>, attempt: Option<u32>, paused: Option<&str>) -> FlowPart {
        FlowPart {
            run: "abc0000000000000-00000001".into(),
            path: path.map(str::to_string),
            attempt,
            turns: 2,
            cost_microunits: 0,
            paused: paused.map(str::to_string),
        }
    }

    #[test]
    fn a_record_and_an_attempt_read_apart_in_a_row_and_in_detail() {
        let record = part(None, None, Some("root.1.review"));
        assert_eq!(row_words(&record), "  flow run=abc0000000000000-00000001 record paused=root.1.review");
        let attempt = part(Some("root.checks"), Some(2), None);
        assert_eq!(row_words(&attempt), "  flow run=abc0000000000000-00000001 path=root.checks attempt=2");
        let head = Head { status: Status::Completed, resumable: true, ..Head::default() };
        let shown = detail_lines(&head, &record);
        assert!(shown.contains("waits for the operator at root.1.review"), "{shown}");
        assert!(shown.contains("--resume abc0000000000000-00000001 --operator passed|failed`"), "{shown}");
        let done = Head { status: Status::Completed, resumable: false, ..Head::default() };
        assert!(!detail_lines(&done, &part(None, None, None)).contains("can go on"));
        let shown = detail_lines(&done, &attempt);
        assert!(shown.starts_with("flow      run abc0000000000000-00000001 · section root.checks, attempt 2\n"));
        assert!(shown.contains("2 model turn(s)"), "{shown}");
    }
}

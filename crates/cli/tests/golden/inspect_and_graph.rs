//! `archmax inspect` and `archmax graph` on the example workspace, one test per
//! recording in `golden/inspect/` and `golden/graph/`. The inspect tests share one
//! artifact, built once by the first that needs it.

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;

use libtest_mimic::{Failed, Trial};

use crate::compare::{compare_or_update, verdict};
use crate::support::{archmax, repository, scratch};

/// Where the shared artifact is built.
fn build_folder() -> PathBuf {
    scratch("golden-inspect")
}

/// The example workspace built once, or why it could not be.
fn specs_artifact() -> Result<&'static str, Failed> {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let folder = build_folder();
        fs::create_dir_all(&folder).map_err(|error| format!("{}: {error}", folder.display()))?;
        let artifact = folder.join("specs.amx").to_string_lossy().into_owned();
        let run = archmax(&repository(), &["build", "--root", "specs", "-o", &artifact]);
        if run.code == 0 { Ok(artifact) } else { Err(format!("the build failed: {}", run.stderr)) }
    });
    built.as_deref().map_err(|problem| problem.into())
}

/// Removes the shared artifact, once every test is done.
pub fn clean_up() {
    let _ = fs::remove_dir_all(build_folder());
}

/// What a recording is made from: the command's arguments, with `{artifact}` standing
/// for the shared artifact.
const RECORDINGS: [(&str, &[&str]); 6] = [
    ("inspect/specs.txt", &["inspect", "{artifact}"]),
    ("inspect/specs.json", &["inspect", "{artifact}", "--format", "json"]),
    ("inspect/refund-desk.review.txt", &["inspect", "{artifact}", "--workflow", "refund-desk", "--state", "review"]),
    ("graph/specs.mmd", &["graph", "--root", "specs"]),
    ("graph/specs.dot", &["graph", "--root", "specs", "--format", "dot"]),
    ("graph/refund-desk.json", &["graph", "refund-desk", "--root", "specs", "--format", "json"]),
];

fn check_recording(recording: &str, args: &[&str]) -> Result<(), Failed> {
    let artifact = if args.contains(&"{artifact}") { specs_artifact()? } else { "" };
    let args: Vec<&str> = args.iter().map(|arg| if *arg == "{artifact}" { artifact } else { arg }).collect();
    let run = archmax(&repository(), &args);
    if run.code != 0 {
        return Err(format!("{args:?} exited {}: {}", run.code, run.stderr).into());
    }
    // The artifact's temporary location is not part of the recording.
    let stdout = if artifact.is_empty() { run.stdout } else { run.stdout.replace(artifact, "specs.amx") };
    let mut failures = Vec::new();
    compare_or_update(&repository().join("golden").join(recording), &stdout, &mut failures);
    verdict(failures)
}

/// One test per recording.
pub fn trials() -> Vec<Trial> {
    RECORDINGS
        .iter()
        .map(|(recording, args)| Trial::test(recording.replace('/', "::"), move || check_recording(recording, args)))
        .collect()
}

//! The command-line contract: the example workspace, streams, formats and exit codes.

use crate::support::{archmax, repository};

#[test]
fn the_example_workspace_validates_clean() {
    let run = archmax(&repository(), &["validate", "--root", "specs"]);
    assert_eq!(run.stdout, "valid — 0 error(s), 0 warning(s)\n", "stderr:\n{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 0);
}

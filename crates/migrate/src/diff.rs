//! A line-based unified diff, for `archmax migrate --diff`.
//!
//! The one thing to know: it is a longest-common-subsequence diff over lines with three
//! lines of context, exact for the small files a workflow holds; a pair of files too
//! large for the table is shown as one hunk replacing the whole text.

const CONTEXT: usize = 3;
const MAX_CELLS: usize = 16_000_000;

enum Op<'t> {
    Same(&'t str),
    Gone(&'t str),
    Added(&'t str),
}

fn operations<'t>(old: &[&'t str], new: &[&'t str]) -> Vec<Op<'t>> {
    if (old.len() + 1).saturating_mul(new.len() + 1) > MAX_CELLS {
        let mut ops: Vec<Op<'t>> = old.iter().map(|line| Op::Gone(line)).collect();
        ops.extend(new.iter().map(|line| Op::Added(line)));
        return ops;
    }
    let width = new.len() + 1;
    let mut table = vec![0u32; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            table[i * width + j] = if old[i] == new[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::new();
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            ops.push(Op::Same(old[i]));
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || table[(i + 1) * width + j] >= table[i * width + j + 1]) {
            ops.push(Op::Gone(old[i]));
            i += 1;
        } else {
            ops.push(Op::Added(new[j]));
            j += 1;
        }
    }
    ops
}

/// The unified diff from `old` to `new` (`None` is an absent file), or `""` when equal.
pub fn unified(path: &str, old: Option<&str>, new: Option<&str>) -> String {
    if old == new {
        return String::new();
    }
    let old_lines: Vec<&str> = old.map(|text| text.split_inclusive('\n').collect()).unwrap_or_default();
    let new_lines: Vec<&str> = new.map(|text| text.split_inclusive('\n').collect()).unwrap_or_default();
    let ops = operations(&old_lines, &new_lines);
    let mut out = format!(
        "--- {}\n+++ {}\n",
        if old.is_some() { format!("a/{path}") } else { "/dev/null".to_string() },
        if new.is_some() { format!("b/{path}") } else { "/dev/null".to_string() }
    );
    let changed: Vec<usize> =
        ops.iter().enumerate().filter(|(_, op)| !matches!(op, Op::Same(_))).map(|(index, _)| index).collect();
    let mut index = 0;
    while index < changed.len() {
        let start = changed[index].saturating_sub(CONTEXT);
        let mut end = changed[index] + 1;
        while index + 1 < changed.len() && changed[index + 1] <= end + 2 * CONTEXT {
            index += 1;
            end = changed[index] + 1;
        }
        let end = (end + CONTEXT).min(ops.len());
        let (mut old_start, mut new_start) = (1, 1);
        for op in &ops[..start] {
            match op {
                Op::Same(_) => {
                    old_start += 1;
                    new_start += 1;
                }
                Op::Gone(_) => old_start += 1,
                Op::Added(_) => new_start += 1,
            }
        }
        let old_count = ops[start..end].iter().filter(|op| !matches!(op, Op::Added(_))).count();
        let new_count = ops[start..end].iter().filter(|op| !matches!(op, Op::Gone(_))).count();
        let shown = |first: usize, count: usize| if count == 0 { first - 1 } else { first };
        out.push_str(&format!(
            "@@ -{},{old_count} +{},{new_count} @@\n",
            shown(old_start, old_count),
            shown(new_start, new_count)
        ));
        for op in &ops[start..end] {
            let (mark, line) = match op {
                Op::Same(line) => (' ', line),
                Op::Gone(line) => ('-', line),
                Op::Added(line) => ('+', line),
            };
            out.push(mark);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        index += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn hunks_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        assert_eq!(
            unified("x", Some(old), Some(new)),
            "--- a/x\n+++ b/x\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
        );
        assert_eq!(unified("x", None, Some("n\n")), "--- /dev/null\n+++ b/x\n@@ -0,0 +1,1 @@\n+n\n");
        assert_eq!(unified("x", Some(old), Some(old)), "");
    }
}

//! Command lines people paste: each word as a POSIX shell reads it back unchanged.
//!
//! The one thing to know: a word made only of characters no shell treats specially is
//! printed as it is; anything else goes in single quotes (a quote inside as `'\''`), so
//! spaces, `$`, globs, `~`, a leading `=` and the empty word all survive a paste. A
//! control character stays in the quotes as it is (POSIX `sh` has no escape for it
//! there): a caller that prints to a terminal shows it replaced, so such a word cannot
//! be pasted back as it was.

/// `word` as one shell word.
pub fn word(word: &str) -> String {
    // `~` is left out: at the start of a word the shell expands it; so is a leading `=`,
    // which zsh expands to a command's path.
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && !word.starts_with('=') && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `words` as one command line, each quoted as [`word`] does.
pub fn line<S: AsRef<str>>(words: &[S]) -> String {
    words.iter().map(|one| word(one.as_ref())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_and_the_rest_is_quoted_so_a_shell_reads_it_back() {
        assert_eq!(word("--session-dir"), "--session-dir");
        assert_eq!(word("fs:sessions/a.b"), "fs:sessions/a.b");
        assert_eq!(word("my sessions"), "'my sessions'");
        assert_eq!(word(""), "''");
        assert_eq!(word("~/home"), "'~/home'");
        assert_eq!(word("=ls"), "'=ls'");
        assert_eq!(word("a=b"), "a=b");
        assert_eq!(word("it's $HOME *"), "'it'\\''s $HOME *'");
        assert_eq!(line(&["flow", "run", "--input", "Add a flag"]), "flow run --input 'Add a flag'");
    }

    #[test]
    fn sh_reads_every_quoted_word_back_as_it_was() {
        let words = ["plain", "two words", "", "it's", "$HOME", "*", "~", "=x", "a\nb", "back\\slash", "\"double\""];
        let script = format!("for w in {}; do printf '%s\\0' \"$w\"; done", line(&words));
        let Ok(output) = std::process::Command::new("sh").args(["-c", &script]).output() else {
            panic!("sh runs");
        };
        let read: Vec<String> =
            output.stdout.split(|&byte| byte == 0).map(|bytes| String::from_utf8_lossy(bytes).into_owned()).collect();
        assert_eq!(&read[..words.len()], &words.map(str::to_string)[..]);
    }
}

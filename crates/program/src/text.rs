//! Cutting text short: the one place that finds where the first `N` characters (or the
//! first `N` bytes) of a text end; and the one list of the characters that disguise
//! text shown to a person ([`disguises`]).
//!
//! The one thing to know: a cut always falls on a character boundary, so slicing with
//! what these functions return never panics, and nothing is cut from a text that is
//! already short enough (`N` characters exactly is not cut).

/// `text` split after its first `count` characters: `(text, "")` when it has no more.
pub fn split_at_chars(text: &str, count: usize) -> (&str, &str) {
    match text.char_indices().nth(count) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    }
}

/// The first `count` characters of `text`, or all of it when it is no longer.
pub fn first_chars(text: &str, count: usize) -> &str {
    split_at_chars(text, count).0
}

/// The first `count` characters of `text` when it has more than `count`; `None` when
/// nothing needs cutting.
pub fn cut_at_chars(text: &str, count: usize) -> Option<&str> {
    match split_at_chars(text, count) {
        (_, "") => None,
        (kept, _) => Some(kept),
    }
}

/// The longest start of `text` of at most `max_bytes` bytes that ends on a character
/// boundary (all of `text` when it is no longer).
pub fn within_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// [`within_bytes`] when `text` is longer than `max_bytes`; `None` when nothing needs
/// cutting.
pub fn cut_at_bytes(text: &str, max_bytes: usize) -> Option<&str> {
    (text.len() > max_bytes).then(|| within_bytes(text, max_bytes))
}

/// `text` cut to its first `count` characters with `…` after them, or whole when it is
/// no longer.
pub fn cut_with_ellipsis(text: &str, count: usize) -> String {
    match cut_at_chars(text, count) {
        Some(kept) => format!("{kept}…"),
        None => text.to_string(),
    }
}

/// The first line of `text` that is not blank, trimmed; empty when there is none.
pub fn first_line(text: &str) -> &str {
    text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default().trim()
}

/// Whether `character` can make text read as other text without being seen: a control
/// character, or one of the invisible characters that hide themselves or reorder what
/// is around them: the soft hyphen, the combining grapheme joiner, the Arabic letter
/// mark, the Hangul fillers, the Khmer inherent vowels, the Mongolian free variation
/// selectors and vowel separator, zero-width spaces and joiners, the bidirectional
/// marks, embeddings, overrides and isolates, the word joiner and invisible operators,
/// the variation selectors (and their supplement), the byte-order mark, the interlinear
/// annotation marks, the shorthand format controls, the musical formatting controls and
/// the tag characters. What a sender wrote is shown to a person without them.
pub fn disguises(character: char) -> bool {
    character.is_control()
        || matches!(
            character,
            '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
                | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

#[cfg(test)]
mod tests {
    use super::{
        cut_at_bytes, cut_at_chars, cut_with_ellipsis, disguises, first_chars, first_line, split_at_chars, within_bytes,
    };

    #[test]
    fn characters_are_counted_not_bytes() {
        assert_eq!(split_at_chars("héllo", 2), ("hé", "llo"));
        assert_eq!(first_chars("日本語テキスト", 3), "日本語");
        assert_eq!(cut_at_chars("日本語テキスト", 3), Some("日本語"));
    }

    #[test]
    fn exactly_n_characters_is_not_cut() {
        assert_eq!(split_at_chars("abc", 3), ("abc", ""));
        assert_eq!(first_chars("abc", 3), "abc");
        assert_eq!(cut_at_chars("abc", 3), None);
        assert_eq!(cut_at_chars("abcd", 3), Some("abc"));
        assert_eq!(cut_at_chars("日本語", 3), None);
    }

    #[test]
    fn empty_text_and_zero_counts() {
        assert_eq!(split_at_chars("", 0), ("", ""));
        assert_eq!(first_chars("", 5), "");
        assert_eq!(cut_at_chars("", 0), None);
        assert_eq!(cut_at_chars("a", 0), Some(""));
        assert_eq!(within_bytes("", 0), "");
        assert_eq!(cut_at_bytes("", 0), None);
        assert_eq!(cut_at_bytes("a", 0), Some(""));
    }

    #[test]
    fn a_byte_cut_steps_back_to_a_character_boundary() {
        // `é` is two bytes: a cut inside it keeps neither.
        assert_eq!(within_bytes("aé", 2), "a");
        assert_eq!(within_bytes("aé", 3), "aé");
        assert_eq!(cut_at_bytes("aé", 3), None);
        assert_eq!(cut_at_bytes("aéb", 3), Some("aé"));
        // A four-byte character cut anywhere inside keeps nothing of it.
        for max in 0..4 {
            assert_eq!(within_bytes("😀", max), "");
        }
        assert_eq!(within_bytes("😀", 4), "😀");
    }

    #[test]
    fn the_characters_that_reorder_or_hide_text_disguise_it_and_letters_do_not() {
        for hidden in [
            '\u{202e}',
            '\u{2067}',
            '\u{61c}',
            '\u{200b}',
            '\u{feff}',
            '\u{ad}',
            '\u{7}',
            '\n',
            '\u{9b}',
            '\u{3164}',
            '\u{e0041}',
            '\u{fe0f}',
            '\u{34f}',
            '\u{fffb}',
            '\u{e0100}',
        ] {
            assert!(disguises(hidden), "{hidden:?}");
        }
        for shown in ['a', 'é', 'ع', ' ', '-', '\u{2010}', '€'] {
            assert!(!disguises(shown), "{shown:?}");
        }
    }

    #[test]
    fn a_cut_says_so_and_the_first_line_is_the_first_with_words() {
        assert_eq!(cut_with_ellipsis("héllo", 3), "hél…");
        assert_eq!(cut_with_ellipsis("hél", 3), "hél");
        assert_eq!(first_line("\n  \n  Error: no\nmore"), "Error: no");
        assert_eq!(first_line(" \n\t"), "");
    }
}

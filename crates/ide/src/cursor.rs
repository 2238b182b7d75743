//! Where the cursor is in a YAML document, read from the text alone (indentation, `- `
//! items, `key:` and flow mappings), so it works while the document does not parse.
//!
//! The one thing to know: the answer is a key path from the root (`states`, `review`,
//! `transitions`, an item, `to`) and whether the cursor sits on a key or in a value; it
//! is a reading of the layout, good for hints, never the compiler's judgement.

use crate::text::LineIndex;

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Item,
}

/// What the cursor is on.
#[derive(Debug)]
pub struct Context {
    /// The mapping the cursor's key or value belongs to.
    pub parents: Vec<Segment>,
    /// The key of the cursor's line (or flow mapping entry), if it has one.
    pub key: Option<String>,
    /// True when the cursor is in the value after `key:` (or an item's value).
    pub in_value: bool,
    /// The word under the cursor, with its byte range.
    pub word: (usize, usize),
    /// The text of the line before the cursor.
    pub before: String,
}

impl Context {
    /// The key path of the value the cursor is in (`parents` plus `key`).
    pub fn value_path(&self) -> Vec<Segment> {
        let mut path = self.parents.clone();
        if let Some(key) = &self.key {
            path.push(Segment::Key(key.clone()));
        }
        path
    }

    /// The keys of the value path, items left out.
    pub fn keys(&self) -> Vec<&str> {
        let parents = self.parents.iter().filter_map(|segment| match segment {
            Segment::Key(key) => Some(key.as_str()),
            Segment::Item => None,
        });
        parents.chain(self.key.as_deref()).collect()
    }
}

/// The layout of one line.
struct Shape<'a> {
    /// Column of the first character that is not a space.
    indent: usize,
    /// Column of a `- ` item marker.
    dash: Option<usize>,
    /// Column, text and colon column of a `key:`.
    key: Option<(usize, &'a str, usize)>,
}

fn shape(line: &str) -> Option<Shape<'_>> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    if rest.is_empty() || rest.starts_with('#') {
        return None;
    }
    let (dash, key_start) = if rest == "-" || rest.starts_with("- ") {
        let after = rest[1..].len() - rest[1..].trim_start_matches(' ').len();
        (Some(indent), indent + 1 + after)
    } else {
        (None, indent)
    };
    let key = key_at(line, key_start);
    Some(Shape { indent, dash, key })
}

/// A plain `key:` starting at `start`.
fn key_at(line: &str, start: usize) -> Option<(usize, &str, usize)> {
    let rest = line.get(start..)?;
    if rest.starts_with(['{', '[', '"', '\'', '#', '|', '>', '&', '*', '!']) {
        return None;
    }
    let colon = rest.char_indices().find(|(index, character)| {
        *character == ':' && rest[index + 1..].chars().next().is_none_or(|next| next == ' ')
    })?;
    let key = rest[..colon.0].trim_end();
    (!key.is_empty() && !key.contains(" #")).then_some((start, key, start + colon.0))
}

/// The key path of the mappings enclosing column `threshold` of line `line`.
fn parents(index: &LineIndex<'_>, line: usize, mut threshold: usize) -> Vec<Segment> {
    let mut path = Vec::new();
    for number in (0..line).rev() {
        if threshold == 0 {
            break;
        }
        let Some(shape) = shape(index.line_text(number)) else {
            continue;
        };
        if shape.indent >= threshold {
            continue;
        }
        match shape.key {
            Some((column, key, _)) if column < threshold => {
                path.push(Segment::Key(key.to_string()));
                if shape.dash.is_some() {
                    path.push(Segment::Item);
                }
                threshold = shape.dash.unwrap_or(column);
            }
            _ => {
                if let Some(dash) = shape.dash {
                    path.push(Segment::Item);
                    threshold = dash;
                } else {
                    threshold = shape.indent;
                }
            }
        }
    }
    path.reverse();
    path
}

fn is_word(character: char) -> bool {
    character.is_alphanumeric() || matches!(character, '_' | '-' | '.' | '/')
}

/// The context of a byte offset in `text`.
pub fn context(text: &str, offset: usize) -> Context {
    let index = LineIndex::new(text);
    let line = index.line_of(offset);
    let start = index.line_start(line);
    let line_text = index.line_text(line);
    let column = (offset - start).min(line_text.len());
    let before = line_text.get(..column).unwrap_or("");
    let word_start =
        before.char_indices().rev().take_while(|(_, c)| is_word(*c)).last().map(|(i, _)| i).unwrap_or(column);
    let after = line_text.get(column..).unwrap_or("");
    let word_end = column + after.char_indices().find(|(_, c)| !is_word(*c)).map(|(i, _)| i).unwrap_or(after.len());
    let word = (start + word_start, start + word_end);
    let shape = shape(line_text);
    let dash = shape.as_ref().and_then(|shape| shape.dash);
    let parents_at = |threshold: usize| {
        let mut path = parents(&index, line, threshold);
        if dash.is_some_and(|dash| dash < threshold) {
            path.push(Segment::Item);
        }
        path
    };
    // Inside a flow mapping on this line: the entry's key is the last `key:` before the cursor.
    if let Some(open) = before.rfind('{').filter(|open| !before[*open..].contains('}')) {
        let entry_start = before.rfind(',').filter(|comma| *comma > open).unwrap_or(open) + 1;
        let entry = &before[entry_start..];
        let mut path = parents_at(open.min(dash.map(|dash| dash + 1).unwrap_or(open)));
        if let Some(key) = flow_owner(line_text, open) {
            path.push(Segment::Key(key));
        }
        let (key, in_value) = match entry.split_once(':') {
            Some((key, _)) => (Some(key.trim().to_string()), true),
            None => (None, false),
        };
        return Context { parents: path, key, in_value, word, before: before.to_string() };
    }
    match shape.as_ref().and_then(|shape| shape.key) {
        Some((key_column, key, colon)) if column > colon => Context {
            parents: parents_at(key_column),
            key: Some(key.to_string()),
            in_value: true,
            word,
            before: before.to_string(),
        },
        Some((key_column, key, _)) => Context {
            parents: parents_at(key_column),
            key: Some(key.to_string()),
            in_value: false,
            word,
            before: before.to_string(),
        },
        None => {
            let item_value = dash.is_some_and(|dash| column > dash + 1);
            let threshold = if item_value { dash.unwrap_or(0) + 1 } else { word_start.min(column) };
            Context {
                parents: if item_value { parents_at(threshold) } else { parents(&index, line, threshold) },
                key: None,
                in_value: item_value,
                word,
                before: before.to_string(),
            }
        }
    }
}

/// The key a flow mapping opening at `open` is the value of (`budget: {`), if any.
fn flow_owner(line: &str, open: usize) -> Option<String> {
    let head = line[..open].trim_end().strip_suffix(':')?;
    let key = head.trim_start().trim_start_matches("- ").trim();
    (!key.is_empty() && !key.contains(['{', ',', ' '])).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "states:\n  review:\n    type: agent\n    transitions:\n      - to: done\n        description: x\n      - { to: done, type: approve }\n    on_error: \n";

    /// Where the cursor is (a marker and the bytes past its start), the keys from the
    /// root, and whether it is in a value.
    const CASES: [(&str, usize, &[&str], bool); 4] = [
        ("- to: done", 6, &["states", "review", "transitions", "to"], true),
        ("description", 2, &["states", "review", "transitions", "description"], false),
        ("{ to: done, type", 6, &["states", "review", "transitions", "to"], true),
        ("on_error: ", 10, &["states", "review", "on_error"], true),
    ];

    #[test]
    fn block_items_flow_entries_and_empty_values_read_as_key_paths() {
        for (marker, delta, keys, in_value) in CASES {
            let context = context(TEXT, TEXT.find(marker).unwrap_or(0) + delta);
            assert_eq!(context.keys(), keys, "at {marker:?}+{delta}");
            assert_eq!(context.in_value, in_value, "at {marker:?}+{delta}");
        }
    }
}

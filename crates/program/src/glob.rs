//! Glob matchers with `${{…}}` holes, serializable into an artifact.
//!
//! Guards are globs over a tool's arguments: `reports/${{order_id}}/*.md`. They are
//! compiled once, at build time, into segments of tokens; a `${{…}}` reference stays a
//! [`Token::Hole`] until call time, when the kernel substitutes the variable's value and
//! matches it *literally* (a value holding `*` matches only `*`), so a variable can never
//! widen a guard. Semantics follow the spec: `*` and `?` never cross `/`, `**` as a whole
//! segment spans any number of segments, classes `[a-z]` / `[!x]` match one character,
//! braces `{a,b}` expand into alternatives, dot-files match like any other name, and `""`
//! matches only the empty value.

use serde::{Deserialize, Serialize};

use crate::reference::{Template, TemplatePart, VarPath};

/// Most alternatives one glob may expand to through braces.
pub const MAX_ALTERNATIVES: usize = 64;

/// A compiled glob: any alternative may match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Glob {
    pub alternatives: Vec<Pattern>,
}

/// One brace-free alternative, split on `/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    pub segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Segment {
    /// `**`: zero or more whole segments.
    Globstar,
    Tokens(Vec<Token>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Token {
    Literal(String),
    /// `*`: any run of characters within a segment.
    Star,
    /// `?`: one character.
    Any,
    /// `[…]`: one character in (or, negated, not in) the ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// `${{…}}`: the variable's value, matched literally.
    Hole(VarPath),
}

/// A hole whose variable is unset or does not resolve to a scalar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved(pub VarPath);

/// Why a glob could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobError(pub String);

impl Glob {
    /// Compiles a parsed template (literal text with `${{…}}` holes).
    pub fn compile(template: &Template) -> Result<Glob, GlobError> {
        // Expand braces over the literal text, keeping holes as opaque placeholders.
        let mut pieces: Vec<Piece> = Vec::new();
        for part in &template.parts {
            match part {
                TemplatePart::Literal(text) => pieces.extend(text.chars().map(Piece::Char)),
                TemplatePart::Reference { path, .. } => pieces.push(Piece::Hole(path.clone())),
            }
        }
        let expanded = expand_braces(&pieces)?;
        let alternatives = expanded.iter().map(|pieces| compile_pattern(pieces)).collect::<Result<Vec<_>, _>>()?;
        Ok(Glob { alternatives })
    }

    /// Compiles glob text without holes (a `${{` is taken literally).
    pub fn literal_text(text: &str) -> Result<Glob, GlobError> {
        Glob::compile(&Template { parts: vec![TemplatePart::Literal(text.to_string())] })
    }

    /// True when the glob has holes.
    pub fn has_holes(&self) -> bool {
        self.alternatives.iter().any(|pattern| {
            pattern.segments.iter().any(|segment| match segment {
                Segment::Tokens(tokens) => tokens.iter().any(|token| matches!(token, Token::Hole(_))),
                Segment::Globstar => false,
            })
        })
    }

    /// Every variable path the glob reads.
    pub fn holes(&self) -> Vec<&VarPath> {
        let mut holes = Vec::new();
        for pattern in &self.alternatives {
            for segment in &pattern.segments {
                if let Segment::Tokens(tokens) = segment {
                    for token in tokens {
                        if let Token::Hole(path) = token
                            && !holes.contains(&path)
                        {
                            holes.push(path);
                        }
                    }
                }
            }
        }
        holes
    }

    /// Matches `value`, resolving holes through `resolve`.
    pub fn matches(&self, value: &str, resolve: &dyn Fn(&VarPath) -> Option<String>) -> Result<bool, Unresolved> {
        let parts: Vec<&str> = value.split('/').collect();
        for pattern in &self.alternatives {
            if pattern_matches(&pattern.segments, &parts, resolve)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[derive(Clone, Debug)]
enum Piece {
    Char(char),
    Hole(VarPath),
}

fn expand_braces(pieces: &[Piece]) -> Result<Vec<Vec<Piece>>, GlobError> {
    // Find the first top-level `{` with a matching `}` that holds a comma.
    let mut depth = 0usize;
    let mut open = None;
    let mut commas = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Char('{') => {
                if depth == 0 {
                    open = Some(index);
                    commas.clear();
                }
                depth += 1;
            }
            Piece::Char(',') if depth == 1 => commas.push(index),
            Piece::Char('}') if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    let start = open.unwrap_or(index);
                    if commas.is_empty() {
                        continue;
                    }
                    let mut bounds = vec![start];
                    bounds.extend(commas.iter().copied());
                    bounds.push(index);
                    let mut expanded = Vec::new();
                    for window in bounds.windows(2) {
                        let mut alternative: Vec<Piece> = pieces[..start].to_vec();
                        alternative.extend_from_slice(&pieces[window[0] + 1..window[1]]);
                        alternative.extend_from_slice(&pieces[index + 1..]);
                        for done in expand_braces(&alternative)? {
                            expanded.push(done);
                            if expanded.len() > MAX_ALTERNATIVES {
                                return Err(GlobError(format!(
                                    "braces expand to more than {MAX_ALTERNATIVES} alternatives"
                                )));
                            }
                        }
                    }
                    return Ok(expanded);
                }
            }
            _ => {}
        }
    }
    Ok(vec![pieces.to_vec()])
}

fn compile_pattern(pieces: &[Piece]) -> Result<Pattern, GlobError> {
    let mut segments = Vec::new();
    let mut current: Vec<&Piece> = Vec::new();
    for piece in pieces.iter().chain(std::iter::once(&Piece::Char('/'))) {
        if matches!(piece, Piece::Char('/')) {
            segments.push(compile_segment(&current)?);
            current.clear();
        } else {
            current.push(piece);
        }
    }
    Ok(Pattern { segments: collapse_globstars(segments) })
}

fn compile_segment(pieces: &[&Piece]) -> Result<Segment, GlobError> {
    if pieces.len() == 2 && pieces.iter().all(|piece| matches!(piece, Piece::Char('*'))) {
        return Ok(Segment::Globstar);
    }
    let mut tokens: Vec<Token> = Vec::new();
    let mut index = 0;
    let push_char = |tokens: &mut Vec<Token>, character: char| match tokens.last_mut() {
        Some(Token::Literal(text)) => text.push(character),
        _ => tokens.push(Token::Literal(character.to_string())),
    };
    while index < pieces.len() {
        match pieces[index] {
            Piece::Hole(path) => tokens.push(Token::Hole(path.clone())),
            Piece::Char('*') => {
                if !matches!(tokens.last(), Some(Token::Star)) {
                    tokens.push(Token::Star);
                }
            }
            Piece::Char('?') => tokens.push(Token::Any),
            Piece::Char('\\') => {
                index += 1;
                match pieces.get(index) {
                    Some(Piece::Char(character)) => push_char(&mut tokens, *character),
                    Some(Piece::Hole(path)) => tokens.push(Token::Hole(path.clone())),
                    None => push_char(&mut tokens, '\\'),
                }
            }
            Piece::Char('[') => {
                let mut cursor = index + 1;
                let negated = matches!(pieces.get(cursor), Some(Piece::Char('!' | '^')));
                if negated {
                    cursor += 1;
                }
                let mut members: Vec<char> = Vec::new();
                let mut closed = false;
                while let Some(piece) = pieces.get(cursor) {
                    match piece {
                        Piece::Char(']') if !members.is_empty() => {
                            closed = true;
                            break;
                        }
                        Piece::Char(character) => members.push(*character),
                        Piece::Hole(_) => return Err(GlobError("a `${{…}}` cannot sit inside `[…]`".to_string())),
                    }
                    cursor += 1;
                }
                if !closed {
                    push_char(&mut tokens, '[');
                } else {
                    let mut ranges = Vec::new();
                    let mut member = 0;
                    while member < members.len() {
                        if member + 2 < members.len() && members[member + 1] == '-' {
                            ranges.push((members[member], members[member + 2]));
                            member += 3;
                        } else {
                            ranges.push((members[member], members[member]));
                            member += 1;
                        }
                    }
                    tokens.push(Token::Class { negated, ranges });
                    index = cursor;
                }
            }
            Piece::Char(character) => push_char(&mut tokens, *character),
        }
        index += 1;
    }
    Ok(Segment::Tokens(tokens))
}

/// Matches `parts` against `segments` depth first, trying a `**` over the fewest parts
/// first, so the first unresolved hole met is the same one a plain backtracking search
/// would meet. Each `**` remembers the first part index from which it is known not to
/// match the rest (if it fails from `j`, it fails from every later index too), so each
/// `(**, part)` pair is tried at most once: O(segments × parts) segment matches at worst.
fn pattern_matches(
    segments: &[Segment],
    parts: &[&str],
    resolve: &dyn Fn(&VarPath) -> Option<String>,
) -> Result<bool, Unresolved> {
    let mut fails_from = vec![usize::MAX; segments.len()];
    matches_from(segments, 0, parts, 0, &mut fails_from, resolve)
}

fn matches_from(
    segments: &[Segment],
    mut segment: usize,
    parts: &[&str],
    mut part: usize,
    fails_from: &mut [usize],
    resolve: &dyn Fn(&VarPath) -> Option<String>,
) -> Result<bool, Unresolved> {
    loop {
        match segments.get(segment) {
            None => return Ok(part == parts.len()),
            Some(Segment::Globstar) => {
                let known_failure = fails_from[segment].min(parts.len() + 1);
                for skip_to in part..known_failure {
                    if matches_from(segments, segment + 1, parts, skip_to, fails_from, resolve)? {
                        return Ok(true);
                    }
                }
                fails_from[segment] = fails_from[segment].min(part);
                return Ok(false);
            }
            Some(Segment::Tokens(tokens)) => match parts.get(part) {
                Some(text) if segment_matches(tokens, text, resolve)? => {
                    segment += 1;
                    part += 1;
                }
                _ => return Ok(false),
            },
        }
    }
}

/// Drops a `**` that directly follows another: `**/**` spans exactly what `**` spans.
fn collapse_globstars(segments: Vec<Segment>) -> Vec<Segment> {
    let mut collapsed: Vec<Segment> = Vec::with_capacity(segments.len());
    for segment in segments {
        if !(segment == Segment::Globstar && collapsed.last() == Some(&Segment::Globstar)) {
            collapsed.push(segment);
        }
    }
    collapsed
}

/// Matches one path segment against tokens, resolving holes to literals first.
fn segment_matches(
    tokens: &[Token],
    text: &str,
    resolve: &dyn Fn(&VarPath) -> Option<String>,
) -> Result<bool, Unresolved> {
    let mut resolved: Vec<Resolved<'_>> = Vec::with_capacity(tokens.len());
    for token in tokens {
        resolved.push(match token {
            Token::Literal(literal) => Resolved::Literal(literal.chars().collect()),
            Token::Hole(path) => {
                let value = resolve(path).ok_or_else(|| Unresolved(path.clone()))?;
                Resolved::Literal(value.chars().collect())
            }
            Token::Star => Resolved::Star,
            Token::Any => Resolved::Any,
            Token::Class { negated, ranges } => Resolved::Class(*negated, ranges),
        });
    }
    let characters: Vec<char> = text.chars().collect();
    Ok(wildcard(&resolved, &characters))
}

enum Resolved<'t> {
    Literal(Vec<char>),
    Star,
    Any,
    Class(bool, &'t [(char, char)]),
}

/// Classic wildcard matching with backtracking to the last star: O(tokens × text).
fn wildcard(tokens: &[Resolved<'_>], text: &[char]) -> bool {
    fn step(token: &Resolved<'_>, text: &[char], at: usize) -> Option<usize> {
        match token {
            Resolved::Literal(literal) => (text.len() >= at + literal.len()
                && text[at..at + literal.len()] == literal[..])
                .then_some(at + literal.len()),
            Resolved::Any => (at < text.len() && text[at] != '/').then_some(at + 1),
            Resolved::Class(negated, ranges) => {
                let character = *text.get(at)?;
                let inside = ranges.iter().any(|(low, high)| (*low..=*high).contains(&character));
                (inside != *negated && character != '/').then_some(at + 1)
            }
            Resolved::Star => None,
        }
    }
    let mut token = 0;
    let mut at = 0;
    let mut star: Option<(usize, usize)> = None;
    loop {
        if token < tokens.len() {
            if let Resolved::Star = tokens[token] {
                star = Some((token, at));
                token += 1;
                continue;
            }
            if let Some(next) = step(&tokens[token], text, at) {
                token += 1;
                at = next;
                continue;
            }
        } else if at == text.len() {
            return true;
        }
        match star {
            Some((star_token, star_at)) if star_at < text.len() && text[star_at] != '/' => {
                star = Some((star_token, star_at + 1));
                token = star_token + 1;
                at = star_at + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::parse_template;

    fn glob(text: &str) -> Glob {
        Glob::compile(&parse_template(text).expect("template")).expect("glob")
    }

    fn matches(pattern: &str, value: &str) -> bool {
        glob(pattern).matches(value, &|path| (path.root == "id").then(|| "A*1".to_string())).expect("resolves")
    }

    #[test]
    fn stars_stay_within_a_segment() {
        assert!(matches("reports/*.json", "reports/a.json"));
        assert!(!matches("reports/*.json", "reports/x/a.json"));
        assert!(matches("reports/**", "reports/x/y/a.json"));
        assert!(matches("reports/**", "reports"));
        assert!(matches("**/*.md", "a/b/c.md"));
        assert!(matches("**", ".env"));
        assert!(matches("secrets/**", "secrets/.env"));
        assert!(matches("*@example.com", "ana@example.com"));
        assert!(!matches("*@example.com", "ana@evil.com"));
    }

    #[test]
    fn empty_matches_only_empty() {
        assert!(matches("", ""));
        assert!(!matches("", "x"));
    }

    #[test]
    fn classes_braces_and_questions() {
        assert!(matches("v[0-9].txt", "v7.txt"));
        assert!(!matches("v[!0-9].txt", "v7.txt"));
        assert!(matches("{reports,exports}/*.csv", "exports/a.csv"));
        assert!(!matches("{reports,exports}/*.csv", "imports/a.csv"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "a/c"));
    }

    #[test]
    fn holes_match_their_value_literally() {
        assert!(matches("orders/${{id}}/*.md", "orders/A*1/x.md"));
        // The value `A*1` holds a star, which must not act as a wildcard.
        assert!(!matches("orders/${{id}}/*.md", "orders/AB1/x.md"));
        let unresolved = glob("x/${{missing}}").matches("x/y", &|_| None);
        assert!(unresolved.is_err());
    }

    #[test]
    fn brace_bombs_are_refused() {
        let text = "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}";
        assert!(Glob::literal_text(text).is_err());
    }

    #[test]
    fn nested_globstars_against_a_deep_path_answer() {
        // Before the memo this explored every way to split 300 parts among 500 `**`.
        let deep = format!("{}y", "a/".repeat(300));
        assert!(!matches(&format!("{}x", "**/".repeat(500)), &deep));
        assert!(matches(&format!("{}y", "**/".repeat(500)), &deep));
        // `**` separated by a segment cannot be collapsed; the memo alone keeps it polynomial.
        let mixed = format!("{}x", "**/a*/".repeat(60));
        assert!(!matches(&mixed, &deep));
        assert!(matches(&format!("{}y", "**/a*/".repeat(60)), &deep));
        assert_eq!(glob(&"**/".repeat(500)).alternatives[0].segments.len(), 2);
    }

    #[test]
    fn nested_braces_expand_within_the_bound_or_are_refused() {
        let nested = format!("{}x{}", "{a,".repeat(40), "}".repeat(40));
        assert_eq!(glob(&nested).alternatives.len(), 41);
        let wide = format!("{}x{}", "{a,b,".repeat(40), "}".repeat(40));
        assert!(Glob::literal_text(&wide).is_err());
    }

    /// The matcher before memoisation: plain backtracking, exponential at worst.
    fn reference(
        segments: &[Segment],
        parts: &[&str],
        resolve: &dyn Fn(&VarPath) -> Option<String>,
    ) -> Result<bool, Unresolved> {
        match segments.split_first() {
            None => Ok(parts.is_empty()),
            Some((Segment::Globstar, rest)) => {
                for skip in 0..=parts.len() {
                    if reference(rest, &parts[skip..], resolve)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Some((Segment::Tokens(tokens), rest)) => match parts.split_first() {
                None => Ok(false),
                Some((part, remaining)) => {
                    Ok(segment_matches(tokens, part, resolve)? && reference(rest, remaining, resolve)?)
                }
            },
        }
    }

    /// A small xorshift generator, so the cases are the same on every run.
    struct Cases(u64);

    impl Cases {
        fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }

        fn token(&mut self) -> Token {
            match self.below(6) {
                0 => Token::Star,
                1 => Token::Any,
                2 => Token::Class { negated: self.below(2) == 0, ranges: vec![('a', 'b')] },
                3 => Token::Hole(VarPath { root: ["id", "missing"][self.below(2)].to_string(), segments: Vec::new() }),
                _ => Token::Literal(["a", "b", "ab"][self.below(3)].to_string()),
            }
        }

        fn segments(&mut self) -> Vec<Segment> {
            (0..self.below(7))
                .map(|_| match self.below(3) {
                    0 => Segment::Globstar,
                    _ => Segment::Tokens((0..1 + self.below(3)).map(|_| self.token()).collect()),
                })
                .collect()
        }

        fn path(&mut self) -> String {
            let parts: Vec<&str> =
                (0..1 + self.below(6)).map(|_| ["a", "b", "ab", "ba", "", "a"][self.below(6)]).collect();
            parts.join("/")
        }
    }

    #[test]
    fn the_memoised_matcher_agrees_with_plain_backtracking() {
        let resolve = |path: &VarPath| (path.root == "id").then(|| "a".to_string());
        let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
        let mut matched = 0;
        for _ in 0..20_000 {
            let segments = cases.segments();
            let path = cases.path();
            let parts: Vec<&str> = path.split('/').collect();
            let expected = reference(&segments, &parts, &resolve);
            assert_eq!(pattern_matches(&segments, &parts, &resolve), expected, "{segments:?} against {path}");
            let collapsed = collapse_globstars(segments.clone());
            assert_eq!(pattern_matches(&collapsed, &parts, &resolve), expected, "{segments:?} collapsed, {path}");
            matched += usize::from(expected == Ok(true));
        }
        assert!(matched > 1000, "the generated cases should match often enough to mean something");
    }
}

//! Markdown from models and tools, rendered without raw HTML.
//!
//! pulldown-cmark (CommonMark, well kept, no other dependency here) parses the text;
//! before its HTML writer runs, every raw HTML event becomes plain text (so `<script>`
//! shows as the characters a model wrote and runs nothing), an image becomes its
//! alternative text (no request leaves for a URL a model chose), and a link keeps its
//! target only for `http`, `https` and `mailto` or a path on this server. The writer
//! escapes text and attributes itself. Writing a Markdown renderer here would mean
//! owning every corner of CommonMark's grammar; dropping events from a proven parser
//! keeps the safety argument to the four rules above.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// Whether a link target may be kept.
fn safe_link(target: &str) -> bool {
    let lower = target.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        // A scheme before any `/`, `?` or `#`: only these.
        Some((scheme, _)) if !scheme.contains(['/', '?', '#']) => {
            matches!(scheme, "http" | "https" | "mailto")
        }
        _ => !lower.starts_with("//"),
    }
}

/// `text` as HTML: CommonMark with tables and strikethrough, raw HTML shown as text,
/// images as their alternative text, unsafe link targets dropped.
pub fn to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut in_image = 0usize;
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Image { .. }) => {
            in_image += 1;
            None
        }
        Event::End(TagEnd::Image) => {
            in_image = in_image.saturating_sub(1);
            None
        }
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            let dest_url = if safe_link(&dest_url) { dest_url } else { CowStr::Borrowed("#") };
            Some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
        }
        other => Some(other),
    });
    let mut html = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_shown_as_text_and_runs_nothing() {
        let html = to_html("Hi <script>alert(1)</script>\n\n<img src=x onerror=\"alert(2)\">\n\n<b>bold</b>");
        assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=\"alert(2)\"&gt;"), "{html}");
    }

    #[test]
    fn images_become_their_text_and_unsafe_links_lose_their_target() {
        let html = to_html(
            "![a cat](https://tracker.example/p.gif) [go](javascript:alert(1)) [ok](https://example.com) [here](/sessions/a) [mail](mailto:a@b.c) [x]( JAVASCRIPT:x)",
        );
        assert!(!html.contains("<img") && html.contains("a cat"), "{html}");
        assert!(html.contains(r##"<a href="#">go</a>"##), "{html}");
        assert!(html.contains(r#"<a href="https://example.com">ok</a>"#));
        assert!(html.contains(r#"<a href="/sessions/a">here</a>"#));
        assert!(html.contains(r#"<a href="mailto:a@b.c">mail</a>"#));
        assert!(!html.to_ascii_lowercase().contains("javascript:"), "{html}");
    }

    #[test]
    fn tables_and_emphasis_render() {
        let html = to_html("# Memo\n\n| a | b |\n| --- | --- |\n| 1 | **2** |\n");
        assert!(html.contains("<h1>Memo</h1>") && html.contains("<table>") && html.contains("<strong>2</strong>"));
    }
}

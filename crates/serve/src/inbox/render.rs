//! The page frame and the small pieces every page shares: notices, ages, JSON, evidence
//! files by kind.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;

use super::markdown;

/// A message at the top of a page.
pub struct Notice {
    pub error: bool,
    pub text: String,
    /// A link after the text: its address and its words.
    pub link: Option<(String, String)>,
}

impl Notice {
    pub fn error(text: impl Into<String>) -> Notice {
        Notice { error: true, text: text.into(), link: None }
    }

    pub fn info(text: impl Into<String>) -> Notice {
        Notice { error: false, text: text.into(), link: None }
    }

    /// The notice with a link to `href` reading `words` after its text.
    pub fn with_link(self, href: String, words: String) -> Notice {
        Notice { link: Some((href, words)), ..self }
    }
}

/// Who is signed in, for the page header.
pub struct Viewer<'a> {
    pub identity: &'a str,
    pub csrf: &'a str,
}

/// A whole page: `title`, the header (with sign-out when someone is signed in), any
/// notice, then `body`. `live` names the event stream that refreshes its regions.
pub fn page(
    title: &str,
    viewer: Option<&Viewer<'_>>,
    notice: Option<&Notice>,
    live: Option<&str>,
    body: Markup,
) -> Markup {
    frame(title, (viewer, notice, live, None), body)
}

/// [`page`], and when `refresh` names a path, a `<meta http-equiv="refresh">` that
/// opens it at once (a same-site navigation, without script).
fn frame(
    title: &str,
    (viewer, notice, live, refresh): (Option<&Viewer<'_>>, Option<&Notice>, Option<&str>, Option<&str>),
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(path) = refresh {
                    meta http-equiv="refresh" content=(format!("0;url={path}"));
                }
                title { (title) " · archmax inbox" }
                link rel="stylesheet" href="/assets/inbox.css";
                script src="/assets/inbox.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/" { "archmax inbox" }
                    @if let Some(viewer) = viewer {
                        form.sign-out method="post" action="/sign-out" {
                            span.identity { "Signed in as " strong { (viewer.identity) } }
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" data-live=[live] {
                    @if let Some(notice) = notice {
                        div.notice.error[notice.error] role=(if notice.error { "alert" } else { "status" }) {
                            (notice.text)
                            @if let Some((href, words)) = &notice.link {
                                " " a.next href=(href) { (words) }
                            }
                        }
                    }
                    (body)
                }
            }
        }
    }
}

/// An HTML answer.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], markup.into_string()).into_response()
}

/// A page that only says why not.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = html! {
        h1 { (title) }
        p { (message) }
        p { a href="/" { "Back to the inbox" } }
    };
    html_response(status, page(title, None, None, None, body))
}

pub fn not_found_page() -> Response {
    error_page(StatusCode::NOT_FOUND, "Not found", "There is no such page.")
}

/// What the sign-in page says of the OpenID Connect provider.
pub struct ProviderOffer<'a> {
    /// Its name on the button.
    pub name: &'a str,
    /// While reads of it are paused after failures: the seconds until it is tried again.
    pub retry_in_seconds: Option<u64>,
}

/// What a sign-in is told while the provider cannot be read.
pub fn provider_unreachable(retry_in_seconds: u64) -> String {
    let unit = if retry_in_seconds == 1 { "second" } else { "seconds" };
    format!(
        "The sign-in provider cannot be reached right now (the runner's log says why); it will be tried again in {retry_in_seconds} {unit}. Start signing in again then, or sign in with a token."
    )
}

/// The sign-in form.
pub fn sign_in_page(csrf: &str, notice: Option<&Notice>, provider: Option<ProviderOffer>) -> Markup {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(provider) = provider {
            p.provider {
                a.button href="/inbox/oidc/start" { "Sign in with " (provider.name) }
            }
            @if let Some(seconds) = provider.retry_in_seconds {
                p.unreachable { (provider_unreachable(seconds)) }
            }
            p { "Or sign in with a token:" }
        }
        p { "Sign in with a token this runner accepts (ARCHMAX_SERVE_TOKEN, or one of its --tokens file). The token is checked, never kept in the browser: a cookie only this site reads holds a random sign-in id." }
        form.sign-in method="post" action="/sign-in" {
            input type="hidden" name="csrf" value=(csrf);
            div.field {
                label for="token" { "Token" }
                input id="token" name="token" type="password" autocomplete="current-password" required autofocus;
            }
            button type="submit" { "Sign in" }
        }
    };
    page("Sign in", None, notice, None, body)
}

/// The page a sign-in through the provider ends on: it opens `return_to` (a path of
/// this inbox) at once, or by its link.
pub fn signed_in_page(identity: &str, return_to: &str) -> Markup {
    let body = html! {
        h1 { "Signed in" }
        p { "Signed in as " strong { (identity) } "." }
        p { a href=(return_to) { "Continue to the inbox" } }
    };
    frame("Signed in", (None, None, None, Some(return_to)), body)
}

/// How long ago `since_ms` was, in the largest whole unit.
pub fn age(now_ms: u64, since_ms: Option<i64>) -> String {
    let Some(since) = since_ms else { return "unknown".to_string() };
    let seconds = (now_ms as i64).saturating_sub(since).max(0) / 1000;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} h", seconds / 3600),
        _ => format!("{} d", seconds / 86_400),
    }
}

/// A JSON value, pretty-printed.
pub fn json_block(value: &Value) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    html! { pre.json { code { (text) } } }
}

/// Markdown, rendered without raw HTML ([`markdown::to_html`]).
pub fn markdown_block(text: &str) -> Markup {
    html! { div.markdown { (PreEscaped(markdown::to_html(text))) } }
}

/// The most of an evidence file shown on a page.
pub const EVIDENCE_SHOWN: usize = 256 * 1024;

/// The media type of an image the inbox shows, by the file's extension.
pub fn image_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase())?;
    match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// One evidence file, by kind: Markdown rendered, JSON pretty-printed, an image shown
/// from `image_url`, anything else as text. `bytes` is the file's head, `size` its size.
pub fn evidence_file(path: &str, bytes: &[u8], size: u64, image_url: &str) -> Markup {
    let cut = size > bytes.len() as u64;
    let text = String::from_utf8_lossy(bytes);
    let lower = path.to_ascii_lowercase();
    let shown = if image_type(path).is_some() {
        html! { img.evidence src=(image_url) alt={ "Evidence image " (path) }; }
    } else if lower.ends_with(".md") || lower.ends_with(".markdown") {
        markdown_block(&text)
    } else if lower.ends_with(".json")
        && let Ok(value) = serde_json::from_slice::<Value>(bytes)
    {
        json_block(&value)
    } else {
        html! { pre.text { (text) } }
    };
    html! {
        (shown)
        @if cut && image_type(path).is_none() {
            p.hint { "Shown: the first " (bytes.len()) " of " (size) " bytes." }
        }
    }
}

/// A path segment or query value, percent-encoded.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The page of a session.
pub fn session_url(id: &str) -> String {
    let segments: Vec<String> = id.split('/').map(encode).collect();
    format!("/sessions/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = 10 * 86_400_000;
        assert_eq!(age(now, Some(now as i64 - 5_000)), "5 s");
        assert_eq!(age(now, Some(now as i64 - 180_000)), "3 min");
        assert_eq!(age(now, Some(now as i64 - 7_200_000)), "2 h");
        assert_eq!(age(now, Some(0)), "10 d");
        assert_eq!(age(now, Some(now as i64 + 1)), "0 s", "a clock behind the park");
        assert_eq!(age(now, None), "unknown");
    }

    #[test]
    fn evidence_is_shown_by_its_kind_and_escaped() {
        let json = evidence_file("a.json", br#"{"b":"<i>"}"#, 11, "/x").into_string();
        assert!(json.contains("&quot;b&quot;: &quot;&lt;i&gt;&quot;"), "{json}");
        let text = evidence_file("a.txt", b"<script>x</script>", 100, "/x").into_string();
        assert!(text.contains("&lt;script&gt;") && text.contains("first 18 of 100 bytes"), "{text}");
        let image = evidence_file("shot.PNG", b"", 9, "/evidence?x").into_string();
        assert!(image.contains(r#"<img class="evidence" src="/evidence?x""#), "{image}");
        assert_eq!(session_url("a/b c"), "/sessions/a/b%20c");
    }
}

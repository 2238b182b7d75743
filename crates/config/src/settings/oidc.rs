//! `[inbox.oidc]` of `archmax.toml`: signing in to the decision inbox with an OpenID
//! Connect provider, beside the runner's tokens.
//!
//! ```toml
//! [inbox.oidc]
//! issuer = "https://login.example.com"        # discovery is read from <issuer>/.well-known/openid-configuration
//! client_id = "archmax-inbox"
//! client_secret_env = "ARCHMAX_OIDC_SECRET"   # the variable holding the client secret
//! allowed_domains = ["fernhill.example"]      # and/or allowed_groups = ["refund-leads"]
//! identity_claim = "email"                    # default; its value is matched against `approvers`
//! ```
//!
//! Also: `groups_claim` (default `groups`), `scopes` (requested besides `openid`; default
//! `["email"]`), `grant_scopes` (the runner scopes a person signed in this way holds;
//! default `["read", "decide"]`), `provider_name` (what the sign-in button says) and
//! `redirect_url` (default `<[serve] public_url>/inbox/oidc/callback`).
//!
//! The one thing to know: at least one of `allowed_domains` and `allowed_groups` is
//! required (an account at the provider is not by itself a reason to let someone in),
//! and the issuer must be `https://` unless it is a loopback address (a test provider).
//! The secret is only named by its variable; the runner refuses to start when it is unset
//! or empty.

use toml::de::DeValue;

use super::is_variable_name;
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The keys `[inbox.oidc]` takes.
const KEYS: [&str; 12] = [
    "issuer",
    "client_id",
    "client_secret_env",
    "allowed_domains",
    "allowed_groups",
    "groups_claim",
    "identity_claim",
    "scopes",
    "grant_scopes",
    "provider_name",
    "redirect_url",
    "trust_unverified_email",
];

/// The runner scopes an OpenID Connect sign-in may hold (never `admin`).
pub const GRANTABLE_SCOPES: [&str; 3] = ["read", "decide", "start"];

/// The most entries one list of `[inbox.oidc]` may hold.
const MAX_ENTRIES: usize = 64;

/// The path of the callback under `[serve] public_url`.
pub const CALLBACK_PATH: &str = "/inbox/oidc/callback";

/// `[inbox.oidc]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcSettings {
    /// The issuer's URL exactly as written (a trailing `/` kept): the provider's `iss`
    /// claim and its discovery document must name this very string.
    pub issuer: String,
    pub client_id: String,
    /// The environment variable holding the client secret.
    pub client_secret_env: String,
    /// Email domains let in (lowercase); a person whose verified email is at one of them.
    pub allowed_domains: Vec<String>,
    /// Groups let in: a person whose groups claim names one of them.
    pub allowed_groups: Vec<String>,
    pub groups_claim: String,
    /// The claim whose value becomes the identity matched against `approvers`.
    pub identity_claim: String,
    /// The scopes requested besides `openid`.
    pub scopes: Vec<String>,
    /// The runner scopes such a sign-in holds (of [`GRANTABLE_SCOPES`]).
    pub grant_scopes: Vec<String>,
    /// What the sign-in button calls the provider.
    pub provider_name: String,
    /// Where the provider sends the browser back; `None`: derived from `public_url`.
    pub redirect_url: Option<String>,
    /// Whether an email claim without `email_verified` counts (for providers, such as
    /// Microsoft Entra ID, that never send it). Off: an email is trusted only when the
    /// token says `email_verified: true`.
    pub trust_unverified_email: bool,
}

impl OidcSettings {
    /// The redirect URL: `redirect_url`, else `<public_url>/inbox/oidc/callback`.
    pub fn redirect_url(&self, public_url: Option<&str>) -> Option<String> {
        self.redirect_url.clone().or_else(|| public_url.map(|base| format!("{base}{CALLBACK_PATH}")))
    }
}

/// Whether `host` (of a URL's authority, without user info) is a loopback name.
fn is_loopback_host(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(name, _)| name),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What is wrong with `url` as the issuer or the redirect URL: an `https://` URL without
/// credentials, query or fragment (`http://` only on a loopback host).
fn url_problem(url: &str) -> Option<&'static str> {
    if let Some(problem) = super::notify::http_url_problem(url) {
        return Some(problem);
    }
    if url.contains(['?', '#']) {
        return Some("holds a query or a fragment");
    }
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("http://") {
        let authority = rest.split('/').next().unwrap_or_default();
        if !is_loopback_host(authority) {
            return Some("is not https:// (plain http:// is taken only on a loopback address)");
        }
    }
    None
}

/// Whether `name` can be a JWT claim or OAuth scope name: printable ASCII, no space.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|byte| byte.is_ascii_graphic() && byte != b'"')
}

/// Reads the `[inbox.oidc]` table `value`; `None` (with diagnostics) when anything is
/// wrong.
pub(super) fn read(
    file: FileId,
    value: &toml::Spanned<DeValue<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<OidcSettings> {
    let before = diagnostics.len();
    let mut settings = default_settings();
    {
        let mut refuse = |at: std::ops::Range<usize>, message: String, help: String| {
            diagnostics
                .push(Diagnostic::at(Code::HostConfig, Span::new(file, at.start, at.end), message).with_help(help));
        };
        let DeValue::Table(table) = value.get_ref() else {
            refuse(
                value.span(),
                "`inbox.oidc` is not a table".into(),
                format!("write an `[inbox.oidc]` table with {}", list_names(&KEYS)),
            );
            return None;
        };
        for (key, value) in table.iter() {
            read_key(&mut settings, (key.get_ref().as_ref(), key.span()), value, &mut refuse);
        }
    }
    let whole = value.span();
    let clean = diagnostics.len() == before;
    let mut refuse = |at: std::ops::Range<usize>, message: String, help: String| {
        diagnostics.push(Diagnostic::at(Code::HostConfig, Span::new(file, at.start, at.end), message).with_help(help));
    };
    let mut first_missing = true;
    for (missing, help) in [
        (settings.issuer.is_empty(), "`issuer`: the provider's issuer URL, such as https://login.example.com"),
        (settings.client_id.is_empty(), "`client_id`: the client id the provider registered"),
        (settings.client_secret_env.is_empty(), "`client_secret_env`: the variable that holds the client secret"),
    ] {
        if missing && clean && first_missing {
            first_missing = false;
            refuse(
                whole.clone(),
                format!("`[inbox.oidc]` lacks {}", help.split(':').next().unwrap_or_default()),
                format!("set {help}"),
            );
        }
    }
    if settings.allowed_domains.is_empty() && settings.allowed_groups.is_empty() && clean && first_missing {
        refuse(
            whole,
            "`[inbox.oidc]` lets nobody in: it sets neither `allowed_domains` nor `allowed_groups`".into(),
            "list the email domains (`allowed_domains`) or the groups (`allowed_groups`) whose people may sign in; an account at the provider alone is not enough".into(),
        );
    }
    if settings.provider_name.is_empty() {
        let host = settings.issuer.split("://").nth(1).unwrap_or(&settings.issuer);
        settings.provider_name = host.trim_end_matches('/').to_string();
    }
    (diagnostics.len() == before).then_some(settings)
}

/// One key of `[inbox.oidc]` into `settings`, or its diagnostic through `refuse`.
fn read_key(
    settings: &mut OidcSettings,
    (name, key_span): (&str, std::ops::Range<usize>),
    value: &toml::Spanned<DeValue<'_>>,
    refuse: &mut dyn FnMut(std::ops::Range<usize>, String, String),
) {
    let at = value.span();
    let text = match value.get_ref() {
        DeValue::String(text) => Some(text.trim().to_string()),
        _ => None,
    };
    let list = || strings(value.get_ref());
    match name {
            "issuer" | "redirect_url" => match text.as_deref().map(|url| (url, url_problem(url))) {
                Some((url, None)) => {
                    if name == "issuer" {
                        settings.issuer = url.to_string()
                    } else {
                        settings.redirect_url = Some(url.trim_end_matches('/').to_string())
                    }
                }
                Some((_, Some(problem))) => refuse(at, format!("`inbox.oidc.{name}` {problem}"), url_help(name)),
                None => refuse(at, format!("`inbox.oidc.{name}` is not a string"), url_help(name)),
            },
            "client_id" | "provider_name" => match text {
                Some(text) if !text.is_empty() && text.len() <= 256 && !text.chars().any(char::is_control) => {
                    if name == "client_id" { settings.client_id = text } else { settings.provider_name = text }
                }
                _ => refuse(
                    at,
                    format!("`inbox.oidc.{name}` is not a non-empty string of at most 256 characters"),
                    match name {
                        "client_id" => "give the client id the provider registered for this inbox".into(),
                        _ => "give the name the sign-in button shows, such as \"Fernhill SSO\"".into(),
                    },
                ),
            },
            "client_secret_env" => match text {
                Some(variable) if is_variable_name(&variable) => settings.client_secret_env = variable,
                _ => refuse(
                    at,
                    "`inbox.oidc.client_secret_env` is not an environment variable name".into(),
                    "name the variable that holds the client secret (letters, digits and `_`), such as ARCHMAX_OIDC_SECRET; the secret itself never goes in the file".into(),
                ),
            },
            "groups_claim" | "identity_claim" => match text {
                Some(claim) if is_plain_name(&claim) => {
                    if name == "groups_claim" { settings.groups_claim = claim } else { settings.identity_claim = claim }
                }
                _ => refuse(at, format!("`inbox.oidc.{name}` is not a claim name"), "write the claim's name as the ID token has it, such as \"email\" or \"groups\"".into()),
            },
            "allowed_domains" => match list().filter(|domains| domains.iter().all(|domain| is_domain(domain))) {
                Some(domains) => settings.allowed_domains = domains.iter().map(|domain| domain.to_ascii_lowercase()).collect(),
                None => refuse(at, "`inbox.oidc.allowed_domains` is not a list of domain names".into(), "list the email domains let in, such as [\"fernhill.example\"]".into()),
            },
            "allowed_groups" | "scopes" => match list().filter(|names| names.iter().all(|name| is_plain_name(name))) {
                Some(names) => {
                    if name == "allowed_groups" { settings.allowed_groups = names } else { settings.scopes = names }
                }
                None => refuse(at, format!("`inbox.oidc.{name}` is not a list of names"), match name {
                    "scopes" => "list the scopes to request besides `openid`, such as [\"email\", \"groups\"]".into(),
                    _ => "list the groups let in, as the groups claim names them, such as [\"refund-leads\"]".into(),
                }),
            },
            "grant_scopes" => match list().filter(|scopes| !scopes.is_empty() && scopes.iter().all(|scope| GRANTABLE_SCOPES.contains(&scope.as_str()))) {
                Some(scopes) => settings.grant_scopes = scopes,
                None => refuse(at, "`inbox.oidc.grant_scopes` is not a list of grantable scopes".into(), format!("list some of {} (`admin` is never granted through the inbox)", list_names(&GRANTABLE_SCOPES))),
            },
            "trust_unverified_email" => match value.get_ref() {
                DeValue::Boolean(trust) => settings.trust_unverified_email = *trust,
                _ => refuse(at, "`inbox.oidc.trust_unverified_email` is not true or false".into(), "set it to true only for a provider that never sends `email_verified` and whose email claim its users cannot set".into()),
            },
            other => {
                let help = match did_you_mean(other, KEYS) {
                    Some(close) => format!("did you mean `{close}`? `[inbox.oidc]` takes {}", list_names(&KEYS)),
                    None => format!("`[inbox.oidc]` takes {}", list_names(&KEYS)),
                };
                refuse(key_span, format!("`inbox.oidc.{other}` is not a setting"), help);
            }
        }
}

fn default_settings() -> OidcSettings {
    OidcSettings {
        issuer: String::new(),
        client_id: String::new(),
        client_secret_env: String::new(),
        allowed_domains: Vec::new(),
        allowed_groups: Vec::new(),
        groups_claim: "groups".into(),
        identity_claim: "email".into(),
        scopes: vec!["email".into()],
        grant_scopes: vec!["read".into(), "decide".into()],
        provider_name: String::new(),
        redirect_url: None,
        trust_unverified_email: false,
    }
}

fn url_help(name: &str) -> String {
    match name {
        "issuer" => "give the provider's issuer URL, such as https://login.example.com (its `iss` claim)".into(),
        _ => format!(
            "give the URL the provider sends people back to, ending in {CALLBACK_PATH}; without it `[serve] public_url` is used"
        ),
    }
}

/// A list of at most [`MAX_ENTRIES`] distinct strings.
fn strings(value: &DeValue<'_>) -> Option<Vec<String>> {
    let DeValue::Array(items) = value else { return None };
    if items.len() > MAX_ENTRIES {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items.iter() {
        let DeValue::String(text) = item.get_ref() else { return None };
        if out.iter().any(|known| known == text.as_ref()) {
            return None;
        }
        out.push(text.to_string());
    }
    Some(out)
}

/// Whether `text` is a domain name: dot-separated labels of letters, digits and `-`.
fn is_domain(text: &str) -> bool {
    text.len() <= 253
        && text.contains('.')
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
        })
}

/// Reads `[inbox]`'s `oidc` key of a parsed document, when present.
#[cfg(test)]
fn read_in(file: FileId, document: &toml::de::DeTable<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<OidcSettings> {
    let DeValue::Table(inbox) = document.get("inbox")?.get_ref() else { return None };
    read(file, inbox.get("oidc")?, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toml::de::DeTable;

    fn read_text(text: &str) -> (Option<OidcSettings>, Vec<String>) {
        let mut diagnostics = Vec::new();
        let document = DeTable::parse(text).expect("TOML");
        let settings = read_in(FileId(0), document.get_ref(), &mut diagnostics);
        (
            settings,
            diagnostics
                .iter()
                .map(|diagnostic| format!("{} | {}", diagnostic.message, diagnostic.help.clone().unwrap_or_default()))
                .collect(),
        )
    }

    const GOOD: &str = "[inbox.oidc]\nissuer = \"https://login.fernhill.example/\"\nclient_id = \"inbox\"\nclient_secret_env = \"OIDC_SECRET\"\nallowed_domains = [\"Fernhill.example\"]\n";

    #[test]
    fn a_provider_is_read_with_its_defaults() {
        let (settings, problems) = read_text(GOOD);
        assert_eq!(problems, Vec::<String>::new());
        let settings = settings.expect("settings");
        assert_eq!(settings.issuer, "https://login.fernhill.example/", "as written: the `iss` claim must match it");
        assert!(!settings.trust_unverified_email);
        assert_eq!(settings.allowed_domains, ["fernhill.example"]);
        assert_eq!((settings.identity_claim.as_str(), settings.groups_claim.as_str()), ("email", "groups"));
        assert_eq!(settings.scopes, ["email"]);
        assert_eq!(settings.grant_scopes, ["read", "decide"]);
        assert_eq!(settings.provider_name, "login.fernhill.example");
        assert_eq!(
            settings.redirect_url(Some("https://inbox.example")).as_deref(),
            Some("https://inbox.example/inbox/oidc/callback")
        );
        assert_eq!(settings.redirect_url(None), None);
        let (loopback, problems) =
            read_text(&GOOD.replace("https://login.fernhill.example/", "http://127.0.0.1:9000/idp"));
        assert_eq!(
            (loopback.map(|settings| settings.issuer), problems),
            (Some("http://127.0.0.1:9000/idp".to_string()), vec![])
        );
    }

    #[test]
    fn every_bad_value_is_named_with_what_to_write() {
        let cases = [
            (
                GOOD.replace("client_id", "client_idd"),
                "`inbox.oidc.client_idd` is not a setting | did you mean `client_id`?",
            ),
            (GOOD.replace("https://login", "http://login"), "`inbox.oidc.issuer` is not https://"),
            (GOOD.replace("https://login.fernhill.example/", "https://login.example/?x=1"), "holds a query"),
            (GOOD.replace("https://login.fernhill.example/", "https://user:pw@login.example"), "carries credentials"),
            (
                GOOD.replace("\"OIDC_SECRET\"", "\"the secret\""),
                "`inbox.oidc.client_secret_env` is not an environment variable name",
            ),
            (
                GOOD.replace("[\"Fernhill.example\"]", "[\"@fernhill\"]"),
                "`inbox.oidc.allowed_domains` is not a list of domain names",
            ),
            (GOOD.replace("allowed_domains = [\"Fernhill.example\"]", "allowed_groups = []"), "lets nobody in"),
            (GOOD.replace("client_id = \"inbox\"\n", ""), "`[inbox.oidc]` lacks `client_id`"),
            (
                format!("{GOOD}grant_scopes = [\"admin\"]\n"),
                "`inbox.oidc.grant_scopes` is not a list of grantable scopes",
            ),
            (format!("{GOOD}identity_claim = \"\"\n"), "`inbox.oidc.identity_claim` is not a claim name"),
            (
                format!("{GOOD}redirect_url = \"ftp://x\"\n"),
                "`inbox.oidc.redirect_url` is not an http:// or https:// URL",
            ),
            ("[inbox]\noidc = 1\n".to_string(), "`inbox.oidc` is not a table"),
        ];
        for (text, says) in cases {
            let (settings, problems) = read_text(&text);
            assert!(settings.is_none(), "{text}");
            assert!(problems.iter().any(|problem| problem.contains(says)), "{text}: {problems:?}");
        }
    }
}

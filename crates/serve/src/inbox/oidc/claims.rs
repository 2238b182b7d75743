//! Who a verified ID token says someone is, and whether `[inbox.oidc]` lets them in.
//!
//! The identity is the value of `identity_claim` (a non-empty string of at most
//! [`MAX_IDENTITY_CHARS`] characters with no control or invisible formatting character,
//! such as a bidi override or a zero-width space, that could disguise it on a page).
//! An email (the default identity claim, or the `email` claim beside another) counts
//! only when it is ASCII, holds one `@` with something before it, and the token says
//! `email_verified: true` (or `trust_unverified_email` is set for a provider that never
//! says); it is lowercased in ASCII only, so no Unicode case folding (the Kelvin sign
//! `K` to `k`) makes two provider accounts one identity. A person is let in when the
//! domain of their email is one of `allowed_domains` (exact, case-insensitive: a
//! subdomain is another domain), or when the groups claim names one of
//! `allowed_groups` (exact).
//!
//! The one thing to know: this reads only claims whose signature was already checked
//! ([`super::provider`]).

use serde_json::{Map, Value};

use archmax_config::settings::oidc::OidcSettings;
use archmax_program::text::disguises;

/// The longest identity taken from a token.
pub const MAX_IDENTITY_CHARS: usize = 256;

/// Why a verified token does not sign anyone in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimsRefusal {
    /// The identity claim is absent, not a string, empty, too long or not printable.
    NoIdentity,
    /// The email is not verified (the token does not say `email_verified: true`).
    EmailUnverified,
    /// Neither the email's domain nor any group is allowed; the identity, for the page.
    NotAllowed(String),
}

/// The identity `claims` sign in as, when `settings` let them in.
pub fn admit(settings: &OidcSettings, claims: &Map<String, Value>) -> Result<String, ClaimsRefusal> {
    let identity = claims
        .get(&settings.identity_claim)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|value| {
            !value.is_empty() && value.chars().count() <= MAX_IDENTITY_CHARS && !value.chars().any(disguises)
        })
        .ok_or(ClaimsRefusal::NoIdentity)?;
    let email_trusted = match claims.get("email_verified") {
        Some(verified) => *verified == Value::Bool(true),
        None => settings.trust_unverified_email,
    };
    let identity = if settings.identity_claim == "email" {
        if !is_email(identity) {
            return Err(ClaimsRefusal::NoIdentity);
        }
        if !email_trusted {
            return Err(ClaimsRefusal::EmailUnverified);
        }
        identity.to_ascii_lowercase()
    } else {
        identity.to_string()
    };
    let email = match settings.identity_claim.as_str() {
        "email" => Some(identity.clone()),
        _ => claims
            .get("email")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|email| email_trusted && is_email(email))
            .map(str::to_ascii_lowercase),
    };
    let domain_allowed = email.as_deref().and_then(|email| email.rsplit_once('@')).is_some_and(|(local, domain)| {
        !local.is_empty() && settings.allowed_domains.iter().any(|allowed| allowed.eq_ignore_ascii_case(domain))
    });
    let groups: Vec<&str> = match claims.get(&settings.groups_claim) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(one)) => vec![one.as_str()],
        _ => Vec::new(),
    };
    let group_allowed = groups.iter().any(|group| settings.allowed_groups.iter().any(|allowed| allowed == group));
    if domain_allowed || group_allowed { Ok(identity) } else { Err(ClaimsRefusal::NotAllowed(identity)) }
}

/// An address an identity may be: ASCII printable, one `@` with text on both sides.
fn is_email(text: &str) -> bool {
    text.bytes().all(|byte| byte.is_ascii_graphic())
        && text
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(domains: &[&str], groups: &[&str], identity_claim: &str) -> OidcSettings {
        OidcSettings {
            issuer: "https://login.example".into(),
            client_id: "inbox".into(),
            client_secret_env: "SECRET".into(),
            allowed_domains: domains.iter().map(|domain| domain.to_string()).collect(),
            allowed_groups: groups.iter().map(|group| group.to_string()).collect(),
            groups_claim: "groups".into(),
            identity_claim: identity_claim.into(),
            scopes: vec![],
            grant_scopes: vec!["read".into()],
            provider_name: "Login".into(),
            redirect_url: None,
            trust_unverified_email: false,
        }
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn the_identity_claim_and_the_allow_lists_decide_who_is_let_in() {
        let by_domain = settings(&["fernhill.example"], &[], "email");
        let by_group = settings(&[], &["refund-leads"], "preferred_username");
        let cases: [(&OidcSettings, Value, Result<&str, ClaimsRefusal>); 15] = [
            (&by_domain, json!({"email": "Lead@Fernhill.example"}), Err(ClaimsRefusal::EmailUnverified)),
            (
                &by_domain,
                json!({"email": "Lead@Fernhill.example", "email_verified": true}),
                Ok("lead@fernhill.example"),
            ),
            // The Kelvin sign lowercases to `k` in Unicode: two accounts, one identity.
            (
                &by_domain,
                json!({"email": "\u{212A}ate@fernhill.example", "email_verified": true}),
                Err(ClaimsRefusal::NoIdentity),
            ),
            (
                &by_domain,
                json!({"email": "kate@fernhill.example@evil.example", "email_verified": true}),
                Err(ClaimsRefusal::NoIdentity),
            ),
            (
                &by_group,
                json!({"preferred_username": "lead\u{202e}nimda", "groups": ["refund-leads"]}),
                Err(ClaimsRefusal::NoIdentity),
            ),
            (
                &by_domain,
                json!({"email": "lead@fernhill.example", "email_verified": true}),
                Ok("lead@fernhill.example"),
            ),
            (
                &by_domain,
                json!({"email": "lead@fernhill.example", "email_verified": false}),
                Err(ClaimsRefusal::EmailUnverified),
            ),
            (
                &by_domain,
                json!({"email": "lead@fernhill.example", "email_verified": "true"}),
                Err(ClaimsRefusal::EmailUnverified),
            ),
            (
                &by_domain,
                json!({"email": "lead@evil.fernhill.example", "email_verified": true}),
                Err(ClaimsRefusal::NotAllowed("lead@evil.fernhill.example".into())),
            ),
            (
                &by_domain,
                json!({"email": "lead@fernhill.example.evil", "email_verified": true}),
                Err(ClaimsRefusal::NotAllowed("lead@fernhill.example.evil".into())),
            ),
            (&by_domain, json!({"sub": "1"}), Err(ClaimsRefusal::NoIdentity)),
            (&by_domain, json!({"email": 7}), Err(ClaimsRefusal::NoIdentity)),
            (&by_group, json!({"preferred_username": "Lead", "groups": ["refund-leads"]}), Ok("Lead")),
            (
                &by_group,
                json!({"preferred_username": "lead", "groups": "refund-leads-2"}),
                Err(ClaimsRefusal::NotAllowed("lead".into())),
            ),
            (
                &by_group,
                json!({"preferred_username": "a\u{7}b", "groups": ["refund-leads"]}),
                Err(ClaimsRefusal::NoIdentity),
            ),
        ];
        for (settings, token, expected) in cases {
            assert_eq!(admit(settings, &claims(token.clone())), expected.map(str::to_string), "{token}");
        }
        // Another identity claim: the email claim's domain still counts, when verified.
        let either = settings(&["fernhill.example"], &["refund-leads"], "preferred_username");
        let verified = json!({"preferred_username": "lead", "email": "lead@fernhill.example", "email_verified": true});
        assert_eq!(admit(&either, &claims(verified)), Ok("lead".to_string()));
        let unsaid = json!({"preferred_username": "lead", "email": "lead@fernhill.example"});
        assert_eq!(admit(&either, &claims(unsaid.clone())), Err(ClaimsRefusal::NotAllowed("lead".into())));
        // A provider that never says, trusted on purpose.
        let trusting = OidcSettings { trust_unverified_email: true, ..either.clone() };
        assert_eq!(admit(&trusting, &claims(unsaid)), Ok("lead".to_string()));
        let said_no = json!({"preferred_username": "lead", "email": "lead@fernhill.example", "email_verified": false});
        assert_eq!(admit(&trusting, &claims(said_no)), Err(ClaimsRefusal::NotAllowed("lead".into())));
        let unverified =
            json!({"preferred_username": "lead", "email": "lead@fernhill.example", "email_verified": false});
        assert_eq!(admit(&either, &claims(unverified)), Err(ClaimsRefusal::NotAllowed("lead".into())));
    }
}

//! Timed tokens: `<random>.<issued second>.<mac>`, what the sign-in form's cookie and an
//! OIDC sign-in's `state` both are, each under its own key.
//!
//! [`issue`] writes one; [`check`] takes one back only when its MAC checks out under the
//! caller's key, its random part is [`RANDOM_CHARS`] long, and it was issued no longer
//! than its [`Lifetime`] ago (nor further in the future than the lifetime's skew allows,
//! for a runner whose clock is ahead of this one's).
//!
//! The one thing to know: the MAC covers `<random>.<issued>` together, so the issue time
//! cannot be moved without the key; everything else about a token is the caller's (which
//! key, which label, what the random part stands for).

/// Characters in a token's random part: 16 random bytes as hex.
pub const RANDOM_CHARS: usize = 32;

/// How long a token is taken after it is issued, in seconds.
#[derive(Clone, Copy, Debug)]
pub struct Lifetime {
    /// Seconds after its issue time a token stops being taken.
    pub seconds: u64,
    /// Seconds ahead of this runner's clock an issue time may lie.
    pub skew: u64,
}

/// Why a token is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token made under this key (malformed, or its MAC does not check out).
    Foreign,
    /// Made under this key, but outside its lifetime at the time asked.
    Expired,
}

/// The token for `random` issued at `issued_seconds`, with `mac` of its first two parts.
pub fn issue(random: &str, issued_seconds: u64, mac: impl FnOnce(&[u8]) -> String) -> String {
    let signed = format!("{random}.{issued_seconds}");
    let mac = mac(signed.as_bytes());
    format!("{signed}.{mac}")
}

/// The random part of `token` when `verifies(signed part, mac)` and it is within
/// `lifetime` at `now_seconds`.
pub fn check(
    token: &str,
    now_seconds: u64,
    lifetime: Lifetime,
    verifies: impl FnOnce(&[u8], &str) -> bool,
) -> Result<&str, Refusal> {
    let (signed, mac) = token.rsplit_once('.').ok_or(Refusal::Foreign)?;
    let (random, issued) = signed.split_once('.').ok_or(Refusal::Foreign)?;
    if random.len() != RANDOM_CHARS || !verifies(signed.as_bytes(), mac) {
        return Err(Refusal::Foreign);
    }
    let issued: u64 = issued.parse().map_err(|_| Refusal::Foreign)?;
    let fresh =
        now_seconds.saturating_sub(issued) <= lifetime.seconds && issued <= now_seconds.saturating_add(lifetime.skew);
    if fresh { Ok(random) } else { Err(Refusal::Expired) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANDOM: &str = "0123456789abcdef0123456789abcdef";
    const LIFETIME: Lifetime = Lifetime { seconds: 600, skew: 60 };

    /// A stand-in MAC: the bytes as hex (like a real one, it holds no `.`).
    fn mac(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    fn verifies(bytes: &[u8], given: &str) -> bool {
        mac(bytes) == given
    }

    #[test]
    fn a_token_is_taken_within_its_lifetime_and_its_skew_and_not_outside() {
        let token = issue(RANDOM, 1_000, mac);
        assert_eq!(check(&token, 1_000, LIFETIME, verifies), Ok(RANDOM));
        assert_eq!(check(&token, 1_600, LIFETIME, verifies), Ok(RANDOM));
        assert_eq!(check(&token, 1_601, LIFETIME, verifies), Err(Refusal::Expired));
        // Issued by a runner whose clock is ahead: up to the skew.
        assert_eq!(check(&token, 940, LIFETIME, verifies), Ok(RANDOM));
        assert_eq!(check(&token, 939, LIFETIME, verifies), Err(Refusal::Expired));
        // The far future does not wrap round to fresh.
        let future = issue(RANDOM, u64::MAX, mac);
        assert_eq!(check(&future, u64::MAX - 61, LIFETIME, verifies), Err(Refusal::Expired));
        assert_eq!(check(&future, u64::MAX, LIFETIME, verifies), Ok(RANDOM));
    }

    #[test]
    fn a_moved_issue_time_a_wrong_mac_or_a_malformed_token_is_foreign() {
        let token = issue(RANDOM, 1_000, mac);
        let moved = token.replacen(".1000.", ".1500.", 1);
        assert_eq!(check(&moved, 1_700, LIFETIME, verifies), Err(Refusal::Foreign));
        let short = issue("abc", 1_000, mac);
        assert_eq!(check(&short, 1_000, LIFETIME, verifies), Err(Refusal::Foreign));
        let not_a_number = issue(RANDOM, 1_000, mac).replacen(".1000.", ".ten.", 1);
        let resigned = {
            let (signed, _) = not_a_number.rsplit_once('.').expect("three parts");
            format!("{signed}.{}", mac(signed.as_bytes()))
        };
        assert_eq!(check(&resigned, 1_000, LIFETIME, verifies), Err(Refusal::Foreign));
        for malformed in ["", ".", "..", RANDOM, "a.b"] {
            assert_eq!(check(malformed, 1_000, LIFETIME, verifies), Err(Refusal::Foreign), "{malformed:?}");
        }
        assert_eq!(check(&token, 1_000, LIFETIME, |_, _| false), Err(Refusal::Foreign));
    }
}

//! Who sent a request: the peer's address, or, when the peer is a proxy the runner was told
//! to trust (`--trusted-proxy`), the client its `X-Forwarded-For` names. Clients are
//! grouped as the connection caps group peers ([`crate::connections::peer_of`]): an IPv4
//! address, or an IPv6 /64. The inbox's sign-in throttle counts by it, and the log of
//! refused API requests names it.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};

/// The client a request came from, as the sign-in throttle counts it: the peer's IPv4
/// address, or its IPv6 /64 (grouped as the connection cap groups peers, so a client
/// rotating addresses inside its /64 is one client). Through a proxy in `trusted`, the
/// client its `X-Forwarded-For` names ([`forwarded_client`]).
pub(crate) fn client_of(extensions: &Extensions, headers: &HeaderMap, trusted: &[IpAddr]) -> String {
    extensions.get::<ConnectInfo<SocketAddr>>().map_or_else(
        || "unknown".to_string(),
        |ConnectInfo(address)| {
            crate::connections::peer_of(forwarded_client(address.ip(), headers, trusted)).to_string()
        },
    )
}

/// The client behind `peer` when `peer` is a trusted proxy: `X-Forwarded-For` read from
/// its right end (what the nearest proxy wrote) past every trusted proxy; what a client
/// wrote further left is never reached. An entry that is not an address stops the walk at
/// the proxy before it. A peer that is not trusted is the client, whatever it sends.
fn forwarded_client(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let is_trusted = |address: IpAddr| trusted.iter().any(|proxy| proxy.to_canonical() == address.to_canonical());
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let address = hop.parse::<IpAddr>().or_else(|_| hop.parse::<SocketAddr>().map(|socket| socket.ip()));
        let Ok(address) = address else { return client };
        client = address;
        if !is_trusted(address) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn sign_in_attempts_are_counted_per_ipv4_address_and_per_ipv6_slash_64() {
        let of = |address: &str| {
            let mut extensions = Extensions::new();
            extensions.insert(ConnectInfo(address.parse::<SocketAddr>().expect("an address")));
            client_of(&extensions, &HeaderMap::new(), &[])
        };
        assert_eq!(of("[2001:db8:1:2::1]:4000"), of("[2001:db8:1:2:ffff:eeee:dddd:cccc]:4001"), "one /64");
        assert_ne!(of("[2001:db8:1:2::1]:4000"), of("[2001:db8:1:3::1]:4000"), "another /64");
        assert_eq!(of("192.0.2.7:1"), of("[::ffff:192.0.2.7]:2"), "an IPv4 address, however written");
        assert_ne!(of("192.0.2.7:1"), of("192.0.2.8:1"));
    }

    #[test]
    fn through_a_trusted_proxy_the_client_is_the_nearest_untrusted_forwarded_address() {
        let address = |text: &str| text.parse::<IpAddr>().expect("an address");
        let (proxy, inner) = (address("10.0.0.1"), address("10.0.0.2"));
        let forwarded = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("x-forwarded-for", HeaderValue::from_str(value).expect("a header"));
            headers
        };
        let trusted = [proxy, inner];
        let client = |peer: IpAddr, headers: &HeaderMap| forwarded_client(peer, headers, &trusted);
        assert_eq!(client(proxy, &forwarded("198.51.100.7")), address("198.51.100.7"));
        assert_eq!(
            client(proxy, &forwarded("203.0.113.9, 198.51.100.7, 10.0.0.2")),
            address("198.51.100.7"),
            "what the client wrote to the left is not reached"
        );
        assert_eq!(client(proxy, &forwarded("not an address")), proxy, "a garbled header counts against the proxy");
        assert_eq!(client(proxy, &HeaderMap::new()), proxy);
        assert_eq!(
            client(address("192.0.2.1"), &forwarded("198.51.100.7")),
            address("192.0.2.1"),
            "a peer that is not trusted is the client"
        );
        assert_eq!(forwarded_client(proxy, &forwarded("198.51.100.7"), &[]), proxy, "no proxy trusted");
    }
}

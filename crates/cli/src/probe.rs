//! `archmax probe URL`: one HTTP GET, exit 0 on a 2xx answer, 1 otherwise.
//!
//! It exists for the container image's `HEALTHCHECK` (`deploy/Containerfile`): the image
//! holds the binary and its libraries and nothing else, so there is no `curl` to ask the
//! server's `/healthz`. The probe speaks plain HTTP/1.1 over a `std` socket (a health
//! check asks a server on the same host, never through TLS), with one timeout bounding
//! the connect, the write and each read, and reads only the status line of the answer.
//!
//! The URL may come from `ARCHMAX_PROBE_URL` instead of the command line, so the image's
//! fixed `HEALTHCHECK ["archmax", "probe"]` follows a server listening elsewhere
//! (`podman run -e ARCHMAX_PROBE_URL=http://127.0.0.1:9000/healthz …`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::output::failure;

/// The variable naming the URL when the command line names none.
pub const URL_VARIABLE: &str = "ARCHMAX_PROBE_URL";

/// The longest status line the probe reads; an answer with a longer one is not HTTP.
const STATUS_LINE_LIMIT: usize = 1024;

/// Why a probe failed, as the message the command prints.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("`{0}` is not a URL the probe can ask: {1}")]
    Url(String, String),
    #[error("could not reach {0}: {1}")]
    Unreachable(String, std::io::Error),
    #[error("{0} did not answer in HTTP: `{1}`")]
    NotHttp(String, String),
    #[error("{0} answered {1}, not 2xx")]
    Status(String, String),
}

/// `archmax probe [URL] --timeout SECONDS`.
pub fn run(url: Option<&str>, timeout: f64) -> ExitCode {
    let from_env = std::env::var(URL_VARIABLE).ok().filter(|url| !url.trim().is_empty());
    let Some(url) = url.or(from_env.as_deref()) else {
        return failure(format!("name the URL to probe, as an argument or in {URL_VARIABLE}"));
    };
    match probe(url, Duration::from_secs_f64(timeout)) {
        Ok(status) => {
            if !crate::output::quiet() {
                println!("{url} answered {status}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => failure(error),
    }
}

/// Asks `url` once; the status line's code and reason when it is 2xx. `timeout` bounds
/// the whole probe, not each step: a server that trickles its answer a byte at a time
/// is cut off when the time is up, like one that never answers.
pub fn probe(url: &str, timeout: Duration) -> Result<String, ProbeError> {
    let deadline = Instant::now() + timeout;
    let (authority, host, path) = target(url)?;
    let unreachable = |error| ProbeError::Unreachable(authority.clone(), error);
    let late = || std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {timeout:?}"));
    let left = || {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() { Err(late()) } else { Ok(left) }
    };
    let addresses: Vec<_> = authority.to_socket_addrs().map_err(unreachable)?.collect();
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "the host name has no address");
    let mut connected = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, left().map_err(unreachable)?) {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(error) => last = error,
        }
    }
    let mut stream = connected.ok_or_else(|| unreachable(last))?;
    stream.set_write_timeout(Some(left().map_err(unreachable)?)).map_err(unreachable)?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: archmax-probe\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(unreachable)?;
    // The status line, read until its end, the limit, the end of the answer or the deadline.
    let mut head = Vec::new();
    let mut chunk = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < STATUS_LINE_LIMIT {
        stream.set_read_timeout(Some(left().map_err(unreachable)?)).map_err(unreachable)?;
        let read = match stream.read(&mut chunk) {
            Ok(read) => read,
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(unreachable(late()));
            }
            Err(error) => return Err(unreachable(error)),
        };
        if read == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    let end = head.iter().position(|&byte| byte == b'\n').unwrap_or(head.len()).min(STATUS_LINE_LIMIT);
    let line = String::from_utf8_lossy(&head[..end]);
    let line = line.trim_end();
    let mut parts = line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/") || code.len() != 3 || !code.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(ProbeError::NotHttp(url.to_string(), line.chars().take(80).collect()));
    }
    let status = line[version.len()..].trim().to_string();
    if code.starts_with('2') { Ok(status) } else { Err(ProbeError::Status(url.to_string(), status)) }
}

/// The `host:port` to connect to, the `Host` header and the request target of `url`.
fn target(url: &str) -> Result<(String, String, String), ProbeError> {
    let refuse = |why: &str| ProbeError::Url(url.to_string(), why.to_string());
    let parsed = url::Url::parse(url).map_err(|error| refuse(&error.to_string()))?;
    if parsed.scheme() != "http" {
        return Err(refuse("only http:// is supported (a health check asks a server on its own host)"));
    }
    let host = parsed.host_str().ok_or_else(|| refuse("it names no host"))?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let path = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_string(),
    };
    // `host_str` keeps an IPv6 address in brackets, as both uses need it.
    Ok((format!("{host}:{port}"), format!("{host}:{port}"), path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-connection server on loopback that reads the request and writes `answer`;
    /// returns its base URL and the request it read.
    fn answering(answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let served = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("a connection");
            let mut request = Vec::new();
            let mut buffer = [0u8; 512];
            while !request.ends_with(b"\r\n\r\n") {
                let read = socket.read(&mut buffer).expect("the request");
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
            }
            socket.write_all(answer.as_bytes()).expect("the answer");
            String::from_utf8_lossy(&request).into_owned()
        });
        (base, served)
    }

    #[test]
    fn a_2xx_answer_passes_and_the_request_names_the_path_and_host() {
        let (base, served) = answering("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        let status = probe(&format!("{base}/healthz?deep=1"), Duration::from_secs(10)).expect("healthy");
        assert_eq!(status, "200 OK");
        let request = served.join().expect("the server");
        let host = base.trim_start_matches("http://");
        assert!(request.starts_with("GET /healthz?deep=1 HTTP/1.1\r\n"), "{request}");
        assert!(request.contains(&format!("\r\nHost: {host}\r\n")), "{request}");
    }

    #[test]
    fn any_other_status_fails_naming_it() {
        let (base, served) = answering("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        let error = probe(&format!("{base}/readyz"), Duration::from_secs(10)).expect_err("unready");
        served.join().expect("the server");
        assert_eq!(error.to_string(), format!("{base}/readyz answered 503 Service Unavailable, not 2xx"));
    }

    #[test]
    fn an_answer_that_is_not_http_is_named() {
        let (base, served) = answering("SSH-2.0-OpenSSH\r\n");
        let error = probe(&base, Duration::from_secs(10)).expect_err("not http");
        served.join().expect("the server");
        assert!(matches!(error, ProbeError::NotHttp(_, ref line) if line == "SSH-2.0-OpenSSH"), "{error}");
    }

    #[test]
    fn a_server_that_never_answers_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let error = probe(&base, Duration::from_millis(200)).expect_err("silent");
        drop(listener);
        let ProbeError::Unreachable(_, cause) = error else { panic!("{error}") };
        assert!(matches!(cause.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{cause}");
    }

    #[test]
    fn a_server_that_trickles_its_answer_is_cut_off_by_the_probes_own_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let trickling = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("a connection");
            // Each byte well within the probe's timeout of the last; the whole line not.
            for byte in b"HTTP/1.1 200 OK\r\n" {
                if socket.write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(150));
            }
        });
        let error = probe(&base, Duration::from_millis(600)).expect_err("cut off");
        let ProbeError::Unreachable(_, cause) = error else { panic!("{error}") };
        assert_eq!(cause.kind(), std::io::ErrorKind::TimedOut, "{cause}");
        trickling.join().expect("the server");
    }

    #[test]
    fn a_closed_port_and_other_schemes_are_refused_clearly() {
        let port = TcpListener::bind("127.0.0.1:0").expect("loopback").local_addr().expect("address").port();
        let error = probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(10)).expect_err("closed");
        assert!(error.to_string().starts_with(&format!("could not reach 127.0.0.1:{port}: ")), "{error}");
        let error = probe("https://127.0.0.1/healthz", Duration::from_secs(1)).expect_err("https");
        assert!(error.to_string().contains("only http:// is supported"), "{error}");
        let error = probe("127.0.0.1:8787/healthz", Duration::from_secs(1)).expect_err("no scheme");
        assert!(matches!(error, ProbeError::Url(..)), "{error}");
    }
}

//! A fake model endpoint on loopback for the adapters' tests: just enough HTTP/1.1 to
//! answer each request with a scripted reply and record what was asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the fake endpoint answers to one request.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request and never answer.
    Hang,
    /// A `text/event-stream` answer: these bytes, then the connection closes.
    Stream(String),
}

pub(crate) fn ok(body: Value) -> Reply {
    Reply::Answer { status: 200, headers: Vec::new(), body: body.to_string() }
}

pub(crate) fn status(status: u16, body: &str) -> Reply {
    Reply::Answer { status, headers: Vec::new(), body: body.to_string() }
}

pub(crate) fn with_retry_after(status: u16, seconds: &str) -> Reply {
    Reply::Answer {
        status,
        headers: vec![("Retry-After".into(), seconds.into())],
        body: json!({ "error": { "message": "slow down" } }).to_string(),
    }
}

/// One request as the fake endpoint saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Just enough HTTP/1.1 on loopback: one scripted reply per request, in order, one
/// request per connection (every answer says `Connection: close`); every request is
/// recorded.
pub(crate) struct FakeEndpoint {
    pub(crate) base_url: String,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

/// What the endpoint's connections share.
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    clock: Option<Clock>,
}

impl FakeEndpoint {
    /// An endpoint for a test on real time.
    pub(crate) async fn start(script: Vec<Reply>) -> FakeEndpoint {
        FakeEndpoint::serving(script, None).await
    }

    /// An endpoint for a test on paused time (`start_paused = true`) that moves the
    /// clock as [`Clock`] says.
    pub(crate) async fn start_with_clock(script: Vec<Reply>) -> FakeEndpoint {
        let (clock, ticker) = Clock::held();
        let mut endpoint = FakeEndpoint::serving(script, Some(clock)).await;
        endpoint.tasks.push(ticker);
        endpoint
    }

    async fn serving(script: Vec<Reply>, clock: Option<Clock>) -> FakeEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared { script: Mutex::new(VecDeque::from(script)), seen: Mutex::default(), clock });
        let connections = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                connections.stop_the_clock();
                tokio::spawn(serve(stream, Arc::clone(&connections)));
            }
        });
        FakeEndpoint { base_url: format!("http://{address}/v1"), shared, tasks: vec![accept] }
    }

    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl Shared {
    fn stop_the_clock(&self) {
        if let Some(clock) = &self.clock {
            clock.ticking.send_replace(false);
        }
    }

    fn start_the_clock(&self) {
        if let Some(clock) = &self.clock {
            clock.ticking.send_replace(true);
        }
    }
}

/// Paused time that moves only while the adapter can be waiting on nothing but a timer
/// (a backoff, or the timeout of an attempt the endpoint will never answer).
///
/// Left alone, paused time jumps to the next timer whenever the runtime has no task to
/// run, and a runtime waiting for loopback I/O has none: the timeout of an attempt
/// would fire while its answer is on the way. So a blocking task holds the clock still
/// (tokio never advances paused time by itself while one runs), and a ticker moves it
/// a millisecond at a time from the moment the endpoint has nothing more to say (it
/// hangs, or the adapter closed the connection after reading an answer) until the next
/// connection arrives. Between a backoff's end and that connection the clock can gain
/// a few ticks; each tick takes [`TICK_PACE`] of real time, so even a slow loopback
/// could not make it gain anything near a backoff step.
struct Clock {
    ticking: watch::Sender<bool>,
}

impl Clock {
    /// The clock, stopped, and the task that ticks it.
    fn held() -> (Clock, JoinHandle<()>) {
        let (release, held) = std::sync::mpsc::channel::<()>();
        // Ends when `release` is dropped, with the ticker.
        tokio::task::spawn_blocking(move || held.recv().ok());
        let (ticking, mut watched) = watch::channel(false);
        let ticker = tokio::spawn(async move {
            let _release = release;
            loop {
                if *watched.borrow_and_update() {
                    tokio::time::advance(TIMER_TICK).await;
                    let _ = tokio::task::spawn_blocking(|| std::thread::sleep(TICK_PACE)).await;
                } else if watched.changed().await.is_err() {
                    return;
                }
            }
        });
        (Clock { ticking }, ticker)
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer).await else {
            // The adapter has read the answer and closed: it backs off or is done.
            shared.start_the_clock();
            return;
        };
        shared.stop_the_clock();
        shared.seen.lock().unwrap_or_else(PoisonError::into_inner).push(request);
        let reply = shared.script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
        let (code, headers, body) = match reply {
            Some(Reply::Stream(body)) => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                shared.start_the_clock();
                return;
            }
            Some(Reply::Answer { status, headers, body }) => (status, headers, body),
            Some(Reply::Hang) => {
                shared.start_the_clock();
                std::future::pending::<()>().await;
                return;
            }
            None => (599, Vec::new(), "the fake endpoint's script is exhausted".to_string()),
        };
        let mut head = format!(
            "HTTP/1.1 {code} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(body.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request (head and `Content-Length` body); `None` when the peer is gone.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Seen> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, path) = (request_line.next()?.to_string(), request_line.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + 4 + length {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = buffer[head_end + 4..head_end + 4 + length].to_vec();
    buffer.drain(..head_end + 4 + length);
    Some(Seen { method, path, headers, body })
}

/// The resolution of tokio's timers (a deadline is rounded up to the next millisecond),
/// and the step of the test clock.
pub(crate) const TIMER_TICK: Duration = Duration::from_millis(1);
/// The real time one tick of the test clock takes: a second of backoffs and timeouts
/// passes in a tenth of a second.
pub(crate) const TICK_PACE: Duration = Duration::from_micros(100);

//! A real `fieldnotes serve` process and raw HTTP/1.1 over real sockets.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{BIN, Db};

/// How long any wait on the server may last before the test gives up. The
/// servers under test are configured with timeouts of a second or two:
/// this bound is generous on purpose, it is not a speed requirement.
pub const BOUND: Duration = Duration::from_secs(60);

/// A running server, killed when the test ends, pass or fail.
pub struct Served {
    child: Child,
    pub port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fieldnotes serve DB --port 0 ARGS…`, started through `sh -c PREFIX`
/// (e.g. `ulimit -n 64;`) when `shell_prefix` is given.
pub fn serve_with(db: &Db, args: &[&str], shell_prefix: Option<&str>) -> Served {
    let mut all = vec!["serve", db.arg(), "--port", "0"];
    all.extend_from_slice(args);
    let mut command = match shell_prefix {
        None => {
            let mut c = Command::new(BIN);
            c.args(&all);
            c
        }
        Some(prefix) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("{prefix} exec \"$0\" \"$@\""))
                .arg(BIN)
                .args(&all);
            c
        }
    };
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fieldnotes serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the listening line");
    // "listening on http://127.0.0.1:PORT (Ctrl-C stops)"
    let port = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://127.0.0.1:"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no loopback address in {line:?}"));
    Served { child, port }
}

pub fn serve(db: &Db, args: &[&str]) -> Served {
    serve_with(db, args, None)
}

impl Served {
    /// A connection whose reads give up after [`BOUND`].
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(BOUND)).expect("read timeout");
        s
    }

    /// Sends `request` as it is on a new connection and reads until the
    /// server closes it; returns what came back.
    pub fn raw(&self, request: &str) -> String {
        let mut s = self.connect();
        s.write_all(request.as_bytes()).expect("send");
        read_until_closed(&mut s)
            .unwrap_or_else(|got| panic!("no complete answer within {BOUND:?}; got {got:?}"))
    }
}

/// Reads until the peer closes the connection (EOF or reset). `Err` holds
/// what was read if the socket's read timeout ran out first.
pub fn read_until_closed(s: &mut TcpStream) -> Result<String, String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(String::from_utf8_lossy(&got).into_owned());
            }
            Err(_) => break, // reset: closed too
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// Reads one whole response (head and `Content-Length` body) off a
/// kept-alive connection.
pub fn read_response(s: &mut TcpStream) -> String {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        assert!(started.elapsed() < BOUND, "no whole response: {text:?}");
        let n = s.read(&mut buf).expect("read a response");
        assert!(n > 0, "closed before a whole response: {text:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// The status code of a response.
pub fn status(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {response:?}"))
}

/// The body of a response.
pub fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

//! Plain HTTP/1.1 requests to loopback servers (the controller's metrics server, Jaeger's,
//! Prometheus' and Toxiproxy's APIs), without a client library: one request per
//! connection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// GETs `path` (with its query) from `address` (`host:port`); the HTTP status and body.
pub fn get(address: &str, path: &str) -> Result<(u16, String), String> {
    request(address, "GET", path, None)
}

/// Sends `method path` with an optional JSON `body` to `address` (`host:port`); the
/// HTTP status and body.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(u16, String), String> {
    let mut stream =
        TcpStream::connect(address).map_err(|e| format!("connect to {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAccept-Encoding: identity\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("send {method} {path} to {address}: {e}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read the response to {method} {path} from {address}: {e}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP response: {response}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {response}"))?;
    let chunked = head.lines().any(|line| {
        line.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// GETs `path` from `address` and parses the JSON body of a 200 response.
pub fn get_json(address: &str, path: &str) -> Result<serde_json::Value, String> {
    let (status, body) = get(address, path)?;
    if status != 200 {
        return Err(format!("GET {path}: HTTP {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("GET {path}: not JSON ({e}): {body}"))
}

/// The body of a chunked response.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// `text` percent-encoded for a query string.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A free loopback port (bound, then released for the caller's server).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

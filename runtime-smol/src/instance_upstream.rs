//! The test instance passing chat completions on to a real OpenAI-compatible server (llama.cpp's
//! `llama-server`, vLLM, Ollama, a hosted API): the optional end-to-end test's way to put a real
//! model behind a real device, with the test instance still serving discovery, the link and
//! `/v1/models`. The device's request body goes as it is, with the server's token (if any) in
//! place of the device's; the server's answer comes back as it is, streamed chunk by chunk.
//! The HTTP to the server is ureq on `blocking`'s pool; a client that goes drops the
//! stream (the blocking reader stops at its next chunk).

use std::io::Read;

use futures_lite::AsyncWriteExt;

use crate::instance::Io;

/// An OpenAI-compatible server.
#[derive(Clone)]
pub struct Upstream {
    /// `http://127.0.0.1:8080` (a trailing `/v1` is taken too).
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` when given.
    pub token: Option<String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What the blocking side hands over.
enum Piece {
    Head { status: u16, content_type: String },
    Bytes(Vec<u8>),
    Failed(String),
}

impl Upstream {
    fn chat_url(&self) -> String {
        let base = self.url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        format!("{base}/v1/chat/completions")
    }

    /// Pass one chat completion on and stream its answer back; whether the answer reached its
    /// end (false: the client left first).
    pub(crate) async fn pass_on(
        &self,
        stream: &mut Box<dyn Io>,
        body: Vec<u8>,
    ) -> std::io::Result<bool> {
        let (tx, rx) = smol::channel::bounded::<Piece>(8);
        let (url, token) = (self.chat_url(), self.token.clone());
        let _reader = blocking::unblock(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            let mut request = agent.post(&url).header("content-type", "application/json");
            if let Some(t) = &token {
                request = request.header("authorization", &format!("Bearer {t}"));
            }
            let response = match request.send(&body[..]) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send_blocking(Piece::Failed(format!("{url}: {e}")));
                    return;
                }
            };
            let head = Piece::Head {
                status: response.status().as_u16(),
                content_type: response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("application/octet-stream")
                    .to_string(),
            };
            if tx.send_blocking(head).is_err() {
                return;
            }
            let mut reader = response.into_body().into_reader();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let piece = match reader.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => Piece::Bytes(buf[..n].to_vec()),
                    Err(e) => Piece::Failed(format!("{url}: {e}")),
                };
                // The client went (the receiver is dropped), or the read failed: stop.
                let failed = matches!(piece, Piece::Failed(_));
                if tx.send_blocking(piece).is_err() || failed {
                    return;
                }
            }
        });
        match rx.recv().await {
            Ok(Piece::Head {
                status,
                content_type,
            }) => {
                let head = format!(
                    "HTTP/1.1 {status} Upstream\r\ncontent-type: {content_type}\r\n\
                     transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                );
                stream.write_all(head.as_bytes()).await?;
                stream.flush().await?;
            }
            Ok(Piece::Failed(why)) => {
                log::warn!("test instance: upstream: {why}");
                let body = serde_json::json!({ "error": { "message": why } }).to_string();
                let head = format!(
                    "HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(body.as_bytes()).await?;
                stream.flush().await?;
                return Ok(true);
            }
            Ok(Piece::Bytes(_)) | Err(_) => return Ok(true),
        }
        while let Ok(piece) = rx.recv().await {
            match piece {
                Piece::Bytes(bytes) => {
                    let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
                    framed.extend_from_slice(&bytes);
                    framed.extend_from_slice(b"\r\n");
                    if stream.write_all(&framed).await.is_err() || stream.flush().await.is_err() {
                        return Ok(false);
                    }
                }
                Piece::Failed(why) => {
                    // Cut short: the client sees the stream end without its last chunk.
                    log::warn!("test instance: upstream: {why}");
                    return Ok(true);
                }
                Piece::Head { .. } => {}
            }
        }
        Ok(stream.write_all(b"0\r\n\r\n").await.is_ok() && stream.flush().await.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chat_path_is_put_after_the_servers_address() {
        let at = |url: &str| {
            Upstream {
                url: url.into(),
                token: None,
            }
            .chat_url()
        };
        assert_eq!(
            at("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            at("http://127.0.0.1:8080/v1/"),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            at("https://api.example/v1"),
            "https://api.example/v1/chat/completions"
        );
    }
}

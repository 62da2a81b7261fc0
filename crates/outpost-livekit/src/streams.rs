//! LiveKit data streams: a header, chunks of at most 15 000 bytes, and a trailer, all
//! on the reliable channel, so payloads of any size cross.
//!
//! - Receiving: [`Receivers`] (owned by the engine) turns incoming packets into
//!   [`StreamReader`]s, enforcing order, the announced length, and a size cap. Each
//!   stream belongs to its sender (a chunk or trailer from anyone else never touches
//!   it); open streams are limited per sender and room-wide, and a stream that stops
//!   receiving chunks is dropped after an idle timeout.
//! - Sending: [`StreamWriter`] cuts what it is given into chunks, queues them on the
//!   reliable send queue with a small window (so progress means "handed to the
//!   transport"), and ends with a trailer; `cancel` ends with a trailer carrying a
//!   reason, which the official SDKs report as an aborted stream.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::outbox::Outbox;
use crate::proto::{self, data_stream};

/// Largest chunk payload, as in the official SDKs.
pub const CHUNK_SIZE: usize = 15_000;
/// Chunks queued but not yet handed to the transport, per writer.
const WINDOW: usize = 16;

/// Byte or text stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `ByteHeader`: binary payload with a name (file name for `send_file`).
    Bytes,
    /// `TextHeader`: UTF-8 text.
    Text,
}

/// What a stream's header said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Stream id.
    pub id: String,
    /// Byte or text.
    pub kind: StreamKind,
    /// Topic (handlers are usually chosen by topic).
    pub topic: String,
    /// Sender identity (of the session that sent it).
    pub sender_identity: String,
    /// Whom the sender sent it for, when not itself: an agent may send a text stream on a
    /// participant's behalf (LiveKit Agents' transcript of the user's speech names the
    /// user). Seen on livekit-server; servers that stamp the sender's identity on the
    /// header (outpost-room) never set it.
    pub on_behalf_of: Option<String>,
    /// MIME type.
    pub mime_type: String,
    /// Byte streams: the name (file name for files).
    pub name: Option<String>,
    /// Total length when the sender announced it.
    pub total_length: Option<u64>,
    /// Sender's attributes.
    pub attributes: HashMap<String, String>,
    /// Sender's timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

/// An incoming stream. Read chunks with [`StreamReader::next_chunk`] or everything
/// with [`StreamReader::read_all`]. Dropping it discards the rest of the stream.
#[derive(Debug)]
pub struct StreamReader {
    /// The header.
    pub info: StreamInfo,
    rx: mpsc::UnboundedReceiver<Result<Bytes>>,
    progress: watch::Receiver<u64>,
}

impl StreamReader {
    /// The next chunk; `None` when the stream ended normally; an error when it was
    /// cancelled by the sender, broke a rule, or the sender left mid-stream.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes>> {
        self.rx.recv().await
    }

    /// Bytes received so far (including chunks not read yet).
    pub fn received(&self) -> u64 {
        *self.progress.borrow()
    }

    /// A watch on the received byte count, for progress displays.
    pub fn progress(&self) -> watch::Receiver<u64> {
        self.progress.clone()
    }

    /// Reads the whole stream.
    pub async fn read_all(mut self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            usize::try_from(self.info.total_length.unwrap_or(0).min(64 << 20)).unwrap_or(0),
        );
        while let Some(chunk) = self.next_chunk().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }

    /// Reads the whole stream as UTF-8 text.
    pub async fn read_to_string(self) -> Result<String> {
        let id = self.info.id.clone();
        let bytes = self.read_all().await?;
        String::from_utf8(bytes).map_err(|e| Error::Stream {
            stream_id: id,
            reason: format!("text stream is not valid UTF-8: {e}"),
        })
    }
}

struct Incoming {
    tx: mpsc::UnboundedSender<Result<Bytes>>,
    received: u64,
    next_index: u64,
    total: Option<u64>,
    progress: watch::Sender<u64>,
    /// When the header or the last chunk arrived (for the idle timeout).
    last: Instant,
    /// Bytes this stream may carry (the receive cap, or a smaller one for RPC payloads).
    cap: u64,
}

/// Limits on incoming streams (from [`crate::RoomOptions`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Streams larger than this many bytes are cut off with an error.
    pub cap: u64,
    /// Streams one sender may have open at once.
    pub per_sender: usize,
    /// Streams open at once across all senders; the assistant's are still accepted
    /// beyond it (up to `per_sender`), so other participants cannot crowd it out.
    pub total: usize,
    /// A stream without a chunk for this long is dropped; zero turns this off.
    pub idle: Duration,
}

/// Incoming streams being assembled, keyed by their real sender (its sid, which the
/// server stamps on every packet; the identity where a server stamps none), then stream
/// id: a chunk or trailer only ever touches a stream its own sender opened (stream ids
/// are visible to everyone a stream is broadcast to).
pub(crate) struct Receivers {
    limits: Limits,
    open: HashMap<String, HashMap<String, Incoming>>,
}

impl std::fmt::Debug for Receivers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receivers")
            .field("limits", &self.limits)
            .field("open", &self.open_count())
            .finish()
    }
}

fn too_large(id: &str, cap: u64) -> Error {
    Error::StreamTooLarge {
        stream_id: id.to_owned(),
        cap,
    }
}

fn stream_error(id: &str, reason: impl Into<String>) -> Error {
    Error::Stream {
        stream_id: id.to_owned(),
        reason: reason.into(),
    }
}

impl Receivers {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            open: HashMap::new(),
        }
    }

    /// Streams open now, across all senders.
    pub(crate) fn open_count(&self) -> usize {
        self.open.values().map(HashMap::len).sum()
    }

    fn open_from(&self, sender: &str) -> usize {
        self.open.get(sender).map_or(0, HashMap::len)
    }

    /// Forgets streams whose reader was dropped: nobody reads the rest, so they hold
    /// no slot and their later chunks are ignored.
    fn purge_abandoned(&mut self) {
        for streams in self.open.values_mut() {
            streams.retain(|id, s| {
                let keep = !s.tx.is_closed();
                if !keep {
                    tracing::debug!(stream = %id, "reader dropped; the rest of the stream is ignored");
                }
                keep
            });
        }
        self.open.retain(|_, streams| !streams.is_empty());
    }

    fn take(&mut self, sender: &str, id: &str) -> Option<Incoming> {
        let streams = self.open.get_mut(sender)?;
        let s = streams.remove(id);
        if streams.is_empty() {
            self.open.remove(sender);
        }
        s
    }

    fn put(&mut self, sender: &str, id: String, s: Incoming) {
        self.open
            .entry(sender.to_owned())
            .or_default()
            .insert(id, s);
    }

    /// A header from `sender` (the key its chunks come under: the real sender's sid),
    /// whose header names `identity` as its sender (`assistant`: whether the real sender
    /// is the assistant now): returns the reader to hand to the application. Streams we
    /// cannot accept still get a reader, which yields the reason as an error.
    pub(crate) fn on_header(
        &mut self,
        sender: &str,
        assistant: bool,
        h: data_stream::Header,
        now: Instant,
    ) -> StreamReader {
        let cap = self.limits.cap;
        self.on_header_capped(sender, assistant, h, now, cap)
    }

    /// [`Receivers::on_header`] for a stream that may carry at most `cap` bytes (or the
    /// receive cap, whichever is smaller): an RPC payload.
    pub(crate) fn on_header_capped(
        &mut self,
        sender: &str,
        assistant: bool,
        h: data_stream::Header,
        now: Instant,
        cap: u64,
    ) -> StreamReader {
        let (kind, name) = match &h.content_header {
            Some(data_stream::header::ContentHeader::ByteHeader(b)) => {
                (StreamKind::Bytes, Some(b.name.clone()))
            }
            _ => (StreamKind::Text, None),
        };
        let info = StreamInfo {
            id: h.stream_id.clone(),
            kind,
            topic: h.topic.clone(),
            sender_identity: sender.to_owned(),
            on_behalf_of: None,
            mime_type: h.mime_type.clone(),
            name,
            total_length: h.total_length,
            attributes: h.attributes.clone(),
            timestamp_ms: h.timestamp,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let (progress, progress_rx) = watch::channel(0);
        let reader = StreamReader {
            info,
            rx,
            progress: progress_rx,
        };
        self.purge_abandoned();
        let encrypted = is_encrypted(&h);
        let id = h.stream_id;
        let Limits {
            per_sender, total, ..
        } = self.limits;
        let cap = cap.min(self.limits.cap);
        let refuse = if id.is_empty() {
            Some("stream header without an id".to_owned())
        } else if self.open.get(sender).is_some_and(|s| s.contains_key(&id)) {
            Some("this sender already has a stream with this id open".to_owned())
        } else if self.open_from(sender) >= per_sender {
            Some(format!(
                "sender {sender:?} already has {per_sender} incoming streams open"
            ))
        } else if !assistant && self.open_count() >= total {
            Some(format!("more than {total} incoming streams open at once"))
        } else if encrypted {
            Some("encrypted data streams are not supported".to_owned())
        } else if h.compression != 0 {
            Some("compressed data streams are not supported (we do not advertise it)".to_owned())
        } else {
            None
        };
        if let Some(reason) = refuse {
            tracing::warn!(stream = %id, from = sender, "refusing data stream: {reason}");
            let _ = tx.send(Err(stream_error(&id, reason)));
            return reader;
        }
        if let Some(t) = h.total_length.filter(|t| *t > cap) {
            tracing::warn!(stream = %id, from = sender, "refusing data stream: announced length {t} exceeds the receive cap of {cap} bytes");
            let _ = tx.send(Err(too_large(&id, cap)));
            return reader;
        }
        let mut incoming = Incoming {
            tx,
            received: 0,
            next_index: 0,
            total: h.total_length,
            progress,
            last: now,
            cap,
        };
        if let Some(inline) = h.inline_content {
            // A single-packet stream: the content rides in the header, no trailer follows.
            let ok = self.accept(&id, &mut incoming, Bytes::from(inline));
            if ok {
                let _ = finish(&id, &incoming);
            }
            return reader;
        }
        self.put(sender, id, incoming);
        reader
    }

    /// Checks and forwards one piece of content; false when the stream is now broken.
    fn accept(&self, id: &str, s: &mut Incoming, content: Bytes) -> bool {
        let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
        let received = s.received.saturating_add(len);
        if received > s.cap {
            let _ = s.tx.send(Err(too_large(id, s.cap)));
            return false;
        }
        if s.total.is_some_and(|t| received > t) {
            let _ = s.tx.send(Err(stream_error(
                id,
                format!(
                    "stream sent more than its announced {} bytes",
                    s.total.unwrap_or(0)
                ),
            )));
            return false;
        }
        s.received = received;
        s.progress.send_replace(received);
        let _ = s.tx.send(Ok(content));
        true
    }

    /// A chunk from `sender`; chunks for a stream this sender did not open are dropped.
    pub(crate) fn on_chunk(&mut self, sender: &str, c: data_stream::Chunk, now: Instant) {
        let Some(mut s) = self.take(sender, &c.stream_id) else {
            tracing::debug!(stream = %c.stream_id, from = sender, "chunk for an unknown stream; dropped");
            return;
        };
        if s.tx.is_closed() {
            // The reader was dropped: free the slot instead of buffering the rest.
            tracing::debug!(stream = %c.stream_id, "reader dropped; the rest of the stream is ignored");
            return;
        }
        if c.chunk_index != s.next_index {
            let _ = s.tx.send(Err(stream_error(
                &c.stream_id,
                format!(
                    "chunk {} is missing (chunk {} came next): the sender skipped it, or the \
                     server dropped it (livekit-server drops reliable data to a receiver slower \
                     than its rtc.datachannel_slow_threshold)",
                    s.next_index, c.chunk_index
                ),
            )));
            return;
        }
        s.next_index += 1;
        s.last = now;
        if self.accept(&c.stream_id, &mut s, Bytes::from(c.content)) {
            self.put(sender, c.stream_id, s);
        }
    }

    /// A trailer from `sender`: ends that sender's stream (with an error when it
    /// carries a reason).
    pub(crate) fn on_trailer(&mut self, sender: &str, t: data_stream::Trailer) {
        let Some(s) = self.take(sender, &t.stream_id) else {
            return;
        };
        if !t.reason.is_empty() {
            let _ = s.tx.send(Err(stream_error(
                &t.stream_id,
                format!("cancelled by the sender: {}", t.reason),
            )));
            return;
        }
        let _ = finish(&t.stream_id, &s);
    }

    /// When the next stream falls idle, if any is open and the timeout is on.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        if self.limits.idle.is_zero() {
            return None;
        }
        self.open
            .values()
            .flat_map(HashMap::values)
            .map(|s| s.last)
            .min()
            .map(|last| last + self.limits.idle)
    }

    /// Fails and forgets every stream without a chunk for the idle timeout (and
    /// forgets streams whose reader was dropped).
    pub(crate) fn expire(&mut self, now: Instant) {
        self.purge_abandoned();
        if self.limits.idle.is_zero() {
            return;
        }
        let idle = self.limits.idle;
        for (sender, streams) in &mut self.open {
            streams.retain(|id, s| {
                if now.saturating_duration_since(s.last) < idle {
                    return true;
                }
                tracing::warn!(stream = %id, from = %sender, "dropping a data stream idle for {idle:?}");
                let _ = s.tx.send(Err(stream_error(
                    id,
                    format!("no data for {idle:?}; dropped (idle timeout)"),
                )));
                false
            });
        }
        self.open.retain(|_, streams| !streams.is_empty());
    }

    /// Fails every stream `identity` was sending (it left).
    /// Ends every stream `p` sent (filed under its sid, or its identity from a server
    /// that stamps no sid).
    pub(crate) fn abort_from_participant(&mut self, p: &crate::Participant, why: &str) {
        self.abort_from(&p.sid, why);
        self.abort_from(&p.identity, why);
    }

    pub(crate) fn abort_from(&mut self, identity: &str, why: &str) {
        if let Some(streams) = self.open.remove(identity) {
            for (id, s) in streams {
                let _ = s.tx.send(Err(stream_error(&id, why)));
            }
        }
    }

    /// Fails every open stream.
    pub(crate) fn abort_all(&mut self, why: &str) {
        for (_, streams) in self.open.drain() {
            for (id, s) in streams {
                let _ = s.tx.send(Err(stream_error(&id, why)));
            }
        }
    }
}

#[allow(deprecated)] // the field is how older senders mark encryption
fn is_encrypted(h: &data_stream::Header) -> bool {
    h.encryption_type != 0
}

fn finish(id: &str, s: &Incoming) -> bool {
    if let Some(total) = s.total {
        if s.received != total {
            let _ = s.tx.send(Err(stream_error(
                id,
                format!("stream ended after {} of {total} bytes", s.received),
            )));
            return false;
        }
    }
    true
}

/// How to send a stream.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// Topic (receivers pick handlers by topic).
    pub topic: String,
    /// Recipients by identity; empty means everyone else.
    pub destination_identities: Vec<String>,
    /// Byte streams: a name (the file name for files). Defaults to "unknown".
    pub name: Option<String>,
    /// MIME type; defaults to `application/octet-stream` (bytes) or `text/plain` (text).
    pub mime_type: Option<String>,
    /// Announced total length, if known (set automatically by `send_bytes`/`send_text`).
    pub total_length: Option<u64>,
    /// Attributes for the header.
    pub attributes: HashMap<String, String>,
    /// Stream id; a random one when `None`.
    pub stream_id: Option<String>,
}

/// What the writer needs from the room.
#[derive(Debug, Clone)]
pub(crate) struct Sink {
    pub outbox: Arc<Outbox>,
    pub identity: String,
}

impl Sink {
    fn push(
        &self,
        value: crate::proto::data_packet::Value,
        destinations: &[String],
        done: Option<oneshot::Sender<Result<()>>>,
    ) -> Result<()> {
        let identity = self.identity.clone();
        let destinations = destinations.to_vec();
        self.outbox.push(
            move |seq| {
                let mut p = proto::stream_packet(value, destinations);
                p.sequence = seq;
                p.participant_identity = identity;
                proto::encode_data_packet(&p)
            },
            done,
        )
    }
}

/// An outgoing stream. Write with [`StreamWriter::write`] (bytes) or
/// [`StreamWriter::write_text`] (text), then [`StreamWriter::close`] or
/// [`StreamWriter::cancel`]. Dropping it unclosed cancels it.
#[derive(Debug)]
pub struct StreamWriter {
    sink: Sink,
    id: String,
    kind: StreamKind,
    destinations: Vec<String>,
    index: u64,
    window: VecDeque<(oneshot::Receiver<Result<()>>, u64)>,
    progress: watch::Sender<u64>,
    handed: u64,
    finished: bool,
}

impl StreamWriter {
    pub(crate) fn open(sink: Sink, kind: StreamKind, opts: StreamOptions) -> Result<Self> {
        let id = opts
            .stream_id
            .unwrap_or_else(|| format!("OS_{}", nanoid::nanoid!(16)));
        let mime_type = opts.mime_type.unwrap_or_else(|| match kind {
            StreamKind::Bytes => "application/octet-stream".to_owned(),
            StreamKind::Text => "text/plain".to_owned(),
        });
        let header = proto::stream_header(
            proto::HeaderFields {
                stream_id: id.clone(),
                topic: opts.topic,
                mime_type,
                total_length: opts.total_length,
                attributes: opts.attributes,
                byte_name: match kind {
                    StreamKind::Bytes => Some(opts.name.unwrap_or_else(|| "unknown".to_owned())),
                    StreamKind::Text => None,
                },
            },
            now_ms(),
        );
        sink.push(header, &opts.destination_identities, None)?;
        Ok(Self {
            sink,
            id,
            kind,
            destinations: opts.destination_identities,
            index: 0,
            window: VecDeque::new(),
            progress: watch::channel(0).0,
            handed: 0,
            finished: false,
        })
    }

    /// Stream id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Bytes handed to the transport so far.
    pub fn progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    async fn settle_one(&mut self) -> Result<()> {
        if let Some((rx, len)) = self.window.pop_front() {
            rx.await
                .map_err(|_| Error::Closed("send queue dropped".into()))??;
            self.handed += len;
            self.progress.send_replace(self.handed);
        }
        Ok(())
    }

    async fn chunk(&mut self, content: Vec<u8>) -> Result<()> {
        while self.window.len() >= WINDOW {
            self.settle_one().await?;
        }
        let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
        let (tx, rx) = oneshot::channel();
        let value = proto::stream_chunk(self.id.clone(), self.index, content);
        self.sink.push(value, &self.destinations, Some(tx))?;
        self.index += 1;
        self.window.push_back((rx, len));
        Ok(())
    }

    /// Writes bytes (any length; cut into 15 000-byte chunks).
    pub async fn write(&mut self, data: &[u8]) -> Result<()> {
        if self.kind != StreamKind::Bytes {
            return Err(Error::InvalidArgument(
                "write() is for byte streams; use write_text()".into(),
            ));
        }
        for piece in data.chunks(CHUNK_SIZE) {
            self.chunk(piece.to_vec()).await?;
        }
        Ok(())
    }

    /// Writes text (cut into chunks of at most 15 000 bytes at character boundaries).
    pub async fn write_text(&mut self, text: &str) -> Result<()> {
        if self.kind != StreamKind::Text {
            return Err(Error::InvalidArgument(
                "write_text() is for text streams; use write()".into(),
            ));
        }
        for piece in split_utf8(text, CHUNK_SIZE) {
            self.chunk(piece.as_bytes().to_vec()).await?;
        }
        Ok(())
    }

    /// Ends the stream normally once every chunk was handed to the transport.
    pub async fn close(mut self) -> Result<()> {
        self.end(String::new()).await
    }

    /// Ends the stream early; receivers see it as aborted with `reason`.
    pub async fn cancel(mut self, reason: &str) -> Result<()> {
        let reason = if reason.is_empty() {
            "cancelled"
        } else {
            reason
        };
        self.end(reason.to_owned()).await
    }

    async fn end(&mut self, reason: String) -> Result<()> {
        self.finished = true;
        let (tx, rx) = oneshot::channel();
        let trailer = proto::stream_trailer(self.id.clone(), reason);
        self.sink.push(trailer, &self.destinations, Some(tx))?;
        while !self.window.is_empty() {
            self.settle_one().await?;
        }
        rx.await
            .map_err(|_| Error::Closed("send queue dropped".into()))?
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        if !self.finished {
            let trailer =
                proto::stream_trailer(self.id.clone(), "writer dropped before close".into());
            let _ = self.sink.push(trailer, &self.destinations, None);
        }
    }
}

/// Splits text into pieces of at most `max` bytes without cutting a character.
pub(crate) fn split_utf8(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max.max(4));
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (a, b) = rest.split_at(cut);
        out.push(a);
        rest = b;
    }
    out
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn header(id: &str, total: Option<u64>) -> data_stream::Header {
        data_stream::Header {
            stream_id: id.into(),
            total_length: total,
            content_header: Some(data_stream::header::ContentHeader::ByteHeader(
                data_stream::ByteHeader { name: "f".into() },
            )),
            ..Default::default()
        }
    }

    fn chunk(id: &str, i: u64, n: usize) -> data_stream::Chunk {
        data_stream::Chunk {
            stream_id: id.into(),
            chunk_index: i,
            content: vec![1; n],
            ..Default::default()
        }
    }

    fn trailer(id: &str, reason: &str) -> data_stream::Trailer {
        data_stream::Trailer {
            stream_id: id.into(),
            reason: reason.into(),
            ..Default::default()
        }
    }

    fn limits(cap: u64) -> Limits {
        Limits {
            cap,
            per_sender: 16,
            total: 64,
            idle: Duration::from_secs(60),
        }
    }

    /// A receiver plus a clock, so the calls read like the packets that arrive.
    struct Rx {
        r: Receivers,
        now: Instant,
    }

    impl Rx {
        fn new(limits: Limits) -> Self {
            Self {
                r: Receivers::new(limits),
                now: Instant::now(),
            }
        }
        fn header(&mut self, from: &str, id: &str, total: Option<u64>) -> StreamReader {
            self.r.on_header(from, false, header(id, total), self.now)
        }
        fn chunk(&mut self, from: &str, id: &str, i: u64, n: usize) {
            self.r.on_chunk(from, chunk(id, i, n), self.now);
        }
        fn trailer(&mut self, from: &str, id: &str, reason: &str) {
            self.r.on_trailer(from, trailer(id, reason));
        }
    }

    async fn error_of(reader: StreamReader) -> String {
        reader.read_all().await.unwrap_err().to_string()
    }

    #[tokio::test]
    async fn assembles_a_stream() {
        let mut r = Rx::new(limits(1000));
        let reader = r.header("bob", "s", Some(20));
        r.chunk("bob", "s", 0, 10);
        r.chunk("bob", "s", 1, 10);
        r.trailer("bob", "s", "");
        assert_eq!(reader.info.sender_identity, "bob");
        assert_eq!(reader.read_all().await.unwrap().len(), 20);
    }

    #[tokio::test]
    async fn cap_order_length_and_cancel_are_errors() {
        let mut r = Rx::new(limits(15));
        let reader = r.header("bob", "a", None);
        r.chunk("bob", "a", 0, 10);
        r.chunk("bob", "a", 1, 10);
        assert!(error_of(reader).await.contains("cap"));

        let reader = r.header("bob", "b", Some(100));
        assert!(error_of(reader).await.contains("cap"));

        let mut r = Rx::new(limits(1000));
        let reader = r.header("bob", "c", None);
        r.chunk("bob", "c", 1, 10);
        let e = error_of(reader).await;
        assert!(e.contains("chunk 0 is missing (chunk 1 came next)"), "{e}");

        let reader = r.header("bob", "d", Some(30));
        r.chunk("bob", "d", 0, 10);
        r.trailer("bob", "d", "");
        assert!(error_of(reader).await.contains("10 of 30"));

        let reader = r.header("bob", "e", None);
        r.trailer("bob", "e", "user stop");
        assert!(error_of(reader).await.contains("user stop"));

        let reader = r.header("bob", "f", None);
        r.r.abort_from("bob", "bob left");
        assert!(error_of(reader).await.contains("bob left"));
    }

    #[tokio::test]
    async fn another_senders_packets_never_touch_a_stream() {
        let mut r = Rx::new(limits(1000));
        let bob = r.header("bob", "s", None);
        r.chunk("bob", "s", 0, 5);
        // Mallory saw the id of bob's broadcast stream: her chunk with the due index,
        // her cancel and her trailer are not bob's.
        r.chunk("mallory", "s", 1, 7);
        r.trailer("mallory", "s", "hijacked");
        r.trailer("mallory", "s", "");
        // Her own stream under the same id is hers alone.
        let hers = r.header("mallory", "s", None);
        r.chunk("mallory", "s", 0, 3);
        r.trailer("mallory", "s", "");
        r.chunk("bob", "s", 1, 4);
        r.trailer("bob", "s", "");
        assert_eq!(bob.read_all().await.unwrap(), vec![1; 9]);
        assert_eq!(hers.info.sender_identity, "mallory");
        assert_eq!(hers.read_all().await.unwrap(), vec![1; 3]);
        // Her leaving fails her streams only.
        let hers = r.header("mallory", "t", None);
        let bobs = r.header("bob", "t", None);
        r.r.abort_from("mallory", "gone");
        r.trailer("bob", "t", "");
        assert!(error_of(hers).await.contains("gone"));
        assert!(bobs.read_all().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn per_sender_and_room_limits_leave_room_for_the_assistant() {
        let mut r = Rx::new(Limits {
            per_sender: 2,
            total: 3,
            ..limits(1000)
        });
        let _m1 = r.header("mallory", "1", None);
        let _m2 = r.header("mallory", "2", None);
        let m3 = r.header("mallory", "3", None);
        assert!(error_of(m3).await.contains("already has 2"));
        let _c1 = r.header("carol", "1", None);
        let d1 = r.header("dave", "1", None);
        assert!(error_of(d1).await.contains("more than 3"));
        // The room is full, but not for the assistant (within its own quota).
        let a1 = r.r.on_header("assistant", true, header("1", None), r.now);
        let a2 = r.r.on_header("assistant", true, header("2", None), r.now);
        let a3 = r.r.on_header("assistant", true, header("3", None), r.now);
        assert!(error_of(a3).await.contains("already has 2"));
        r.chunk("assistant", "1", 0, 10);
        r.trailer("assistant", "1", "");
        assert_eq!(a1.read_all().await.unwrap().len(), 10);
        r.trailer("assistant", "2", "");
        assert!(a2.read_all().await.unwrap().is_empty());
        assert_eq!(r.r.open_count(), 3);
    }

    #[tokio::test]
    async fn a_dropped_reader_frees_its_slot_and_its_chunks_are_ignored() {
        let mut r = Rx::new(Limits {
            per_sender: 1,
            ..limits(1000)
        });
        drop(r.header("bob", "a", None));
        r.chunk("bob", "a", 0, 10);
        assert_eq!(r.r.open_count(), 0);
        // Dropped before any chunk came: the next header still finds the slot free.
        drop(r.header("bob", "b", None));
        let c = r.header("bob", "c", None);
        r.chunk("bob", "b", 0, 10);
        r.chunk("bob", "c", 0, 10);
        r.trailer("bob", "c", "");
        assert_eq!(c.read_all().await.unwrap().len(), 10);
    }

    #[tokio::test]
    async fn idle_streams_are_dropped_with_an_error() {
        let idle = Duration::from_secs(2);
        let mut r = Rx::new(Limits {
            idle,
            per_sender: 1,
            ..limits(1000)
        });
        let t0 = r.now;
        assert_eq!(r.r.next_expiry(), None);
        let mut reader = r.header("bob", "a", None);
        assert_eq!(r.r.next_expiry(), Some(t0 + idle));
        r.now = t0 + Duration::from_secs(1);
        r.chunk("bob", "a", 0, 10);
        assert_eq!(r.r.next_expiry(), Some(r.now + idle));
        r.r.expire(t0 + Duration::from_millis(2500));
        assert_eq!(r.r.open_count(), 1, "a chunk restarted the clock");
        r.r.expire(t0 + Duration::from_secs(3));
        assert_eq!(r.r.open_count(), 0);
        assert_eq!(r.r.next_expiry(), None);
        assert_eq!(reader.next_chunk().await.unwrap().unwrap().len(), 10);
        let err = reader.next_chunk().await.unwrap().unwrap_err().to_string();
        assert!(err.contains("idle timeout"), "{err}");
        // The slot is free again.
        let b = r.header("bob", "b", None);
        r.trailer("bob", "b", "");
        assert!(b.read_all().await.unwrap().is_empty());
        // Zero turns the timeout off.
        let mut r = Rx::new(Limits {
            idle: Duration::ZERO,
            ..limits(1000)
        });
        let _reader = r.header("bob", "a", None);
        assert_eq!(r.r.next_expiry(), None);
        r.r.expire(t0 + Duration::from_secs(3600));
        assert_eq!(r.r.open_count(), 1);
    }

    #[test]
    fn utf8_split_never_cuts_a_character() {
        let s = "aé€😀".repeat(1000);
        let parts = split_utf8(&s, 7);
        assert!(parts.iter().all(|p| p.len() <= 7));
        assert_eq!(parts.concat(), s);
    }
}

//! The byte stream of a control connection cut into requests.
//!
//! jive5ab treats whatever one `read()` of up to 4096 bytes returned as one request (a list of
//! statements) and terminates the reply with CR LF when the request held one, LF otherwise
//! (`src/test.cc`, "telnet sends \r\n, tstdimino sends a separate \n"). A read is not a message
//! boundary on TCP, so here a request is a line: the bytes up to LF. A client that sends no LF at
//! all (`printf 'version?;' | nc`) still gets its answer: bytes that already end with `;` when
//! nothing more is waiting are a request too. An empty line gets no reply, as in jive5ab.
//!
//! Lines are bounded by [`MAX_LINE`]: a longer one gives one [`Event::Overlong`] and its bytes
//! are dropped up to the next LF, so a client sending a megabyte without a newline costs one
//! reply and no memory.

use std::collections::VecDeque;

/// Longest request line, bytes (jive5ab's read buffer; the FS limits a field to 32 characters,
/// a scan label to 64).
pub const MAX_LINE: usize = 4096;

/// What the framer found in the bytes pushed so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A request: one or more statements (LF and a trailing CR removed).
    Request {
        /// The line.
        text: Vec<u8>,
        /// It ended with CR LF: the reply must too.
        crlf: bool,
    },
    /// A line longer than [`MAX_LINE`]; its bytes are dropped up to the next LF.
    Overlong,
}

/// Cuts a connection's bytes into [`Event`]s; push what was read, then [`Framer::poll`] until
/// `None`.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    discarding: bool,
    events: VecDeque<Event>,
}

impl Framer {
    /// An empty framer.
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Take bytes read from the connection. At most one event per LF (and one per
    /// [`MAX_LINE`] bytes) is queued, so a bounded read gives a bounded queue.
    pub fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let newline = data.iter().position(|&b| b == b'\n');
            if self.discarding {
                match newline {
                    Some(i) => {
                        self.discarding = false;
                        data = &data[i + 1..];
                        continue;
                    }
                    None => return,
                }
            }
            let (line, rest) = match newline {
                Some(i) => (&data[..i], &data[i + 1..]),
                None => (data, &data[data.len()..]),
            };
            data = rest;
            if self.buf.len() + line.len() > MAX_LINE {
                self.events.push_back(Event::Overlong);
                self.buf.clear();
                self.discarding = newline.is_none();
                continue;
            }
            self.buf.extend_from_slice(line);
            if newline.is_some() {
                self.finish(true);
            }
        }
        // No LF (yet): a request that already ends its last statement is answered now.
        let last = self.buf.iter().rev().find(|b| !b.is_ascii_whitespace());
        if !self.discarding && last == Some(&b';') {
            self.finish(false);
        }
    }

    /// The next event, if any.
    pub fn poll(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes held of an unfinished request.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    fn finish(&mut self, newline: bool) {
        let mut text = std::mem::take(&mut self.buf);
        let crlf = newline && text.last() == Some(&b'\r');
        if crlf {
            text.pop();
        }
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        self.events.push_back(Event::Request { text, crlf });
    }
}

/// The terminator of the reply to a request.
pub fn reply_terminator(crlf: bool) -> &'static [u8] {
    if crlf {
        b"\r\n"
    } else {
        b"\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(f: &mut Framer) -> Vec<Event> {
        std::iter::from_fn(|| f.poll()).collect()
    }

    fn req(s: &str, crlf: bool) -> Event {
        Event::Request {
            text: s.as_bytes().to_vec(),
            crlf,
        }
    }

    #[test]
    fn lines_split_across_reads_join() {
        let mut f = Framer::new();
        f.push(b"reco");
        assert_eq!(all(&mut f), vec![]);
        f.push(b"rd = on : s1 ;\nmtu?");
        assert_eq!(all(&mut f), vec![req("record = on : s1 ;", false)]);
        f.push(b";\r\n");
        assert_eq!(all(&mut f), vec![req("mtu?;", true)]);
        f.push(b"status?;\r\n\n\n   \r\n");
        assert_eq!(all(&mut f), vec![req("status?;", true)]);
    }

    #[test]
    fn a_request_without_newline_is_answered_once_it_ends_with_a_semicolon() {
        let mut f = Framer::new();
        f.push(b"version?;  ");
        assert_eq!(all(&mut f), vec![req("version?;  ", false)]);
        f.push(b"evlbi?");
        assert_eq!(all(&mut f), vec![]);
        assert_eq!(f.pending(), 6);
    }

    #[test]
    fn an_overlong_line_is_one_event_and_no_memory() {
        let mut f = Framer::new();
        let big = vec![b'x'; 1 << 20];
        for chunk in big.chunks(4000) {
            f.push(chunk);
            assert!(f.pending() <= MAX_LINE);
        }
        assert_eq!(all(&mut f), vec![Event::Overlong]);
        // Still discarding until the newline; the next line is served.
        f.push(b"more;x\nmtu?;\n");
        assert_eq!(all(&mut f), vec![req("mtu?;", false)]);
        // A line just at the limit passes, one byte more does not.
        let mut line = vec![b'a'; MAX_LINE - 1];
        line.push(b';');
        f.push(&line);
        f.push(b"\n");
        assert!(matches!(all(&mut f).as_slice(), [Event::Request { .. }]));
        let mut line = vec![b'a'; MAX_LINE];
        line.extend_from_slice(b";\n");
        f.push(&line);
        assert_eq!(all(&mut f), vec![Event::Overlong]);
        f.push(b"mtu?;\n");
        assert_eq!(all(&mut f), vec![req("mtu?;", false)]);
    }
}

//! VSI-S control bytes from a client: framed in arbitrary reads, every statement must give a
//! typed request or a reply code, every reply written must parse back, and the framer's memory
//! stays bounded.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vsis::framing::{Event, Framer, MAX_LINE};
use vsis::reply::ReplyRepr;
use vsis::statement::split_request;
use vsis::Request;

fuzz_target!(|data: &[u8]| {
    let mut f = Framer::new();
    // The first byte picks the read size, so requests cross read boundaries.
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    for chunk in data.chunks(step) {
        f.push(chunk);
        assert!(f.pending() <= MAX_LINE);
        while let Some(e) = f.poll() {
            let Event::Request { text, .. } = e else { continue };
            for s in split_request(&text) {
                let reply = match s {
                    Ok(s) => match Request::parse(&s) {
                        Ok(r) => ReplyRepr::new(&s, vsis::ReturnCode::Done, [format!("{r:?}")]),
                        Err(e) => ReplyRepr::new(&s, e.code, [e.message]),
                    },
                    Err(e) => ReplyRepr::for_keyword("syntax", false, vsis::ReturnCode::NoSuchKeyword, [e.to_string()]),
                };
                let text = reply.to_string();
                assert_eq!(ReplyRepr::parse(text.as_bytes()).as_ref(), Ok(&reply));
            }
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = vsis::mode::Mode::parse(s);
        let _ = vsis::evlbi::format(&vsis::evlbi::EvlbiStats::default(), s, vsis::evlbi::UnixTime { secs: 0, micros: 0 });
    }
});

//! VSI-S: the text protocol the NASA Field System (and every jive5ab script) uses to command a
//! recorder over TCP (port 2620), in the dialect jive5ab speaks. Sans-IO: bytes in, requests out;
//! typed replies in, bytes out. No sockets, no clock (the one field that prints the time takes
//! it as an argument).
//!
//! # The protocol
//!
//! VSI-S specification §3 (quoted in jive5ab's `doc/source/vsi-s-commands.rst`) with jive5ab's
//! handling (`src/test.cc`, its command loop) where the two differ:
//!
//! | what | syntax | example |
//! |---|---|---|
//! | command | `keyword = field : field : … ;` | `record = on : exp_ef_no0001 ;` |
//! | query | `keyword ? field : … ;` | `evlbi? ;` |
//! | command reply | `!keyword = RC [: field …] ;` | `!record = 0 ;` |
//! | query reply | `!keyword ? RC [: field …] ;` | `!net_port? 0 : 46227 ;` |
//!
//! - White space is not significant: jive5ab removes every blank, CR and LF before parsing, so
//!   `record=on:scan;` and `record = on : scan ;` are the same statement ([`statement`]).
//! - Several statements may share a line; their replies are sent together, terminated by CR LF
//!   when the request had one (telnet) and by LF otherwise (the FS, `tstdimino`) ([`framing`]).
//! - Keywords are case-insensitive (lower-cased); fields keep their case.
//! - A statement without `?` or `=` is answered `!syntax = 7 : Not a command or query;`, an
//!   unknown keyword `!keyword? 7 : ENOSYS - not implemented ;` ([`reply::ReturnCode`]).
//! - The return codes are the Mark5/jive5ab numbering of the VSI-S list (0-based): 0 done,
//!   1 initiated, 2 not applicable (query only, not implemented here), 3 syntax, 4 failed while
//!   executing, 5 busy, 6 conflicting request (`not whilst record is in progress`), 7 no such
//!   keyword, 8 parameter error, 9 indeterminate.
//!
//! # Modules
//!
//! | module | what |
//! |---|---|
//! | [`framing`] | the byte stream cut into requests, lines bounded ([`framing::MAX_LINE`]) |
//! | [`statement`] | [`statement::Statement`] accessors + [`statement::StatementRepr`] parse/emit |
//! | [`reply`] | [`reply::ReturnCode`], [`reply::ReplyRepr`] emit (and parse, for clients and tests) |
//! | [`command`] | typed commands and queries ([`command::Request`]) from a statement |
//! | [`error`] | [`error::CommandError`]: why a statement is no command (its return code and message) |
//! | [`mode`] | the `mode = VDIF_8000-2048-16-2` data mode: frame size, rate, frame rate |
//! | [`evlbi`] | jive5ab's `evlbi?` statistics and its `%t %l %L …` format |
//! | [`status`] | what the recorder counts about itself ([`status::ServeStatus`]: transfer, statements, connections) |
//! | [`runtime`] | `runtime = NAME`: jive5ab's independent transfer contexts (several transfers at once) |
//! | [`playback`] | recorded scans: `scan_set`, `scan_check?` (and its reply), `disk2file`, VEX times |
//!
//! # Example
//!
//! ```
//! use vsis::framing::{Event, Framer};
//! use vsis::statement::split_request;
//! use vsis::command::{Request, Setting};
//! use vsis::reply::{ReplyRepr, ReturnCode};
//!
//! let mut f = Framer::new();
//! f.push(b"mtu = 9000 ; mtu? ;\r\n");
//! let Some(Event::Request { text, crlf }) = f.poll() else { panic!() };
//! assert!(crlf);
//! let statements = split_request(&text);
//! let s = statements[0].as_ref().unwrap();
//! assert_eq!(Request::parse(s), Ok(Request::Mtu(Setting::Set(9000))));
//! let reply = ReplyRepr::new(s, ReturnCode::Done, Vec::<String>::new());
//! assert_eq!(reply.to_string(), "!mtu = 0 ;");
//! ```

pub mod command;
pub mod error;
pub mod evlbi;
pub mod framing;
pub mod mode;
pub mod playback;
pub mod reply;
pub mod runtime;
pub mod statement;
pub mod status;

pub use command::Request;
pub use error::CommandError;
pub use reply::{ReplyRepr, ReturnCode};
pub use statement::{StatementRepr, SyntaxError};

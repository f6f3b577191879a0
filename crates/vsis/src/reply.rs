//! Replies: `!keyword = RC [: field …] ;` to a command, `!keyword ? RC [: field …] ;` to a query.
//!
//! The return codes are jive5ab's (Mark5 numbering of the VSI-S list, `vsi-s-commands.rst`);
//! jive5ab's own replies are not uniformly spaced (`!record?  0 : off ;`, `!mtu= 0 ;`), so
//! [`ReplyRepr::parse`] trims blanks around every part, and [`ReplyRepr`]'s `Display` writes
//! one spelling: `!keyword? 0 : a : b ;`, `!keyword = 0 ;`.
//!
//! A field never holds `:` or `;` (they would split it on the other side) nor a control byte;
//! [`ReplyRepr::new`] replaces them (see [`sanitize`]), so text from a client or an error
//! message cannot forge another field or reply.

use std::fmt;

use thiserror::Error;

use crate::statement::StatementRepr;

/// The return code of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReturnCode {
    /// 0: done (a query answered, a command carried out).
    Done = 0,
    /// 1: initiated, not completed yet.
    Initiated = 1,
    /// 2: not applicable: a query-only keyword given as a command, or not implemented here.
    NotApplicable = 2,
    /// 3: syntax error.
    Syntax = 3,
    /// 4: an error while executing (a socket that would not bind, a disk that would not open).
    Failed = 4,
    /// 5: too busy, try again later.
    Busy = 5,
    /// 6: inconsistent or conflicting request (`not whilst record is in progress`).
    Conflict = 6,
    /// 7: no such keyword (jive5ab also answers a statement that is none with 7).
    NoSuchKeyword = 7,
    /// 8: parameter error.
    BadParameter = 8,
    /// 9: indeterminate state.
    Indeterminate = 9,
}

impl ReturnCode {
    /// The code for its number.
    pub fn from_number(n: u8) -> Option<ReturnCode> {
        use ReturnCode::*;
        Some(match n {
            0 => Done,
            1 => Initiated,
            2 => NotApplicable,
            3 => Syntax,
            4 => Failed,
            5 => Busy,
            6 => Conflict,
            7 => NoSuchKeyword,
            8 => BadParameter,
            9 => Indeterminate,
            _ => return None,
        })
    }

    /// Its number on the wire.
    pub fn number(self) -> u8 {
        self as u8
    }
}

/// Why bytes are not a reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// Does not start with `!`.
    #[error("a reply starts with '!'")]
    NoBang,
    /// No `?` or `=` after the keyword.
    #[error("no '?' or '=' after the keyword")]
    NoKind,
    /// No `;` at the end.
    #[error("a reply ends with ';'")]
    NoEnd,
    /// The return code is not 0 to 9.
    #[error("return code {0:?} is not 0 to 9")]
    BadCode(String),
    /// Not ASCII.
    #[error("not ASCII")]
    NotAscii,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRepr {
    /// The keyword of the statement answered.
    pub keyword: String,
    /// It answers a query.
    pub query: bool,
    /// What happened.
    pub code: ReturnCode,
    /// What follows the code.
    pub fields: Vec<String>,
}

/// `s` as a field: `:` becomes `.`, `;` becomes `,`, a control byte or non-ASCII character `?`,
/// blanks at the ends removed.
pub fn sanitize(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            ':' => '.',
            ';' => ',',
            c if c.is_ascii_control() || !c.is_ascii() => '?',
            c => c,
        })
        .collect()
}

impl ReplyRepr {
    /// The reply to `to` (its keyword and kind) with `code` and `fields` (sanitized).
    pub fn new<S: AsRef<str>>(to: &StatementRepr, code: ReturnCode, fields: impl IntoIterator<Item = S>) -> ReplyRepr {
        ReplyRepr::for_keyword(&to.keyword, to.query, code, fields)
    }

    /// A reply for a keyword (e.g. `syntax` for a statement that had none).
    pub fn for_keyword<S: AsRef<str>>(
        keyword: &str,
        query: bool,
        code: ReturnCode,
        fields: impl IntoIterator<Item = S>,
    ) -> ReplyRepr {
        ReplyRepr {
            keyword: sanitize(keyword).replace(['?', '=', ' '], "_"),
            query,
            code,
            fields: fields.into_iter().map(|f| sanitize(f.as_ref())).collect(),
        }
    }

    /// Parse one reply, jive5ab's spacing included (`!record?  0 : off ;`).
    pub fn parse(text: &[u8]) -> Result<ReplyRepr, ReplyError> {
        let text = std::str::from_utf8(text).map_err(|_| ReplyError::NotAscii)?.trim();
        let body = text.strip_prefix('!').ok_or(ReplyError::NoBang)?;
        let body = body.strip_suffix(';').ok_or(ReplyError::NoEnd)?;
        let sep = body.find(['?', '=']).ok_or(ReplyError::NoKind)?;
        let mut parts = body[sep + 1..].split(':').map(str::trim);
        let rc = parts.next().unwrap_or_default();
        let code = rc
            .parse::<u8>()
            .ok()
            .and_then(ReturnCode::from_number)
            .ok_or_else(|| ReplyError::BadCode(rc.to_string()))?;
        Ok(ReplyRepr {
            keyword: body[..sep].trim().to_string(),
            query: &body[sep..=sep] == "?",
            code,
            fields: parts.map(str::to_string).collect(),
        })
    }

    /// Parse every reply of a line (`!a? 0 ;!b? 0 : x ;`).
    pub fn parse_all(line: &[u8]) -> Result<Vec<ReplyRepr>, ReplyError> {
        let mut out = Vec::new();
        let mut rest = line.trim_ascii();
        while !rest.is_empty() {
            let end = rest.iter().position(|&c| c == b';').ok_or(ReplyError::NoEnd)?;
            out.push(ReplyRepr::parse(&rest[..=end])?);
            rest = rest[end + 1..].trim_ascii_start();
        }
        Ok(out)
    }

    /// The reply's bytes (no line terminator).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.to_string().as_bytes());
    }
}

impl fmt::Display for ReplyRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "!{}{} {}",
            self.keyword,
            if self.query { "?" } else { " =" },
            self.code.number()
        )?;
        for field in &self.fields {
            write!(f, " : {field}")?;
        }
        f.write_str(" ;")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_written_as_the_field_system_reads_them() {
        let q = StatementRepr {
            keyword: "net_port".into(),
            query: true,
            fields: vec![],
        };
        assert_eq!(
            ReplyRepr::new(&q, ReturnCode::Done, ["46227", "46228"]).to_string(),
            "!net_port? 0 : 46227 : 46228 ;"
        );
        let c = StatementRepr { query: false, ..q };
        assert_eq!(
            ReplyRepr::new(&c, ReturnCode::Done, Vec::<String>::new()).to_string(),
            "!net_port = 0 ;"
        );
        assert_eq!(
            ReplyRepr::new(&c, ReturnCode::Conflict, ["not whilst record is in progress"]).to_string(),
            "!net_port = 6 : not whilst record is in progress ;"
        );
        // A field cannot split itself or end the reply.
        assert_eq!(
            ReplyRepr::new(&c, ReturnCode::BadParameter, ["a:b;c\r\n"]).to_string(),
            "!net_port = 8 : a.b,c ;"
        );
    }

    #[test]
    fn jive5ab_replies_parse() {
        // Captured from jive5ab 3.1.0 (build/src/jive5ab -p 26201).
        let r = ReplyRepr::parse(b"!record?  0 : off ;").unwrap();
        assert_eq!(
            (r.keyword.as_str(), r.query, r.code),
            ("record", true, ReturnCode::Done)
        );
        assert_eq!(r.fields, vec!["off"]);
        let r = ReplyRepr::parse(b"!syntax = 7 : Not a command or query;").unwrap();
        assert_eq!(
            (r.keyword.as_str(), r.query, r.code),
            ("syntax", false, ReturnCode::NoSuchKeyword)
        );
        let r = ReplyRepr::parse(
            b"!evlbi? 0 : total : 23753 : loss : 247 ( 1.03%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt ;",
        )
        .unwrap();
        assert_eq!(r.fields[1], "23753");
        assert_eq!(r.fields[3], "247 ( 1.03%)");
        let two = ReplyRepr::parse_all(b"!version?  0 :  jive5ab : 3.1.0 ;!mtu= 0 ;\n").unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].code, ReturnCode::Done);
        assert!(ReplyRepr::parse(b"!x? 12 ;").is_err());
        assert!(ReplyRepr::parse(b"x? 0 ;").is_err());
        assert!(ReplyRepr::parse(b"!x? 0").is_err());
    }
}

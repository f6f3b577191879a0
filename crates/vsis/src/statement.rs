//! One VSI-S statement: `keyword = field : field` (a command) or `keyword ? field` (a query).
//!
//! smoltcp style: [`Statement`] gives checked accessors over the bytes of one statement (blanks
//! already removed, no `;`), [`StatementRepr`] is the parsed form with its `emit`.
//! [`split_request`] cuts a request line into statements as jive5ab does (`src/test.cc`): every
//! blank, tab, CR and LF is removed (VSI-S: white space between tokens is not significant, and
//! jive5ab strips it inside fields too), then the line is split at `;`.
//!
//! | part | rule |
//! |---|---|
//! | keyword | bytes before the first `?` or `=`; 1 to [`MAX_KEYWORD`] of `[A-Za-z0-9_]`, lower-cased |
//! | kind | `?` query, `=` command |
//! | fields | the rest split at `:`; none when the rest is empty; at most [`MAX_FIELDS`], each at most [`MAX_FIELD`] bytes of printable ASCII |

use thiserror::Error;

/// Longest keyword (VSI-S limits a field to 32 characters for the Field System).
pub const MAX_KEYWORD: usize = 32;
/// Most fields in one statement (`net_port` lists ports; jive5ab takes up to 64 streams).
pub const MAX_FIELDS: usize = 64;
/// Longest field, bytes (a scan label is at most 64; a path a little more).
pub const MAX_FIELD: usize = 256;

/// Why a statement is not one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SyntaxError {
    /// Neither `?` nor `=`: jive5ab's `!syntax = 7 : Not a command or query;`.
    #[error("Not a command or query")]
    NotAStatement,
    /// `?` or `=` with nothing before it.
    #[error("No keyword given")]
    NoKeyword,
    /// A keyword longer than [`MAX_KEYWORD`] or with a byte outside `[A-Za-z0-9_]`.
    #[error("keyword is not 1 to 32 of A-Z a-z 0-9 _")]
    BadKeyword,
    /// A byte that is not printable ASCII (after blanks were removed).
    #[error("byte 0x{0:02x} is not printable ASCII")]
    NotPrintable(u8),
    /// More than [`MAX_FIELDS`] fields.
    #[error("more than {MAX_FIELDS} fields")]
    TooManyFields,
    /// A field longer than [`MAX_FIELD`] bytes.
    #[error("a field is longer than {MAX_FIELD} bytes")]
    FieldTooLong,
}

/// Checked, zero-copy view of one statement's bytes (blanks removed, no `;`).
#[derive(Debug, Clone, Copy)]
pub struct Statement<T: AsRef<[u8]>> {
    buf: T,
    /// Index of the `?` or `=`.
    sep: usize,
}

impl<T: AsRef<[u8]>> Statement<T> {
    /// Validate `buf` as one statement: printable ASCII, a keyword, a kind, bounded fields.
    pub fn new_checked(buf: T) -> Result<Statement<T>, SyntaxError> {
        let b = buf.as_ref();
        if let Some(&c) = b.iter().find(|c| !c.is_ascii_graphic()) {
            return Err(SyntaxError::NotPrintable(c));
        }
        let sep = b
            .iter()
            .position(|&c| c == b'?' || c == b'=')
            .ok_or(SyntaxError::NotAStatement)?;
        let kw = &b[..sep];
        if kw.is_empty() {
            return Err(SyntaxError::NoKeyword);
        }
        if kw.len() > MAX_KEYWORD || !kw.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            return Err(SyntaxError::BadKeyword);
        }
        let s = Statement { buf, sep };
        if s.fields().count() > MAX_FIELDS {
            return Err(SyntaxError::TooManyFields);
        }
        if s.fields().any(|f| f.len() > MAX_FIELD) {
            return Err(SyntaxError::FieldTooLong);
        }
        Ok(s)
    }

    /// The keyword as written (not lower-cased).
    pub fn keyword(&self) -> &[u8] {
        &self.buf.as_ref()[..self.sep]
    }

    /// A query (`?`), not a command (`=`).
    pub fn is_query(&self) -> bool {
        self.buf.as_ref()[self.sep] == b'?'
    }

    /// The bytes after the `?` or `=`.
    pub fn params(&self) -> &[u8] {
        &self.buf.as_ref()[self.sep + 1..]
    }

    /// The fields: the parameters split at `:` (none when there are no parameters; empty fields
    /// are kept, `a::b` has three).
    pub fn fields(&self) -> impl Iterator<Item = &[u8]> {
        let p = self.params();
        p.split(|&c| c == b':').take(if p.is_empty() { 0 } else { usize::MAX })
    }
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementRepr {
    /// The keyword, lower-cased.
    pub keyword: String,
    /// A query (`?`), not a command (`=`).
    pub query: bool,
    /// The fields, as written.
    pub fields: Vec<String>,
}

impl StatementRepr {
    /// The parsed form of a checked statement.
    pub fn parse<T: AsRef<[u8]>>(s: &Statement<T>) -> StatementRepr {
        // new_checked let only printable ASCII through: the conversions cannot lose anything.
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        StatementRepr {
            keyword: text(s.keyword()).to_ascii_lowercase(),
            query: s.is_query(),
            fields: s.fields().map(text).collect(),
        }
    }

    /// The statement as a client sends it: `keyword = a : b ;` or `keyword? a ;`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.keyword.as_bytes());
        out.extend_from_slice(if self.query { b"?" } else { b" =" });
        for (i, f) in self.fields.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b" " } else { b" : " });
            out.extend_from_slice(f.as_bytes());
        }
        out.extend_from_slice(b" ;");
    }
}

/// What jive5ab removes before parsing.
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The statements of a request line, in order: each parsed, or why not. Empty statements
/// (`;;`) are skipped, as jive5ab does.
pub fn split_request(line: &[u8]) -> Vec<Result<StatementRepr, SyntaxError>> {
    let stripped: Vec<u8> = line.iter().copied().filter(|b| !is_blank(*b)).collect();
    stripped
        .split(|&c| c == b';')
        .filter(|s| !s.is_empty())
        .map(|s| Statement::new_checked(s).map(|s| StatementRepr::parse(&s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(kw: &str, query: bool, fields: &[&str]) -> StatementRepr {
        StatementRepr {
            keyword: kw.into(),
            query,
            fields: fields.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn statements_parse_as_jive5ab_splits_them() {
        let got = split_request(b"Record = on : Exp_Ef_No0001 ; evlbi? ;  net_port=46227:46228;;bar;=3;mtu?");
        assert_eq!(
            got,
            vec![
                Ok(repr("record", false, &["on", "Exp_Ef_No0001"])),
                Ok(repr("evlbi", true, &[])),
                Ok(repr("net_port", false, &["46227", "46228"])),
                Err(SyntaxError::NotAStatement),
                Err(SyntaxError::NoKeyword),
                Ok(repr("mtu", true, &[])),
            ]
        );
        assert_eq!(split_request(b"tstat=;"), vec![Ok(repr("tstat", false, &[]))]);
        assert_eq!(split_request(b"a=x::y"), vec![Ok(repr("a", false, &["x", "", "y"]))]);
        assert_eq!(split_request(b"a/b?"), vec![Err(SyntaxError::BadKeyword)]);
        assert_eq!(split_request(b"a=\x01"), vec![Err(SyntaxError::NotPrintable(1))]);
        assert_eq!(
            split_request("a=é".as_bytes()),
            vec![Err(SyntaxError::NotPrintable(0xc3))]
        );
        let many = format!("a={}", vec!["1"; MAX_FIELDS + 1].join(":"));
        assert_eq!(split_request(many.as_bytes()), vec![Err(SyntaxError::TooManyFields)]);
        let long = format!("a={}", "x".repeat(MAX_FIELD + 1));
        assert_eq!(split_request(long.as_bytes()), vec![Err(SyntaxError::FieldTooLong)]);
    }

    #[test]
    fn emit_is_the_field_system_spelling() {
        let mut out = Vec::new();
        repr("record", false, &["on", "s1"]).emit(&mut out);
        assert_eq!(out, b"record = on : s1 ;");
        out.clear();
        repr("evlbi", true, &[]).emit(&mut out);
        assert_eq!(out, b"evlbi? ;");
        out.clear();
        repr("tstat", false, &[]).emit(&mut out);
        assert_eq!(out, b"tstat = ;");
    }

    #[test]
    fn accessors_see_the_raw_bytes() {
        let s = Statement::new_checked(&b"MTU=9000"[..]).unwrap();
        assert_eq!(s.keyword(), b"MTU");
        assert!(!s.is_query());
        assert_eq!(s.params(), b"9000");
        assert_eq!(s.fields().collect::<Vec<_>>(), vec![&b"9000"[..]]);
        let q = Statement::new_checked(&b"mtu?"[..]).unwrap();
        assert!(q.is_query());
        assert_eq!(q.fields().count(), 0);
    }
}

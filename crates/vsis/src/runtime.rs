//! `runtime`: jive5ab's independent transfer contexts, each with its own settings (`mode`,
//! `net_port`, …) and its own transfer, so one recorder runs several transfers at once — a
//! correlator input host serving several stations, one `net2sfxc` socket each.
//!
//! A control connection works in one runtime at a time (at first the default one) and
//! switches with `runtime = NAME ;`, which makes the runtime when it does not exist yet.
//! jive5ab's `src/test.cc` (`process_runtime_command`) gives the forms and replies:
//!
//! | statement | what |
//! |---|---|
//! | `runtime = NAME ;` | work in NAME, made when missing (`0` is the default runtime) |
//! | `runtime = NAME : new ;` | the same, NAME must not exist yet |
//! | `runtime = NAME : exists ;` | work in NAME, which must exist |
//! | `runtime = NAME : transient ;` | a new NAME, deleted when this connection closes |
//! | `runtime = NAME : delete ;` | delete NAME (its transfer stopped); never the default |
//! | `runtime? ;` | `current : count : the others …` |
//!
//! The reply to a command names the runtime the connection is in: `!runtime = 0 : NAME ;`.

use crate::error::CommandError;
use crate::reply::ReturnCode;
use crate::statement::StatementRepr;

/// jive5ab's name of the runtime every connection starts in.
pub const DEFAULT_RUNTIME: &str = "default";

/// Longest runtime name: it names metric series and threads.
pub const MAX_NAME: usize = 32;

/// How `runtime = NAME [: how]` treats a runtime that exists or does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    /// No second field: made when missing.
    IfMissing,
    /// `new`: must not exist.
    New,
    /// `exists`: must exist.
    Exists,
    /// `transient`: must not exist; deleted when the connection that made it closes.
    Transient,
}

/// A `runtime` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeCmd {
    /// `runtime? ;`
    Query,
    /// `runtime = NAME [: new|exists|transient] ;`: work in NAME from now on.
    Select {
        /// The runtime ([`DEFAULT_RUNTIME`] for `0`).
        name: String,
        /// What must hold of it.
        creation: Creation,
    },
    /// `runtime = NAME : delete ;`
    Delete(String),
}

/// Parse a `runtime` statement. Names are 1 to [`MAX_NAME`] bytes of letters, digits, `_`,
/// `-`, `.` and `+` (jive5ab takes any; these name metric series and threads here).
pub fn parse(s: &StatementRepr) -> Result<RuntimeCmd, CommandError> {
    if s.query {
        return Ok(RuntimeCmd::Query);
    }
    let f = &s.fields;
    if f.is_empty() || f.len() > 2 {
        return Err(CommandError::param("expects one or two parameters"));
    }
    let name = match f[0].as_str() {
        "0" => DEFAULT_RUNTIME.to_string(),
        "" => {
            return Err(CommandError::new(
                ReturnCode::Failed,
                "cannot create runtime with no name",
            ))
        }
        n => {
            let ok = n.len() <= MAX_NAME
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+'));
            if !ok {
                return Err(CommandError::param(format!(
                    "runtime name '{n}': 1 to {MAX_NAME} letters, digits, '_', '-', '.', '+'"
                )));
            }
            n.to_string()
        }
    };
    let creation = match f.get(1).map(String::as_str).unwrap_or("") {
        "" => Creation::IfMissing,
        "new" => Creation::New,
        "exists" => Creation::Exists,
        "transient" => Creation::Transient,
        "delete" => return Ok(RuntimeCmd::Delete(name)),
        _ => {
            return Err(CommandError::new(
                ReturnCode::Conflict,
                "second argument to runtime command has to be 'delete', 'exists', 'transient' or 'new' if present",
            ))
        }
    };
    Ok(RuntimeCmd::Select { name, creation })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::split_request;

    fn parse_line(line: &str) -> Result<RuntimeCmd, CommandError> {
        let mut all = split_request(line.as_bytes());
        parse(&all.remove(0).unwrap())
    }

    #[test]
    fn jive5abs_forms_parse() {
        assert_eq!(parse_line("runtime? ;"), Ok(RuntimeCmd::Query));
        assert_eq!(
            parse_line("runtime = Ef ;"),
            Ok(RuntimeCmd::Select {
                name: "Ef".into(),
                creation: Creation::IfMissing
            })
        );
        assert_eq!(
            parse_line("runtime = 0 ;"),
            Ok(RuntimeCmd::Select {
                name: DEFAULT_RUNTIME.into(),
                creation: Creation::IfMissing
            })
        );
        for (how, c) in [
            ("new", Creation::New),
            ("exists", Creation::Exists),
            ("transient", Creation::Transient),
        ] {
            assert_eq!(
                parse_line(&format!("runtime = st.1 : {how} ;")),
                Ok(RuntimeCmd::Select {
                    name: "st.1".into(),
                    creation: c
                })
            );
        }
        assert_eq!(
            parse_line("runtime = Wb : delete ;"),
            Ok(RuntimeCmd::Delete("Wb".into()))
        );
    }

    #[test]
    fn bad_names_and_words_are_refused_with_jive5abs_codes() {
        let code = |l: &str| parse_line(l).unwrap_err().code;
        assert_eq!(code("runtime = ;"), ReturnCode::BadParameter);
        assert_eq!(code("runtime = : new ;"), ReturnCode::Failed);
        assert_eq!(code("runtime = a : b : c ;"), ReturnCode::BadParameter);
        assert_eq!(code("runtime = a : sideways ;"), ReturnCode::Conflict);
        assert_eq!(code("runtime = ../x ;"), ReturnCode::BadParameter);
        assert_eq!(code("runtime = a\"b ;"), ReturnCode::BadParameter);
        assert_eq!(
            code(&format!("runtime = {} ;", "x".repeat(33))),
            ReturnCode::BadParameter
        );
        assert!(parse_line(&format!("runtime = {} ;", "x".repeat(32))).is_ok());
    }
}

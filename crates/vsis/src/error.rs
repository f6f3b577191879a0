//! Why a statement is not a command this recorder takes: a leaf that the keyword table
//! ([`crate::command`]) and the statement parsers it calls ([`crate::playback`],
//! [`crate::runtime`]) all return.

use thiserror::Error;

use crate::reply::ReturnCode;

/// Why a statement is not a command this recorder takes: the code and the message of the reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct CommandError {
    /// The reply's return code.
    pub code: ReturnCode,
    /// The reply's message field.
    pub message: String,
}

impl CommandError {
    pub(crate) fn new(code: ReturnCode, message: impl Into<String>) -> CommandError {
        CommandError {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn param(message: impl Into<String>) -> CommandError {
        CommandError::new(ReturnCode::BadParameter, message)
    }
}

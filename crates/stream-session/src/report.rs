//! The results of `evlbi stream send` and `stream recv` are defined in the core
//! ([`stream::results`]) and re-exported here.

pub use stream::results::*;

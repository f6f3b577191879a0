//! Models and (in later issues) plots and reports. Every model is a pure function from a
//! documented input struct to a documented serde result struct: the CLI prints them as tables or
//! JSON, and tests pin them against the figures of the seed papers.

pub mod models;

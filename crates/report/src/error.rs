//! The errors of this crate, in a leaf module that the drawing and export modules import
//! (the crate root only re-exports them).

use std::path::PathBuf;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Reading the font or writing a figure failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The font file is not a usable TrueType font.
    #[error("font {0} cannot be used: {1}")]
    Font(PathBuf, FontError),
    /// plotters failed to draw.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// A figure had no finite data point to draw.
    #[error("no data to draw in \"{0}\"")]
    NoData(String),
    /// The report could not be serialised.
    #[error("cannot serialise the report: {0}")]
    Export(String),
}

/// Why a font file cannot be used (kept for the process: plotters registers a font once).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FontError {
    /// The file cannot be read.
    #[error(transparent)]
    Read(std::sync::Arc<std::io::Error>),
    /// plotters does not take it.
    #[error("not a TrueType/OpenType font")]
    NotAFont,
}

//! The sender's inputs: a VDIF file, frames in memory, or a stream an [`Opener`] opens (a
//! recorded vbs/Mark6 scan); each read once to be inspected — into memory when it fits, so it is
//! sent from there — and given its [`Shape`].

use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use vdif::FrameRate;

use super::shape::{shape, whole_frames, Found, Shape};
use crate::{InputProblem, StreamSessionError};

/// Files up to this size are read into memory and sent from there.
const MEMORY_SOURCE_MAX: u64 = 2 << 30;

/// Opens a stream of VDIF from its start (once per pass over it): a recorded scan, or
/// anything else that reads like a file.
#[derive(Clone)]
pub struct Opener(Arc<dyn Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + Sync>);

impl Opener {
    /// An opener calling `f`.
    pub fn new(f: impl Fn() -> std::io::Result<Box<dyn Read + Send>> + Send + Sync + 'static) -> Opener {
        Opener(Arc::new(f))
    }

    pub(crate) fn open(&self) -> std::io::Result<Box<dyn Read + Send>> {
        (self.0)()
    }

    fn file(path: PathBuf) -> Opener {
        Opener::new(move || {
            safedir::open_regular(&path)
                .map(|f| Box::new(f) as Box<dyn Read + Send>)
                .map_err(safedir::DirError::into_io)
        })
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Opener")
    }
}

/// One station's VDIF: a file, frames already in memory (e.g. just generated), or a stream
/// read from an opener (a recorded vbs/Mark6 scan).
#[derive(Debug, Clone)]
pub enum Input {
    /// A VDIF file (read into memory when it fits, else streamed by a reader thread).
    File(PathBuf),
    /// A stream of `len` bytes (read into memory when it fits, else by a reader thread that
    /// opens it anew for each pass).
    Reader {
        /// Shown as the source in reports (e.g. `vbs://SCAN`).
        name: String,
        /// Bytes.
        len: u64,
        /// Opens it from the start.
        open: Opener,
    },
    /// Contiguous frames in memory, with a name for the report.
    Memory {
        /// Shown as the source in reports.
        name: String,
        /// The frames.
        data: Vec<u8>,
    },
}

impl Input {
    fn name(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Memory { name, .. } | Input::Reader { name, .. } => name.clone(),
        }
    }
}

/// One input, examined: where its frames come from, and how it is sent.
pub(crate) struct Source {
    /// The input, when it is streamed by a reader thread.
    pub path: Option<Opener>,
    /// The whole input as contiguous frames, when it is sent from memory (a file: mapped).
    pub memory: Option<Bytes>,
    /// How it is sent (its name too).
    pub shape: Shape,
}

/// What examining an input gives: the opener (for a reader thread), the data when it fits in
/// memory, and the inspection.
type Examined = (
    Option<Opener>,
    Option<Bytes>,
    Result<vdif::inspect::InspectReport, vdif::inspect::InspectError>,
);

/// Inspect one input (one pass over its bytes; `fps` for a file that cannot show its rate) and
/// shape it ([`shape`]: paced at `rate_bps` when given, looped when `looping`). A file that
/// fits in memory is read once and inspected there, so it is sent from memory: no reader thread
/// competing for one of two cores, no per-frame allocation, no second read.
pub(crate) fn examine(
    input: Input,
    fps: Option<FrameRate>,
    rate_bps: Option<vdif::BitRate>,
    looping: bool,
) -> Result<Source, StreamSessionError> {
    let name = input.name();
    let (path, data, rep) = match input {
        Input::File(path) => examine_file(fps, &name, path)?,
        Input::Reader { len, open, .. } => examine_stream(fps, &name, open, len)?,
        Input::Memory { data, .. } => {
            let rep = vdif::inspect::inspect(&data[..], fps, |_, _| {});
            (None, Some(Bytes::from(data)), rep)
        }
    };
    // Mark5B (its sync word first): one stream, station 0, surveyed in memory.
    let found = match data.as_deref().filter(|d| vdif::mark5b_file::starts_mark5b(d)) {
        Some(d) => mark5b_found(d, fps).map_err(|p| StreamSessionError::input(&name, p))?,
        None if rep.is_err() && path.as_ref().is_some_and(|_| data.is_none()) && first_bytes_mark5b(&path) => {
            return Err(StreamSessionError::input(
                &name,
                InputProblem::Mark5b(format!(
                    "more than {MEMORY_SOURCE_MAX} bytes: Mark5B is sent from memory only"
                )),
            ))
        }
        None => Found::of(&rep.map_err(|e| StreamSessionError::input(&name, e.into()))?),
    };
    let shape = shape(&found, &name, rate_bps, looping).map_err(|p| StreamSessionError::input(&name, p))?;
    let memory = data.filter(|d| whole_frames(&found, d.len()));
    if memory.is_none() && path.is_none() {
        return Err(StreamSessionError::input(name, InputProblem::NotContiguous));
    }
    Ok(Source { path, memory, shape })
}

/// What a sender needs of Mark5B `data` (contiguous whole frames): one thread (0) of station 0,
/// 10 016-byte frames with 16-byte headers, the frame rate the frame numbers show across a
/// second (else `fps`).
fn mark5b_found(data: &[u8], fps: Option<FrameRate>) -> Result<Found, InputProblem> {
    let s = vdif::mark5b_file::survey(data).map_err(|e| InputProblem::Mark5b(e.to_string()))?;
    Ok(Found {
        station_id: Some(vdif::StationId(0)),
        thread_ids: vec![0],
        frame_len: Some(vdif::formats::MARK5B_FRAME_LEN),
        header_len: Some(vdif::mark5b::MARK5B_HEADER_LEN),
        frames: s.frames,
        frames_per_second: s.frames_per_second.or(fps),
        frame_numbers: (u32::from(s.frame_numbers.0), u32::from(s.frame_numbers.1)),
        first_second_utc: None,
        edv: None,
    })
}

/// Whether the stream `open` opens begins with a Mark5B sync word.
fn first_bytes_mark5b(open: &Option<Opener>) -> bool {
    let mut head = [0u8; 4];
    open.as_ref()
        .and_then(|o| o.open().ok())
        .is_some_and(|mut r| r.read_exact(&mut head).is_ok() && vdif::mark5b_file::starts_mark5b(&head))
}

/// Inspect a stream of `len` bytes: read into memory when it fits, else inspected as it is
/// read (then a reader thread sends it).
fn examine_stream(fps: Option<FrameRate>, name: &str, open: Opener, len: u64) -> Result<Examined, StreamSessionError> {
    let read_err = |e: std::io::Error| StreamSessionError::input(name, InputProblem::Read(e));
    let r = open.open().map_err(read_err)?;
    if len <= MEMORY_SOURCE_MAX {
        let mut data = Vec::with_capacity(len as usize);
        // Its length as examined, not more: a file that grows meanwhile is not read on.
        r.take(len).read_to_end(&mut data).map_err(read_err)?;
        let rep = vdif::inspect::inspect(&data[..], fps, |_, _| {});
        return Ok((Some(open), Some(Bytes::from(data)), rep));
    }
    let rep = vdif::inspect::inspect(BufReader::with_capacity(1 << 20, r), fps, |_, _| {});
    Ok((Some(open), None, rep))
}

/// Inspect a file: mapped into memory when it fits ([`crate::mapped`]), so it is sent from its
/// pages in the page cache and nothing is copied before the first datagram; read as a stream
/// when it does not fit or cannot be mapped.
fn examine_file(fps: Option<FrameRate>, name: &str, path: PathBuf) -> Result<Examined, StreamSessionError> {
    let read_err = |e: std::io::Error| StreamSessionError::input(name, InputProblem::Read(e));
    // A regular file only (a device such as /dev/zero, a FIFO, a directory is refused here, not
    // read without end), its length known before a byte is read.
    let file = safedir::open_regular(&path).map_err(|e| read_err(e.into_io()))?;
    let len = file.metadata().map_err(read_err)?.len();
    if len <= MEMORY_SOURCE_MAX {
        if let Some(data) = crate::mapped::map(&file) {
            let rep = vdif::inspect::inspect(&data[..], fps, |_, _| {});
            return Ok((Some(Opener::file(path)), Some(data), rep));
        }
    }
    examine_stream(fps, name, Opener::file(path), len)
}

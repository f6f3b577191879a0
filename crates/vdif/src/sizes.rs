//! The sizes every other module names (the header's, the scanner's cap), in a leaf module so
//! that the errors that quote them import no module that imports the errors.

/// Length of a standard VDIF header in bytes.
pub const HEADER_LEN: usize = 32;
/// Length of a legacy-mode VDIF header in bytes (words 0–3 only).
pub const LEGACY_HEADER_LEN: usize = 16;

/// Largest frame (header included) the scanner believes. VDIF allows 134 MB, but frames in the
/// field are a few kB (8032, 5032, Mark5B-in-VDIF 10016; a jumbo datagram holds 9000), and
/// every byte of a claimed length is buffered before a header is believed: the cap is what
/// bounds memory on garbage.
pub const MAX_SCAN_FRAME_LEN: usize = 4 << 20;

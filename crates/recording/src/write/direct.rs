//! Direct I/O (O_DIRECT) for the writer process: aligned appends with the file's last partial
//! block carried in memory, and the switch back to the page cache for that block at close.

// unsafe: fcntl(2) to drop O_DIRECT for a file's unaligned tail, fstatfs(2) for the file system
// type: std can do neither.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write;

use super::bad;

/// Direct I/O (O_DIRECT) moves data from memory to the disk without the page cache, which at
/// 4 Gb/s costs more CPU than the copy itself (this VM: 8 GB written in 2.1 s of system time
/// direct, 17 s buffered). File offset, length and memory address must all be multiples of the
/// device's logical block size; 4096 serves 512-byte and 4 KiB-sector devices alike.
pub const DIRECT_ALIGN: usize = 4096;

#[repr(C, align(4096))]
struct Block([u8; DIRECT_ALIGN]);

/// The bytes of a direct-I/O file past its last whole block: written when the block is complete,
/// or through the page cache when the file is closed.
pub(super) struct Carry {
    block: Box<Block>,
    len: usize,
}

impl Carry {
    pub(super) fn new() -> Carry {
        Carry {
            block: Box::new(Block([0; DIRECT_ALIGN])),
            len: 0,
        }
    }
}

/// Append `data` to a direct-I/O file whose unwritten last block is in `c`. The receiver places
/// a record in its slot at the offset the data has within its block on disk (memory address ≡
/// file offset mod [`DIRECT_ALIGN`]), so after topping up the carried block the rest is aligned
/// and goes to the disk straight from shared memory.
pub(super) fn write_direct(f: &mut File, c: &mut Carry, data: &[u8]) -> std::io::Result<()> {
    if (data.as_ptr() as usize) % DIRECT_ALIGN != c.len {
        return Err(bad(format!(
            "writer record: placed at {} within its block, the file is at {}",
            (data.as_ptr() as usize) % DIRECT_ALIGN,
            c.len
        )));
    }
    // Top the carried block up (it is written once full); if it is not, all of `data` is in it.
    let head = if c.len > 0 {
        (DIRECT_ALIGN - c.len).min(data.len())
    } else {
        0
    };
    append_bytes(f, c, &data[..head])?;
    if c.len > 0 {
        return Ok(());
    }
    let rest = &data[head..];
    let whole = rest.len() - rest.len() % DIRECT_ALIGN;
    f.write_all(&rest[..whole])?;
    append_bytes(f, c, &rest[whole..])
}

/// Append bytes that are not in a slot (a Mark6 header) to a direct-I/O file: through the
/// carried block, which is written when it fills.
pub(super) fn append_bytes(f: &mut File, c: &mut Carry, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = (DIRECT_ALIGN - c.len).min(bytes.len());
        c.block.0[c.len..c.len + n].copy_from_slice(&bytes[..n]);
        c.len += n;
        bytes = &bytes[n..];
        if c.len == DIRECT_ALIGN {
            f.write_all(&c.block.0)?;
            c.len = 0;
        }
    }
    Ok(())
}

/// Write the carried last partial block through the page cache (O_DIRECT writes whole blocks
/// only) and leave the file without O_DIRECT.
pub(super) fn finish_direct(f: &mut File, c: &mut Carry) -> std::io::Result<()> {
    if c.len == 0 {
        return Ok(());
    }
    end_direct(f)?;
    f.write_all(&c.block.0[..c.len])?;
    c.len = 0;
    Ok(())
}

/// Overwrite `bytes` at offset `at` of a file of `len` bytes so far (its last `c.len` bytes, with
/// direct I/O, still in the carried block): in the carry, or on disk by reading, changing and
/// writing back the aligned blocks that hold them. For a Mark6 block header whose block ended
/// short.
pub(super) fn patch(f: &File, c: Option<&mut Carry>, len: u64, at: u64, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let Some(c) = c else {
        return f.write_all_at(bytes, at);
    };
    let on_disk = len - c.len as u64;
    let split = usize::try_from(on_disk.saturating_sub(at))
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    for (i, b) in bytes[split..].iter().enumerate() {
        let k = usize::try_from(at + (split + i) as u64 - on_disk).unwrap_or(usize::MAX);
        *c.block
            .0
            .get_mut(k)
            .ok_or_else(|| bad(format!("patch at {at} past the file's end")))? = *b;
    }
    let (mut off, mut rest) = (at, &bytes[..split]);
    let mut blk = Box::new(Block([0; DIRECT_ALIGN]));
    while !rest.is_empty() {
        let base = off / DIRECT_ALIGN as u64 * DIRECT_ALIGN as u64;
        let i = (off - base) as usize;
        let n = (DIRECT_ALIGN - i).min(rest.len());
        f.read_exact_at(&mut blk.0, base)?;
        blk.0[i..i + n].copy_from_slice(&rest[..n]);
        f.write_all_at(&blk.0, base)?;
        off += n as u64;
        rest = &rest[n..];
    }
    Ok(())
}

/// Turn O_DIRECT off for an open file (its last, partial block).
pub(super) fn end_direct(f: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own; results checked.
    let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `fd` is on tmpfs (statfs(2) `f_type` TMPFS_MAGIC; a memfd is too). tmpfs takes
/// O_DIRECT since Linux 6.6 but still copies into its page cache: at 4.096 Gb/s the writer then
/// took 2.19 s of CPU per 640000 frames against 1.69 s through the page cache, and the receiver
/// more with the larger direct slots (bench/RESULTS.md, issue 30), so a recording that uses direct
/// I/O wherever a disk takes it writes tmpfs through the page cache.
pub(super) fn on_tmpfs(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // SAFETY: fstatfs writes one statfs we own; the result is checked.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between libcs
    let is_tmpfs = st.f_type as i64 == TMPFS_MAGIC;
    rc == 0 && is_tmpfs
}

/// Whether files in `dir` can be written with direct I/O: a clear error now instead of a
/// failed recording later. The probe file is made below the descriptor, never through a link.
pub(super) fn check_direct(dir: &safedir::Dir) -> std::io::Result<()> {
    let probe = format!(".evlbi-direct-check-{}", std::process::id());
    let opened = dir.create_file(
        &probe,
        safedir::Create {
            read: false,
            direct: true,
        },
    );
    if opened.is_ok() {
        let _ = dir.remove(&probe);
    }
    opened.map(drop).map_err(|e| {
        let e = e.into_io();
        std::io::Error::new(
            e.kind(),
            format!(
                "{} does not take direct I/O (O_DIRECT: {e}); leave out --direct to write through the page cache",
                dir.path().display()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::on_tmpfs;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    #[test]
    fn a_memfd_is_on_tmpfs_and_a_pipe_is_not() {
        // SAFETY: the name is a NUL-terminated literal; the result is checked.
        let raw = unsafe { libc::memfd_create(c"evlbi-tmpfs-check".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: memfd_create returned a new descriptor nothing else owns.
        let memfd = unsafe { OwnedFd::from_raw_fd(raw) };
        assert!(on_tmpfs(memfd.as_fd()), "a memfd lives on the kernel's internal tmpfs");
        let (r, _w) = std::io::pipe().unwrap();
        assert!(!on_tmpfs(r.as_fd()), "a pipe is on pipefs");
    }
}

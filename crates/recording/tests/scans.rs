//! Scans laid out on real directories as jive5ab and d-plane lay them out, read back.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use recording::{list_scans, Layout, Scan, ScanError, ScanReader};
use scanfmt::mk6::{BlockHeader, FileHeader};
use scanfmt::vbs::chunk_name;

/// `n` bytes that differ at every position (a misplaced block shows).
fn data(n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

fn disks(root: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let d = root.join(format!("disk{i}"));
            std::fs::create_dir_all(&d).unwrap();
            d
        })
        .collect()
}

/// `bytes` as vbs chunks of `chunk` bytes, round robin over `disks`, leaving out `skip`.
fn write_vbs(disks: &[PathBuf], scan: &str, bytes: &[u8], chunk: usize, skip: &[usize]) {
    for (i, c) in bytes.chunks(chunk).enumerate() {
        if skip.contains(&i) {
            continue;
        }
        let dir = disks[i % disks.len()].join(scan);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(chunk_name(scan, i as u32)), c).unwrap();
    }
}

/// `bytes` as Mark6 blocks of `block` bytes, round robin over `disks` (one file each).
fn write_mk6(disks: &[PathBuf], scan: &str, bytes: &[u8], block: usize, packet: u64, v1: bool) -> Vec<Vec<u8>> {
    let mut head = FileHeader::vdif(block as u64, packet).unwrap().emit();
    if v1 {
        head[4] = 1;
        // Version 1: block_size counts the 4-byte block header.
        head[8..12].copy_from_slice(&(block as i32 + 4).to_le_bytes());
    }
    let mut files = vec![head.to_vec(); disks.len()];
    for (i, c) in bytes.chunks(block).enumerate() {
        let f = &mut files[i % disks.len()];
        if v1 {
            assert_eq!(c.len(), block, "version 1 blocks are all full");
            f.extend_from_slice(&(i as i32).to_le_bytes());
        } else {
            f.extend_from_slice(&BlockHeader::emit_v2(i as u64, c.len() as u64).unwrap());
        }
        f.extend_from_slice(c);
    }
    for (d, f) in disks.iter().zip(&files) {
        std::fs::write(d.join(scan), f).unwrap();
    }
    files
}

fn read_all(scan: Scan) -> Vec<u8> {
    let mut out = Vec::new();
    ScanReader::new(Arc::new(scan)).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn a_vbs_scan_over_four_disks_reads_back_byte_identical() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 4);
    let bytes = data(10 * 1000 + 300);
    write_vbs(&d, "ev123_no0001_dsEf", &bytes, 1000, &[]);
    let scan = Scan::open(Layout::Vbs, "ev123_no0001_dsEf", &d).unwrap();
    assert_eq!(scan.len(), bytes.len() as u64);
    assert_eq!(scan.files().len(), 11);
    let info = scan.info();
    assert_eq!((info.blocks, info.missing_blocks, info.disks.len()), (11, 0, 4));
    assert!(info.problems.iter().all(|p| p.contains("VDIF")), "{:?}", info.problems);
    assert!(read_all(scan) == bytes);
}

#[test]
fn a_lost_vbs_chunk_is_counted_and_the_rest_read_in_order() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 3);
    let bytes = data(6000);
    write_vbs(&d, "s", &bytes, 1000, &[2]);
    let scan = Scan::open(Layout::Vbs, "s", &d).unwrap();
    let info = scan.info();
    assert_eq!((info.missing_blocks, info.missing.clone()), (1, vec![[2, 3]]));
    assert!(
        info.problems[0].contains("1 block(s) missing (2)"),
        "{:?}",
        info.problems
    );
    let mut expect = bytes[..2000].to_vec();
    expect.extend_from_slice(&bytes[3000..]);
    assert!(read_all(scan) == expect);
}

#[test]
fn mark6_files_interleave_by_block_number_with_a_short_last_block() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 4);
    let bytes = data(9 * 800 + 400); // 10 blocks, the last half full
    write_mk6(&d, "mk", &bytes, 800, 100, false);
    let scan = Scan::open(Layout::Mk6, "mk", &d).unwrap();
    let info = scan.info();
    assert_eq!(
        (info.blocks, info.files, info.missing_blocks, info.packet_bytes),
        (10, 4, 0, Some(100))
    );
    let mut r = ScanReader::new(Arc::new(scan));
    r.seek(SeekFrom::Start(1234)).unwrap();
    let mut some = vec![0u8; 3000];
    r.read_exact(&mut some).unwrap();
    assert!(some == bytes[1234..4234], "reads across blocks of different files");
    let mut pos = vec![0u8; 500];
    r.read_exact_at(&mut pos, 7000).unwrap();
    assert!(pos == bytes[7000..7500]);
    r.seek(SeekFrom::Start(0)).unwrap();
    let mut all = Vec::new();
    r.read_to_end(&mut all).unwrap();
    assert!(all == bytes);
}

#[test]
fn mark6_version_1_block_headers_are_read() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    let bytes = data(6 * 500);
    write_mk6(&d, "old", &bytes, 500, 100, true);
    let scan = Scan::open(Layout::Mk6, "old", &d).unwrap();
    assert_eq!(scan.info().blocks, 6);
    assert!(read_all(scan) == bytes);
}

#[test]
fn a_mark6_file_cut_inside_a_block_keeps_whole_packets() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    let bytes = data(4 * 800);
    let files = write_mk6(&d, "cut", &bytes, 800, 100, false);
    // Disk 1 holds blocks 1 and 3; cut it 250 bytes into block 3's data.
    let cut = files[1].len() - 800 + 250;
    std::fs::write(d[1].join("cut"), &files[1][..cut]).unwrap();
    let scan = Scan::open(Layout::Mk6, "cut", &d).unwrap();
    let info = scan.info();
    assert_eq!(info.truncated_blocks, 1);
    assert!(
        info.problems.iter().any(|p| p.contains("cut short")),
        "{:?}",
        info.problems
    );
    let got = read_all(scan);
    assert_eq!(got.len(), 3 * 800 + 200, "2 whole packets of block 3");
    assert!(got == bytes[..2600]);
}

#[test]
fn a_garbage_header_stops_that_file_only() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    let bytes = data(4 * 800);
    let mut files = write_mk6(&d, "bad", &bytes, 800, 100, false);
    // Block 3's header (the second in disk 1's file) says -1.
    let at = 20 + 8 + 800;
    files[1][at..at + 4].copy_from_slice(&(-1i32).to_le_bytes());
    std::fs::write(d[1].join("bad"), &files[1]).unwrap();
    let scan = Scan::open(Layout::Mk6, "bad", &d).unwrap();
    assert!(scan.problems()[0].contains("block number -1"), "{:?}", scan.problems());
    let got = read_all(scan);
    assert_eq!(got.len(), 2400);
    assert!(got == bytes[..2400]);
}

#[test]
fn not_found_names_the_data_streams_and_bad_names_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    write_vbs(&d, "exp_dsEf", &data(100), 50, &[]);
    write_vbs(&d, "exp_dsWb", &data(100), 50, &[]);
    let e = Scan::open(Layout::Vbs, "exp", &d).unwrap_err();
    assert!(matches!(e, ScanError::NotFound { .. }));
    assert!(e.to_string().contains("vbs://exp_dsEf, vbs://exp_dsWb"), "{e}");
    for bad in ["../etc", "a/b", "x.00000001", ""] {
        assert!(
            matches!(Scan::open(Layout::Vbs, bad, &d), Err(ScanError::Name(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_symlinked_chunk_or_scan_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    write_vbs(&d, "s", &data(200), 100, &[]);
    let secret = t.path().join("secret");
    std::fs::write(&secret, b"outside the disks").unwrap();
    std::os::unix::fs::symlink(&secret, d[0].join("s").join(chunk_name("s", 2))).unwrap();
    std::os::unix::fs::symlink(&secret, d[1].join("m")).unwrap();
    let scan = Scan::open(Layout::Vbs, "s", &d).unwrap();
    assert!(
        scan.problems().iter().any(|p| p.contains("not a regular file")),
        "{:?}",
        scan.problems()
    );
    assert_eq!(read_all(scan).len(), 200, "the link is left out");
    assert!(Scan::open(Layout::Mk6, "m", &d).is_err());
}

#[test]
fn the_disks_are_listed_with_their_scans() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 3);
    write_vbs(&d, "a_dsEf", &data(3000), 1000, &[]);
    write_mk6(&d, "b", &data(1600), 800, 100, false);
    std::fs::create_dir(d[0].join("empty")).unwrap();
    std::fs::write(d[1].join("notes.txt"), b"not a scan").unwrap();
    let list = list_scans(&[Layout::Vbs, Layout::Mk6], &d);
    let names: Vec<(String, String)> = list.scans.iter().map(|s| (s.scan.clone(), s.url.clone())).collect();
    assert_eq!(
        names,
        vec![("a_dsEf".into(), "vbs://a_dsEf".into()), ("b".into(), "mk6://b".into())]
    );
    assert_eq!(list.scans[0].bytes, 3000);
    assert_eq!(list.scans[1].blocks, 2);
}

#[test]
fn disk_labels_keep_what_tells_disks_apart() {
    let flex: Vec<PathBuf> = ["/mnt/disk0", "/mnt/disk11"].iter().map(PathBuf::from).collect();
    assert_eq!(recording::disk_label(&flex, &flex[1]), PathBuf::from("disk11"));
    let mk6: Vec<PathBuf> = ["/mnt/disks/1/0", "/mnt/disks/2/7"].iter().map(PathBuf::from).collect();
    assert_eq!(recording::disk_label(&mk6, &mk6[1]), PathBuf::from("2/7"));
    let one = vec![PathBuf::from("/data/d0")];
    assert_eq!(recording::disk_label(&one, &one[0]), PathBuf::from("d0"));
}

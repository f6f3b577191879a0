//! The multi-disk recorder written through and read back with `recording::read`: what goes in comes
//! out, byte for byte, in both layouts.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use recording::write::{RecordingConfig, RecordingNames, ScanSink, WriterPlacement};
use scanfmt::Layout;
use stream::FrameSink;
use vdif::VdifHeader;

const EF: u16 = u16::from_be_bytes(*b"Ef");
const FRAME: usize = 1056;

/// Frame `i` of a 2-thread stream: threads alternate, 100 frames per second per thread, the
/// data bytes telling the frame apart.
fn frame(i: u32) -> Vec<u8> {
    let h = VdifHeader {
        invalid: false,
        legacy: false,
        seconds: 1000 + i / 200,
        ref_epoch: 52,
        unassigned: 0,
        frame_number: (i % 200) / 2,
        version: 0,
        log2_channels: 2,
        frame_len_units: (FRAME / 8) as u32,
        complex: false,
        bits_per_sample: 2,
        thread_id: (i % 2) as u16,
        station_id: vdif::StationId(EF),
        extended: [0; 4],
    };
    let mut f = h.to_bytes().unwrap();
    f.extend((0..FRAME - 32).map(|k| (i as usize * 7 + k) as u8));
    f
}

fn disks(root: &std::path::Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| root.join(format!("disk{i}"))).collect()
}

fn read_scan(layout: Layout, scan: &str, disks: &[PathBuf]) -> Vec<u8> {
    let s = recording::Scan::open(layout, scan, disks).unwrap();
    let mut out = Vec::new();
    recording::ScanReader::new(Arc::new(s)).read_to_end(&mut out).unwrap();
    out
}

fn record(
    layout: Layout,
    n: u32,
    split: bool,
) -> (tempfile::TempDir, Vec<PathBuf>, Vec<u8>, recording::write::SinkOutcome) {
    record_named(layout, n, split, RecordingNames::Template("exp_no0001".into()))
}

fn record_named(
    layout: Layout,
    n: u32,
    split: bool,
    names: RecordingNames,
) -> (tempfile::TempDir, Vec<PathBuf>, Vec<u8>, recording::write::SinkOutcome) {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 4);
    let cfg = RecordingConfig {
        layout,
        disks: d.clone(),
        names,
        block_bytes: Some(10 * FRAME as u64 + 500),
        direct: false,
        opened: Vec::new(),
    };
    let mut sink = ScanSink::new(&cfg, &WriterPlacement::Thread, 64 << 20, split).unwrap();
    let mut sent = Vec::new();
    for i in 0..n {
        let f = frame(i);
        sink.frame(vdif::StationId(EF), &f, i % 17 == 0);
        sent.extend_from_slice(&f);
    }
    let out = sink.finish();
    (t, d, sent, out)
}

#[test]
fn both_layouts_over_four_disks_read_back_byte_identical() {
    for layout in [Layout::Vbs, Layout::Mk6] {
        let (_t, d, sent, out) = record(layout, 1005, false);
        assert_eq!(out.error, None, "{layout}");
        assert_eq!(out.not_written, 0);
        let r = out.recording.unwrap();
        assert_eq!(r.scans.len(), 1);
        let s = &r.scans[0];
        assert_eq!(
            (s.scan.as_str(), s.frames, s.blocks),
            ("exp_no0001_dsEf", 1005, 101),
            "{layout}"
        );
        assert_eq!(s.filled, (0..1005).filter(|i| i % 17 == 0).count() as u64);
        for disk in &r.disks {
            assert!(disk.blocks >= 25 && !disk.dropped, "every disk works: {disk:?}");
        }
        let back = read_scan(layout, "exp_no0001_dsEf", &d);
        assert_eq!(back.len(), sent.len(), "{layout}");
        assert!(back == sent, "{layout}: the scan differs from what was recorded");
        let info = recording::Scan::open(layout, "exp_no0001_dsEf", &d).unwrap().info();
        assert_eq!((info.missing_blocks, info.blocks), (0, 101));
    }
}

#[test]
fn one_scan_per_thread_holds_that_thread_only() {
    let (_t, d, sent, out) = record(Layout::Mk6, 400, true);
    let r = out.recording.unwrap();
    let names: Vec<&str> = r.scans.iter().map(|s| s.scan.as_str()).collect();
    assert_eq!(names, ["exp_no0001_dsEf-0", "exp_no0001_dsEf-1"]);
    for t in 0..2usize {
        let expect: Vec<u8> = sent.chunks(FRAME).skip(t).step_by(2).flatten().copied().collect();
        assert!(
            read_scan(Layout::Mk6, &format!("exp_no0001_dsEf-{t}"), &d) == expect,
            "thread {t}"
        );
    }
}

#[test]
fn a_scan_name_already_on_a_disk_gets_a_letter() {
    let t = tempfile::tempdir().unwrap();
    let d = disks(t.path(), 2);
    std::fs::create_dir_all(d[1].join("s_dsEf")).unwrap();
    let cfg = RecordingConfig {
        layout: Layout::Vbs,
        disks: d.clone(),
        names: RecordingNames::Template("s".into()),
        block_bytes: Some(4 * FRAME as u64),
        direct: false,
        opened: Vec::new(),
    };
    let mut sink = ScanSink::new(&cfg, &WriterPlacement::Thread, 32 << 20, false).unwrap();
    for i in 0..10 {
        sink.frame(vdif::StationId(EF), &frame(i), false);
    }
    let r = sink.finish().recording.unwrap();
    assert_eq!(r.scans[0].scan, "s_dsEfa");
    assert_eq!(read_scan(Layout::Vbs, "s_dsEfa", &d).len(), 10 * FRAME);
}

#[test]
fn bad_configurations_are_refused_before_recording() {
    let t = tempfile::tempdir().unwrap();
    let cfg = |scan: &str, disks: Vec<PathBuf>, block: u64| RecordingConfig {
        layout: Layout::Mk6,
        disks,
        names: RecordingNames::Template(scan.into()),
        block_bytes: Some(block),
        direct: false,
        opened: Vec::new(),
    };
    let d = disks(t.path(), 1);
    let p = WriterPlacement::Thread;
    assert!(ScanSink::new(&cfg("a.b", d.clone(), 1 << 20), &p, 1 << 20, false).is_err());
    assert!(ScanSink::new(&cfg("a", Vec::new(), 1 << 20), &p, 1 << 20, false).is_err());
    assert!(ScanSink::new(&cfg("a", d.clone(), 4 << 30), &p, 1 << 20, false).is_err());
    let file = t.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let e = ScanSink::new(&cfg("a", vec![file], 1 << 20), &p, 1 << 20, false)
        .err()
        .unwrap();
    assert!(e.to_string().contains("no disk can be written"), "{e}");
}

/// A FlexBuff names its recordings by the Field System's label: all frames in `LABEL`, or with
/// data streams defined one recording `LABEL_ds<stream>` each (`datastream = add :
/// ds{thread} : *` gives `LABEL_dsds0`, `LABEL_dsds1`); frames no stream takes are counted.
#[test]
fn a_label_names_the_recording_as_a_flexbuff_does() {
    use scanfmt::datastream::{DataStreams, LabelNames};
    let label = |streams| {
        RecordingNames::Label(LabelNames::new(
            &scanfmt::name::ScanName::parse("r41066_ef_no0001").unwrap(),
            streams,
        ))
    };
    let (_t, d, sent, out) = record_named(Layout::Vbs, 400, false, label(DataStreams::default()));
    let r = out.recording.unwrap();
    assert_eq!(r.scans.len(), 1);
    assert_eq!((r.scans[0].scan.as_str(), r.scans[0].frames), ("r41066_ef_no0001", 400));
    assert!(read_scan(Layout::Vbs, "r41066_ef_no0001", &d) == sent);

    let mut per_thread = DataStreams::default();
    per_thread.add("ds{thread}", &["*".to_string()]).unwrap();
    let (_t, d, sent, out) = record_named(Layout::Vbs, 400, false, label(per_thread));
    let r = out.recording.unwrap();
    let names: Vec<&str> = r.scans.iter().map(|s| s.scan.as_str()).collect();
    assert_eq!(names, ["r41066_ef_no0001_dsds0", "r41066_ef_no0001_dsds1"]);
    let mut per: Vec<Vec<u8>> = Vec::new();
    for t in 0..2usize {
        let expect: Vec<u8> = sent.chunks(FRAME).skip(t).step_by(2).flatten().copied().collect();
        assert!(read_scan(Layout::Vbs, &format!("r41066_ef_no0001_dsds{t}"), &d) == expect);
        per.push(expect);
    }
    // The label reads as jive5ab's scan_set reads it: its data streams merged, block by block
    // (block n of dsds0, then of dsds1).
    let merged = recording::Scan::open_with_streams(Layout::Vbs, "r41066_ef_no0001", &d).unwrap();
    let mut all = Vec::new();
    recording::ScanReader::new(Arc::new(merged))
        .read_to_end(&mut all)
        .unwrap();
    let block = 10 * FRAME;
    let mut expect = Vec::new();
    for (a, b) in per[0].chunks(block).zip(per[1].chunks(block)) {
        expect.extend_from_slice(a);
        expect.extend_from_slice(b);
    }
    assert_eq!(all.len(), sent.len());
    assert!(all == expect, "merged in jive5ab's order");

    let mut only0 = DataStreams::default();
    only0.add("zero", &["Ef.0".to_string()]).unwrap();
    let (_t, _d, _sent, out) = record_named(Layout::Mk6, 400, false, label(only0));
    assert_eq!(out.not_written, 200);
    let r = out.recording.unwrap();
    assert_eq!((r.frames_unmatched, r.scans.len()), (200, 1));
    assert_eq!(
        (r.scans[0].scan.as_str(), r.scans[0].frames),
        ("r41066_ef_no0001_dszero", 200)
    );
}

//! `evlbi model …` from the command line: the issue's worked examples, JSON, and usage errors.

mod common;

use std::process::Output;

use common::{assert_usage_error, bin};
use serde_json::Value;

fn evlbi(args: &[&str]) -> Output {
    bin().args(args).output().expect("run evlbi")
}

fn json(args: &[&str]) -> Value {
    let o = evlbi(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

#[test]
fn wire_example_of_the_issue() {
    let w = json(&["model", "wire", "--rate", "4.096G", "--payload", "8192", "--json"]);
    assert!((w["spacing_ns"].as_f64().unwrap() - 16000.0).abs() < 1e-6);
    assert!((w["wire_rate_bps"].as_f64().unwrap() - 4.129e9).abs() < 1.0); // 62500 x 8258 B x 8
    let h = json(&[
        "model",
        "wire",
        "--rate",
        "4.096G",
        "--payload",
        "8192",
        "--app-header",
        "16",
        "--json",
    ]);
    assert_eq!(h["wire_bytes_per_packet"], 8274);
    assert!((h["wire_rate_bps"].as_f64().unwrap() - 4.137e9).abs() < 1e6);
    let text = String::from_utf8_lossy(&evlbi(&["model", "wire", "--rate", "4.096G", "--payload", "8192"]).stdout)
        .into_owned();
    assert!(
        text.contains("one every 16.000 us") && text.contains("4.129 Gb/s"),
        "{text}"
    );
}

#[test]
fn tcp_bound_and_tolerable_loss() {
    let t = json(&[
        "model", "tcp", "--rtt", "100ms", "--loss", "0.01%", "--target", "1G", "--json",
    ]);
    assert!((t["bound_bps"].as_f64().unwrap() - 14.187e6).abs() < 1e4, "{t}");
    assert!(
        (t["max_loss_for_target"].as_f64().unwrap() - 2.013e-8).abs() < 1e-10,
        "{t}"
    );
    assert_eq!(t["bdp_bytes"], 12.5e6);
}

#[test]
fn vlbi_loss_per_station_baseline_and_frame_rejection() {
    let v = json(&[
        "model",
        "vlbi-loss",
        "--loss",
        "Ef=1%,Wb=0",
        "--burst",
        "1,16",
        "--frames",
        "200000",
        "--json",
    ]);
    assert_eq!(v["array"]["baselines"][0]["a"], "Ef");
    assert!((v["array"]["baselines"][0]["sn_factor"].as_f64().unwrap() - 0.99f64.sqrt()).abs() < 1e-12);
    let fr = v["frame_rejection"].as_array().unwrap();
    assert_eq!(fr.len(), 4);
    let (poisson, bursty) = (&fr[0], &fr[1]);
    assert_eq!(poisson["station"], "Ef");
    // Frame rejection makes 1 % Poisson loss cost well over 1 % of the data.
    assert!(poisson["effective_loss"].as_f64().unwrap() > 0.015, "{poisson}");
    assert!(
        bursty["mean_rejected_run_frames"].as_f64().unwrap()
            > 4.0 * poisson["mean_rejected_run_frames"].as_f64().unwrap()
    );
    // Wb loses nothing.
    assert_eq!(fr[2]["effective_loss"], 0.0);
}

#[test]
fn model_usage_errors_exit_2() {
    for args in [
        &["model", "wire", "--rate", "4G", "--payload", "0"][..],
        &["model", "tcp", "--rtt", "100ms"][..],
        &["model", "tcp", "--rtt", "soon", "--loss", "1%"][..],
        &["model", "vlbi-loss", "--loss", "Ef"][..],
        &["model", "vlbi-loss", "--loss", "Ef=150%"][..],
        &["model", "vlbi-loss", "--loss", "Ef=1%", "--burst", "0.5"][..],
    ] {
        assert_usage_error(args);
    }
}

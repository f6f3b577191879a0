//! `evlbi model …`: the operator's back-of-the-envelope models, as tables or JSON.

use anyhow::Result;
use clap::{Args, Subcommand};
use linkemu::{LossModel, LossProcess};
use models::{tcp, vlbi, wire};
use serde::Serialize;

use crate::flags::JsonOutput;
use crate::units::{parse_fraction, parse_positive_duration, parse_rate, si_fmt};
use crate::{usage, usage_of};

#[derive(Subcommand)]
pub enum ModelCommand {
    /// What packet loss does to VLBI signal-to-noise: √(1−f) per station, per baseline and for
    /// the array; and, for a correlator that rejects whole frames (seed 000 §4.2), how Poisson
    /// and bursty loss of the same mean differ.
    #[command(after_help = "Examples:\n  \
        evlbi model vlbi-loss --loss Ef=1%,Wb=0.1%,Jb=0\n  \
        evlbi model vlbi-loss --loss Ef=1% --packet 1472 --frame 2500 --reject 10% --burst 1,4,16\n  \
        evlbi model vlbi-loss --loss Wb=2% --burst 1,8 --json")]
    VlbiLoss(VlbiLossArgs),
    /// The Mathis bound on TCP throughput, BW ≤ (MSS/RTT)·√(3/2)/√p, and the loss a target
    /// rate can tolerate.
    #[command(after_help = "Examples:\n  \
        evlbi model tcp --rtt 100ms --loss 0.01%\n  \
        evlbi model tcp --rtt 150ms --target 1G          # what loss 1 Gb/s tolerates at 150 ms\n  \
        evlbi model tcp --mss 8948 --rtt 20ms --loss 1e-6 --target 4.096G --json")]
    Tcp(TcpArgs),
    /// Wire rate and packet spacing for a data rate: payload + application header + 66 bytes
    /// of UDP/IP/Ethernet overhead per packet.
    #[command(after_help = "Examples:\n  \
        evlbi model wire --rate 4.096G --payload 8192                  # 16 us spacing, 4.129 Gb/s on the wire\n  \
        evlbi model wire --rate 4.096G --payload 8192 --app-header 16  # seed 004: 8274 B every 16 us\n  \
        evlbi model wire --rate 512M --payload 8000 --app-header 8     # VDIF over udps/VTP")]
    Wire(WireArgs),
}

#[derive(Args)]
pub struct VlbiLossArgs {
    /// Loss per station, STATION=FRACTION (1% or 0.01), comma separated.
    #[arg(long, value_delimiter = ',', required = true)]
    loss: Vec<String>,
    /// VLBI data bytes per packet, for the frame-rejection model.
    #[arg(long, default_value_t = 1472)]
    packet: u32,
    /// Correlator frame size, bytes (2500 at the JIVE Mk4 correlator).
    #[arg(long, default_value_t = 2500)]
    frame: u32,
    /// A frame with more bad bytes than this fraction is rejected whole.
    #[arg(long, default_value = "10%", value_parser = parse_fraction)]
    reject: f64,
    /// Mean loss-burst lengths to compare, in packets (1 = Poisson), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    burst: Vec<f64>,
    /// Frames simulated per case.
    #[arg(long, default_value_t = 1_000_000)]
    frames: u64,
    /// Seed of the loss simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: JsonOutput,
}

#[derive(Args)]
pub struct TcpArgs {
    /// Maximum segment size, bytes (1448 for MTU 1500 with TCP timestamps, 8948 for MTU 9000).
    #[arg(long, default_value_t = 1448)]
    mss: u32,
    /// Round-trip time: 100ms.
    #[arg(long, value_parser = parse_positive_duration)]
    rtt: std::time::Duration,
    /// Packet loss probability: 0.01% or 1e-4.
    #[arg(long, value_parser = parse_fraction)]
    loss: Option<f64>,
    /// A rate to reach: 1G.
    #[arg(long, value_parser = parse_rate)]
    target: Option<f64>,
    #[command(flatten)]
    output: JsonOutput,
}

#[derive(Args)]
pub struct WireArgs {
    /// User data rate: 4.096G.
    #[arg(long, value_parser = parse_rate)]
    rate: f64,
    /// Data bytes per packet.
    #[arg(long)]
    payload: u32,
    /// Application header bytes per packet (8 for udps/VTP, 16 in seed 004).
    #[arg(long, default_value_t = 0)]
    app_header: u32,
    /// Network overhead per packet on the wire, bytes.
    #[arg(long, default_value_t = wire::ETHERNET_UDP_OVERHEAD)]
    overhead: u32,
    #[command(flatten)]
    output: JsonOutput,
}

pub fn run(cmd: ModelCommand) -> Result<()> {
    match cmd {
        ModelCommand::VlbiLoss(a) => vlbi_loss(a),
        ModelCommand::Tcp(a) => tcp_model(a),
        ModelCommand::Wire(a) => wire_model(a),
    }
}

/// Result of `evlbi model vlbi-loss`.
#[derive(Serialize)]
struct VlbiLossReport {
    /// Independent-loss factors per station, baseline and array.
    array: vlbi::ArrayLoss,
    /// Frame-rejection simulation per station loss and burst length.
    frame_rejection: Vec<StationFrameRejection>,
}

#[derive(Serialize)]
struct StationFrameRejection {
    station: String,
    #[serde(flatten)]
    result: vlbi::FrameRejectionResult,
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

fn vlbi_loss(a: VlbiLossArgs) -> Result<()> {
    let mut stations = Vec::new();
    for s in &a.loss {
        let (name, f) = s
            .split_once('=')
            .ok_or_else(|| usage(format!("--loss {s:?}: expected STATION=FRACTION, e.g. Ef=1%")))?;
        let f = parse_fraction(f).map_err(|e| usage(format!("--loss {s:?}: {e}")))?;
        stations.push((name.to_string(), f));
    }
    if a.burst.iter().any(|b| !(b.is_finite() && *b >= 1.0)) {
        return Err(usage("--burst: mean burst lengths are >= 1 packet"));
    }
    let array = vlbi::array(&stations).map_err(usage_of)?;
    let mut frame_rejection = Vec::new();
    for (name, f) in &stations {
        for &burst in &a.burst {
            let input = vlbi::FrameRejectionInput {
                loss: *f,
                burst,
                packet_bytes: a.packet,
                frame_bytes: a.frame,
                reject_fraction: a.reject,
                frames: a.frames,
                seed: a.seed,
            };
            let model = LossModel::from_mean_loss_and_burst(*f, burst).map_err(usage_of)?;
            let mut process = LossProcess::new(model, a.seed);
            let result = vlbi::frame_rejection(input, || process.lose()).map_err(usage_of)?;
            frame_rejection.push(StationFrameRejection {
                station: name.clone(),
                result,
            });
        }
    }
    let report = VlbiLossReport { array, frame_rejection };
    if !a.output.emit(&report)? {
        return Ok(());
    }
    println!("independent loss: S/N factor sqrt(1-f)");
    for s in &report.array.stations {
        println!(
            "  station  {:<6} loss {:>8}  S/N x {:.4}",
            s.station,
            pct(s.loss),
            s.sn_factor
        );
    }
    for b in &report.array.baselines {
        println!(
            "  baseline {:<6} pair loss {:>8}  S/N x {:.4}",
            format!("{}-{}", b.a, b.b),
            pct(b.pair_loss),
            b.sn_factor
        );
    }
    println!("  array    S/N x {:.4}", report.array.array_sn_factor);
    println!(
        "\nframe rejection: {}-byte packets, {}-byte frames rejected above {} bad bytes, {} frames each",
        a.packet,
        a.frame,
        pct(a.reject),
        a.frames
    );
    println!("  station  burst  packet loss  frames hit  rejected  data lost  S/N      (no rejection)  mean run  longest  sync losses/1e6");
    for r in &report.frame_rejection {
        let x = &r.result;
        println!(
            "  {:<7} {:>6.1}  {:>11}  {:>10}  {:>8}  {:>9}  {:.4}   ({:.4})        {:>8.2}  {:>7}  {:>15.0}",
            r.station,
            x.input.burst,
            pct(x.packet_loss),
            pct(x.frames_hit),
            pct(x.frames_rejected),
            pct(x.effective_loss),
            x.sn_factor,
            x.sn_factor_without_rejection,
            x.mean_rejected_run_frames,
            x.longest_rejected_run_frames,
            x.sync_losses_per_million_frames
        );
    }
    Ok(())
}

fn tcp_model(a: TcpArgs) -> Result<()> {
    if a.loss.is_none() && a.target.is_none() {
        return Err(usage(
            "give --loss (for the bound) and/or --target (for the loss a rate tolerates)",
        ));
    }
    let r = tcp::evaluate(tcp::TcpInput {
        mss_bytes: a.mss,
        rtt_s: a.rtt.as_secs_f64(),
        loss: a.loss,
        target_bps: a.target,
    })
    .map_err(usage_of)?;
    if !a.output.emit(&r)? {
        return Ok(());
    }
    println!(
        "Mathis: BW <= (MSS/RTT) * sqrt(3/2) / sqrt(p), MSS {} B, RTT {:.3} ms",
        a.mss,
        a.rtt.as_secs_f64() * 1e3
    );
    if let (Some(p), Some(b)) = (a.loss, r.bound_bps) {
        println!("  loss {:<10} -> at most {}b/s", format!("{p:e}"), si_fmt(b));
    }
    if let (Some(t), Some(p), Some(bdp)) = (a.target, r.max_loss_for_target, r.bdp_bytes) {
        println!(
            "  target {}b/s -> needs loss <= {p:.3e} (one loss per {:.0} packets) and a window >= {}B",
            si_fmt(t),
            1.0 / p,
            si_fmt(bdp)
        );
    }
    Ok(())
}

fn wire_model(a: WireArgs) -> Result<()> {
    let r = wire::evaluate(wire::WireInput {
        data_rate_bps: a.rate,
        payload_bytes: a.payload,
        app_header_bytes: a.app_header,
        overhead_bytes: a.overhead,
    })
    .map_err(usage_of)?;
    if !a.output.emit(&r)? {
        return Ok(());
    }
    println!(
        "{}b/s of data in {}-byte payloads{}: {:.3} kpackets/s, one every {:.3} us",
        si_fmt(a.rate),
        a.payload,
        if a.app_header > 0 {
            format!(" + {}-byte header", a.app_header)
        } else {
            String::new()
        },
        r.packets_per_second / 1e3,
        r.spacing_ns / 1e3
    );
    println!(
        "on the wire: {} bytes per packet ({} UDP payload + {} overhead), {}b/s, efficiency {:.2}%",
        r.wire_bytes_per_packet,
        r.udp_payload_bytes,
        a.overhead,
        si_fmt(r.wire_rate_bps),
        r.efficiency * 100.0
    );
    Ok(())
}

//! The three back-of-the-envelope models an e-VLBI operator reaches for.
//!
//! - [`wire`]: what a data rate costs on the wire, and at what packet spacing.
//! - [`tcp`]: the Mathis et al. bound on TCP throughput under random loss.
//! - [`vlbi`]: what packet loss does to VLBI signal-to-noise, per station, per baseline and for
//!   a correlator that rejects whole frames (seed 000 §4.2).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A model input outside its domain.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    /// A quantity that must be positive and finite was not.
    #[error("{0} must be a positive, finite number")]
    NotPositive(&'static str),
    /// A fraction outside [0, 1).
    #[error("{name} = {value} must lie in [0, 1)")]
    Fraction {
        /// The quantity.
        name: &'static str,
        /// Its value.
        value: f64,
    },
}

fn positive(name: &'static str, v: f64) -> Result<f64, ModelError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ModelError::NotPositive(name))
    }
}

fn fraction(name: &'static str, value: f64) -> Result<f64, ModelError> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ModelError::Fraction { name, value })
    }
}

pub mod wire {
    //! Wire rate and packet spacing for a user data rate.
    //!
    //! Each datagram carries `payload` bytes of data plus an optional application header
    //! (e.g. the 16-byte header of seed 004 §2, or the 8-byte VTP sequence number) and costs
    //! `overhead` more bytes on an Ethernet wire: UDP 8 + IPv4 20 + Ethernet 14 + FCS 4 +
    //! preamble 8 + inter-frame gap 12 = 66 bytes.

    use super::*;

    /// Ethernet + IPv4 + UDP overhead per datagram on the wire, bytes: the one definition every
    /// crate uses (probe rates, transfer wire bytes, this model).
    pub const ETHERNET_UDP_OVERHEAD: u32 = 66;

    /// Inputs of the wire model.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct WireInput {
        /// User data rate, bits per second.
        pub data_rate_bps: f64,
        /// Data bytes per datagram.
        pub payload_bytes: u32,
        /// Application header bytes per datagram (sequence numbers, timestamps).
        pub app_header_bytes: u32,
        /// Network overhead bytes per datagram on the wire (66 for Ethernet/IPv4/UDP).
        pub overhead_bytes: u32,
    }

    /// Result of the wire model.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct WireResult {
        /// The inputs.
        pub input: WireInput,
        /// Datagrams per second.
        pub packets_per_second: f64,
        /// Spacing between datagram starts, nanoseconds.
        pub spacing_ns: f64,
        /// UDP payload per datagram (data + application header), bytes.
        pub udp_payload_bytes: u32,
        /// Bytes each datagram occupies on the wire.
        pub wire_bytes_per_packet: u32,
        /// Rate on the wire, bits per second.
        pub wire_rate_bps: f64,
        /// Data rate / wire rate.
        pub efficiency: f64,
    }

    /// Evaluate the wire model.
    pub fn evaluate(input: WireInput) -> Result<WireResult, ModelError> {
        positive("data rate", input.data_rate_bps)?;
        positive("payload", f64::from(input.payload_bytes))?;
        let pps = input.data_rate_bps / (8.0 * f64::from(input.payload_bytes));
        let udp_payload = input.payload_bytes + input.app_header_bytes;
        let wire_bytes = udp_payload + input.overhead_bytes;
        let wire_rate = pps * 8.0 * f64::from(wire_bytes);
        Ok(WireResult {
            input,
            packets_per_second: pps,
            spacing_ns: 1e9 / pps,
            udp_payload_bytes: udp_payload,
            wire_bytes_per_packet: wire_bytes,
            wire_rate_bps: wire_rate,
            efficiency: input.data_rate_bps / wire_rate,
        })
    }
}

pub mod tcp {
    //! The Mathis bound: steady-state TCP Reno/CUBIC-like throughput under random loss p,
    //! BW ≤ (MSS / RTT) · C / √p with C = √(3/2) (M. Mathis, J. Semke, J. Mahdavi, T. Ott,
    //! "The macroscopic behavior of the TCP congestion avoidance algorithm", CCR 27(3), 1997).

    use super::*;

    /// √(3/2), the constant for periodic loss with delayed ACKs off.
    pub const MATHIS_C: f64 = 1.224_744_871_391_589;

    /// Inputs of the TCP model: give `loss` for the bound, `target_bps` for the loss it needs.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct TcpInput {
        /// Maximum segment size, bytes (1448 for a 1500-byte MTU with timestamps).
        pub mss_bytes: u32,
        /// Round-trip time, seconds.
        pub rtt_s: f64,
        /// Packet loss probability.
        pub loss: Option<f64>,
        /// A throughput to reach, bits per second.
        pub target_bps: Option<f64>,
    }

    /// Result of the TCP model.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct TcpResult {
        /// The inputs.
        pub input: TcpInput,
        /// Mathis bound at `loss`, bits per second.
        pub bound_bps: Option<f64>,
        /// Largest loss probability at which `target_bps` is still reachable.
        pub max_loss_for_target: Option<f64>,
        /// Bandwidth-delay product at `target_bps`, bytes (the window TCP needs).
        pub bdp_bytes: Option<f64>,
    }

    /// Mathis bound in bits per second.
    pub fn bound_bps(mss_bytes: u32, rtt_s: f64, loss: f64) -> f64 {
        8.0 * f64::from(mss_bytes) / rtt_s * MATHIS_C / loss.sqrt()
    }

    /// Evaluate the TCP model.
    pub fn evaluate(input: TcpInput) -> Result<TcpResult, ModelError> {
        positive("MSS", f64::from(input.mss_bytes))?;
        positive("RTT", input.rtt_s)?;
        let bound = match input.loss {
            Some(p) => Some(bound_bps(input.mss_bytes, input.rtt_s, positive("loss", p)?)),
            None => None,
        };
        let (max_loss, bdp) = match input.target_bps {
            Some(t) => {
                let t = positive("target rate", t)?;
                let x = 8.0 * f64::from(input.mss_bytes) * MATHIS_C / (input.rtt_s * t);
                (Some(x * x), Some(t * input.rtt_s / 8.0))
            }
            None => (None, None),
        };
        Ok(TcpResult {
            input,
            bound_bps: bound,
            max_loss_for_target: max_loss,
            bdp_bytes: bdp,
        })
    }
}

pub mod vlbi {
    //! Packet loss and VLBI signal-to-noise.
    //!
    //! A lost fraction f of one station's data lowers every baseline's S/N by √(1−f) (seed 000
    //! §4.2); a baseline needs both stations' samples, so with independent losses its factor is
    //! √((1−f₁)(1−f₂)). The tape-era correlator of seed 000 §4.2 checks each VLBI frame (2500
    //! bytes at JIVE) and rejects the whole frame when more than 10 % of its bytes are bad, so a
    //! packet loss that clips a frame can cost far more than the packet: [`frame_rejection`]
    //! measures that by simulation, for Poisson (Bernoulli) and bursty (Gilbert–Elliott) loss
    //! of the same mean. (At 1 % Poisson loss of 1472-byte packets, 2.4 % of the data is
    //! rejected; bursts of the same mean loss reject less data but in long runs of frames.)

    use super::*;

    /// S/N factor of one station: √(1−f).
    pub fn sn_factor(loss: f64) -> f64 {
        (1.0 - loss.clamp(0.0, 1.0)).sqrt()
    }

    /// A station and its loss.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct StationLoss {
        /// Station code.
        pub station: String,
        /// Fraction of its data lost.
        pub loss: f64,
        /// √(1−f).
        pub sn_factor: f64,
    }

    /// One baseline.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Baseline {
        /// First station.
        pub a: String,
        /// Second station.
        pub b: String,
        /// Fraction of sample pairs lost (independent losses): 1 − (1−f₁)(1−f₂).
        pub pair_loss: f64,
        /// S/N factor √((1−f₁)(1−f₂)).
        pub sn_factor: f64,
    }

    /// Per station, per baseline and array factors.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ArrayLoss {
        /// Per station.
        pub stations: Vec<StationLoss>,
        /// Every pair.
        pub baselines: Vec<Baseline>,
        /// S/N factor of an image made from all baselines with equal weights: the RMS of the
        /// baseline factors (sensitivity adds in quadrature over baselines).
        pub array_sn_factor: f64,
    }

    /// Station, baseline and array factors for independent losses.
    pub fn array(stations: &[(String, f64)]) -> Result<ArrayLoss, ModelError> {
        let st = stations
            .iter()
            .map(|(s, f)| {
                Ok(StationLoss {
                    station: s.clone(),
                    loss: fraction("loss", *f)?,
                    sn_factor: sn_factor(*f),
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let mut baselines = Vec::new();
        for i in 0..st.len() {
            for j in i + 1..st.len() {
                let keep = (1.0 - st[i].loss) * (1.0 - st[j].loss);
                baselines.push(Baseline {
                    a: st[i].station.clone(),
                    b: st[j].station.clone(),
                    pair_loss: 1.0 - keep,
                    sn_factor: keep.sqrt(),
                });
            }
        }
        let array_sn_factor = if baselines.is_empty() {
            st.first().map_or(1.0, |s| s.sn_factor)
        } else {
            (baselines.iter().map(|b| b.sn_factor * b.sn_factor).sum::<f64>() / baselines.len() as f64).sqrt()
        };
        Ok(ArrayLoss {
            stations: st,
            baselines,
            array_sn_factor,
        })
    }

    /// Inputs of the frame-rejection model.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct FrameRejectionInput {
        /// Mean packet loss probability.
        pub loss: f64,
        /// Mean burst length in packets (1 = Poisson/Bernoulli).
        pub burst: f64,
        /// VLBI data bytes per packet.
        pub packet_bytes: u32,
        /// Correlator frame, bytes (2500 at the JIVE Mk4 correlator).
        pub frame_bytes: u32,
        /// A frame with more than this fraction of bad bytes is rejected whole (0.1 at JIVE).
        pub reject_fraction: f64,
        /// Frames simulated.
        pub frames: u64,
        /// RNG seed.
        pub seed: u64,
    }

    /// Result of the frame-rejection model.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct FrameRejectionResult {
        /// The inputs.
        pub input: FrameRejectionInput,
        /// Packet loss seen in the simulation.
        pub packet_loss: f64,
        /// Frames that lost at least one byte.
        pub frames_hit: f64,
        /// Frames rejected whole.
        pub frames_rejected: f64,
        /// Fraction of data unusable after rejection (lost bytes + rejected frames).
        pub effective_loss: f64,
        /// √(1 − effective loss).
        pub sn_factor: f64,
        /// √(1 − packet loss): what the loss would cost without frame rejection.
        pub sn_factor_without_rejection: f64,
        /// Runs of two or more rejected frames, per million frames: where a correlator that
        /// flywheels over one bad frame loses synchronisation.
        pub sync_losses_per_million_frames: f64,
        /// Mean length of a run of consecutive rejected frames.
        pub mean_rejected_run_frames: f64,
        /// Longest run of consecutive rejected frames.
        pub longest_rejected_run_frames: u64,
    }

    /// Simulate `frames` correlator frames carried in packets, each lost when `lose()` says so.
    ///
    /// `lose` is the loss process the input describes (mean `loss`, mean `burst`, `seed`): the
    /// caller builds it (`evlbi model` uses linkemu's Gilbert–Elliott process), so this model
    /// stays a pure function of the packets' fate and needs no link emulator.
    pub fn frame_rejection(
        input: FrameRejectionInput,
        mut lose: impl FnMut() -> bool,
    ) -> Result<FrameRejectionResult, ModelError> {
        fraction("loss", input.loss)?;
        fraction("reject fraction", input.reject_fraction)?;
        positive("packet bytes", f64::from(input.packet_bytes))?;
        positive("frame bytes", f64::from(input.frame_bytes))?;
        positive("frames", input.frames as f64)?;
        let (p, n) = (u64::from(input.packet_bytes), u64::from(input.frame_bytes));
        let (mut packets, mut lost_packets) = (0u64, 0u64);
        let (mut hit, mut rejected, mut unusable) = (0u64, 0u64, 0u64);
        let (mut run, mut sync_losses, mut runs, mut longest) = (0u64, 0u64, 0u64, 0u64);
        // Walk the byte stream packet by packet, closing frames as their last byte passes.
        let mut packet_end = 0u64;
        let mut packet_lost = false;
        for f in 0..input.frames {
            let (start, end) = (f * n, (f + 1) * n);
            let mut bad = 0u64;
            let mut pos = start;
            while pos < end {
                if pos >= packet_end {
                    packet_lost = lose();
                    packets += 1;
                    lost_packets += u64::from(packet_lost);
                    packet_end += p;
                }
                let upto = packet_end.min(end);
                if packet_lost {
                    bad += upto - pos;
                }
                pos = upto;
            }
            hit += u64::from(bad > 0);
            if bad as f64 > input.reject_fraction * n as f64 {
                rejected += 1;
                unusable += n;
                run += 1;
            } else {
                unusable += bad;
                if run > 0 {
                    runs += 1;
                    sync_losses += u64::from(run >= 2);
                    longest = longest.max(run);
                }
                run = 0;
            }
        }
        if run > 0 {
            runs += 1;
            sync_losses += u64::from(run >= 2);
            longest = longest.max(run);
        }
        let frames = input.frames as f64;
        let effective = unusable as f64 / (frames * n as f64);
        let packet_loss = lost_packets as f64 / packets.max(1) as f64;
        Ok(FrameRejectionResult {
            input,
            packet_loss,
            frames_hit: hit as f64 / frames,
            frames_rejected: rejected as f64 / frames,
            effective_loss: effective,
            sn_factor: sn_factor(effective),
            sn_factor_without_rejection: sn_factor(packet_loss),
            sync_losses_per_million_frames: sync_losses as f64 * 1e6 / frames,
            mean_rejected_run_frames: if runs == 0 { 0.0 } else { rejected as f64 / runs as f64 },
            longest_rejected_run_frames: longest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_matches_the_issue_example() {
        // 4.096 Gb/s in 8192-byte payloads: one packet per 16 µs, 4.129 Gb/s on the wire;
        // with seed 004's 16-byte header, 8274 bytes every 16 µs, 4.137 Gb/s.
        let w = wire::evaluate(wire::WireInput {
            data_rate_bps: 4.096e9,
            payload_bytes: 8192,
            app_header_bytes: 0,
            overhead_bytes: wire::ETHERNET_UDP_OVERHEAD,
        })
        .unwrap();
        assert!((w.spacing_ns - 16_000.0).abs() < 1e-6);
        assert!((w.wire_rate_bps / 1e9 - 4.129).abs() < 5e-4, "{}", w.wire_rate_bps);
        let h = wire::evaluate(wire::WireInput {
            app_header_bytes: 16,
            ..w.input
        })
        .unwrap();
        assert_eq!(h.wire_bytes_per_packet, 8274);
        assert!((h.wire_rate_bps / 1e9 - 4.137).abs() < 5e-4, "{}", h.wire_rate_bps);
        assert!(wire::evaluate(wire::WireInput {
            payload_bytes: 0,
            ..w.input
        })
        .is_err());
    }

    #[test]
    fn mathis_bound_and_its_inverse() {
        // 1448-byte MSS, 100 ms RTT, 1e-4 loss: 8*1448/0.1*1.2247/0.01 = 14.19 Mb/s.
        let b = tcp::bound_bps(1448, 0.1, 1e-4);
        assert!((b / 1e6 - 14.19).abs() < 0.01, "{b}");
        let r = tcp::evaluate(tcp::TcpInput {
            mss_bytes: 1448,
            rtt_s: 0.1,
            loss: None,
            target_bps: Some(b),
        })
        .unwrap();
        assert!((r.max_loss_for_target.unwrap() - 1e-4).abs() < 1e-12);
        assert!((r.bdp_bytes.unwrap() - b * 0.1 / 8.0).abs() < 1e-6);
    }

    #[test]
    fn baselines_need_both_stations() {
        let a = vlbi::array(&[("Ef".into(), 0.01), ("Wb".into(), 0.04), ("Jb".into(), 0.0)]).unwrap();
        assert_eq!(a.baselines.len(), 3);
        let efwb = &a.baselines[0];
        assert!((efwb.sn_factor - (0.99f64 * 0.96).sqrt()).abs() < 1e-12);
        assert!((a.stations[1].sn_factor - 0.96f64.sqrt()).abs() < 1e-12);
        assert!(a.array_sn_factor < 1.0 && a.array_sn_factor > efwb.sn_factor);
        assert!(vlbi::array(&[("Ef".into(), 1.5)]).is_err());
    }

    fn fr(loss: f64, burst: f64) -> vlbi::FrameRejectionResult {
        let input = vlbi::FrameRejectionInput {
            loss,
            burst,
            packet_bytes: 1472,
            frame_bytes: 2500,
            reject_fraction: 0.1,
            frames: 400_000,
            seed: 7,
        };
        let model = linkemu::LossModel::from_mean_loss_and_burst(loss, burst).unwrap();
        let mut process = linkemu::LossProcess::new(model, input.seed);
        vlbi::frame_rejection(input, || process.lose()).unwrap()
    }

    #[test]
    fn no_loss_costs_nothing() {
        let r = fr(0.0, 1.0);
        assert_eq!(
            (r.packet_loss, r.frames_rejected, r.effective_loss, r.sn_factor),
            (0.0, 0.0, 0.0, 1.0)
        );
    }

    #[test]
    fn frame_rejection_amplifies_poisson_loss_and_bursts_differ() {
        let poisson = fr(0.01, 1.0);
        let bursty = fr(0.01, 16.0);
        // Both see ~1 % packet loss.
        assert!((poisson.packet_loss - 0.01).abs() < 0.001, "{poisson:?}");
        assert!((bursty.packet_loss - 0.01).abs() < 0.002, "{bursty:?}");
        // A 1472-byte packet spans parts of two or three 2500-byte frames, and usually more
        // than 10 % of each: rejection costs more data than the packets themselves.
        assert!(poisson.effective_loss > 1.5 * poisson.packet_loss, "{poisson:?}");
        assert!(poisson.sn_factor < poisson.sn_factor_without_rejection);
        // At equal mean loss, bursts of 16 packets hit far fewer frames (lost packets share
        // frames), so less data is thrown away — but each burst wipes out a long run of
        // frames, where Poisson loss costs one or two at a time.
        assert!(
            bursty.frames_hit < 0.5 * poisson.frames_hit,
            "{bursty:?} vs {poisson:?}"
        );
        assert!(bursty.effective_loss < poisson.effective_loss);
        assert!(poisson.mean_rejected_run_frames < 2.5, "{poisson:?}");
        assert!(
            bursty.mean_rejected_run_frames > 4.0 * poisson.mean_rejected_run_frames,
            "{bursty:?}"
        );
        assert!(bursty.longest_rejected_run_frames > poisson.longest_rejected_run_frames);
    }
}

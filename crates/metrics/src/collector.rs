//! The hub's latest counts as a `prometheus-client` collector: on each scrape the samples of
//! every source are gathered, merged where a label set repeats (a station that left and came
//! back is one series), and encoded as constant counters and gauges.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::hub::Hub;
use crate::series::{self, Kind, Metric, Sample, Value};

/// Encodes a hub's counts on each scrape.
#[derive(Debug)]
struct HubCollector(Arc<Hub>);

/// A registry that reads `hub` on each scrape.
pub(crate) fn registry(hub: Arc<Hub>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(HubCollector(hub)));
    r
}

/// Every sample of `hub` now, build info first, repeated label sets merged (counts added).
pub(crate) fn gather(hub: &Hub) -> Vec<Sample> {
    let (program, version) = hub.program();
    let mut all = vec![Sample {
        metric: &series::BUILD_INFO,
        labels: vec![("program", program.to_string()), ("version", version.to_string())],
        value: Value::Int(1),
    }];
    for (name, labels, status) in hub.labelled_snapshot() {
        series::samples(&name, &labels, &status, &mut all);
    }
    let mut merged: Vec<Sample> = Vec::with_capacity(all.len());
    for s in all {
        match merged
            .iter_mut()
            .find(|m| std::ptr::eq(m.metric, s.metric) && m.labels == s.labels)
        {
            Some(m) => {
                m.value = match (m.value, s.value) {
                    (Value::Int(a), Value::Int(b)) if s.metric.kind == Kind::Counter => Value::Int(a.saturating_add(b)),
                    (_, v) => v,
                }
            }
            None => merged.push(s),
        }
    }
    merged
}

impl Collector for HubCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = gather(&self.0);
        let mut order: Vec<&'static Metric> = Vec::new();
        for s in &samples {
            if !order.iter().any(|m| std::ptr::eq(*m, s.metric)) {
                order.push(s.metric);
            }
        }
        for m in order {
            let kind = match m.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
            };
            let mut family = encoder.encode_descriptor(m.name, m.help, None, kind)?;
            for s in samples.iter().filter(|s| std::ptr::eq(s.metric, m)) {
                let e = family.encode_family(&s.labels)?;
                match (m.kind, s.value) {
                    (Kind::Counter, Value::Int(v)) => ConstCounter::new(v).encode(e)?,
                    (Kind::Counter, Value::Float(v)) => ConstCounter::new(v).encode(e)?,
                    (Kind::Gauge, Value::Int(v)) => ConstGauge::new(v).encode(e)?,
                    (Kind::Gauge, Value::Float(v)) => ConstGauge::new(v).encode(e)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Status;
    use stream::results::RecvStatus;

    #[test]
    fn exposition_is_openmetrics_text_with_merged_series() {
        let hub = Hub::new("stream recv", "0.1.0");
        let mut st: stream::StationSummary = serde_json::from_value(serde_json::json!({
            "station": "Ef", "station_id": 17, "stream": null, "source": "127.0.0.1:1", "frames_per_second": 8000,
            "threads": 1, "frame_len": 8032, "window": {"placed": 100, "written_valid": 90, "written_filled": 5,
            "reordered": 2, "duplicates": 0, "late": 0, "wrong_format": 0, "out_of_range": 0, "jumps": 0,
            "discontinuities": 0, "unfilled_gap_frames": 0}, "seq_first": null, "seq_last": null,
            "retransmits_received": 0, "arq": null, "loss_fraction": 0.05, "snr_factor": 0.97
        }))
        .unwrap();
        let mut again = st.clone();
        again.window.placed = 50;
        st.retired = true;
        let p = hub.source("stream_recv").unwrap();
        p.publish(Status::StreamRecv(RecvStatus {
            stations: vec![st, again],
            rate_bps: 512e6,
            ..RecvStatus::default()
        }));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry(hub)).unwrap();
        assert!(text.contains("# TYPE evlbi_stream_frames counter"), "{text}");
        assert!(
            text.contains("evlbi_stream_frames_total{source=\"stream_recv\",station=\"Ef\"} 150\n"),
            "{text}"
        );
        assert!(text.contains("evlbi_build_info{program=\"stream recv\",version=\"0.1.0\"} 1\n"));
        assert!(text.contains("evlbi_stream_rate_bits_per_second{source=\"stream_recv\"} 512000000.0\n"));
        assert!(text.ends_with("# EOF\n"));
        // One series per label set.
        assert_eq!(text.matches("evlbi_stream_frames_total{").count(), 1);
    }
}

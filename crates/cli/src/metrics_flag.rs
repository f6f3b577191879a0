//! `--metrics ADDR:PORT` of every long-running command: Prometheus metrics at /metrics, the
//! counts as /status.json, a live page at /.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use metrics::{Hub, MetricsServer, Publisher, Status};

/// The flag, flattened into each long-running command.
#[derive(Args, Clone, Debug, Default)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics, the live counts
    /// as /status.json and a page plotting rate and loss per station at / (e.g.
    /// 127.0.0.1:9200). No authentication: bind a loopback or management address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
}

/// A command's metrics: the hub its loop publishes to and, with `--metrics`, the server.
pub struct Metrics {
    hub: Arc<Hub>,
    server: Option<MetricsServer>,
}

impl MetricsArgs {
    /// Start serving (when asked) for `program`; says where on stderr.
    pub fn start(&self, program: &str) -> Result<Metrics> {
        let hub = Hub::new(program, env!("CARGO_PKG_VERSION"));
        let server = match self.metrics {
            None => None,
            Some(addr) => {
                let s = MetricsServer::start(addr, hub.clone())
                    .with_context(|| format!("--metrics {addr}: cannot listen"))?;
                status!(
                    "metrics: http://{0}/metrics (Prometheus), http://{0}/status.json, live page http://{0}/",
                    s.local_addr()
                );
                Some(s)
            }
        };
        Ok(Metrics { hub, server })
    }
}

impl Metrics {
    /// The publisher of source `name`, when metrics are served.
    pub fn publisher(&self, name: &str) -> Option<Publisher> {
        self.server.as_ref()?;
        self.hub.source(name).ok()
    }

    /// The hub (the daemon keeps its transfers' counts there even without a server).
    pub fn hub(&self) -> Arc<Hub> {
        self.hub.clone()
    }

    /// An observer for a stream loop that publishes what `wrap` makes of each count.
    pub fn observer<T: Send + 'static>(
        &self,
        name: &str,
        wrap: fn(T) -> Status,
    ) -> Option<stream_session::Observer<T>> {
        let p = self.publisher(name)?;
        Some(Box::new(move |t: T| {
            p.publish(wrap(t));
        }))
    }
}

/// `probe server`'s counts after `e`.
pub fn probe_tally(s: &mut probe::results::ProbeServerStatus, e: &probe_session::ServerEvent) {
    use probe_session::ServerEvent as E;
    match e {
        E::Ready { .. } => s.trials += 1,
        E::Finished { report, .. } => {
            s.packets += report.unique_packets;
            s.lost += report.lost_packets;
            s.last_loss_fraction = report.loss_fraction;
            s.last_rate_bps = report.user_rate_bps;
        }
        E::TcpFinished { report, .. } => {
            s.tcp_bytes += report.bytes;
            s.last_rate_bps = report.rate_bps;
            if report.partial {
                s.failed += 1;
            }
        }
        E::Failed { .. } => s.failed += 1,
    }
}

/// `evlbi recv`'s counts after `e`.
pub fn transfer_tally(s: &mut transfer::results::TransferRecvStatus, e: &transfer_session::ServerEvent) {
    use transfer_session::ServerEvent as E;
    match e {
        E::Connected(_) => s.sessions += 1,
        E::Rejected(..) => s.refused += 1,
        E::Ended(_, Some(_)) => s.sessions_failed += 1,
        E::Ended(_, None) | E::Directory(_) | E::DataPort(..) => {}
        // A session's datagrams, counted when its one data stream ends.
        E::Stream(_, st) => {
            s.datagrams += st.datagrams_received;
            s.duplicate_datagrams += st.duplicate_datagrams;
            s.rejected_datagrams += st.rejected + st.foreign.other_host + st.foreign.other_port + st.foreign.oversized;
        }
        E::File(f) => {
            if f.verified {
                s.files_verified += 1;
                s.bytes += f.size;
            } else {
                s.files_failed += 1;
            }
            s.bytes_received += f.size.saturating_sub(f.resumed_bytes);
            s.rounds += u64::from(f.rounds);
            s.last_file = Some(f.path.clone());
            s.last_rate_bps =
                (f.elapsed_s > 0.0).then(|| f.size.saturating_sub(f.resumed_bytes) as f64 * 8.0 / f.elapsed_s);
        }
    }
}

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

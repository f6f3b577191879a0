//! What a running evlbi command shows to the people watching it: Prometheus metrics, a JSON
//! status and a live page, served over HTTP (`--metrics ADDR:PORT`).
//!
//! A view, as `report` is of results: the live counts are the core crates' own types
//! (`stream::results::{RecvStatus, RelayStatus, SendStatus}`,
//! `transfer::results::{TransferRecvStatus, TransferSendStatus}`,
//! `probe::results::ProbeServerStatus`, `linkemu::LinkemuStatus`, `vsis::status::ServeStatus`);
//! this crate only holds the latest of each and renders them. A command that needs its own
//! counts (the daemon's `evlbi?`) keeps them itself rather than reading them back from here.
//!
//! The data paths never wait for this crate. Each loop already gathers its counts once per
//! live interval (`stream_session::Observer`); it hands them to a [`Publisher`], which swaps them
//! into a slot with `try_lock` — when an HTTP reader happens to hold the slot (for the few
//! nanoseconds of an `Arc` clone), that interval's counts are skipped and the next ones go in.
//! Readers ([`Hub::snapshot`]) clone the `Arc` of the latest counts and format them on their own
//! thread.
//!
//! | module | what |
//! |---|---|
//! | [`series`] | every [`Status`] as named, labelled samples: the metric names Grafana sees |
//! | [`history`] | rate and loss per station, one point a second, the last ten minutes |
//! | [`status`] | what each command hands over ([`Status`]) |
//! | [`hub`] | where it is handed over ([`Publisher`]) and read ([`Hub`]) |
//! | [`http`] | the server: `/metrics` (OpenMetrics text via `prometheus-client`), `/status.json`, `/` |

mod collector;
pub mod history;
pub mod http;
pub mod hub;
pub mod series;
pub mod status;

pub use http::MetricsServer;
pub use hub::{Hub, HubError, Labels, Publisher, MAX_SOURCES};
pub use status::Status;

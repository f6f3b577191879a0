//! The results of `evlbi stream send` and `stream recv` are defined in the core
//! ([`stream::results`]) and re-exported here, with the conversions from the socket layer's host
//! counters to their plain copies in the results.

pub use stream::results::*;

/// The result copy of host UDP counter differences.
pub(crate) fn udp(c: netio::UdpCounters) -> UdpCounters {
    let netio::UdpCounters {
        in_datagrams,
        no_ports,
        in_errors,
        out_datagrams,
        rcvbuf_errors,
        sndbuf_errors,
        in_csum_errors,
    } = c;
    UdpCounters {
        in_datagrams,
        no_ports,
        in_errors,
        out_datagrams,
        rcvbuf_errors,
        sndbuf_errors,
        in_csum_errors,
    }
}

/// The result copy of a process CPU share.
pub(crate) fn cpu(c: netio::ProcessCpuShare) -> ProcessCpuShare {
    let netio::ProcessCpuShare { user, system } = c;
    ProcessCpuShare { user, system }
}

/// The result copy of a socket buffer grant.
pub(crate) fn grant(g: netio::BufferGrant) -> BufferGrant {
    let netio::BufferGrant {
        requested_rcv,
        granted_rcv,
        requested_snd,
        granted_snd,
        rmem_max,
        wmem_max,
        forced_rcv,
        forced_snd,
        warnings,
    } = g;
    BufferGrant {
        requested_rcv,
        granted_rcv,
        requested_snd,
        granted_snd,
        rmem_max,
        wmem_max,
        forced_rcv,
        forced_snd,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copies serialise exactly as the socket layer's types (the JSON did not change).
    #[test]
    fn copies_keep_the_json_of_the_socket_layer_types() {
        let u = netio::UdpCounters {
            in_datagrams: 1,
            no_ports: 2,
            in_errors: 3,
            out_datagrams: 4,
            rcvbuf_errors: 5,
            sndbuf_errors: 6,
            in_csum_errors: 7,
        };
        let c = netio::ProcessCpuShare {
            user: 1.5,
            system: 2.25,
        };
        let g = netio::BufferGrant {
            requested_rcv: 1,
            granted_rcv: 2,
            requested_snd: 3,
            granted_snd: 4,
            rmem_max: Some(5),
            wmem_max: None,
            forced_rcv: true,
            forced_snd: false,
            warnings: vec!["w".into()],
        };
        let json = |v: serde_json::Result<String>| v.expect("serialises");
        assert_eq!(json(serde_json::to_string(&u)), json(serde_json::to_string(&udp(u))));
        assert_eq!(json(serde_json::to_string(&c)), json(serde_json::to_string(&cpu(c))));
        assert_eq!(
            json(serde_json::to_string(&g)),
            json(serde_json::to_string(&grant(g.clone())))
        );
    }
}

//! TLS on both sides, on rustls with ring (the stack reqwest already brings): the PEM files an
//! operator's PKI hands out ([`pem`]), the client side every outbound connection is built from
//! (targets, the Pushgateway, remote-write, OTLP, the fleet page's Prometheus).

pub(crate) mod client;
pub(crate) mod pem;
pub(crate) mod server;

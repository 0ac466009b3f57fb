//! A sim connection, plain or over TLS (`sim --tls-cert`): what every route reads requests from
//! and writes answers to, whichever it is.

use tokio::net::TcpStream;
use tokio_util::either::Either;

pub(crate) use crate::listener::MaybeTls as Conn;

/// The socket under a connection, for its options (no delay, linger).
pub(crate) fn tcp(conn: &Conn) -> &TcpStream {
    match conn {
        Either::Left(t) => t.get_ref(),
        Either::Right(t) => t.get_ref().0.get_ref(),
    }
}

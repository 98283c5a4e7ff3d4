//! `GET /healthz` for Envoy's active health checks: is the database target
//! reachable and answering? — without a line in its error log.
//!
//! Why the old check was noisy: it opened a TCP (or unix) connection to
//! MySQL and closed it. MariaDB ends every connection in `close_connection()`,
//! which logs "Aborted connection ... (This connection closed normally
//! without authentication)" at `log_warnings` > 1 — the default is 2 — when
//! the connection has no user name yet; once a user name was received it
//! logs only at `log_warnings` > 3. Reading the greeting first, sending a
//! COM_QUIT or an SSL request, half-closing: all logged the same (tried on
//! 10.11). A login with a wrong or unknown user logs "Access denied".
//!
//! So the check, in order:
//! 1. An admitted pool with an idle connection: `COM_PING` on it. It is
//!    authenticated, stays in the pool, and costs MySQL a round trip.
//! 2. Otherwise a probe that MariaDB answers without logging: read the
//!    server's greeting, send a handshake response that names a user
//!    (`ferry-health-probe`) and asks for an authentication plugin no server
//!    has, so the server answers with an AuthSwitchRequest (its own plugin),
//!    and close. The server parsed the greeting reply, looked the account up
//!    and answered: it is up and serving logins. As the user name was set,
//!    the close is logged only at `log_warnings` > 3, and as the
//!    authentication did not fail (it was abandoned) there is no "Access
//!    denied" either. It counts in `Aborted_connects` (a status counter).
//!    An ERR instead of the switch (too many connections, host blocked) is
//!    unhealthy: clients could not log in either.
//!    MySQL 8.0 answers an unknown user with a decoy account on
//!    `sha256_password` and logs that plugin's deprecation warning each time,
//!    so on MySQL the probe names `mysql.sys`, an account every MySQL 8 has
//!    (locked; never logged in): the switch goes to its own plugin, and an
//!    abandoned handshake is logged only at `log_error_verbosity` 3 (tried on
//!    8.0.33: no line).
//!
//! The packets are mysql_common's (the protocol crate under mysql_async),
//! framed by its codec; nothing here encodes MySQL packets by hand.
use crate::mysql::pool::Pools;
use crate::mysql::target::MysqlTarget;
use bytes::BytesMut;
use mysql_async::prelude::Queryable;
use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, ErrPacket, HandshakePacket, HandshakeResponse};
use mysql_common::proto::codec::PacketCodec;
use mysql_common::proto::MySerialize;
use std::borrow::Cow;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long one check may take.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The user name the probe gives MariaDB (no such account is needed).
pub const PROBE_USER: &str = "ferry-health-probe";
/// ... and MySQL (see the module comment).
pub const PROBE_USER_MYSQL: &str = "mysql.sys";
/// The authentication plugin it asks for: none has this name.
const PROBE_PLUGIN: &[u8] = b"ferry_health_probe";

/// `Ok` when the target answers; `Err` says why not.
pub async fn check(pools: &Pools, target: &MysqlTarget) -> Result<(), String> {
    if let Some(pool) = pools.idle_pool() {
        let ping = async {
            let mut conn = pool.get_conn().await?;
            conn.ping().await?;
            conn.reset_connection(false); // a ping leaves nothing behind
            Ok::<_, mysql_async::Error>(())
        };
        // A failed ping falls through to the probe, which says why.
        if let Ok(Ok(())) = tokio::time::timeout(TIMEOUT, ping).await {
            return Ok(());
        }
    }
    match tokio::time::timeout(TIMEOUT, probe(target)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer within {TIMEOUT:?}")),
    }
}

async fn probe(target: &MysqlTarget) -> Result<(), String> {
    match target {
        MysqlTarget::Socket(path) => {
            let s = tokio::net::UnixStream::connect(path)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            exchange(s).await
        }
        MysqlTarget::Tcp { host, port } => {
            let s = tokio::net::TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(|e| format!("connect: {e}"))?;
            exchange(s).await
        }
    }
}

/// Greeting, handshake response, the server's answer; then the stream is
/// dropped (closed).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> Result<(), String> {
    let mut codec = PacketCodec::default();
    let mut buf = BytesMut::new();
    let greeting = read_packet(&mut s, &mut codec, &mut buf).await?;
    if greeting.first() == Some(&0xff) {
        return Err(server_error(&greeting, CapabilityFlags::empty()));
    }
    let hello: HandshakePacket<'_> = ParseBuf(&greeting)
        .parse(())
        .map_err(|e| format!("not a MySQL greeting: {e}"))?;
    let caps = hello.capabilities()
        & (CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_LONG_PASSWORD);
    let (version, user) = match hello.maria_db_server_version_parsed() {
        Some(v) => (v, PROBE_USER),
        None => (
            hello.server_version_parsed().unwrap_or((0, 0, 0)),
            PROBE_USER_MYSQL,
        ),
    };
    let response = HandshakeResponse::new(
        Some(&[][..]),
        version,
        Some(user.as_bytes()),
        None::<&[u8]>,
        Some(AuthPlugin::Other(Cow::Borrowed(PROBE_PLUGIN))),
        caps,
        None,
        1 << 24,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    let mut out = BytesMut::new();
    codec
        .encode(&mut &body[..], &mut out)
        .map_err(|e| format!("cannot frame the probe: {e}"))?;
    s.write_all(&out).await.map_err(|e| format!("write: {e}"))?;
    let answer = read_packet(&mut s, &mut codec, &mut buf).await?;
    match answer.first() {
        // AuthSwitchRequest (or, for an account that takes no password, OK).
        Some(0xfe | 0x00) => Ok(()),
        Some(0xff) => Err(server_error(&answer, caps)),
        _ => Err("unexpected answer to the handshake".into()),
    }
}

async fn read_packet<S: AsyncRead + Unpin>(
    s: &mut S,
    codec: &mut PacketCodec,
    buf: &mut BytesMut,
) -> Result<Vec<u8>, String> {
    let mut packet = Vec::new();
    loop {
        match codec.decode(buf, &mut packet) {
            Ok(true) => return Ok(packet),
            Ok(false) => {}
            Err(e) => return Err(format!("bad packet: {e}")),
        }
        let n = s.read_buf(buf).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
    }
}

fn server_error(packet: &[u8], caps: CapabilityFlags) -> String {
    match ParseBuf(packet).parse::<ErrPacket<'_>>(caps | CapabilityFlags::CLIENT_PROTOCOL_41) {
        Ok(e) => format!("the server refused: {e}"),
        Err(_) => "the server refused the connection".into(),
    }
}

//! Sealed sessions: the `Session.signature` the client carries back is an
//! HMAC-SHA256 over what the gateway relies on, so a tampered, forged, expired
//! or borrowed session is refused before anything runs.
//!
//! `signature` = version (1) ‖ key id (4) ‖ token ‖ MAC (32), where the token
//! is: session id (16) ‖ shim instance (8) ‖ credential tag (16) ‖ issued-at
//! seconds (8, BE) ‖ flags (1: pinned) ‖ holder length (1) ‖ holder (the
//! issuing shim's address as Envoy knows it, `FERRY_SHIM_ADVERTISE`; the
//! filter reads it, unverified, to route a pinned session back to its shim —
//! the shim verifies everything). The MAC covers the version,
//! key id, token and the vitess fields the gateway sets (in_transaction,
//! autocommit, last_insert_id, row_count, SessionUUID, and the read-after-write
//! GTID when there is one), so flipping `inTransaction` in the JSON, or dropping
//! the GTID a write left to read from a lagging replica, is tampering too. (A
//! session without a GTID is MACed exactly as before the GTID existed, so
//! sessions sealed by an older shim stay valid.) The credential tag is an HMAC
//! of user and password under the same key: the password itself is never in a
//! session, and a session presented with other credentials is refused.
//!
//! Keys come from a file (`FERRY_SESSION_KEYS_FILE`): one hex key per line, at
//! least 32 bytes; the first signs, all verify, so a new key is added on top and
//! the old one removed a session lifetime later, without dropping sessions.
//! Every shim of one Envoy cluster reads the same file.
use crate::credentials::{constant_time_eq, Credentials};
use crate::settings::{Setting, Vars};
use ferry_proto::vitess::vtgate;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
/// The fixed part of the token, up to the holder's length byte.
const TOKEN_FIXED: usize = 16 + 8 + 16 + 8 + 1 + 1;
const MAC_LEN: usize = 32;
const MIN_SIGNATURE_LEN: usize = 1 + 4 + TOKEN_FIXED + MAC_LEN;
const FLAG_PINNED: u8 = 1;

pub type SessionId = [u8; 16];

/// What a sealed session says, once its seal is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub id: SessionId,
    /// The shim process that issued it (random per start): tells a restart.
    pub instance: [u8; 8],
    pub pinned: bool,
    /// The address of the shim that issued it.
    pub holder: String,
    cred: [u8; 16],
    issued_at: u64,
}

impl Token {
    pub fn id_hex(&self) -> String {
        hex(&self.id)
    }
}

/// Why a session was refused (the message the client gets).
#[derive(Debug, PartialEq, Eq)]
pub enum SealError {
    /// Not issued by this gateway, or modified since.
    Invalid(&'static str),
    Expired {
        age: Duration,
        ttl: Duration,
    },
    OtherCredentials,
}

impl std::fmt::Display for SealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SealError::Invalid(why) => write!(
                f,
                "invalid session ({why}): it was modified or not issued by this gateway; start a new session"
            ),
            SealError::Expired { age, ttl } => write!(
                f,
                "session expired: last used {}s ago, sessions live {}s (FERRY_SESSION_TTL_SECS); start a new session",
                age.as_secs(),
                ttl.as_secs()
            ),
            SealError::OtherCredentials => write!(
                f,
                "this session belongs to other credentials; start a new session"
            ),
        }
    }
}

struct Key {
    id: [u8; 4],
    secret: Vec<u8>,
}

pub struct Sealer {
    keys: Vec<Key>,
    ttl: Duration,
    holder: Vec<u8>,
}

impl Sealer {
    /// From the key file's text: one hex key (≥ 32 bytes) per line; `#` comments.
    pub fn from_key_file(text: &str, ttl: Duration) -> Result<Sealer, String> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let secret = unhex(line).ok_or_else(|| format!("line {}: a key must be hex", n + 1))?;
            if secret.len() < 32 {
                return Err(format!("line {}: a key must have at least 32 bytes", n + 1));
            }
            keys.push(Key::new(secret));
        }
        if keys.is_empty() {
            return Err("no key in the session key file".into());
        }
        Ok(Sealer {
            keys,
            ttl,
            holder: Vec::new(),
        })
    }

    /// Names this shim in every token it seals (at most 255 bytes kept).
    pub fn with_holder(mut self, holder: &str) -> Sealer {
        self.holder = holder.as_bytes().iter().take(255).copied().collect();
        self
    }

    /// Whether a token names another shim as its holder (a session pinned there).
    pub fn held_elsewhere(&self, token_holder: &str) -> bool {
        !token_holder.is_empty() && token_holder.as_bytes() != self.holder.as_slice()
    }

    /// A key of this process only: sessions do not survive a restart and are
    /// not shared with other shims (used when no key file is configured).
    pub fn ephemeral(ttl: Duration) -> Sealer {
        Sealer {
            keys: vec![Key::new(random::<32>().to_vec())],
            ttl,
            holder: Vec::new(),
        }
    }

    pub fn seal(
        &self,
        token_id: SessionId,
        instance: [u8; 8],
        pinned: bool,
        creds: &Credentials,
        vitess: &vtgate::Session,
    ) -> Vec<u8> {
        let key = &self.keys[0];
        let mut sig = Vec::with_capacity(MIN_SIGNATURE_LEN + self.holder.len());
        sig.push(VERSION);
        sig.extend_from_slice(&key.id);
        sig.extend_from_slice(&token_id);
        sig.extend_from_slice(&instance);
        sig.extend_from_slice(&key.cred_tag(creds));
        sig.extend_from_slice(&now_secs().to_be_bytes());
        sig.push(if pinned { FLAG_PINNED } else { 0 });
        sig.push(self.holder.len() as u8);
        sig.extend_from_slice(&self.holder);
        let mac = key.mac(&sig, vitess);
        sig.extend_from_slice(&mac);
        sig
    }

    /// Verifies a session's seal for these credentials. An empty signature is
    /// `Ok(None)`: a client's first call, or a session it made up (which then
    /// simply starts fresh; it can claim nothing).
    pub fn open(
        &self,
        signature: &[u8],
        vitess: &vtgate::Session,
        creds: &Credentials,
    ) -> Result<Option<Token>, SealError> {
        if signature.is_empty() {
            return Ok(None);
        }
        let holder_len = usize::from(*signature.get(1 + 4 + TOKEN_FIXED - 1).unwrap_or(&0));
        if signature.len() != MIN_SIGNATURE_LEN + holder_len || signature[0] != VERSION {
            return Err(SealError::Invalid("unknown format"));
        }
        let (signed, mac) = signature.split_at(signature.len() - MAC_LEN);
        let key = self
            .keys
            .iter()
            .find(|k| k.id == signed[1..5])
            .ok_or(SealError::Invalid("unknown key"))?;
        let mut check = key.hmac();
        check.update(signed);
        key_vitess_view(&mut check, vitess);
        check
            .verify_slice(mac)
            .map_err(|_| SealError::Invalid("bad signature"))?;
        let t = &signed[5..];
        let token = Token {
            id: t[..16].try_into().unwrap_or_default(),
            instance: t[16..24].try_into().unwrap_or_default(),
            cred: t[24..40].try_into().unwrap_or_default(),
            issued_at: u64::from_be_bytes(t[40..48].try_into().unwrap_or_default()),
            pinned: t[48] & FLAG_PINNED != 0,
            holder: String::from_utf8_lossy(&t[50..]).into_owned(),
        };
        let age = Duration::from_secs(now_secs().saturating_sub(token.issued_at));
        if age > self.ttl {
            return Err(SealError::Expired { age, ttl: self.ttl });
        }
        if !constant_time_eq(&token.cred, &key.cred_tag(creds)) {
            return Err(SealError::OtherCredentials);
        }
        Ok(Some(token))
    }
}

/// Tags of stored records (idempotency/store.rs): the key's id, then HMAC-SHA256 over
/// the parts, each framed with its length, under a domain of their own.
pub const TAG_LEN: usize = 4 + 32;

impl Sealer {
    /// A tag over `parts` with the current key: whoever can write the record's table
    /// cannot make one this gateway accepts.
    pub fn tag(&self, domain: &str, parts: &[&[u8]]) -> Vec<u8> {
        let key = &self.keys[0];
        let mut tag = key.id.to_vec();
        tag.extend_from_slice(&tag_mac(key, domain, parts));
        tag
    }

    /// Whether `tag` is [`Sealer::tag`] of `parts` under one of the keys (rotation).
    pub fn tag_holds(&self, domain: &str, parts: &[&[u8]], tag: &[u8]) -> bool {
        let Some((id, mac)) = (tag.len() == TAG_LEN).then(|| tag.split_at(4)) else {
            return false;
        };
        self.keys
            .iter()
            .filter(|k| k.id == id)
            .any(|k| constant_time_eq(&tag_mac(k, domain, parts), mac))
    }
}

fn tag_mac(key: &Key, domain: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut m = key.hmac();
    m.update(b"ferry-tag\0");
    m.update(domain.as_bytes());
    for part in parts {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part);
    }
    m.finalize().into_bytes().into()
}

impl Key {
    fn new(secret: Vec<u8>) -> Key {
        let digest = Sha256::digest(&secret);
        let mut id = [0u8; 4];
        id.copy_from_slice(&digest[..4]);
        Key { id, secret }
    }

    fn hmac(&self) -> HmacSha256 {
        // HMAC takes keys of any length.
        HmacSha256::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable!())
    }

    fn mac(&self, signed: &[u8], vitess: &vtgate::Session) -> [u8; MAC_LEN] {
        let mut m = self.hmac();
        m.update(signed);
        key_vitess_view(&mut m, vitess);
        m.finalize().into_bytes().into()
    }

    fn cred_tag(&self, creds: &Credentials) -> [u8; 16] {
        let mut m = self.hmac();
        m.update(b"ferry-credential\0");
        m.update(creds.user.as_bytes());
        m.update(b"\0");
        m.update(creds.password.as_bytes());
        let full: [u8; 32] = m.finalize().into_bytes().into();
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&full[..16]);
        tag
    }
}

/// The vitess fields the gateway sets, in a fixed layout for the MAC.
fn key_vitess_view(m: &mut HmacSha256, v: &vtgate::Session) {
    m.update(b"\0vitess\0");
    m.update(&[u8::from(v.in_transaction), u8::from(v.autocommit)]);
    m.update(&v.last_insert_id.to_be_bytes());
    m.update(&v.row_count.to_be_bytes());
    m.update(&(v.session_uuid.len() as u64).to_be_bytes());
    m.update(v.session_uuid.as_bytes());
    // Only when present: the MAC of a session without one is unchanged.
    if let Some(gtid) = v
        .read_after_write
        .as_ref()
        .map(|r| r.read_after_write_gtid.as_str())
        .filter(|g| !g.is_empty())
    {
        m.update(b"\0read_after_write_gtid\0");
        m.update(&(gtid.len() as u64).to_be_bytes());
        m.update(gtid.as_bytes());
    }
    if v.found_rows != 0 {
        m.update(b"\0found_rows\0");
        m.update(&v.found_rows.to_be_bytes());
    }
    // The state the session carries (sessions/state.rs), in name order; only when
    // present, as above.
    let framed = |m: &mut HmacSha256, bytes: &[u8]| {
        m.update(&(bytes.len() as u64).to_be_bytes());
        m.update(bytes);
    };
    if !v.user_defined_variables.is_empty() {
        m.update(b"\0user_defined_variables\0");
        let mut vars: Vec<_> = v.user_defined_variables.iter().collect();
        vars.sort_by(|a, b| a.0.cmp(b.0));
        for (name, value) in vars {
            framed(m, name.as_bytes());
            m.update(&value.r#type.to_be_bytes());
            framed(m, &value.value);
        }
    }
    if !v.system_variables.is_empty() {
        m.update(b"\0system_variables\0");
        let mut vars: Vec<_> = v.system_variables.iter().collect();
        vars.sort();
        for (name, value) in vars {
            framed(m, name.as_bytes());
            framed(m, value.as_bytes());
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// N random bytes from the OS.
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // The OS random source does not fail on Linux once booted; if it ever
    // did, a zero id would still be sealed, never guessable into a pin.
    if getrandom::fill(&mut b).is_err() {
        crate::log!(crate::telemetry::log::Level::Error, "getrandom failed");
    }
    b
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// How sessions are sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealSettings {
    /// Unset: a random key per process, logged as a warning.
    pub keys_file: Option<std::path::PathBuf>,
    pub ttl: Duration,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_SESSION_KEYS_FILE",
        default: "",
        about: "session sealing keys, one hex key per line, the first signs (unset: a random key per process, logged as a warning; `scripts/env.sh` sets `.run/certs/session.keys`)",
    },
    Setting {
        name: "FERRY_SESSION_TTL_SECS",
        default: "86400",
        about: "a session unused this long is refused",
    },
];

impl SealSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(SealSettings {
            keys_file: vars.set("FERRY_SESSION_KEYS_FILE").map(Into::into),
            ttl: vars.secs("FERRY_SESSION_TTL_SECS")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const K2: &str = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

    fn creds(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: password.into(),
        }
    }

    fn vitess() -> vtgate::Session {
        vtgate::Session {
            in_transaction: true,
            autocommit: true,
            session_uuid: "abc".into(),
            ..Default::default()
        }
    }

    fn sealer(keys: &str) -> Sealer {
        Sealer::from_key_file(keys, Duration::from_secs(60))
            .unwrap()
            .with_holder("127.0.0.1:8081")
    }

    #[test]
    fn a_sealed_session_opens_for_its_credentials_only() {
        let s = sealer(K1);
        let c = creds("ferry", "pw");
        let sig = s.seal([7; 16], [9; 8], true, &c, &vitess());
        let t = s.open(&sig, &vitess(), &c).unwrap().unwrap();
        assert_eq!((t.id, t.instance, t.pinned), ([7; 16], [9; 8], true));
        assert_eq!(t.holder, "127.0.0.1:8081");
        // The filter reads the holder at a fixed place: after the pinned flag.
        assert_eq!(sig[53], FLAG_PINNED);
        assert_eq!(&sig[55..55 + usize::from(sig[54])], b"127.0.0.1:8081");
        assert_eq!(
            s.open(&sig, &vitess(), &creds("ferry", "other")),
            Err(SealError::OtherCredentials)
        );
        assert_eq!(
            s.open(&sig, &vitess(), &creds("other", "pw")),
            Err(SealError::OtherCredentials)
        );
        assert_eq!(s.open(&[], &vitess(), &c), Ok(None));
    }

    #[test]
    fn any_change_is_tampering() {
        let s = sealer(K1);
        let c = creds("ferry", "pw");
        let sig = s.seal([7; 16], [9; 8], false, &c, &vitess());
        for i in 0..sig.len() {
            let mut bad = sig.clone();
            bad[i] ^= 1;
            assert!(
                matches!(s.open(&bad, &vitess(), &c), Err(SealError::Invalid(_))),
                "byte {i}"
            );
        }
        let mut v = vitess();
        v.in_transaction = false;
        assert_eq!(
            s.open(&sig, &v, &c),
            Err(SealError::Invalid("bad signature"))
        );
        let mut v = vitess();
        v.session_uuid = "abd".into();
        assert!(s.open(&sig, &v, &c).is_err());
        assert!(s.open(&sig[1..], &vitess(), &c).is_err());
        // Forged with another key.
        let forged = sealer(K2).seal([7; 16], [9; 8], false, &c, &vitess());
        assert_eq!(
            s.open(&forged, &vitess(), &c),
            Err(SealError::Invalid("unknown key"))
        );
    }

    #[test]
    fn the_read_after_write_gtid_is_sealed() {
        let s = sealer(K1);
        let c = creds("ferry", "pw");
        let with = |gtid: &str| {
            let mut v = vitess();
            v.read_after_write = Some(vtgate::ReadAfterWrite {
                read_after_write_gtid: gtid.into(),
                ..Default::default()
            });
            v
        };
        // An empty GTID (or none) seals as a session from before GTIDs did.
        let old = s.seal([7; 16], [9; 8], false, &c, &vitess());
        assert!(s.open(&old, &with(""), &c).is_ok());
        let sig = s.seal([7; 16], [9; 8], false, &c, &with("0-1-42"));
        assert!(s.open(&sig, &with("0-1-42"), &c).is_ok());
        for tampered in [with("0-1-41"), with(""), vitess()] {
            assert_eq!(
                s.open(&sig, &tampered, &c),
                Err(SealError::Invalid("bad signature"))
            );
        }
        assert!(s.open(&old, &with("0-1-42"), &c).is_err(), "added later");
        // The timeout and tracking flag are not the gateway's: carried, not sealed.
        let mut v = with("0-1-42");
        if let Some(r) = v.read_after_write.as_mut() {
            r.read_after_write_timeout = 9.0;
        }
        assert!(s.open(&sig, &v, &c).is_ok());
    }

    #[test]
    fn keys_rotate_without_dropping_sessions() {
        let c = creds("ferry", "pw");
        let old = sealer(K1).seal([1; 16], [2; 8], false, &c, &vitess());
        let rotated = sealer(&format!("{K2}\n# old, until sessions expire\n{K1}\n"));
        assert!(rotated.open(&old, &vitess(), &c).unwrap().is_some());
        let new = rotated.seal([1; 16], [2; 8], false, &c, &vitess());
        assert!(sealer(K2).open(&new, &vitess(), &c).unwrap().is_some());
        assert!(sealer(K1).open(&new, &vitess(), &c).is_err());
    }

    #[test]
    fn sessions_expire() {
        let c = creds("ferry", "pw");
        let s = Sealer::from_key_file(K1, Duration::from_secs(0)).unwrap();
        let mut sig = s.seal([1; 16], [2; 8], false, &c, &vitess());
        // Re-sign with an issued-at an hour ago.
        let at = 1 + 4 + 16 + 8 + 16;
        sig[at..at + 8].copy_from_slice(&(now_secs() - 3600).to_be_bytes());
        sig.truncate(sig.len() - MAC_LEN);
        let mac = s.keys[0].mac(&sig, &vitess());
        sig.extend_from_slice(&mac);
        assert!(matches!(
            s.open(&sig, &vitess(), &c),
            Err(SealError::Expired { .. })
        ));
    }

    #[test]
    fn key_files_are_checked() {
        let ttl = Duration::from_secs(1);
        assert!(Sealer::from_key_file("", ttl).is_err());
        assert!(Sealer::from_key_file("abcd", ttl).is_err(), "too short");
        assert!(Sealer::from_key_file(&K1.replace('0', "g"), ttl).is_err());
        assert!(Sealer::from_key_file(&format!("# c\n\n{K1}\n"), ttl).is_ok());
    }

    #[test]
    fn the_password_is_not_in_the_signature() {
        let s = sealer(K1);
        let sig = s.seal(
            [0; 16],
            [0; 8],
            false,
            &creds("u", "hunter2hunter2"),
            &vitess(),
        );
        assert!(!sig.windows(7).any(|w| w == b"hunter2"));
    }

    #[test]
    fn tags_hold_only_for_their_parts_and_keys() {
        let a = Sealer::ephemeral(Duration::from_secs(60));
        let b = Sealer::ephemeral(Duration::from_secs(60));
        let t = a.tag("d", &[b"user", b"key"]);
        assert_eq!(t.len(), TAG_LEN);
        assert!(a.tag_holds("d", &[b"user", b"key"], &t));
        assert!(!a.tag_holds("d", &[b"user", b"kez"], &t));
        assert!(!a.tag_holds("e", &[b"user", b"key"], &t), "another domain");
        // Framing: moving a byte between parts changes the tag.
        assert!(!a.tag_holds("d", &[b"use", b"rkey"], &t));
        assert!(!b.tag_holds("d", &[b"user", b"key"], &t), "another key");
        assert!(!a.tag_holds("d", &[b"user", b"key"], &t[..10]));
    }
}

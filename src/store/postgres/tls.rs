//! TLS for every PostgreSQL connection recon and `recon-pg-ledger` make,
//! with libpq's `sslmode` semantics (SPEC 10, "For production"):
//!
//! - `disable`: plaintext only;
//! - `allow`: plaintext first, TLS (unverified) if the server refuses it;
//! - `prefer` (the default): TLS (unverified) when the server offers it,
//!   plaintext when it does not, or when it refuses the TLS session;
//! - `require`: TLS, the certificate not verified, unless a root
//!   certificate is there (`sslrootcert`, or `~/.postgresql/root.crt`),
//!   when it is held to it as under `verify-ca`, as libpq does;
//! - `verify-ca`: TLS, the server's chain verified against `sslrootcert`;
//! - `verify-full`: `verify-ca`, and the certificate must name the host
//!   connected to (a DNS name, or an IP address for a numeric host).
//!
//! `sslrootcert`, `sslcert` and `sslkey` name PEM files (defaults under
//! `~/.postgresql/`, as libpq's); each setting comes from the URL's query
//! or else `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`. A Unix
//! socket carries no TLS (libpq ignores `sslmode` there too). The TLS
//! library is rustls with the ring provider, through the maintained
//! `tokio-postgres-rustls` connector; the verifiers are this module's.

use postgres::config::{Host, SslMode as WireMode};
use postgres::{Client, Config, NoTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The URL query parameters this module takes (the `postgres` crate
/// knows only `disable`, `prefer` and `require`, and no file names).
pub(crate) const PARAMETERS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// The TLS settings of one database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    mode: SslMode,
    root_cert: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    /// `~/.postgresql`, where libpq's default files are.
    defaults: Option<PathBuf>,
}

/// Why a connection could not be made: the server's or the client
/// library's error, or TLS settings that cannot be used (a root
/// certificate missing, a key others may read). Neither carries a
/// password.
#[derive(Debug)]
pub enum ConnectError {
    Postgres(postgres::Error),
    Settings(String),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Postgres(e) => f.write_str(&super::detail(e)),
            ConnectError::Settings(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ConnectError {}

impl TlsSettings {
    /// The settings from the URL's query (`query`, decoded pairs of
    /// [`PARAMETERS`]), else from `lookup` (the `PGSSL*` variables) and
    /// `home` (for the default files).
    pub(crate) fn new(
        query: &[(String, String)],
        lookup: &dyn Fn(&str) -> Option<String>,
        home: Option<PathBuf>,
    ) -> Result<TlsSettings, String> {
        let setting = |name: &str, variable: &str| {
            query
                .iter()
                .rev()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
                .filter(|value| !value.is_empty())
                .or_else(|| lookup(variable))
        };
        let mode = match setting("sslmode", "PGSSLMODE") {
            None => SslMode::Prefer,
            Some(text) => SslMode::parse(&text).ok_or_else(|| {
                format!(
                    "sslmode {text:?} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                )
            })?,
        };
        let root_cert = setting("sslrootcert", "PGSSLROOTCERT").map(PathBuf::from);
        if root_cert.as_deref() == Some(Path::new("system")) {
            return Err(
                "sslrootcert=system (the system's trusted roots) is not supported: \
                        name the CA's certificate file"
                    .into(),
            );
        }
        Ok(TlsSettings {
            mode,
            root_cert,
            cert: setting("sslcert", "PGSSLCERT").map(PathBuf::from),
            key: setting("sslkey", "PGSSLKEY").map(PathBuf::from),
            defaults: home.map(|home| home.join(".postgresql")),
        })
    }

    pub fn mode(&self) -> SslMode {
        self.mode
    }

    /// Connects with `config` (the URL's, with the caller's session
    /// settings) as `sslmode` says.
    pub fn connect(&self, config: &Config) -> Result<Client, ConnectError> {
        let only_sockets = config
            .get_hosts()
            .iter()
            .all(|host| !matches!(host, Host::Tcp(_)));
        if self.mode == SslMode::Disable || only_sockets {
            return plain(config);
        }
        match self.mode {
            SslMode::Allow => match plain(config) {
                Err(ConnectError::Postgres(e)) if e.as_db_error().is_some() => {
                    self.encrypted(config, WireMode::Require)
                }
                done => done,
            },
            SslMode::Prefer => match self.encrypted(config, WireMode::Prefer) {
                Err(ConnectError::Postgres(e)) if e.as_db_error().is_some() => plain(config),
                done => done,
            },
            _ => self.encrypted(config, WireMode::Require),
        }
    }

    fn encrypted(&self, config: &Config, wire: WireMode) -> Result<Client, ConnectError> {
        let connector = MakeRustlsConnect::new(self.client_config()?);
        let mut config = config.clone();
        config.ssl_mode(wire);
        config.connect(connector).map_err(|e| self.failed(e))
    }

    /// The server's error, with what was being verified when the TLS
    /// handshake refused the server's certificate.
    fn failed(&self, e: postgres::Error) -> ConnectError {
        let text = super::detail(&e);
        if !text.contains("invalid peer certificate") {
            return ConnectError::Postgres(e);
        }
        let against = self
            .root_file()
            .map_or_else(String::new, |f| format!(" against {}", f.display()));
        ConnectError::Settings(format!(
            "the server's TLS certificate was refused (sslmode={}, verified{against}): {text}",
            self.mode.name()
        ))
    }

    /// The root certificate file: the one named, or libpq's default.
    fn root_file(&self) -> Option<PathBuf> {
        self.root_cert
            .clone()
            .or_else(|| Some(self.defaults.as_ref()?.join("root.crt")))
    }

    fn client_config(&self) -> Result<ClientConfig, ConnectError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = self.verifier(&provider)?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ConnectError::Settings(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        match self.client_identity()? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ConnectError::Settings(format!("sslcert/sslkey: {e}"))),
            None => Ok(builder.with_no_client_auth()),
        }
    }

    /// What the server's certificate is held to under this mode.
    fn verifier(
        &self,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Arc<dyn ServerCertVerifier>, ConnectError> {
        let unverified =
            || Ok(Arc::new(Unverified(provider.clone())) as Arc<dyn ServerCertVerifier>);
        let roots = match self.mode {
            SslMode::Allow | SslMode::Prefer => return unverified(),
            SslMode::Require => match self.root_file().filter(|f| f.exists()) {
                None => return unverified(),
                Some(file) => roots(&file)?,
            },
            _ => match self.root_file() {
                Some(file) if file.exists() => roots(&file)?,
                file => {
                    let named = file.map_or_else(
                        || "~/.postgresql/root.crt".into(),
                        |f| f.display().to_string(),
                    );
                    return Err(ConnectError::Settings(format!(
                        "sslmode={} needs the CA's certificate: root certificate file {named} \
                         does not exist (name it with sslrootcert=FILE or PGSSLROOTCERT)",
                        self.mode.name()
                    )));
                }
            },
        };
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| ConnectError::Settings(format!("sslrootcert: {e}")))?;
        Ok(match self.mode {
            SslMode::VerifyFull => webpki,
            _ => Arc::new(ChainOnly(webpki)),
        })
    }

    /// The client certificate chain and its key, when there is one: the
    /// files named, else libpq's defaults when they exist.
    fn client_identity(
        &self,
    ) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, ConnectError> {
        let default = |name: &str| self.defaults.as_ref().map(|d| d.join(name));
        let cert = match &self.cert {
            Some(named) if !named.exists() => {
                return Err(ConnectError::Settings(format!(
                    "client certificate file {} does not exist",
                    named.display()
                )))
            }
            Some(named) => named.clone(),
            None => match default("postgresql.crt").filter(|f| f.exists()) {
                Some(file) => file,
                None => return Ok(None),
            },
        };
        let key = self
            .key
            .clone()
            .or_else(|| default("postgresql.key"))
            .filter(|f| f.exists())
            .ok_or_else(|| {
                ConnectError::Settings(format!(
                    "client certificate {} has no private key file (sslkey)",
                    cert.display()
                ))
            })?;
        private_enough(&key)?;
        let chain = CertificateDer::pem_file_iter(&cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| ConnectError::Settings(format!("sslcert {}: {e}", cert.display())))?;
        let key = PrivateKeyDer::from_pem_file(&key)
            .map_err(|e| ConnectError::Settings(format!("sslkey {}: {e}", key.display())))?;
        Ok(Some((chain, key)))
    }
}

fn plain(config: &Config) -> Result<Client, ConnectError> {
    let mut config = config.clone();
    config.ssl_mode(WireMode::Disable);
    config.connect(NoTls).map_err(ConnectError::Postgres)
}

/// The certificates of a PEM file, as trust anchors.
fn roots(file: &Path) -> Result<RootCertStore, ConnectError> {
    let unreadable = |e: &dyn fmt::Display| {
        ConnectError::Settings(format!("sslrootcert {}: {e}", file.display()))
    };
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(file).map_err(|e| unreadable(&e))? {
        store
            .add(cert.map_err(|e| unreadable(&e))?)
            .map_err(|e| unreadable(&e))?;
    }
    if store.is_empty() {
        return Err(unreadable(&"no certificate in it"));
    }
    Ok(store)
}

/// libpq's rule for a private key file: no access for others, and none
/// for the group unless root owns it.
fn private_enough(key: &Path) -> Result<(), ConnectError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(key)
        .map_err(|e| ConnectError::Settings(format!("sslkey {}: {e}", key.display())))?;
    let mode = meta.mode();
    let allowed = if meta.uid() == 0 { 0o037 } else { 0o077 };
    if mode & allowed != 0 {
        return Err(ConnectError::Settings(format!(
            "private key file {} has group or world access; it must be u=rw (0600) or less, \
             or u=rw,g=r (0640) or less if owned by root",
            key.display()
        )));
    }
    Ok(())
}

/// `verify-ca` (and `require` with a root certificate): the chain must
/// lead to a trusted root; the name the certificate is for is not
/// checked. webpki checks the chain first and the name last, so a name
/// error means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `allow`, `prefer`, and `require` without a root certificate: the
/// session is encrypted and the certificate is not checked (as libpq
/// does), though the handshake's signatures still are.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(query: &[(&str, &str)], env: &[(&str, &str)]) -> Result<TlsSettings, String> {
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        TlsSettings::new(&query, &lookup, Some(PathBuf::from("/home/ann")))
    }

    #[test]
    fn sslmode_is_prefer_by_default_and_the_url_wins_over_pgsslmode() {
        assert_eq!(settings(&[], &[]).unwrap().mode(), SslMode::Prefer);
        let env = [
            ("PGSSLMODE", "verify-full"),
            ("PGSSLROOTCERT", "/etc/ca.pem"),
        ];
        let from_env = settings(&[], &env).unwrap();
        assert_eq!(from_env.mode(), SslMode::VerifyFull);
        assert_eq!(from_env.root_file(), Some(PathBuf::from("/etc/ca.pem")));
        let url = settings(&[("sslmode", "require")], &env).unwrap();
        assert_eq!(url.mode(), SslMode::Require);
        assert_eq!(
            settings(&[("sslmode", "verify-ca")], &[])
                .unwrap()
                .root_file(),
            Some(PathBuf::from("/home/ann/.postgresql/root.crt"))
        );
    }

    #[test]
    fn an_unknown_sslmode_is_refused_naming_the_six() {
        let e = settings(&[("sslmode", "verify_full")], &[]).unwrap_err();
        assert!(e.contains("verify-full") && e.contains("allow"), "{e}");
    }

    #[test]
    fn verify_full_without_a_root_certificate_fails_before_connecting() {
        let tls = settings(
            &[
                ("sslmode", "verify-full"),
                ("sslrootcert", "/nonexistent/ca"),
            ],
            &[],
        )
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let e = tls.verifier(&provider).expect_err("refused").to_string();
        assert!(
            e.contains("/nonexistent/ca") && e.contains("does not exist"),
            "{e}"
        );
    }
}

//! TLS to the server, as libpq's `sslmode` promises it, with rustls.
//!
//! A store target may carry the TLS settings libpq users already write, in either form
//! (`postgres://…?sslmode=verify-full&sslrootcert=ca.pem` or
//! `host=db.example sslmode=verify-full sslrootcert=ca.pem`):
//!
//! | `sslmode` | TLS | The server's certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it | not checked |
//! | `require` | always | not checked, unless `sslrootcert` is given: then as `verify-ca` |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | signed by a root of `sslrootcert`, and names the host |
//!
//! `sslrootcert` is a PEM file of root certificates, or `system` for the operating
//! system's roots; `verify-ca` and `verify-full` need one (libpq's fallback,
//! `~/.postgresql/root.crt`, is used when it exists). `sslcert` and `sslkey` are the
//! client's certificate chain and private key (PEM), for servers that authenticate
//! clients by certificate; one without the other is refused, and so is a key given twice.
//! rustls takes only X.509 version 3 certificates: an older client certificate is refused
//! before anything is dialled, with how to issue one again.
//! `sslrootcert=system` trusts every public authority, so it implies `verify-full` and
//! refuses a weaker mode. A unix socket never carries TLS (the server does not offer it
//! there): a target whose hosts are all sockets connects without it, whatever the mode,
//! as libpq does.
//!
//! The one thing to know: tokio-postgres itself knows only `disable`, `prefer` and
//! `require`, and refuses the other keys. [`crate::target`] takes this module's keys out
//! of the target and hands tokio-postgres the rest with the mode it knows, [`settings`]
//! reads them, and [`connector`] builds the rustls configuration that gives the mode its
//! meaning. Nothing is installed process-wide: the configuration names its crypto
//! provider (ring) itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much of the server's certificate is checked; see the module's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const ALL: [SslMode; 5] =
        [SslMode::Disable, SslMode::Prefer, SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull];

    fn parse(text: &str) -> Result<SslMode, String> {
        // libpq's `allow` tries without TLS first; a store never wants that.
        SslMode::ALL.into_iter().find(|mode| mode.name() == text).ok_or_else(|| {
            format!(
                "sslmode `{text}` is not one archmax supports; use disable, prefer, require, verify-ca or verify-full"
            )
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The mode tokio-postgres is given: it only needs to know whether TLS is required.
    pub(crate) fn for_driver(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
        }
    }
}

/// Where the server's certificate must lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    File(PathBuf),
    System,
}

/// The TLS settings of one store target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<Roots>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

/// The keys this module reads; tokio-postgres never sees them ([`crate::target`] takes
/// them out).
pub(crate) const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Read here by the CLI, which shows a target without its password.
pub use crate::target::{is_target_key, keyword_pairs};

/// The settings from the target's TLS pairs (keys of [`TLS_KEYS`] only, each once).
pub(crate) fn settings(pairs: Vec<(String, String)>) -> Result<TlsSettings, String> {
    let mut mode = None;
    let mut root_cert = None;
    let mut client_cert = None;
    let mut client_key = None;
    for (key, value) in pairs {
        match key.as_str() {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => {
                root_cert = Some(if value == "system" { Roots::System } else { Roots::File(PathBuf::from(value)) })
            }
            "sslcert" => client_cert = Some(PathBuf::from(value)),
            "sslkey" => client_key = Some(PathBuf::from(value)),
            _ => {}
        }
    }
    // The operating system's roots vouch for any public name, so with them only a name
    // check means anything (as libpq 16 has it): `system` implies verify-full.
    let mode = match (mode, &root_cert) {
        (None, Some(Roots::System)) => SslMode::VerifyFull,
        (Some(mode), Some(Roots::System)) if mode != SslMode::VerifyFull => {
            return Err(format!(
                "sslrootcert=system trusts every public certificate authority, so it needs sslmode=verify-full \
                 (the target says {}); drop sslmode or set it to verify-full",
                mode.name()
            ));
        }
        (mode, _) => mode.unwrap_or(SslMode::Prefer),
    };
    if client_cert.is_some() != client_key.is_some() {
        return Err(
            "sslcert and sslkey go together: give the client certificate and its private key, or neither".to_string()
        );
    }
    Ok(TlsSettings { mode, root_cert, client_cert, client_key })
}

/// The connector for `settings`: the rustls configuration its mode calls for.
pub fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS cannot be set up: {error}"))?;
    let roots = match (&settings.root_cert, settings.mode) {
        (Some(roots), _) => Some(load_roots(roots)?),
        (None, SslMode::VerifyCa | SslMode::VerifyFull) => Some(load_roots(&default_roots()?)?),
        (None, _) => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Lenient::Nothing(provider.signature_verification_algorithms)),
        Some(roots) => {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|error| format!("the root certificates cannot be used: {error}"))?;
            if settings.mode == SslMode::VerifyFull { webpki } else { Arc::new(Lenient::ChainOnly(webpki)) }
        }
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    let config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certificates(cert, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|error| format!("sslkey `{}` holds no usable private key: {error}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|error| client_identity_refused(cert, &error))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Why the client's certificate and key were refused. rustls says "invalid peer
/// certificate" whatever the certificate, so a certificate it cannot parse is named here
/// as the client's own.
fn client_identity_refused(cert: &Path, error: &rustls::Error) -> String {
    let shown = cert.display();
    let old_version = matches!(error, rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))
        if format!("{other:?}").contains("UnsupportedCertVersion"));
    if old_version {
        return format!(
            "sslcert `{shown}` is not an X.509 version 3 certificate, and rustls takes no other for a client: issue \
             it again with extensions, which makes it version 3, for example `openssl x509 -req -in client.csr \
             -CA ca.crt -CAkey ca.key -days 365 -extfile client.ext -out client.crt` with \
             `basicConstraints=CA:FALSE` in client.ext"
        );
    }
    match error {
        rustls::Error::InvalidCertificate(problem) => {
            format!("sslcert `{shown}` cannot be used as the client's certificate: {problem:?}")
        }
        other => format!("sslcert `{shown}` and sslkey do not make a client identity: {other}"),
    }
}

/// libpq's default root file, `~/.postgresql/root.crt`, when the mode needs roots and
/// none were named.
fn default_roots() -> Result<Roots, String> {
    let missing = "verify-ca and verify-full check the server's certificate against roots: add \
                   sslrootcert=FILE (a PEM file) or sslrootcert=system";
    let home = std::env::var_os("HOME").ok_or_else(|| missing.to_string())?;
    let file = Path::new(&home).join(".postgresql/root.crt");
    if file.is_file() { Ok(Roots::File(file)) } else { Err(missing.to_string()) }
}

fn load_roots(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            for certificate in read_certificates(path, "sslrootcert")? {
                store.add(certificate).map_err(|error| {
                    format!("sslrootcert `{}` holds a certificate rustls cannot use: {error}", path.display())
                })?;
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err("sslrootcert=system: the operating system offers no root certificates".to_string());
            }
        }
    }
    Ok(store)
}

/// Every certificate of a PEM file, at least one.
fn read_certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| format!("{key} `{shown}` cannot be read: {error}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{key} `{shown}` is not a PEM certificate file: {error}"))?;
    if certificates.is_empty() {
        return Err(format!("{key} `{shown}` holds no certificate"));
    }
    Ok(certificates)
}

/// What a verifier checks of the server's certificate short of a full check (which is
/// webpki's own verifier, used as it is).
#[derive(Debug)]
enum Lenient {
    /// `prefer` and `require` without roots: nothing (libpq's meaning). The connection
    /// is encrypted, and the handshake's signatures are still verified, so the peer does
    /// hold the key of the certificate it showed.
    Nothing(WebPkiSupportedAlgorithms),
    /// `verify-ca`: the chain must lead to a root, whatever name the certificate carries.
    ChainOnly(Arc<WebPkiServerVerifier>),
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self {
            Lenient::Nothing(_) => Ok(ServerCertVerified::assertion()),
            Lenient::ChainOnly(webpki) => {
                // webpki checks the name only once the chain holds, so this excuses the
                // name and nothing else.
                match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
                    Err(rustls::Error::InvalidCertificate(
                        rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. },
                    )) => Ok(ServerCertVerified::assertion()),
                    other => other,
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match self {
            Lenient::Nothing(algorithms) => rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms),
            Lenient::ChainOnly(webpki) => webpki.verify_tls12_signature(message, cert, dss),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match self {
            Lenient::Nothing(algorithms) => rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms),
            Lenient::ChainOnly(webpki) => webpki.verify_tls13_signature(message, cert, dss),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match self {
            Lenient::Nothing(algorithms) => algorithms.supported_schemes(),
            Lenient::ChainOnly(webpki) => webpki.supported_verify_schemes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{Split, split};

    #[test]
    fn system_roots_mean_verify_full_and_a_key_is_given_once() {
        let Split { tls: settings, .. } = split("host=db.example sslrootcert=system").expect("splits");
        assert_eq!(settings.mode, SslMode::VerifyFull, "system roots vouch for any public name");
        for weaker in ["prefer", "require", "verify-ca", "disable"] {
            let message = split(&format!("host=db.example sslrootcert=system sslmode={weaker}")).expect_err(weaker);
            assert!(message.contains("needs sslmode=verify-full"), "{message}");
        }
        let message = split("host=x sslmode=verify-full sslmode=disable").expect_err("twice");
        assert!(message.contains("`sslmode` is given twice"), "{message}");
        let message = split("postgres://h/db?sslmode=verify-full&sslmode=disable").expect_err("twice in a URL");
        assert!(message.contains("given twice"), "{message}");
    }

    #[test]
    fn bad_settings_say_what_is_wrong() {
        let message = split("host=x sslmode=allow").expect_err("allow");
        assert!(message.contains("sslmode `allow`"), "{message}");
        let message = split("host=x sslcert=/c.pem").expect_err("half an identity");
        assert!(message.contains("sslcert and sslkey go together"), "{message}");
        let message = split("host=x 'unterminated").expect_err("no =");
        assert!(message.contains("no `=value`"), "{message}");
        let message = split("host=x password='open").expect_err("open quote");
        assert!(message.contains("no closing quote"), "{message}");
        let settings = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: Some(Roots::File(PathBuf::from("/nonexistent/ca.pem"))),
            client_cert: None,
            client_key: None,
        };
        let message = connector(&settings).err().expect("a missing file");
        assert!(message.contains("sslrootcert `/nonexistent/ca.pem` cannot be read"), "{message}");
    }

    /// `der`, a certificate, without its version field: how a version 1 certificate
    /// is written (its signature no longer holds, which nothing here checks first).
    fn as_version_one(der: &[u8]) -> Vec<u8> {
        /// A DER element's header length and content length.
        fn header(der: &[u8]) -> (usize, usize) {
            match der[1] {
                short @ 0..=0x7f => (2, usize::from(short)),
                long => {
                    let count = usize::from(long & 0x7f);
                    (2 + count, der[2..2 + count].iter().fold(0, |length, byte| (length << 8) | usize::from(*byte)))
                }
            }
        }
        fn sequence(content: &[u8]) -> Vec<u8> {
            let length = content.len();
            let mut der = vec![0x30];
            if length < 0x80 {
                der.push(length as u8);
            } else {
                let bytes: Vec<u8> = length.to_be_bytes().into_iter().skip_while(|byte| *byte == 0).collect();
                der.push(0x80 | bytes.len() as u8);
                der.extend(bytes);
            }
            der.extend(content);
            der
        }
        let (outer_header, _) = header(der);
        let tbs = &der[outer_header..];
        let (tbs_header, tbs_length) = header(tbs);
        let (fields, after_tbs) = (&tbs[tbs_header..tbs_header + tbs_length], &tbs[tbs_header + tbs_length..]);
        assert_eq!(fields[0], 0xa0, "the certificate has a version field");
        let (version_header, version_length) = header(fields);
        let mut outer = sequence(&fields[version_header + version_length..]);
        outer.extend(after_tbs);
        sequence(&outer)
    }

    #[test]
    fn a_client_certificate_that_is_not_x509_v3_is_named_as_the_clients_and_how_to_make_one() {
        use base64::Engine;
        let key = rcgen::KeyPair::generate().expect("a key");
        let params = rcgen::CertificateParams::new(vec!["client".to_string()]).expect("params");
        let certificate = params.self_signed(&key).expect("a certificate");
        let old = as_version_one(certificate.der());
        let dir = std::env::temp_dir().join(format!("archmax-client-v1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let (cert, key_file) = (dir.join("client.crt"), dir.join("client.key"));
        let pem = base64::engine::general_purpose::STANDARD.encode(&old);
        std::fs::write(&cert, format!("-----BEGIN CERTIFICATE-----\n{pem}\n-----END CERTIFICATE-----\n"))
            .expect("cert");
        std::fs::write(&key_file, key.serialize_pem()).expect("key");
        let settings = TlsSettings {
            mode: SslMode::Require,
            root_cert: None,
            client_cert: Some(cert.clone()),
            client_key: Some(key_file),
        };
        let message = connector(&settings).err().expect("a version 1 certificate is refused");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(message.contains(&format!("sslcert `{}`", cert.display())), "{message}");
        assert!(message.contains("X.509 version 3") && message.contains("-extfile"), "{message}");
        assert!(!message.contains("peer"), "the certificate is the client's own: {message}");
    }
}

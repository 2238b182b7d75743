//! The store over TLS, against a throwaway server started with `ssl=on`, certificates
//! from a test CA made here, and every TCP connection without TLS refused: each
//! `sslmode` does what libpq promises, a wrong CA or a wrong name is refused under the
//! modes that check them, and a client certificate signs a role in.

use std::path::{Path, PathBuf};

use archmax_store_postgres::test_cluster::{TestCluster, TlsFiles};
use archmax_store_postgres::{ConnectError, PgOptions, PgStore};
use archmax_vm::session::{Head, SessionState, SessionStore};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A CA, and certificates it signed.
struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a CA key")).expect("a CA");
        Authority { issuer }
    }

    /// A certificate for `names` (DNS names) with `common_name`, and its key, as PEM.
    fn issue(&self, common_name: &str, names: &[&str]) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|name| (*name).to_string()).collect::<Vec<_>>()).expect("params");
        params.distinguished_name.push(DnType::CommonName, common_name);
        let key = KeyPair::generate().expect("a key");
        let certificate = params.signed_by(&key, &self.issuer).expect("signed");
        (certificate.pem(), key.serialize_pem())
    }
}

/// Files the client side reads, in a folder of this test's own.
struct ClientFiles(PathBuf);

impl ClientFiles {
    fn new(label: &str) -> ClientFiles {
        let dir = std::env::temp_dir().join(format!("archmax-tls-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a folder");
        ClientFiles(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for ClientFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn executor() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor")
}

/// A store at `target`, proven usable by a session created and read back.
async fn usable(target: &str) -> Result<(), ConnectError> {
    let store = PgStore::connect_with(target, PgOptions::default()).await?;
    let id = format!("tls-{}", std::process::id());
    let state = SessionState {
        id: archmax_vm::session::id::SessionId::from_store(&id),
        head: Head { workflow: "w".into(), spec_hash: "ab".into(), ..Head::default() },
        ..SessionState::default()
    };
    let _ = store.remove(&id).await;
    drop(store.create(&state).await.expect("a session over TLS"));
    assert!(store.read(&id).await.expect("read back").is_some());
    Ok(())
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn each_sslmode_does_what_libpq_promises_against_a_server_that_requires_tls() {
    let authority = Authority::new("archmax test CA");
    let (server_cert, server_key) = authority.issue("localhost", &["localhost"]);
    let (client_cert, client_key) = authority.issue("archmax_cert", &[]);
    let cluster = TestCluster::start_tls(&TlsFiles {
        server_cert: &server_cert,
        server_key: &server_key,
        client_ca: &authority.issuer.pem(),
        cert_user: "archmax_cert",
    })
    .expect("a TLS server");
    let port = cluster.tcp_port().expect("a TCP port");
    let unix = cluster.database("tls").expect("a database");
    let dbname = unix.rsplit("dbname=").next().expect("the database's name").to_string();

    let files = ClientFiles::new("modes");
    let ca = path(&files.write("ca.pem", &authority.issuer.pem()));
    let stranger = path(&files.write("other-ca.pem", &Authority::new("someone else").issuer.pem()));
    let cert = path(&files.write("client.crt", &client_cert));
    let key = path(&files.write("client.key", &client_key));
    let tcp =
        |host: &str, user: &str, extra: &str| format!("host={host} port={port} user={user} dbname={dbname} {extra}");

    executor().block_on(async {
        // Without TLS the server refuses the connection; every mode that speaks TLS gets in.
        let plain = usable(&tcp("localhost", "postgres", "sslmode=disable")).await;
        assert!(
            matches!(plain, Err(ConnectError::Connect(ref message)) if message.contains("no encryption")),
            "{plain:?}"
        );
        for mode in ["sslmode=prefer", "sslmode=require", ""] {
            usable(&tcp("localhost", "postgres", mode)).await.unwrap_or_else(|error| panic!("{mode:?}: {error}"));
        }

        // verify-full checks the chain and the name; verify-ca the chain only.
        usable(&tcp("localhost", "postgres", &format!("sslmode=verify-full sslrootcert={ca}")))
            .await
            .expect("verify-full");
        let wrong_name = usable(&tcp("127.0.0.1", "postgres", &format!("sslmode=verify-full sslrootcert={ca}"))).await;
        assert!(
            matches!(wrong_name, Err(ConnectError::Connect(ref message))
                if message.contains("does not name the host `127.0.0.1`") && message.contains("sslmode=verify-ca")),
            "a certificate for localhost does not name 127.0.0.1: {wrong_name:?}"
        );
        usable(&tcp("127.0.0.1", "postgres", &format!("sslmode=verify-ca sslrootcert={ca}"))).await.expect("verify-ca");
        for mode in ["verify-ca", "verify-full", "require"] {
            let refused =
                usable(&tcp("localhost", "postgres", &format!("sslmode={mode} sslrootcert={stranger}"))).await;
            assert!(
                matches!(refused, Err(ConnectError::Connect(ref message))
                    if message.contains("UnknownIssuer") && message.contains(&format!("sslrootcert `{stranger}`"))),
                "{mode} with another CA's root is refused, naming the roots: {refused:?}"
            );
        }

        // The URL form carries the same keys.
        let url = format!(
            "postgres://postgres@localhost:{port}/{dbname}?sslmode=verify-full&sslrootcert={}",
            ca.replace('/', "%2F")
        );
        usable(&url).await.expect("the URL form");

        // A role that signs in by certificate: with the certificate it gets in, without it not.
        usable(&tcp(
            "localhost",
            "archmax_cert",
            &format!("sslmode=verify-full sslrootcert={ca} sslcert={cert} sslkey={key}"),
        ))
        .await
        .expect("signed in by the client certificate");
        let without = usable(&tcp("localhost", "archmax_cert", &format!("sslmode=verify-full sslrootcert={ca}"))).await;
        assert!(matches!(without, Err(ConnectError::Connect(_))), "{without:?}");

        // Settings that cannot work are named before anything is dialled.
        let missing =
            usable(&tcp("localhost", "postgres", "sslmode=verify-full sslrootcert=/nonexistent/ca.pem")).await;
        assert!(
            matches!(missing, Err(ConnectError::Tls(ref message)) if message.contains("/nonexistent/ca.pem")),
            "{missing:?}"
        );
        let half = usable(&tcp("localhost", "postgres", &format!("sslmode=require sslcert={cert}"))).await;
        assert!(matches!(half, Err(ConnectError::Config(ref message)) if message.contains("sslkey")), "{half:?}");
    });
}

#[test]
fn a_server_without_tls_and_a_host_nobody_knows_say_what_to_do() {
    let cluster = TestCluster::start_tcp().expect("a server on TCP without TLS");
    let port = cluster.tcp_port().expect("a TCP port");
    executor().block_on(async {
        let plain = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
        usable(&format!("{plain} sslmode=prefer")).await.expect("prefer falls back to no TLS");
        match usable(&format!("{plain} sslmode=require")).await {
            Err(error @ ConnectError::Connect(_)) => {
                let said = error.to_string();
                assert!(said.contains("server does not support TLS"), "{said}");
                assert!(said.contains("ssl = on") && said.contains("sslmode=prefer"), "what to do: {said}");
            }
            other => panic!("require against a server without TLS is refused, got {:?}", other.err()),
        }
        match usable("host=archmax-no-such-host.invalid user=postgres sslmode=disable").await {
            Err(error @ ConnectError::Connect(_)) => {
                let said = error.to_string();
                assert!(said.contains("`archmax-no-such-host.invalid` could not be resolved"), "{said}");
            }
            other => panic!("a host nobody knows is refused, got {:?}", other.err()),
        }
    });
}

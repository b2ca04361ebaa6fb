//! A real Jaeger that takes OTLP/HTTP over TLS only and asks every client for a
//! certificate signed by its CA — what a hosted tracing backend looks like — with the
//! certificates made here by `openssl` (a CA, the server's for 127.0.0.1, a client's).
//! Started from the provisioned `jaeger` binary, one per call, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tidal_control_plane as scripts;

use crate::cluster::provisioned_bin;
use crate::http::{free_port, get_json};
use crate::jaeger::Jaeger;
use crate::process::{Process, output};
use crate::wait::blocking_eventually;

/// A running TLS-only Jaeger and the files a client needs.
pub struct TlsJaeger {
    jaeger: Jaeger,
    dir: PathBuf,
    _process: Process,
}

impl TlsJaeger {
    /// Makes the certificates in `dir` and starts Jaeger; waits until its query API
    /// answers.
    pub fn start(dir: &Path) -> TlsJaeger {
        std::fs::create_dir_all(dir).expect("create the TLS Jaeger's directory");
        make_certificates(dir);
        let (otlp, query, query_grpc) = (free_port(), free_port(), free_port());
        let config = dir.join("jaeger.yaml");
        std::fs::write(&config, config_yaml(dir, otlp, query, query_grpc))
            .expect("write jaeger.yaml");
        let bin = provisioned_bin().expect("provisioned binaries");
        let mut command = Command::new(bin.join("jaeger"));
        command.arg(format!("--config=file:{}", config.display()));
        let process = Process::spawn("tls-jaeger", command, dir.join("jaeger.log"));
        let query = format!("127.0.0.1:{query}");
        blocking_eventually(
            Duration::from_secs(60),
            "the TLS Jaeger's query API",
            || get_json(&query, "/api/services"),
        );
        TlsJaeger {
            jaeger: Jaeger::from(scripts::Jaeger {
                otlp_http: format!("https://127.0.0.1:{otlp}"),
                query,
            }),
            dir: dir.to_owned(),
            _process: process,
        }
    }

    /// Its addresses and query API (`otlp_http_endpoint` is `https://`).
    pub fn jaeger(&self) -> &Jaeger {
        &self.jaeger
    }

    /// The CA that signed its certificate and the client's (PEM).
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A client certificate it accepts (PEM) and its key.
    pub fn client_identity(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("client.pem"), self.dir.join("client.key"))
    }
}

fn config_yaml(dir: &Path, otlp: u16, query: u16, query_grpc: u16) -> String {
    let file = |name: &str| dir.join(name).display().to_string();
    format!(
        "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
        tls:
          cert_file: {server_cert}
          key_file: {server_key}
          client_ca_file: {ca}
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
    http:
      endpoint: 127.0.0.1:{query}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
",
        server_cert = file("server.pem"),
        server_key = file("server.key"),
        ca = file("ca.pem"),
    )
}

/// A CA, and certificates it signs: `server` for 127.0.0.1, `client` for client auth.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let mut command = Command::new("openssl");
        command.args(args).current_dir(dir);
        output(command).unwrap_or_else(|e| panic!("openssl {args:?}: {e}"));
    };
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=tidal-test-ca"];
    ca.extend(key);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(&ca);
    for (name, extensions) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (key_file, csr, cert, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&ext), extensions).expect("write extensions");
        let subject = format!("/CN=tidal-test-{name}");
        let mut request = vec!["req", "-new", "-subj", &subject];
        request.extend(key);
        request.extend(["-keyout", &key_file, "-out", &csr]);
        openssl(&request);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &cert,
            "-extfile",
            &ext,
        ]);
    }
}

//! The two ways to install — `kubectl apply -k deploy/` and the Helm chart — rendered
//! by the real kubectl and helm: the chart passes `helm lint --strict`, its schema
//! refuses bad values by name, and both renderings install the same controller (the
//! same CRD, permissions, pod, disruption budget and metrics Service). tests/node.rs
//! installs both on a real node.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tidal_harness as common;

use common::cluster::{REPO, provisioned_bin};
use common::node::helm_command;

fn bin() -> PathBuf {
    provisioned_bin().unwrap_or_else(|e| panic!("provisioned binaries: {e}"))
}

fn chart() -> PathBuf {
    Path::new(REPO).join("deploy/helm/tidal-scheduler")
}

/// Runs `helm ARGS`, its state in a scratch directory; (success, stdout, stderr).
fn helm(args: &[&str]) -> (bool, String, String) {
    let home = common::target_tmpdir().join(format!("helm-home-{}", std::process::id()));
    let mut command = helm_command(&bin(), &home);
    command.args(args);
    run(command)
}

/// Runs `kubectl ARGS`; (success, stdout, stderr).
fn kubectl(args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(bin().join("kubectl"));
    command.args(args);
    run(command)
}

fn run(mut command: Command) -> (bool, String, String) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn documents(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
    documents
        .into_iter()
        .filter(|d| !d.is_null())
        .map(numbers_as_floats)
        .collect()
}

/// The same document with every number a float: kustomize writes the CRD's `100` as
/// `100.0`, which is the same number.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

fn kustomize() -> Vec<Value> {
    let deploy = Path::new(REPO).join("deploy");
    let (ok, out, err) = kubectl(&["kustomize", deploy.to_str().unwrap()]);
    assert!(ok, "kubectl kustomize deploy/: {err}");
    documents(&out)
}

fn helm_template(values: &[&str]) -> Result<Vec<Value>, String> {
    let chart = chart();
    let mut args = vec![
        "template",
        "tidal-scheduler",
        chart.to_str().unwrap(),
        "--namespace",
        "tidal-system",
        "--include-crds",
    ];
    for value in values {
        args.extend(["--set", value]);
    }
    let (ok, out, err) = helm(&args);
    if ok { Ok(documents(&out)) } else { Err(err) }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Every label of `selector` is on `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

/// The pod spec without what names the installation (label selectors).
fn pod_spec(deployment: &Value) -> Value {
    let mut spec = deployment["spec"]["template"]["spec"].clone();
    spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        ["labelSelector"] = Value::Null;
    spec
}

/// The name and namespace of every object, but the Namespace kustomize creates (Helm
/// installs into `--namespace`, created with `--create-namespace`).
fn inventory(objects: &[Value]) -> Vec<(String, String, String)> {
    let mut names: Vec<(String, String, String)> = objects
        .iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|o| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&o["kind"]),
                text(&o["metadata"]["name"]),
                text(&o["metadata"]["namespace"]),
            )
        })
        .collect();
    names.sort();
    names
}

#[test]
fn the_chart_passes_helm_lint_strict() {
    for values in [
        &[][..],
        &[
            "watchNamespaces={team-a,team-b}",
            "otel.endpoint=http://collector:4318",
            "serviceMonitor.enabled=true",
        ][..],
    ] {
        let chart = chart();
        let mut args = vec!["lint", "--strict", chart.to_str().unwrap()];
        for value in values {
            args.extend(["--set", value]);
        }
        let (ok, out, err) = helm(&args);
        assert!(ok, "helm lint --strict {values:?}:\n{out}{err}");
    }
}

#[test]
fn the_charts_schema_refuses_bad_values_by_name() {
    for (value, named) in [
        ("replicaCount=0", "/replicaCount"),
        (
            "leaderElection.leaseDuration=15",
            "/leaderElection/leaseDuration",
        ),
        ("logFormat=xml", "/logFormat"),
        ("watchNamespaces={Not_A_Name}", "/watchNamespaces/0"),
        ("otel.endpoint=collector:4318", "/otel/endpoint"),
        ("otel.headersSecret.name=otlp-auth", "/otel/headersSecret"),
        ("otel.tls.secretName=Not_A_Name", "/otel/tls/secretName"),
        ("replicas=3", "replicas"),
        // (helm 4.3.1 reports a wrong location for a bad property name, but names it)
        (
            "admissionPolicy.scaleTargets.Widget/example=widgets",
            "invalid propertyName 'Widget/example'",
        ),
    ] {
        let error = helm_template(&[value]).expect_err(value);
        assert!(
            error.contains(named),
            "{value}: the error should name {named}:\n{error}"
        );
    }
}

#[test]
fn the_chart_takes_otlp_headers_and_tls_files_from_secrets() {
    let objects = helm_template(&[
        "otel.endpoint=https://collector.example:4318",
        "otel.headersSecret.name=otlp-auth",
        "otel.headersSecret.key=headers",
        "otel.tls.secretName=otlp-tls",
        "otel.tls.certificate=tls.crt",
        "otel.tls.key=tls.key",
    ])
    .expect("helm template");
    let pod = &find(&objects, "Deployment", "tidal-scheduler")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {:#}", container["env"]))
    };
    assert_eq!(
        env("OTEL_EXPORTER_OTLP_HEADERS")["valueFrom"]["secretKeyRef"],
        json!({ "name": "otlp-auth", "key": "headers" })
    );
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    for (name, file) in [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "ca.crt"),
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "tls.crt"),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "tls.key"),
    ] {
        assert_eq!(env(name)["value"], json!(format!("{mount}/{file}")));
    }
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "otlp-tls");
    assert_eq!(container["volumeMounts"][0]["readOnly"], true);
    // Without them: no such variable, no volume.
    let objects = helm_template(&["otel.endpoint=https://collector.example:4318"]).unwrap();
    let pod = &find(&objects, "Deployment", "tidal-scheduler")["spec"]["template"]["spec"];
    assert!(pod["volumes"].is_null(), "{pod:#}");
    let text = pod.to_string();
    assert!(!text.contains("OTEL_EXPORTER_OTLP_HEADERS") && !text.contains("CERTIFICATE"));
}

#[test]
fn the_charts_crd_is_deploy_crd_yaml() {
    let chart_crd = std::fs::read_to_string(chart().join("crds/crds.yaml")).expect("read");
    let crd = std::fs::read_to_string(Path::new(REPO).join("deploy/crd.yaml")).expect("read");
    assert!(
        chart_crd == crd,
        "deploy/helm/tidal-scheduler/crds/crds.yaml is stale: copy deploy/crd.yaml"
    );
}

#[test]
fn kustomize_and_helm_install_the_same_controller() {
    let kustomized = kustomize();
    let helm = helm_template(&[]).expect("helm template");
    assert_eq!(inventory(&kustomized), inventory(&helm), "the same objects");

    let crd = "tidalschedulers.scheduling.tidal.io";
    assert_eq!(
        find(&kustomized, "CustomResourceDefinition", crd)["spec"],
        find(&helm, "CustomResourceDefinition", crd)["spec"]
    );
    for (kind, name) in [
        ("ClusterRole", "tidal-scheduler"),
        ("Role", "tidal-scheduler-leader-election"),
    ] {
        assert_eq!(
            find(&kustomized, kind, name)["rules"],
            find(&helm, kind, name)["rules"],
            "{kind} {name}"
        );
    }
    for (kind, name) in [
        ("ClusterRoleBinding", "tidal-scheduler"),
        ("RoleBinding", "tidal-scheduler-leader-election"),
    ] {
        for field in ["roleRef", "subjects"] {
            assert_eq!(
                find(&kustomized, kind, name)[field],
                find(&helm, kind, name)[field],
                "{kind} {name} {field}"
            );
        }
    }
    let (ours, theirs) = (
        find(&kustomized, "Deployment", "tidal-scheduler"),
        find(&helm, "Deployment", "tidal-scheduler"),
    );
    assert_eq!(pod_spec(ours), pod_spec(theirs), "the pod");
    for field in ["replicas", "strategy"] {
        assert_eq!(
            ours["spec"][field], theirs["spec"][field],
            "Deployment {field}"
        );
    }
    assert_eq!(
        find(&kustomized, "PodDisruptionBudget", "tidal-scheduler")["spec"]["maxUnavailable"],
        find(&helm, "PodDisruptionBudget", "tidal-scheduler")["spec"]["maxUnavailable"]
    );
    let policy = "tidal-scheduler-scale-permission";
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert_eq!(
            find(&kustomized, kind, policy)["spec"],
            find(&helm, kind, policy)["spec"],
            "{kind}: deploy/helm/tidal-scheduler/templates/admission.yaml is stale"
        );
    }
    for (kind, name) in [
        ("PriorityLevelConfiguration", "tidal-scheduler"),
        ("FlowSchema", "tidal-scheduler"),
        ("FlowSchema", "tidal-scheduler-leader-election"),
    ] {
        assert_eq!(
            find(&kustomized, kind, name)["spec"],
            find(&helm, kind, name)["spec"],
            "{kind} {name}: deploy/helm/tidal-scheduler/templates/flowcontrol.yaml is stale"
        );
    }
    let mapping = "tidal-scheduler-scale-targets";
    assert_eq!(
        find(&kustomized, "ConfigMap", mapping)["data"],
        find(&helm, "ConfigMap", mapping)["data"]
    );
    let service = "tidal-scheduler-metrics";
    for field in ["ports", "clusterIP"] {
        assert_eq!(
            find(&kustomized, "Service", service)["spec"][field],
            find(&helm, "Service", service)["spec"][field],
            "Service {field}"
        );
    }

    // Within each rendering, the selectors select the controller's pods and the Lease
    // the pods use is the one the Role grants.
    for objects in [&kustomized, &helm] {
        let deployment = find(objects, "Deployment", "tidal-scheduler");
        let labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert!(selects(
            &deployment["spec"]["selector"]["matchLabels"],
            labels
        ));
        let pdb = find(objects, "PodDisruptionBudget", "tidal-scheduler");
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
        assert!(selects(
            &find(objects, "Service", service)["spec"]["selector"],
            labels
        ));
        let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .expect("env");
        let lease = env
            .iter()
            .find(|e| e["name"] == "TIDAL_LEASE_NAME")
            .expect("TIDAL_LEASE_NAME")["value"]
            .clone();
        let role = find(objects, "Role", "tidal-scheduler-leader-election");
        assert_eq!(role["rules"][1]["resourceNames"][0], lease);
        // API Priority and Fairness classifies the pods' service account, and its Lease
        // requests where the Lease lives.
        let pods = &deployment["spec"]["template"]["spec"];
        let account = find(objects, "ServiceAccount", "tidal-scheduler");
        for name in ["tidal-scheduler", "tidal-scheduler-leader-election"] {
            let schema = &find(objects, "FlowSchema", name)["spec"];
            let subject = &schema["rules"][0]["subjects"][0]["serviceAccount"];
            assert_eq!(
                subject["name"], pods["serviceAccountName"],
                "FlowSchema {name}"
            );
            assert_eq!(subject["namespace"], account["metadata"]["namespace"]);
        }
        let schema = &find(objects, "FlowSchema", "tidal-scheduler-leader-election")["spec"];
        assert_eq!(
            schema["rules"][0]["resourceRules"][0]["namespaces"][0],
            role["metadata"]["namespace"]
        );
    }
}

#[test]
fn the_chart_maps_more_kinds_for_the_admission_policy_or_leaves_it_out() {
    let helm = helm_template(&["admissionPolicy.scaleTargets.Widget\\.example\\.com=widgets"])
        .expect("helm template");
    let data = &find(&helm, "ConfigMap", "tidal-scheduler-scale-targets")["data"];
    assert_eq!(data["Widget.example.com"], "widgets");
    assert_eq!(data["Deployment.apps"], "deployments", "the defaults stay");
    let helm = helm_template(&["admissionPolicy.enabled=false"]).expect("helm template");
    assert!(helm.iter().all(|o| o["kind"] != "ValidatingAdmissionPolicy"
        && o["kind"] != "ValidatingAdmissionPolicyBinding"
        && o["kind"] != "ConfigMap"));
}

#[test]
fn watched_namespaces_get_roles_instead_of_a_cluster_role() {
    let helm = helm_template(&["watchNamespaces={team-a,team-b}"]).expect("helm template");
    // One ClusterRole only: reading ClusterTidalCalendars, which a Role cannot grant.
    let cluster_roles: Vec<_> = helm.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    assert_eq!(cluster_roles.len(), 1, "{cluster_roles:?}");
    assert_eq!(
        cluster_roles[0]["metadata"]["name"],
        "tidal-scheduler-cluster-calendars"
    );
    assert_eq!(
        cluster_roles[0]["rules"],
        serde_json::json!([{
            "apiGroups": ["scheduling.tidal.io"],
            "resources": ["clustertidalcalendars"],
            "verbs": ["get", "list", "watch"],
        }])
    );
    let kustomized = kustomize();
    let cluster_rules = &find(&kustomized, "ClusterRole", "tidal-scheduler")["rules"];
    for namespace in ["team-a", "team-b"] {
        let role = helm
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == namespace)
            .unwrap_or_else(|| panic!("no Role in {namespace}"));
        assert_eq!(&role["rules"], cluster_rules, "{namespace}");
    }
    let deployment = find(&helm, "Deployment", "tidal-scheduler");
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "TIDAL_NAMESPACES" && e["value"] == "team-a,team-b")
    );
}

#[test]
fn the_kustomize_components_add_monitoring_and_an_otlp_endpoint() {
    // An overlay as a user writes it, outside deploy/ (kustomize refuses a cycle).
    let overlay = common::target_tmpdir().join(format!("overlay-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).expect("create overlay");
    let deploy = Path::new(REPO).join("deploy");
    let deploy = deploy.canonicalize().expect("deploy/");
    let relative = |path: &Path| {
        let depth = overlay.components().count() - 1;
        let up = "../".repeat(depth);
        format!("{up}{}", path.to_str().unwrap().trim_start_matches('/'))
    };
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}, {}]\n",
            relative(&deploy),
            relative(&deploy.join("monitoring")),
            relative(&deploy.join("components/otel"))
        ),
    )
    .expect("write kustomization.yaml");
    let (ok, out, err) = kubectl(&["kustomize", overlay.to_str().unwrap()]);
    assert!(
        ok,
        "kubectl kustomize of an overlay with the components: {err}"
    );
    let objects = documents(&out);
    let monitor = find(&objects, "ServiceMonitor", "tidal-scheduler");
    let service = find(&objects, "Service", "tidal-scheduler-metrics");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    find(&objects, "PrometheusRule", "tidal-scheduler");
    let dashboard = find(&objects, "ConfigMap", "tidal-scheduler-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = dashboard["data"]["grafana-dashboard.json"]
        .as_str()
        .expect("the dashboard");
    serde_json::from_str::<Value>(json).expect("the dashboard is JSON");
    let env =
        find(&objects, "Deployment", "tidal-scheduler")["spec"]["template"]["spec"]["containers"]
            [0]["env"]
            .clone();
    assert!(
        env.as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{env:#}"
    );
    // The base's own variables are still there.
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "POD_NAME")
    );
}

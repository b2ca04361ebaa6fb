//! The monitoring manifests of `deploy/monitoring/`: the PrometheusRule's rules pass
//! `promtool check rules` and their unit tests (`rules-test.yaml`, run by the real
//! `promtool`); the dashboard and the ServiceMonitor are well-formed. The dashboard's
//! queries are run against a real Prometheus in tests/observability.rs.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tidal_harness as common;

use common::cluster::REPO;
use common::prometheus::promtool;

fn monitoring(file: &str) -> PathBuf {
    Path::new(REPO).join("deploy/monitoring").join(file)
}

fn yaml(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(monitoring(file)).expect("read manifest");
    serde_saphyr::from_multiple(&text).expect("YAML")
}

/// The PrometheusRule's `spec` as a plain rule file next to a copy of rules-test.yaml,
/// in a scratch directory; returns that directory.
fn rule_files() -> PathBuf {
    let rule = yaml("prometheus-rule.yaml").remove(0);
    assert_eq!(rule["kind"], "PrometheusRule");
    let dir = common::target_tmpdir().join(format!("rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    let spec = serde_json::to_string(&rule["spec"]).expect("JSON");
    // JSON is YAML.
    std::fs::write(dir.join("rules.yaml"), spec).expect("write rules.yaml");
    std::fs::copy(monitoring("rules-test.yaml"), dir.join("rules-test.yaml"))
        .expect("copy rules-test.yaml");
    dir
}

#[test]
fn the_alerting_rules_are_valid_and_pass_their_unit_tests() {
    let dir = rule_files();
    let rules = dir.join("rules.yaml");
    let (valid, output) = promtool(&["check", "rules", rules.to_str().unwrap()], "");
    assert!(valid, "promtool check rules:\n{output}");
    let tests = dir.join("rules-test.yaml");
    let (passed, output) = promtool(&["test", "rules", tests.to_str().unwrap()], "");
    assert!(passed, "promtool test rules:\n{output}");
}

#[test]
fn every_alert_has_a_unit_test() {
    let rule = yaml("prometheus-rule.yaml").remove(0);
    let tests = yaml("rules-test.yaml").remove(0);
    let tested: Vec<&str> = tests["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|test| test["alert_rule_test"].as_array().into_iter().flatten())
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    let alerts = rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .filter_map(|rule| rule["alert"].as_str())
        .collect::<Vec<_>>();
    // Counted independently of the parse above: a path that finds nothing must fail.
    let text = std::fs::read_to_string(monitoring("prometheus-rule.yaml")).expect("read");
    let written = text
        .lines()
        .filter(|line| line.trim_start().starts_with("- alert:"))
        .count();
    assert!(written > 0, "prometheus-rule.yaml has no alerts");
    assert_eq!(alerts.len(), written, "alerts found: {alerts:?}");
    for alert in alerts {
        assert!(
            tested.contains(&alert),
            "{alert} has no unit test in rules-test.yaml"
        );
    }
}

#[test]
fn the_service_monitor_scrapes_the_pods_metrics_port() {
    let documents = yaml("servicemonitor.yaml");
    let monitor = documents
        .iter()
        .find(|d| d["kind"] == "ServiceMonitor")
        .expect("a ServiceMonitor");
    let services: Vec<Value> = serde_saphyr::from_multiple(
        &std::fs::read_to_string(Path::new(REPO).join("deploy/service.yaml")).expect("read"),
    )
    .expect("YAML");
    let service = &services[0];
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        service["metadata"]["labels"]
    );
    let controller: Vec<Value> = serde_saphyr::from_multiple(
        &std::fs::read_to_string(Path::new(REPO).join("deploy/controller.yaml")).expect("read"),
    )
    .expect("YAML");
    let deployment = controller
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(
            &pod_labels[key], value,
            "the Service selects the controller's pods"
        );
    }
}

#[test]
fn the_dashboard_is_grafana_json_with_a_query_per_panel() {
    let text = std::fs::read_to_string(monitoring("grafana-dashboard.json")).expect("read");
    let dashboard: Value = serde_json::from_str(&text).expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 12);
    for panel in panels {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        for target in targets {
            let expr = target["expr"].as_str().expect("expr");
            assert!(expr.contains("tidal_scheduler_"), "{expr}");
        }
    }
}

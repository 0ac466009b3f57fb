//! The alert rules for maintenance windows and agreeing locations, with the real tools: promtool
//! runs their unit tests (a failure in a window does not page, the same failure after it does;
//! two of three locations page once for the target, one location alone is a ticket), and amtool
//! routes those alerts and renders messages that name the locations.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::run;
use common::services::binary;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn promtool_maintenance_location_and_build_change_rule_tests() {
    // build_change_test.yml: a target down 11 minutes after its serving build changed says so in
    // the page; the same outage with no change seen does not.
    for file in [
        "maintenance_test.yml",
        "locations_test.yml",
        "build_change_test.yml",
    ] {
        let out = run(Command::new(binary("promtool", "prometheus"))
            .args(["test", "rules"])
            .arg(root().join("deploy/prometheus/tests").join(file)));
        assert!(out.contains("SUCCESS"), "{file}: {out}");
    }
}

#[test]
fn location_alerts_route_by_severity_and_name_their_locations() {
    let am = root().join("deploy/alertmanager");
    let amtool = binary("amtool", "prometheus-alertmanager");
    for (alert, severity, receiver) in [
        ("LLMCanaryTargetFailingFromLocations", "P0", "page"),
        ("LLMCanaryLocationFailing", "P2", "ticket"),
    ] {
        let out = run(Command::new(&amtool)
            .args(["config", "routes", "test", "--config.file"])
            .arg(am.join("alertmanager.yml"))
            .arg(format!("severity={severity}"))
            .args([&format!("alertname={alert}"), "target=t", "region=eu"]));
        assert_eq!(out.lines().next().map(str::trim), Some(receiver), "{alert}");
    }
    let rendered = run(Command::new(&amtool)
        .current_dir(&am)
        .args([
            "template",
            "render",
            "--template.glob=templates/*.tmpl",
            "--template.data=tests/locations.json",
        ])
        .arg("--template.text={{ template \"llm_canary.title\" . }}\n{{ template \"llm_canary.text\" . }}"));
    for line in [
        "[FIRING:2] P0 LLMCanaryTargetFailingFromLocations on chat-7b",
        "*chat-7b fails from 2 of 3 locations*",
        "• failing from: eu-west, us-east\n",
        "target: chat-13b · location: ap-south\n• failing from: ap-south\n",
    ] {
        assert!(
            rendered.contains(line),
            "{line:?} missing from:\n{rendered}"
        );
    }
}

"""The monitoring files in deploy/ (Prometheus's alert rules, Grafana's dashboard) parse, and
every metric their expressions name is one the service exports: a renamed metric fails here,
not silently on an operator's dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from service.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
#: a metric name in a PromQL expression (label names and functions never start so)
METRIC = re.compile(r"\b(?:wizard_arena|process)_[a-z_]+\b")
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"), "gauge": ("",)}


def exported() -> set[str]:
    """Every series name the API's registry can expose."""
    names = set()
    for family in Metrics(["submitMove"]).registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def check(expr: str, where: str) -> None:
    named = set(METRIC.findall(expr))
    assert named, f"{where}: {expr!r} names no metric of the service"
    assert named <= exported(), f"{where}: {sorted(named - exported())} are not exported by the service"


def test_the_alert_rules_parse_and_cover_clock_lag_errors_and_redis():
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus-alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    for name, rule in alerts.items():
        check(rule["expr"], name)
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"], name
    covered = " ".join(rule["expr"] for rule in alerts.values())
    for metric in ("wizard_arena_clock_heartbeat_age_seconds", "wizard_arena_deadline_lag_seconds",
                   "wizard_arena_requests_total", "wizard_arena_redis_up"):
        assert metric in covered, f"no alert watches {metric}"


def test_the_dashboard_parses_and_every_panel_asks_for_exported_metrics():
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["panels"]
    shown = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            check(target["expr"], panel["title"])
            shown.update(METRIC.findall(target["expr"]))
    for metric in ("wizard_arena_matches_live", "wizard_arena_waits_open", "wizard_arena_websockets_open",
                   "wizard_arena_job_queue_depth", "wizard_arena_deadline_lag_seconds", "wizard_arena_settlement_backlog",
                   "wizard_arena_graphql_seconds_bucket", "process_cpu_seconds_total", "process_resident_memory_bytes",
                   "process_open_fds"):
        assert metric in shown, f"the dashboard shows no {metric}"


def test_the_worker_container_checks_its_clock_too():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    check_command = compose["services"]["worker"]["healthcheck"]["test"]
    assert check_command[1:] == ["wizard-arena", "worker", "--check"], check_command

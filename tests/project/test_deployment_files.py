"""The container files hold what the production path relies on. Docker may not run where the
tests do, so these read the files: the Dockerfile (slim base, non-root user, health check,
the default command), docker-compose.yml (Redis with its append-only file on a volume, two
API replicas and a worker on that Redis, health checks the others wait for) and the load
balancer's configuration."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = re.compile(r"^redis://redis:6379(/\d+)?$")


# ------------------------------------------------------------------ Dockerfile
def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_every_stage_starts_from_python_311_slim():
    stages = _stages()
    assert stages, "the Dockerfile has no FROM"
    for stage in stages:
        base = stage[0][1].split()[0]
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", base), f"base image {base}: use python:3.11-slim"


def test_the_package_is_installed_with_pip_from_the_lock_with_hashes():
    """The image is reproducible: its dependencies come from requirements/lock.txt, every one
    checked against its hashes, and the project is installed without resolving anything more."""
    runs = [args for word, args in _instructions() if word == "RUN"]
    installs = [part for run in runs for part in run.split("&&") if re.search(r"\bpip install\b", part)]
    assert any("--require-hashes" in run and "-r requirements/lock.txt" in run for run in installs), installs
    project = [run for run in installs if re.search(r"""(\s|^)['"]?\.(\[server\])?['"]?(\s|$)""", run)]
    assert project and all("--no-deps" in run for run in project), "pip install --no-deps ., after the lock"


def test_the_final_stage_runs_as_a_non_root_user():
    users = [args for word, args in _stages()[-1] if word == "USER"]
    assert users, "the final stage needs a USER"
    assert users[-1].split(":")[0] not in ("root", "0"), "the service must not run as root"


def test_healthcheck_asks_healthz_with_python():
    """The image's own check is liveness (/healthz): an orchestrator that replaces unhealthy
    containers must not restart every API over a Redis or archive outage (/readyz's 503)."""
    checks = [args for word, args in _stages()[-1] if word == "HEALTHCHECK"]
    assert checks, "the final stage needs a HEALTHCHECK"
    check = checks[-1]
    assert "CMD" in check and "/healthz" in check and "/readyz" not in check
    assert "urllib" in check and "curl" not in check, "python:3.11-slim has no curl: use python's urllib"


def test_port_and_default_command():
    final = _stages()[-1]
    assert ("EXPOSE", "8000") in final
    cmd = [args for word, args in final if word == "CMD"][-1]
    words = yaml.safe_load(cmd) if cmd.startswith("[") else shlex.split(cmd)
    assert words == ["wizard-arena", "serve", "--host", "0.0.0.0", "--port", "8000"]


def test_dockerignore_keeps_the_build_context_small_but_complete():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", ".venv-run"} <= ignored
    # what the Dockerfile copies must not be ignored
    copied = {
        src
        for word, args in _instructions()
        if word == "COPY" and not args.startswith("--from")
        for src in args.split()[:-1]
    }
    assert {"pyproject.toml", "README.md", "wizard", "service", "worker"} <= copied
    assert not copied & ignored


def test_the_image_gets_every_package_pyproject_installs():
    """`pip install .` in the image finds only what was copied: a package pyproject.toml
    includes but the Dockerfile leaves out (the SDK, which the command imports) would be
    missing from the image."""
    include = re.search(r"include = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())
    assert include is not None
    packages = {name.strip(' "*') for name in include.group(1).split(",")}
    copied = {args.split()[0] for word, args in _instructions() if word == "COPY" and not args.startswith("--from")}
    assert packages <= copied, f"the Dockerfile does not copy {sorted(packages - copied)}"


# ------------------------------------------------------------------ docker-compose.yml
@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(compose, dict) and isinstance(compose.get("services"), dict)
    return compose["services"]  # type: ignore[no-any-return]


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _with_command(services: dict[str, Any], word: str, profile: str | None = None) -> dict[str, dict[str, Any]]:
    """Our image's services running ``wizard-arena <word>`` (the image's CMD is serve): those
    `docker compose up` starts (no profile), or those of ``profile``."""
    found = {}
    for name, service in services.items():
        if (profile not in service.get("profiles", [])) if profile else service.get("profiles"):
            continue
        command = _command(service)
        ours = "build" in service or str(service.get("image", "")).startswith("wizard-arena")
        if ours and (command[1:2] == [word] or (not command and word == "serve")):
            found[name] = service
    return found


def test_redis_keeps_an_append_only_file_on_a_volume(services):
    redis = services["redis"]
    assert str(redis["image"]).startswith("redis:7")
    command = _command(redis)
    assert "--appendonly" in command and command[command.index("--appendonly") + 1] == "yes"
    assert any(str(v).split(":")[1:2] == ["/data"] for v in redis.get("volumes", [])), "AOF on a volume at /data"
    assert "healthcheck" in redis


def _replicas(service: dict[str, Any]) -> int:
    return int(service.get("deploy", {}).get("replicas", 1))


def test_two_api_replicas_and_a_worker(services):
    apis = _with_command(services, "serve")
    workers = _with_command(services, "worker")
    assert sum(_replicas(s) for s in apis.values()) >= 2, "the production path runs at least two API processes"
    assert sum(_replicas(s) for s in workers.values()) >= 1, "a worker keeps the matches' clocks"
    for name, service in {**apis, **workers}.items():
        assert REDIS_URL.match(_environment(service).get("REDIS_URL", "")), f"{name}: REDIS_URL must name the redis service"
        assert service.get("depends_on", {}).get("redis", {}).get("condition") == "service_healthy", name
        assert "healthcheck" in service, f"{name} needs a health check"
    for name, service in apis.items():
        # what the load balancer waits for: the replica ready to serve, not merely alive
        assert "/readyz" in " ".join(service["healthcheck"]["test"]), name
        assert "--host" in _command(service) and "0.0.0.0" in _command(service), f"{name} must listen beyond localhost"


def _seconds(duration: str) -> float:
    """A compose duration ("1m30s", "45s", "500ms") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a duration: {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)


def test_the_api_and_the_workers_get_longer_than_the_drain_to_stop(services):
    """`docker compose restart` sends SIGTERM, then SIGKILL after stop_grace_period (10 s by
    default): shorter than the API's drain, it would cut draining requests off mid-move."""
    from service.api.draining import DRAIN_SECONDS

    for name, service in {**_with_command(services, "serve"), **_with_command(services, "worker")}.items():
        grace = service.get("stop_grace_period")
        assert grace is not None, f"{name} needs a stop_grace_period longer than the drain ({DRAIN_SECONDS} s)"
        assert _seconds(str(grace)) > DRAIN_SECONDS, f"{name}: stop_grace_period {grace} <= {DRAIN_SECONDS} s"


def test_the_load_balancer_knows_every_api_replica(services):
    apis = _with_command(services, "serve")
    balancers = {name: s for name, s in services.items() if str(s.get("image", "")).startswith("nginx")}
    if not balancers:  # replicas published without a balancer are fine too
        return
    for name, balancer in balancers.items():
        conditions = balancer.get("depends_on", {})
        for api in apis:
            assert conditions.get(api, {}).get("condition") == "service_healthy", f"{name} waits for {api}"
        mounts = [str(v).split(":")[0] for v in balancer.get("volumes", [])]
        configs = [ROOT / m for m in mounts if m.startswith("./deploy/")]
        assert configs and all(c.exists() for c in configs), f"{name}'s configuration lives under deploy/"
        text = "\n".join(c.read_text() for c in configs)
        for api in apis:
            assert f"server {api}:8000" in text, f"{name} must send requests to {api}"
        assert "Upgrade $http_upgrade" in text, "subscriptions need WebSocket upgrades through the balancer"
        if "healthcheck" in balancer:  # the front door: the service ready behind it, not a process alive
            assert "/readyz" in " ".join(balancer["healthcheck"]["test"]), name


def test_postgresql_keeps_the_archive_on_a_volume_and_migrate_runs_once_before_the_rest(services):
    postgres = services["postgres"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert any(str(v).split(":")[1:2] == ["/var/lib/postgresql/data"] for v in postgres.get("volumes", [])), \
        "the archive on a volume"
    assert "healthcheck" in postgres
    migrates = _with_command(services, "migrate")
    assert len(migrates) == 1, "one one-shot `wizard-arena migrate`"
    [(migrate_name, migrate)] = migrates.items()
    assert str(migrate.get("restart", "no")) == "no", "migrate runs once"
    assert migrate.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy"
    url = _environment(migrate).get("DATABASE_URL", "")
    assert url.startswith("postgresql://") and "@postgres:" in url, "DATABASE_URL must name the postgres service"
    for name, service in {**_with_command(services, "serve"), **_with_command(services, "worker")}.items():
        assert _environment(service).get("DATABASE_URL") == url, f"{name}: the same DATABASE_URL as migrate"
        condition = service.get("depends_on", {}).get(migrate_name, {}).get("condition")
        assert condition == "service_completed_successfully", f"{name} starts once the schema is up to date"


def test_the_cluster_profile_runs_the_service_on_three_masters_with_replicas_and_a_queue_redis(services):
    nodes = {name: s for name, s in services.items() if "--cluster-enabled" in _command(s)}
    assert len(nodes) == 6 and all(s.get("profiles") == ["cluster"] for s in nodes.values())
    for name, node in nodes.items():
        command = _command(node)
        assert command[command.index("--appendonly") + 1] == "yes", f"{name}: AOF"
        assert any(str(v).split(":")[1:2] == ["/data"] for v in node.get("volumes", [])), f"{name}: data on a volume"
        assert "healthcheck" in node
    addresses = {name: node["networks"]["cluster"]["ipv4_address"] for name, node in nodes.items()}
    assert len(set(addresses.values())) == 6, "each node at a fixed address of its own"
    [create] = [s for s in services.values() if "--cluster-replicas" in " ".join(_command(s))]
    script = " ".join(_command(create))
    assert "--cluster-replicas 1" in script and all(f"{a}:6379" in script for a in addresses.values())
    assert str(create.get("restart")) == "no"
    apis, workers = _with_command(services, "serve", "cluster"), _with_command(services, "worker", "cluster")
    assert len(apis) == 1 and len(workers) == 1
    for name, service in {**apis, **workers}.items():
        env = _environment(service)
        hosts = [node.split(":")[0] for node in env["REDIS_URL"].removeprefix("redis://").split("/")[0].split(",")]
        assert len(hosts) >= 3 and set(hosts) <= set(addresses.values()), f"{name}: REDIS_URL names several nodes"
        queue = env["ARENA_QUEUE_URL"].removeprefix("redis://").split(":")[0]
        assert "cluster" in services[queue].get("profiles", []) and "--cluster-enabled" not in _command(services[queue])
        assert service["depends_on"]["redis-cluster-create"]["condition"] == "service_completed_successfully"
        assert "healthcheck" in service

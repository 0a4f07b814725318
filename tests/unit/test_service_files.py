"""The service files (deploy/) stop the server the way tests/server/test_signals.py proves it stops."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT


def unit_settings(name: str) -> dict[str, str]:
    settings = {}
    for line in (ROOT / "deploy" / name).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def test_the_systemd_unit_stops_the_way_the_server_expects() -> None:
    settings = unit_settings("sparkwire.service")
    assert settings["KillMode"] == "mixed"
    assert settings["KillSignal"] == "SIGTERM"
    assert settings["Restart"] == "on-failure"
    assert settings["EnvironmentFile"].lstrip("-") == "/etc/sparkwire/sparkwire.env"
    grace = _env_file_grace()
    assert int(settings["TimeoutStopSec"]) >= grace + 20, "TimeoutStopSec must cover the drain and Spark"


@pytest.mark.parametrize(
    ("name", "installed"),
    [
        ("sparkwire.service", "sparkwire.service"),
        ("sparkwire-compute@.service", "sparkwire-compute@8101.service"),
        ("sparkwire-edge@.service", "sparkwire-edge@8001.service"),
    ],
)
def test_the_systemd_unit_verifies(tmp_path: Path, name: str, installed: str) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here")
    # The unit as shipped (a template as one of its instances), except that ExecStart names this
    # checkout's sparkwire (verify checks that the program exists).
    sparkwire = ROOT / ".venv" / "bin" / "sparkwire"
    if not sparkwire.exists():
        pytest.skip(f"{sparkwire} is not installed")
    unit = (ROOT / "deploy" / name).read_text()
    assert "ExecStart=/opt/sparkwire/bin/sparkwire serve" in unit
    copy = tmp_path / installed
    copy.write_text(unit.replace("/opt/sparkwire/bin/sparkwire", str(sparkwire)))
    result = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # no unknown keys, no warnings


@pytest.mark.parametrize("role", ["compute", "edge"])
def test_the_template_units_run_one_process_per_port_stopping_as_the_single_unit(role: str) -> None:
    """sparkwire-ROLE@PORT: the role, the instance as port and as its own data directory, the
    shared settings file, and the single unit's way of stopping."""
    settings = unit_settings(f"sparkwire-{role}@.service")
    data = f"/var/lib/sparkwire/{role}-%i"
    assert (
        settings["ExecStart"]
        == f"/opt/sparkwire/bin/sparkwire serve --role {role} --port %i --data-dir {data}"
    )
    assert "/var/lib/" + settings["StateDirectory"] == settings["WorkingDirectory"] == data
    single = unit_settings("sparkwire.service")
    for key in ("EnvironmentFile", "KillMode", "KillSignal", "TimeoutStopSec", "Restart", "User", "Type"):
        assert settings[key] == single[key], key


def test_the_settings_file_gives_the_template_units_the_sharded_tests_settings() -> None:
    """deploy/sparkwire.env's "Running at scale" lines, uncommented, are the settings every process of
    tests/server/test_sharded_compute.py gets."""
    from tests.server.test_sharded_compute import SLOTS, sharded_env

    text = (ROOT / "deploy" / "sparkwire.env").read_text().split("# Running at scale", 1)[1]
    scale = dict(line[1:].split("=", 1) for line in text.splitlines() if line.startswith("#SPARKWIRE_"))
    tested = sharded_env("redis://127.0.0.1:6379/0", "127.0.0.1:9092")
    assert set(scale) == set(tested)
    assert scale["SPARKWIRE_SOURCE"] == tested["SPARKWIRE_SOURCE"] == "kafka"
    assert scale["SPARKWIRE_COMPUTE_SLOTS"] == str(SLOTS) and SLOTS > 0
    assert scale["SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"  # deploy/kafka.sh's default port


def test_the_kubernetes_manifest_is_one_replica_with_probes_and_a_grace_above_the_drain() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with uvicorn[standard]")
    documents = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    by_kind = {d["kind"]: d for d in documents}
    assert set(by_kind) == {"Deployment", "Service", "PersistentVolumeClaim"}
    deployment = by_kind["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 1  # the embedded log: one server
    assert spec["strategy"]["type"] == "Recreate"
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    port_names = {p["name"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["port"] in port_names
    assert container["readinessProbe"]["httpGet"]["port"] in port_names

    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    drain = int(pre_stop[1]) + float(env["SPARKWIRE_SHUTDOWN_GRACE"])
    assert pod["terminationGracePeriodSeconds"] >= drain + 20, "the kubelet would SIGKILL mid-drain"

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (volume,) = pod["volumes"]
    assert mounts[volume["name"]] == env["SPARKWIRE_DATA_DIR"]
    assert (
        volume["persistentVolumeClaim"]["claimName"] == by_kind["PersistentVolumeClaim"]["metadata"]["name"]
    )

    service = by_kind["Service"]["spec"]
    assert service["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    assert {p["targetPort"] for p in service["ports"]} <= port_names


def _env_file_grace() -> float:
    for line in (ROOT / "deploy" / "sparkwire.env").read_text().splitlines():
        if line.startswith("SPARKWIRE_SHUTDOWN_GRACE="):
            return float(line.split("=", 1)[1])
    raise AssertionError("deploy/sparkwire.env sets no SPARKWIRE_SHUTDOWN_GRACE")

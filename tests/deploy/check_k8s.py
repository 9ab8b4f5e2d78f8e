#!/usr/bin/env python3
"""Offline consistency check of hipq's Kubernetes manifests (deploy/k8s).

No cluster is needed: checks each object's kind/apiVersion and required fields, and the
references between objects (selectors match pod labels, probes and Services name ports that
exist, mounts name volumes that exist, volumes name Secrets/PVCs defined in the set, GPU
workers request a GPU resource, kustomization lists files that exist).
Usage: check_k8s.py DIR   (exit 0 = all good; otherwise one line per problem)
"""
import pathlib
import sys

import yaml

API = {
    "Namespace": "v1", "Service": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1",
    "ConfigMap": "v1", "StatefulSet": "apps/v1", "Deployment": "apps/v1", "DaemonSet": "apps/v1",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}
WORKLOADS = {"StatefulSet", "Deployment", "DaemonSet"}
GPU_RESOURCES = {"nvidia.com/gpu", "amd.com/gpu"}


def main(root: pathlib.Path) -> int:
    problems, objects = [], []
    for path in sorted(root.glob("*.yaml")):
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            problems.append(f"{path}: not valid YAML: {e}")
            continue
        for d in docs:
            objects.append((path, d))

    def err(path, obj, msg):
        name = (obj.get("metadata") or {}).get("name", "?")
        problems.append(f"{path.name}: {obj.get('kind', '?')}/{name}: {msg}")

    secrets = {o["metadata"]["name"] for _, o in objects if o.get("kind") == "Secret"}
    pvcs = {o["metadata"]["name"] for _, o in objects if o.get("kind") == "PersistentVolumeClaim"}
    pod_label_sets, port_names = [], set()

    for path, o in objects:
        kind = o.get("kind")
        if kind not in API:
            err(path, o, f"unknown kind {kind!r}")
            continue
        if o.get("apiVersion") != API[kind]:
            err(path, o, f"apiVersion {o.get('apiVersion')!r}, expected {API[kind]!r}")
        if kind == "Kustomization":
            for r in o.get("resources", []):
                if not (root / r).exists():
                    err(path, o, f"resource {r!r} does not exist")
            continue
        if not (o.get("metadata") or {}).get("name"):
            err(path, o, "metadata.name missing")
        if kind not in WORKLOADS:
            continue
        spec = o.get("spec") or {}
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        if not match or any(labels.get(k) != v for k, v in match.items()):
            err(path, o, f"selector {match} does not match template labels {labels}")
        pod_label_sets.append(labels)
        pod = tmpl.get("spec") or {}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claim_templates = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"].get("secretName") not in secrets:
                err(path, o, f"volume {v['name']!r} names Secret {v['secret'].get('secretName')!r}, not defined")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"].get("claimName") not in pvcs:
                err(path, o, f"volume {v['name']!r} names PVC {v['persistentVolumeClaim'].get('claimName')!r}, not defined")
        containers = pod.get("containers") or []
        if not containers:
            err(path, o, "no containers")
        for c in containers:
            for field in ("name", "image"):
                if not c.get(field):
                    err(path, o, f"container without {field}")
            ports = {p.get("name") for p in c.get("ports", [])}
            port_names.update(ports)
            for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = c.get(probe_name)
                if not probe:
                    continue
                for handler in ("tcpSocket", "httpGet"):
                    if handler in probe:
                        port = probe[handler].get("port")
                        if isinstance(port, str) and port not in ports:
                            err(path, o, f"{probe_name} names port {port!r}, container has {sorted(ports)}")
            for m in c.get("volumeMounts", []):
                if m.get("name") not in volumes and m.get("name") not in claim_templates:
                    err(path, o, f"volumeMount {m.get('name')!r} has no volume")
            if "worker" in c.get("args", [])[:1]:
                if not (c.get("livenessProbe") or c.get("readinessProbe")):
                    err(path, o, "worker container has no health probe")
                limits = (c.get("resources") or {}).get("limits") or {}
                if not GPU_RESOURCES & set(limits):
                    err(path, o, f"worker container requests no GPU ({sorted(GPU_RESOURCES)})")

    for path, o in objects:
        if o.get("kind") != "Service":
            continue
        sel = (o.get("spec") or {}).get("selector") or {}
        if not any(all(ls.get(k) == v for k, v in sel.items()) for ls in pod_label_sets):
            err(path, o, f"selector {sel} matches no workload's pod labels")
        for p in (o.get("spec") or {}).get("ports", []):
            tp = p.get("targetPort")
            if isinstance(tp, str) and tp not in port_names:
                err(path, o, f"targetPort {tp!r} is not a named container port")

    for p in problems:
        print(p)
    kinds = sorted({o.get("kind", "?") for _, o in objects})
    print(f"check_k8s: {len(objects)} objects ({', '.join(kinds)}), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(pathlib.Path(sys.argv[1])))

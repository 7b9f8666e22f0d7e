"""The cluster's PrometheusRule (``deploy/k8s/monitoring/prometheusrule.yaml``),
written from the rule files the local stack's Prometheus loads, ``monitoring/rules.yml``
and ``monitoring/rules-kubernetes.yml``: the Prometheus Operator reads rules from that
resource, not from files.

    python -m stack prometheusrule    # write it (tests/test_k8s_monitoring.py checks it is current)
"""

from __future__ import annotations

import yaml

from . import pages
from .config import ROOT

RULE_FILES = (ROOT / "monitoring/rules.yml", ROOT / "monitoring/rules-kubernetes.yml")
TARGET = ROOT / "deploy/k8s/monitoring/prometheusrule.yaml"
HEADER = """\
# Written by `python -m stack prometheusrule` from monitoring/rules.yml and
# monitoring/rules-kubernetes.yml; edit those and write it again.
"""


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, and a multi-line expression as a block, as the
    manifests are written (deploy/k8s/.yamllint.yaml)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def rendered() -> str:
    groups = [group for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]]
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "flashsale"}, "spec": {"groups": groups}}
    return HEADER + yaml.dump(rule, Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True)


def write() -> bool:
    """Write the file; whether it changed."""
    return pages.page_write(TARGET, lambda _: rendered())

"""Parses a metrics exposition with the Prometheus project's own Python parser and prints
every sample as JSON: [{"name": ..., "labels": {...}, "value": ...}, ...].

    python parse_metrics.py prometheus < exposition.txt   # text format 0.0.4
    python parse_metrics.py openmetrics < exposition.txt  # OpenMetrics

A parse error exits non-zero with the parser's message.
"""
import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as prometheus_families

text = sys.stdin.read()
parse = openmetrics_families if sys.argv[1] == "openmetrics" else prometheus_families
samples = []
for family in parse(text):
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value, "type": family.type})
json.dump(samples, sys.stdout)

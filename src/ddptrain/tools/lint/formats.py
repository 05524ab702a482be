"""Findings where users read linters: GitHub Actions annotations (`--format github`) and SARIF 2.1.0
(`--format sarif`, for code-scanning pages)."""

from __future__ import annotations

from typing import Sequence

from ...version import __version__
from .rules import ERROR, Finding, Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _escape(text: str, property_value: bool = False) -> str:
    """GitHub's workflow-command escaping: %, CR and LF always; ':' and ',' in property values too."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def github_annotation(finding: Finding) -> str:
    level = "error" if finding.severity == ERROR else "warning"
    properties = f"file={_escape(finding.file, True)},line={finding.line},title={finding.rule}"
    return f"::{level} {properties}::{_escape(f'{finding.message} -> {finding.fix}')}"


def sarif(findings: Sequence[Finding], rules: Sequence[Rule]) -> dict:
    ids = [rule.id for rule in rules]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ddptrain lint",
                        "version": __version__,
                        "rules": [
                            {
                                "id": rule.id,
                                "shortDescription": {"text": rule.message},
                                "help": {"text": rule.fix},
                                "defaultConfiguration": {"level": "error" if rule.severity == ERROR else "warning"},
                                "properties": {"category": rule.category},
                            }
                            for rule in rules
                        ],
                    }
                },
                "results": [
                    {
                        "ruleId": finding.rule,
                        "ruleIndex": ids.index(finding.rule),
                        "level": "error" if finding.severity == ERROR else "warning",
                        "message": {"text": f"{finding.message} -> {finding.fix}"},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": finding.file.replace("\\", "/")},
                                    "region": {"startLine": finding.line},
                                }
                            }
                        ],
                    }
                    for finding in findings
                ],
            }
        ],
    }

"""Shared paths for the binding's tests."""

from __future__ import annotations

from pathlib import Path

#: The repository root (adapters/python/tests -> ../../..).
ROOT = Path(__file__).resolve().parents[3]
#: The public conformance corpus (docs/FORMAT.md).
CORPUS = sorted((ROOT / "tests" / "conformance").glob("*.jsonl"))

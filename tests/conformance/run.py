#!/usr/bin/python3
"""Runs the conformance suite (every test_*.py here, or the files named:
`run.py test_query test_scan`) in one process; see conformance.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance  # noqa: E402

conformance.main(sys.argv[1:])

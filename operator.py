#!/usr/bin/env python3
"""Thin launcher: `python operator.py run --watches-file watches.yaml`. The code lives in hybrid_operator."""

import sys

from hybrid_operator.cli import main

sys.exit(main())

"""Print where warm runs spent their time, from the profiles ``HYBRID_OPERATOR_PROFILE_DIR`` collected.

    HYBRID_OPERATOR_PROFILE_DIR=/tmp/prof .venv/bin/python bench/executors.py --role foo --executors warm
    .venv/bin/python bench/profiles.py /tmp/prof [--limit 40] [--sort cumulative|tottime]

Totals over all the runs in the directory (``hybrid_operator.ansible.warm.profiling``); divide by the run count
printed first. ``--what module``: the modules the runs forked instead of the runs' own processes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hybrid_operator.ansible.warm.profiling import summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime", "ncalls"))
    parser.add_argument("--what", default="run", choices=("run", "module"), help="runs' processes or modules'")
    args = parser.parse_args()
    print(summary(sorted(args.directory.glob(f"{args.what}-*.prof")), args.limit, args.sort), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

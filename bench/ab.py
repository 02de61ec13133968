"""Before/after in one invocation: ``bench/executors.py`` run alternately on two versions, several rounds.

    .venv/bin/python -m bench.ab --before HEAD~1 --rounds 5 -- --role foo --executors warm --runs 10
    .venv/bin/python -m bench.ab --before-env HYBRID_OPERATOR_X=0 -- --role foo --executors warm
    .venv/bin/python -m bench.ab --before-python other-venv/bin/python -- --role foo --executors warm

"before" is the ``hybrid_operator`` package of a git ref (``--before``, extracted with ``git archive`` and
put first on ``PYTHONPATH``, as ``bench.fairness --ref`` does) and/or the working tree with extra
environment (``--before-env``) and/or another interpreter (``--before-python``: a venv's ``python``, with the
same packages installed, as ``hack/bootstrap.sh`` makes them); "after" is the working tree or the package of
``--after REF`` (with ``--after-env``, ``--after-python``). The benchmark itself is always the working
tree's. Each round runs before then after, or after then before on odd rounds (so neither always runs on a
machine the other just warmed), each a fresh process, and prints the load average with each number. At the
end: the median over the rounds of each side's median latency and CPU per run, with the spread (min-max) so
what the noise could explain is visible, and the median of the rounds' paired differences (after minus
before, each round's two runs back to back), which the machine's drift over the rounds touches less.
Numbers, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(
    r"^(?P<name>\S+)\s+runs=\d+\s+median=\s*(?P<median>\d+) ms\s+p90=\s*(?P<p90>\d+) ms.*cpu/run=\s*(?P<cpu>\d+) ms"
)


@dataclass
class Side:
    label: str
    pythonpath: str | None
    env: dict[str, str]
    python: str = sys.executable  # the interpreter this side's bench (and so its runs) runs on
    medians: dict[str, list[float]] = field(default_factory=dict)
    cpus: dict[str, list[float]] = field(default_factory=dict)

    def run(self, args: list[str]) -> None:
        env = {**os.environ, **self.env}
        if self.pythonpath:
            # (never an empty entry: that is the working directory, where operator.py would shadow ``operator``)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (self.pythonpath, env.get("PYTHONPATH")) if p)
        load = os.getloadavg()[0]
        done = subprocess.run(
            [self.python, str(ROOT / "bench" / "executors.py"), *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = False
        for line in done.stdout.splitlines():
            match = _LINE.match(line)
            if match:
                found = True
                name = match["name"]
                self.medians.setdefault(name, []).append(float(match["median"]))
                self.cpus.setdefault(name, []).append(float(match["cpu"]))
                print(f"  {self.label:<6} load {load:4.1f}  {line.strip()}", flush=True)
        if not found:
            print(f"  {self.label}: no numbers (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _package_at(ref: str, work: Path) -> Path:
    """The ``hybrid_operator`` package of ``ref``, extracted under ``work``; the directory to import it from."""
    target = work / ref.replace("/", "-")
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "hybrid_operator"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def _env(pairs: list[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.0f} ms (min {min(values):.0f}, max {max(values):.0f})"


def _interpreter(python: str) -> str:
    """A side's interpreter as the results say it: its version and how it was built (``report.python_build``)."""
    probe = "import platform, sys; sys.path.append(sys.argv[1]); from bench.report import python_build; "
    probe += "print(platform.python_version(), python_build())"
    done = subprocess.run([python, "-P", "-c", probe, str(ROOT)], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"? ({python}: {done.stderr.strip()[-200:]})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", help="git ref whose hybrid_operator package is 'before'")
    parser.add_argument("--before-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--after", help="git ref whose hybrid_operator package is 'after' (default: working tree)")
    parser.add_argument("--after-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--before-python", default=sys.executable, help="the interpreter 'before' runs on")
    parser.add_argument("--after-python", default=sys.executable, help="the interpreter 'after' runs on")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="after --: bench/executors.py's arguments")
    args = parser.parse_args()
    passed = args.args[1:] if args.args[:1] == ["--"] else args.args
    if not args.before and not args.before_env and not args.after_env and args.before_python == args.after_python:
        parser.error("nothing differs: give --before REF, --before-env, --after-env or another --before-python")
    work = Path(tempfile.mkdtemp(prefix="hyop-ab-"))
    try:
        before_package = str(_package_at(args.before, work)) if args.before else None
        after_package = str(_package_at(args.after, work)) if args.after else None
        before = Side("before", before_package, _env(args.before_env), args.before_python)
        after = Side("after", after_package, _env(args.after_env), args.after_python)
        for side, ref, extra in (before, args.before, args.before_env), (after, args.after, args.after_env):
            print(f"{side.label}: {ref or 'working tree'} {extra} on {_interpreter(side.python)}")
        print(f"bench/executors.py {' '.join(passed)}; {args.rounds} rounds; {os.cpu_count()} CPUs")
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}", flush=True)
            for side in (before, after) if round_ % 2 == 0 else (after, before):
                side.run(passed)
        for name in before.medians:
            if name not in after.medians:
                continue
            print(f"{name}: median latency  before {_spread(before.medians[name])}")
            print(f"{name}:                 after  {_spread(after.medians[name])}")
            print(f"{name}: CPU per run     before {_spread(before.cpus[name])}")
            print(f"{name}:                 after  {_spread(after.cpus[name])}")
            # Each round ran both sides back to back: their difference is less exposed to the machine's drift.
            for what, b, a in (("latency", before.medians, after.medians), ("CPU", before.cpus, after.cpus)):
                paired = [y - x for x, y in zip(b[name], a[name], strict=False)]
                print(f"{name}: {what} after - before, paired by round: {_spread(paired)}")
        print(f"load average now {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The events' data in one stream (``compat.events``): the installed ansible-runner's display callback has the
shape it replaces, the reader reads what the writer wrote as far as it needs (and per-event files as before),
and the stream is gone once read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hybrid_operator.ansible.compat import events

_CHILD = r"""
import json, sys
from ansible_runner.display_callback.callback import awx_display
from hybrid_operator.ansible.compat import events
print(json.dumps(events.partial_stream_problems([awx_display])))
"""


def test_the_installed_display_callback_has_the_shape(tmp_path: Path) -> None:
    env = {**os.environ, "AWX_ISOLATED_DATA_DIR": str(tmp_path)}  # the callback's cache is made from it
    done = subprocess.run([sys.executable, "-P", "-c", _CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_what_is_written_is_read_as_far_as_needed(tmp_path: Path) -> None:
    stream = events._PartialStream(tmp_path / events.PARTIALS, json.JSONEncoder)
    reader = events.PartialReader(tmp_path)
    assert reader.take("nothing-yet") is None
    stream.set(":1:ev-one", {"event": "playbook_on_start", "n": 1})
    assert reader.take("one") == {"event": "playbook_on_start", "n": 1}
    stream.set(":1:ev-two", {"n": 2})
    stream.set(":1:ev-three", {"n": 3, "text": "ünïcode\nand lines"})
    assert reader.take("three") == {"n": 3, "text": "ünïcode\nand lines"}
    assert reader.take("two") == {"n": 2}  # read ahead, kept until asked for
    assert reader.take("two") is None  # taken once
    (tmp_path / "four-partial.json").write_text('{"n": 4}', encoding="utf-8")  # a cold run's file
    assert reader.take("four") == {"n": 4} and not (tmp_path / "four-partial.json").exists()
    reader.close()
    assert not (tmp_path / events.PARTIALS).exists()


def test_a_line_cut_short_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / events.PARTIALS
    line = json.dumps({"uuid": "u", "data": {"x": 1}}).encode() + b"\n"
    path.write_bytes(line[:10])
    reader = events.PartialReader(tmp_path)
    assert reader.take("u") is None
    with path.open("ab") as handle:
        handle.write(line[10:])
    assert reader.take("u") == {"x": 1}
    reader.close()


_DEBUG_CHILD = r"""
import io, json, sys
from ansible.utils.display import Display
from ansible_runner.display_callback.callback import awx_display
from hybrid_operator.ansible.compat import events
wrapped = Display.debug
problems = events.quiet_debug([awx_display])
display = Display()
out, err = io.StringIO(), io.StringIO()
sys.stdout, sys.stderr = out, err
display.debug("a debug message")
sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
shown = out.getvalue() + err.getvalue()
print(json.dumps({"problems": problems, "changed": Display.debug is not wrapped, "shown": shown}))
"""


def _quiet_debug(tmp_path: Path, debug: str) -> dict[str, object]:
    env = {**os.environ, "AWX_ISOLATED_DATA_DIR": str(tmp_path), "ANSIBLE_DEBUG": debug}
    done = subprocess.run(
        [sys.executable, "-P", "-c", _DEBUG_CHILD], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_debug_calls_lose_the_marking_only_while_debug_output_is_off(tmp_path: Path) -> None:
    off = _quiet_debug(tmp_path, "0")
    assert off == {"problems": [], "changed": True, "shown": ""}
    on = _quiet_debug(tmp_path, "1")  # the callback's marking stays, and the message is shown as before
    assert on["problems"] == ["Ansible's debug output is on"] and on["changed"] is False
    assert "a debug message" in str(on["shown"])

"""The warm executor's socket protocol: every message survives the trip, and what is not one is refused
with the field named (the zygote and the executor each parse what the other sent before using it)."""

from __future__ import annotations

import json

import pytest

from hybrid_operator.ansible.warm import protocol

RUN = protocol.RunSpec(["ansible-playbook", "site.yml"], {"PATH": "/bin"}, "/tmp/x", "/tmp/x/out", 60.0, cold=True)


@pytest.mark.parametrize(
    "message",
    [
        protocol.WarmUp(RUN),
        protocol.WarmUp(RUN, ["/opt/ansible/roles/memcached", "/srv/operator/playbooks/roles"]),
        protocol.WarmUp(RUN, [], ["/tmp/hyop-x/playbooks/foo-2c26b46b.yml", "/opt/ansible/playbooks/site.yml"]),
        protocol.Run(3, RUN),
        protocol.Run(4, protocol.RunSpec(["a"], {}, "/", "/o", None)),
        protocol.Ready(1234, "2.21.5", 1.5, True, "", "", "812345 objects of the warm-up immortal in 0.21s"),
        protocol.Ready(1234, "2.19.14", 2, False, "ActionBase._configure_module: not found"),
        protocol.Fatal("the warm-up playbook failed"),
        protocol.Started(3, 4321),
        protocol.Exited(3, 254, True),
    ],
)
def test_every_message_survives_the_trip(message: protocol.Message) -> None:
    line = protocol.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = protocol.decode(line)
    assert decoded == message or (isinstance(message, protocol.Ready) and decoded.seconds == message.seconds)


_WARM_UP = json.loads(protocol.encode(protocol.WarmUp(RUN)))


@pytest.mark.parametrize(
    "prepare",
    [
        "/opt/ansible/roles",  # not a list
        ["roles/memcached"],  # relative: whose working directory?
        ["/opt/ansible/roles\0/etc"],
        [7],
        ["/r"] * (protocol.MAX_PREPARED + 1),
    ],
)
def test_a_warm_up_naming_anything_but_absolute_directories_is_refused(prepare: object) -> None:
    with pytest.raises(protocol.ProtocolError, match="prepare"):
        protocol.decode(json.dumps({**_WARM_UP, "prepare": prepare}).encode())
    with pytest.raises(protocol.ProtocolError, match="playbooks"):  # the playbooks to load ahead, alike
        protocol.decode(json.dumps({**_WARM_UP, "playbooks": prepare}).encode())


def test_a_warm_up_without_directories_to_prepare_still_reads() -> None:
    assert protocol.decode(json.dumps({"op": "warm-up", "run": _WARM_UP["run"]}).encode()) == protocol.WarmUp(RUN)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"op": "launch"}, "op"),
        ({"op": "exited", "id": 1, "rc": "0", "timed_out": False}, "rc"),
        ({"op": "exited", "id": 1, "rc": 300, "timed_out": False}, "rc"),
        ({"op": "exited", "id": -1, "rc": 0, "timed_out": False}, "id"),
        ({"op": "exited", "id": True, "rc": 0, "timed_out": False}, "id"),
        ({"op": "started", "id": 1, "pid": 1}, "pid"),
        (
            {"op": "run", "id": 1, "run": {**json.loads(protocol.encode(protocol.WarmUp(RUN)))["run"], "argv": []}},
            "argv",
        ),
        (
            {
                "op": "run",
                "id": 1,
                "run": {**json.loads(protocol.encode(protocol.WarmUp(RUN)))["run"], "env": {"A": 1}},
            },
            "env",
        ),
        (
            {"op": "run", "id": 1, "run": {**json.loads(protocol.encode(protocol.WarmUp(RUN)))["run"], "timeout": -5}},
            "timeout",
        ),
    ],
)
def test_what_is_not_a_message_is_refused_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=field):
        protocol.decode(json.dumps(raw).encode())


def test_lines_are_split_across_reads_and_bounded() -> None:
    reader = protocol.LineReader()
    first, second = protocol.encode(protocol.Started(1, 99)), protocol.encode(protocol.Exited(1, 0, False))
    assert reader.feed(first[:5]) == []
    assert reader.feed(first[5:] + second[:3]) == [protocol.Started(1, 99)]
    assert reader.feed(second[3:]) == [protocol.Exited(1, 0, False)]
    with pytest.raises(protocol.ProtocolError, match="longer than"):
        reader.feed(b"x" * (protocol.MAX_LINE + 1))

"""Private names of ansible-core that ``ansible.reserved`` reads in its probe: where they are, per minor.

Read in the operator's own process, which never imports Ansible itself (only ``ansible.release``, for the
version): the probe child process imports what these name.
"""

from __future__ import annotations

from hybrid_operator.ansible.compat.versions import per_minor

# One source of the variable names a spec may not set (``reserved``, in a child process): the template
# keywords, (module, attribute). 2.18 keeps no such list (Jinja's own literals are refused on every minor).
_TEMPLATE_KEYWORDS: dict[tuple[int, int], tuple[str, str] | None] = {
    (2, 18): None,
    (2, 19): ("ansible._internal._templating._jinja_bits", "JINJA_KEYWORDS"),
}
# The mapping keys the extra-vars JSON decoder gives meaning to (``reserved``; refused at any depth of an
# object): (module, owner, attribute). A mapping's keys; or, for a function (2.18's ``object_hook``
# compares each key with string constants), its ``__ansible_`` string constants. A miss is reported there;
# the ``__ansible_`` prefix is refused anyway.
_DECODER_KEYS: dict[tuple[int, int], tuple[str, str, str]] = {
    (2, 18): ("ansible.parsing.ajson", "AnsibleJSONDecoder", "object_hook"),
    (2, 19): ("ansible._internal._json._profiles._legacy", "_Profile", "deserialize_map"),
}


def template_keywords() -> tuple[str, str] | None:
    """Where the installed ansible-core lists its template keywords; None if this minor has no such list."""
    return per_minor(_TEMPLATE_KEYWORDS)


def decoder_keys() -> tuple[str, str, str]:
    """Where the installed ansible-core's extra-vars JSON decoder keeps the keys it gives meaning to."""
    return per_minor(_DECODER_KEYS)

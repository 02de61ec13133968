"""Private names of ansible-core that ``ansible.reserved`` reads in its probe: where they are, per area."""

from __future__ import annotations

# One source of the variable names a spec may not set (``reserved``, in a child process): the template
# keywords. (module, attribute); a miss is reported there and the other sources still count.
TEMPLATE_KEYWORDS = ("ansible._internal._templating._jinja_bits", "JINJA_KEYWORDS")
# The mapping keys the extra-vars JSON decoder gives meaning to (``reserved``; refused at any depth of an
# object): (module, class, attribute). A miss is reported there; the ``__ansible_`` prefix is refused anyway.
DECODER_KEYS = ("ansible._internal._json._profiles._legacy", "_Profile", "deserialize_map")

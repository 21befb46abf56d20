"""How to install one of sqlq's extras, said the same way by every message that names one.

sqlq is not on PyPI yet: today an extra is installed from a checkout; the published
name, ``sqlq-jobs``, is given for once it is out. The docs' install lines say the same
(docs/index.md, docs/getting-started.md, README.md).
"""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """The pip line that installs ``extra``: ``pip install '.[postgres]'`` in a checkout...

    Examples:
        >>> install_hint("dashboard")
        "pip install '.[dashboard]' in a checkout of sqlq (pip install 'sqlq-jobs[dashboard]' once it is on PyPI)"
    """  # noqa: E501
    return (f"pip install '.[{extra}]' in a checkout of sqlq "
            f"(pip install 'sqlq-jobs[{extra}]' once it is on PyPI)")

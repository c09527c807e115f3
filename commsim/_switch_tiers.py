"""Where a reducing switch sits (in-network reduction, IR rule 7): one rule for the IR, its
files and the network.

``"server"``: a server's own switch (an NVSwitch: NVLink SHARP, the ``nvls`` rows);
``"fabric"``: a switch between servers (an InfiniBand leaf: SHARP, ``collnet_direct``). A
``Schedule.in_network`` value and a graph switch's ``reduce`` attribute name one: ``True`` or
``"server"``, ``"fabric"``, or ``False`` for none.

Examples:
    >>> switch_tier(True), switch_tier("fabric"), switch_tier(False)
    ('server', 'fabric', None)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SWITCH_TIERS", "TIER_WORDS", "switch_tier"]

#: the tiers, in the order :attr:`commsim.topology.Network.reducing_tier` numbers them
SWITCH_TIERS = ("server", "fabric")

#: what a value that names no tier should have been, for error messages
TIER_WORDS = "true, false, 'server' or 'fabric'"


def switch_tier(value: Any) -> str | None:
    """The tier ``value`` names (``None`` for false); :class:`ValueError` when it names none."""
    if isinstance(value, bool | np.bool_):
        return "server" if value else None
    if isinstance(value, str) and value in SWITCH_TIERS:
        return value
    raise ValueError(f"must be {TIER_WORDS}, got {value!r}")

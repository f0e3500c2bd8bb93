"""Readers of acquisition files.

(The DAS family's readers land in this file too; the block below is the live family's.)
"""

# ---- family live: Verasonics Vantage workspaces (implementation in usbeam/io_vantage.py) ----
from .io_vantage import (VantageAcquisition, VantageProbe, VantageTransmit,  # noqa: E402,F401
                         VantageWorkspace, load_vantage)

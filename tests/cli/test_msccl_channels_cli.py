"""``commsim export --format msccl`` of a schedule on two channels writes them, and
``commsim verify --file`` reads them back."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import commsim
from commsim.interop import read_msccl


def test_export_writes_a_multi_channel_schedules_channels(cli, tmp_path):
    path = tmp_path / "dbt8.xml"
    rc, out, err = cli("export", "-c", "allreduce", "-a", "double_binary_tree_channels", "-p", "8",
                       "--format", "msccl", "-o", str(path))  # fmt: skip
    assert rc == 0, err
    root = ET.parse(path).getroot()
    assert root.get("nchannels") == "2"
    assert {tb.get("chan") for tb in root.iter("tb")} == {"0", "1"}
    s = read_msccl(path)
    assert s.nchannels == 2
    commsim.verify(s)
    rc, out, err = cli("verify", "--file", str(path))
    assert rc == 0 and "OK" in out, err

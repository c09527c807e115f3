"""``commsim export --format msccl`` of a schedule on two channels writes them, and
``commsim verify --file`` reads them back."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import commsim
from commsim.algorithms.trees import double_binary_tree_channels
from commsim.interop import read_msccl


def test_export_writes_a_multi_channel_schedules_channels(cli, tmp_path):
    """The double binary tree with a tree per channel, saved, exported, read back, verified."""
    saved = commsim.save(double_binary_tree_channels(8), tmp_path / "dbt8.json")
    path = tmp_path / "dbt8.xml"
    rc, out, err = cli("export", "--file", str(saved), "--format", "msccl", "-o", str(path))
    assert rc == 0, err
    root = ET.parse(path).getroot()
    assert root.get("nchannels") == "2"
    assert {tb.get("chan") for tb in root.iter("tb")} == {"0", "1"}
    s = read_msccl(path)
    assert s.nchannels == 2
    commsim.verify(s)
    rc, out, err = cli("verify", "--file", str(path))
    assert rc == 0 and "OK" in out, err


def test_predict_an_msccl_file_on_more_links_is_faster(cli_json):
    """The allpairs alltoall's 3 sending and 3 receiving thread blocks per GPU run on 3 ports."""
    path = str(Path(__file__).parents[1] / "data" / "msccl" / "alltoall_allpairs_p4_Simple.xml")
    args = ("predict", "--file", path, "-s", "1MiB", "--alpha", "1us", "--beta", "1GB/s",
            "--gamma", "0")  # fmt: skip
    t = [cli_json(*args, "--links", str(k))["results"][0]["time_s"] for k in (1, 2, 4)]
    assert t[0] == pytest.approx(1.5 * t[1]) and t[0] == pytest.approx(3 * t[2])

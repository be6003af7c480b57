"""--device: auto takes CUDA only when torch sees it, cpu is always there, cuda is refused where torch sees none;
onnxruntime gets its CPU provider unless the device is CUDA and its CUDA provider is installed. The CUDA path itself
is untested: the development machine has no GPU."""

import json

import onnxruntime
import pytest
import torch

from patterncnn.cli import main
from patterncnn.core.device import DeviceError, onnx_providers, resolve_device

CUDA = torch.cuda.is_available()


def test_cpu_and_auto():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if CUDA else "cpu")
    assert onnx_providers("cpu") == ["CPUExecutionProvider"]


def test_cuda_where_torch_sees_none_is_refused_and_onnxruntime_falls_back_to_its_cpu_provider():
    if CUDA:
        assert resolve_device("cuda") == "cuda"
    else:
        with pytest.raises(DeviceError, match=r"device cuda \(--device cuda\): .*; use cpu \(or auto"):
            resolve_device("cuda")
    has_cuda_provider = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    assert onnx_providers("cuda") == (["CUDAExecutionProvider", "CPUExecutionProvider"] if has_cuda_provider
                                      else ["CPUExecutionProvider"])
    with pytest.raises(DeviceError, match="choose one of auto, cpu, cuda"):
        resolve_device("tpu")


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_census_records_where_it_ran(device, tiny_bert, tiny_classifier, glue_dir, tmp_path):
    out = tmp_path / device
    assert main(["census", "--task", "rte", "--model", str(tiny_bert), "--limit", "6", "--glue-dir", str(glue_dir),
                 "--classifier", str(tiny_classifier[1]), "--out", str(out), "--device", device]) == 0
    res = json.loads((out / "census.json").read_text())
    expected = "cuda" if CUDA and device == "auto" else "cpu"
    assert res["device"]["encoder"] == expected
    assert res["device"]["classifier"][-1] == "CPUExecutionProvider"


@pytest.mark.parametrize("command", [["census", "--task", "rte", "--limit", "4"], ["drift", "A", "A", "--task", "rte"],
                                     ["special-tokens", "--task", "rte"], ["disable", "--task", "rte"]])
def test_every_command_with_a_device_refuses_cuda_where_there_is_none(command, tiny_bert, glue_dir, tmp_path, capsys):
    if CUDA:
        pytest.skip("this machine has a CUDA device: the refusal cannot happen here")
    args = [str(tiny_bert) if a == "A" else a for a in command]
    if command[0] in ("census", "special-tokens", "disable"):
        args += ["--model", str(tiny_bert)]
    assert main([*args, "--glue-dir", str(glue_dir), "--out", str(tmp_path / "o"), "--device", "cuda"]) == 2
    assert "torch sees no CUDA device" in capsys.readouterr().err

"""The installed environment keeps the pitfalls of environment.md out."""
from importlib import metadata

import torch

FORBIDDEN = ("torchvision", "torchaudio", "torchcodec")


def installed() -> set[str]:
    return {(d.metadata["Name"] or "").lower() for d in metadata.distributions()}


def test_no_vision_audio_codec_packages():
    # beside CPU torch these break transformers' model imports
    assert not installed() & set(FORBIDDEN)


def test_cpu_machines_have_no_cuda_wheels():
    if torch.cuda.is_available():
        return  # a GPU machine: CUDA wheels are expected there
    nvidia = sorted(n for n in installed() if n.startswith("nvidia-") or n in ("triton", "cuda-toolkit"))
    assert nvidia == [], f"CUDA packages on a CPU machine: {nvidia}"
    assert torch.version.cuda is None

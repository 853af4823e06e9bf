"""Pick the torch device from settings: CUDA when present, else the CPU."""

from __future__ import annotations


def resolve_device(setting: str) -> str:
    if setting != "auto":
        return setting
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

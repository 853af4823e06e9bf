"""E_θ: the frozen embedder's network with a peft LoRA, always on a copy of the weights.

The frozen model keeps encoding every memory and the E(q) half of the query, so the adapter
is attached to a deep copy: peft injects its layers in place and must never reach E.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

# Every linear layer of the encoder; BERT's pooler is skipped because dcpm pools the hidden
# states itself (the pooler's LoRA would never receive a gradient).
TARGET_MODULES = "all-linear"
EXCLUDED_MODULES = ["pooler.dense"]


def lora_config(rank: int, alpha: int, dropout: float) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=TARGET_MODULES,
                      exclude_modules=EXCLUDED_MODULES, bias="none")


def attach_lora(model: Any, rank: int, alpha: int, dropout: float) -> Any:
    """A trainable E_θ: a copy of `model` with a fresh LoRA whose B is zero, so E_θ = E at start."""
    from peft import get_peft_model

    return get_peft_model(copy.deepcopy(model), lora_config(rank, alpha, dropout))


def load_lora(model: Any, directory: Path, merge: bool, strength: float = 1.0) -> Any:
    """E_θ for serving. Merged: LoRA folded into a second copy of the weights, one plain pass
    per query (Madeleine B). Unmerged: the peft wrapper, which adds the low-rank branch.
    `strength` scales every low-rank update (W + strength·BA): 0 is E itself, 1 as trained,
    between them a network between the two, at the same cost."""
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    adapted = PeftModel.from_pretrained(copy.deepcopy(model), str(directory), is_trainable=False)
    for module in adapted.modules():
        if isinstance(module, LoraLayer):
            module.scale_layer(strength)
    if merge:
        adapted = adapted.merge_and_unload()
    return adapted.eval()

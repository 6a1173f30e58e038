"""The critic for recipes that declare one (ppo, vapo): the warm-start backbone + a scalar head."""
from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM


class ValueModel(torch.nn.Module):
    """V(s_t) for every completion token: the value of the state *before* token t is emitted,
    read at the same position as the logits that produce token t. Head initialised to zero, so
    the first values are 0 and the value-pretraining steps (VAPO) start from a neutral critic.
    """

    def __init__(self, path: str, device: str | torch.device = "cpu"):
        super().__init__()
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        self.config = lm.config
        self.backbone = lm.model  # drop the LM head: only hidden states are needed
        self.head = torch.nn.Linear(lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        self.to(device)

    def forward(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion: torch.Tensor) -> torch.Tensor:
        """(B, T) values for a (B, T) completion after (B, P) left-padded prompts."""
        T = completion.shape[1]
        ids = torch.cat([prompt_ids, completion], 1)
        att = torch.cat([prompt_mask, torch.ones_like(completion)], 1)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        h = self.backbone(input_ids=ids, attention_mask=att, position_ids=pos).last_hidden_state
        return self.head(h[:, -T - 1:-1]).squeeze(-1)

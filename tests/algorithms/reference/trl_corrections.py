"""Verbatim excerpts of TRL's GRPO trainer: advantages, the vLLM importance-sampling correction, OPSM,
the top-entropy mask and the bias-corrected KL, the outside reference for
tests/algorithms/test_algorithms_2026_{advantages,corrections}.py.

Source: https://github.com/huggingface/trl, commit f2cd57710ae345ea6428ae95363267fcf38a3dc8
(2026-07-24):
  trl/trainer/utils.py          nanstd
  trl/trainer/grpo_trainer.py   GRPOTrainer.get_off_policy_mask, GRPOTrainer.get_high_entropy_mask, and
                                three blocks of inline code: the importance-sampling ratio in
                                _generate_and_score_completions (lines 2579-2623), the advantages in the
                                same method (lines 2679-2730), the ratio and KL in _compute_loss
                                (lines 3054-3076)
Copyright 2020-2026 The HuggingFace Team. All rights reserved.
Licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0);
distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.

The code lines are copied unchanged (re-indented). Inline blocks are wrapped in functions whose
parameters are the names the block reads, with `self` a namespace of the trainer attributes it reads
(`stand_in(...)`); their results are returned. `self.accelerator` is a single-process stand-in
(pad_across_processes and gather return their input), as TRL behaves with one process.
"""

# ruff: noqa
import math
from types import SimpleNamespace

import torch


def stand_in(**attributes) -> SimpleNamespace:
    """A trainer `self` carrying only the attributes a block reads (one process)."""
    accelerator = SimpleNamespace(pad_across_processes=lambda t, dim=0, pad_index=0: t, gather=lambda t: t)
    return SimpleNamespace(accelerator=accelerator, **attributes)


# ---------------------------------------------------------------------------- trl/trainer/utils.py

def nanstd(tensor: torch.Tensor, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> torch.Tensor:
    """
    Compute the standard deviation of a tensor, ignoring NaNs.

    Args:
        tensor (`torch.Tensor`):
            Input tensor.
        dim (`int` or `tuple[int, ...]`, *optional*):
            Dimension(s) to reduce. Defaults to all dimensions.
        keepdim (`bool`, *optional*, defaults to `False`):
            Whether to keep reduced dimensions.

    Returns:
        `torch.Tensor`:
            Standard deviation of the tensor, ignoring NaNs.
    """
    # Compute variance ignoring NaNs
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)  # count of non-NaN values
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction  # Bessel's correction
    std = torch.sqrt(variance)
    if keepdim:
        return std
    if dim is None:
        return std.squeeze()
    if isinstance(dim, int):
        return std.squeeze(dim)
    dims = [(d if d >= 0 else d + std.ndim) for d in dim]
    for d in sorted(dims, reverse=True):
        std = std.squeeze(d)
    return std


# ---------------------------------------------------------------------------- trl/trainer/grpo_trainer.py

def importance_sampling_ratio(self, old_per_token_logps, sampling_per_token_logps, completion_mask, tool_mask=None):
    """_generate_and_score_completions, lines 2579-2623."""
    if self.use_vllm and self.vllm_importance_sampling_correction:
        mask = completion_mask if tool_mask is None else completion_mask * tool_mask
        per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask

        sequence_level_is = self.vllm_importance_sampling_mode in ["sequence_mask", "sequence_truncate"]
        if sequence_level_is:
            per_sequence_logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
            logps_diff = per_sequence_logps_diff
        else:
            logps_diff = per_token_logps_diff

        vllm_importance_sampling_ratio = torch.exp(logps_diff)

        # vllm_importance_sampling_ratio.shape:
        #   token_* modes:     (B, T)  (per-token ratio)
        #   sequence_* modes:  (B, 1)  (per-sequence ratio)

        if self.vllm_importance_sampling_mode in ["sequence_truncate", "token_truncate"]:
            vllm_importance_sampling_ratio = torch.clamp(
                vllm_importance_sampling_ratio,
                min=self.vllm_importance_sampling_clip_min,
                max=self.vllm_importance_sampling_clip_max,
            )
        elif self.vllm_importance_sampling_mode in ["sequence_mask", "token_mask"]:
            min_val = (
                self.vllm_importance_sampling_clip_min
                if self.vllm_importance_sampling_clip_min is not None
                else -math.inf
            )
            max_val = (
                self.vllm_importance_sampling_clip_max
                if self.vllm_importance_sampling_clip_max is not None
                else math.inf
            )

            invalid_mis_mask = (vllm_importance_sampling_ratio < min_val) | (
                vllm_importance_sampling_ratio > max_val
            )
            vllm_importance_sampling_ratio = vllm_importance_sampling_ratio.masked_fill(
                invalid_mis_mask, value=0.0
            )
        else:
            raise ValueError(
                f"Unknown vLLM importance sampling level: {self.vllm_importance_sampling_mode}. Possible values are 'token_truncate', 'token_mask', 'sequence_truncate', and 'sequence_mask'."
            )
    return vllm_importance_sampling_ratio


def advantages(self, rewards_per_func, num_generations, device):
    """_generate_and_score_completions, lines 2679-2730."""
    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)

    if self.multi_objective_aggregation == "sum_then_normalize":
        # Apply weights to each reward function's output and sum
        rewards = (rewards_per_func * self.reward_weights.to(device).unsqueeze(0)).nansum(dim=1)
        rewards[unscorable_mask] = torch.nan
        mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
        mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
        if self.scale_rewards in ["group", "none"]:
            # If self.scale_rewards = "none", we'll only use std_rewards to check for zero std for logging
            if num_generations > 1:
                std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
                std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
            else:  # doesn't occur during training, but could occur in eval when num_generations_eval=1
                std_rewards = torch.zeros_like(rewards)
        elif self.scale_rewards == "batch":
            # Compute global std
            if rewards.numel() > 1:
                std_rewards = nanstd(rewards).expand_as(rewards)
            else:  # doesn't occur during training, but could occur in eval when num_generations_eval=batch_size=1
                std_rewards = torch.zeros_like(rewards)
        else:
            raise ValueError(
                f"Invalid value for scale_rewards: {self.scale_rewards}. Must be one of 'batch', 'group', or 'none'."
            )

        advantages = rewards - mean_grouped_rewards
        if self.scale_rewards != "none":
            advantages = advantages / (std_rewards + 1e-4)
        is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))  # for logging

    elif self.multi_objective_aggregation == "normalize_then_sum":
        grouped = rewards_per_func.view(-1, num_generations, len(self.reward_funcs))
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
        std_k = nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
        reward_k = (grouped - mean_k) / (std_k + 1e-4)
        reward_k = reward_k.view(-1, len(self.reward_funcs))
        rewards = (reward_k * self.reward_weights.to(device).unsqueeze(0)).nansum(dim=1)
        rewards[unscorable_mask] = torch.nan
        std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
        advantages = (rewards - torch.nanmean(rewards)) / (std_rewards + 1e-4)
        is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))  # for logging

    else:
        raise ValueError(
            f"Invalid multi_objective_aggregation: {self.multi_objective_aggregation}. Must be "
            "'sum_then_normalize' or 'normalize_then_sum'."
        )

    # Unscorable completions (every reward func returned None) carry no learning signal: their reward is NaN here,
    # so zero their advantage to keep them from moving the policy.
    advantages = torch.nan_to_num(advantages, nan=0.0)
    return advantages


def per_token_kl(self, inputs, per_token_logps, old_per_token_logps, mask):
    """_compute_loss, lines 3054-3076 (the ratio coef_1 and the KL term)."""
    log_ratio = per_token_logps - old_per_token_logps
    if self.importance_sampling_level == "token":
        log_importance_weights = log_ratio
    elif self.importance_sampling_level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)
    else:
        raise ValueError(
            f"Unknown importance sampling level: {self.importance_sampling_level}. Possible values are 'token' "
            "and 'sequence'."
        )

    coef_1 = torch.exp(log_importance_weights)

    # Compute the KL divergence between the model and the reference model
    if self.beta != 0.0:
        ref_per_token_logps = inputs["ref_per_token_logps"]
        per_token_kl = (
            torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
        )
        # Importance sampling correction for the KL divergence
        if self.args.use_bias_correction_kl:
            per_token_kl = per_token_kl * coef_1
    return per_token_kl


def get_off_policy_mask(
    advantages: torch.Tensor,
    per_token_logps: torch.Tensor,
    sampling_per_token_logps: torch.Tensor,
    mask: torch.Tensor,
    off_policy_threshold: float,
) -> torch.Tensor:
    """
    Computes the Off-Policy Sequence Mask from DeepSeek-V3.2 paper. Returns a (B, 1) tensor where 1.0 indicates
    "Keep" and 0.0 indicates "Drop".
    """
    # forward KL div: log(pi_old) - log(pi_theta)
    kl_div = sampling_per_token_logps - per_token_logps.detach()
    # Sequence-level Mean KL (ignoring prompt+padding)
    seq_kl_sum = (kl_div * mask).sum(dim=1, keepdim=True)
    avg_seq_kl = seq_kl_sum / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
    # Keep if (Advantage >= 0) OR (KL <= delta)
    is_pos_adv = advantages >= 0
    is_low_kl = avg_seq_kl <= off_policy_threshold
    return (is_pos_adv | is_low_kl).to(dtype=mask.dtype)  # (B, 1)


def get_high_entropy_mask(self, entropies: torch.Tensor, mask: torch.Tensor, threshold: float) -> torch.Tensor:
    """
    Returns a binary mask identifying tokens whose entropy exceeds a given quantile threshold.

    Args:
        entropies (`torch.Tensor`):
            Tensor of shape (batch_size, seq_len) with per-token entropy values.
        mask (`torch.Tensor`):
            Binary mask of the same shape as `entropies`, where `1` indicates valid tokens and `0` padding.
        threshold (`float`):
            Quantile threshold between `0.0` and `1.0` to select high-entropy tokens.

    Returns:
        `torch.Tensor`:
            Boolean mask of shape (batch_size, seq_len), where `True` indicates tokens with entropy >= threshold
            and `False` otherwise.
    """
    local = entropies[mask.bool()].float()

    # Use a negative pad_value as a sentinel because entropy values are always >= 0.
    # This guarantees that the sentinel cannot collide with any real entropy value.
    pad_value = -1e9

    # Pad across processes so that every rank has the same tensor length
    padded = self.accelerator.pad_across_processes(local, dim=0, pad_index=pad_value)
    gathered = self.accelerator.gather(padded)

    # Drop sentinel values (safe because no entropy can be negative)
    gathered = gathered[gathered != pad_value]

    if gathered.numel() == 0:
        return torch.zeros_like(entropies, dtype=torch.bool)

    entropy_threshold = torch.quantile(gathered, threshold)
    masked_entropies = entropies * mask.float()
    entropy_mask = masked_entropies >= entropy_threshold
    return entropy_mask & mask.bool()  # ensure padding tokens are always masked out

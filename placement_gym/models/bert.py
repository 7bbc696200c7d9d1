"""BERT-base encoder in plain PyTorch (the structure of Hugging Face ``BertModel``).

Embeddings (word + position + token type, LayerNorm), 12 post-LayerNorm transformer layers
(hidden 768, 12 heads, FFN 3072 with exact GELU) using ``F.scaled_dot_product_attention``
with the padding mask, then the pooler (dense + tanh on the first token). Dropout is left out:
the model is only ever run in eval mode, where it is the identity.

Inputs: ``input_ids`` ``(1, 128)`` int64 in ``[0, 30522)`` and ``attention_mask`` ``(1, 128)``
int64 (1 = real token, 0 = padding). Outputs: ``last_hidden_state`` ``(1, 128, 768)`` and
``pooler_output`` ``(1, 768)`` float32. Token type ids are all zeros (a buffer), as in
``BertModel`` when none are passed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB_SIZE = 30522
SEQ_LEN = 128
HIDDEN = 768
HEADS = 12
INTERMEDIATE = 3072
LAYERS = 12
MAX_POSITIONS = 512
LN_EPS = 1e-12


class BertEmbeddings(nn.Module):
    """``input_ids (B, T) int64 -> (B, T, 768)``: sum of three embeddings, then LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB_SIZE, HIDDEN, padding_idx=0)
        self.position_embeddings = nn.Embedding(MAX_POSITIONS, HIDDEN)
        self.token_type_embeddings = nn.Embedding(2, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN, eps=LN_EPS)
        self.register_buffer("position_ids", torch.arange(MAX_POSITIONS).unsqueeze(0), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, MAX_POSITIONS, dtype=torch.long), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(self.token_type_ids[:, :seq_len])
            + self.position_embeddings(self.position_ids[:, :seq_len])
        )
        return self.LayerNorm(x)


class BertLayer(nn.Module):
    """One encoder layer: ``(B, T, 768)`` + additive mask ``(B, 1, 1, T)`` -> ``(B, T, 768)``."""

    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)
        self.attention_output = nn.Linear(HIDDEN, HIDDEN)
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=LN_EPS)
        self.intermediate = nn.Linear(HIDDEN, INTERMEDIATE)
        self.output = nn.Linear(INTERMEDIATE, HIDDEN)
        self.output_norm = nn.LayerNorm(HIDDEN, eps=LN_EPS)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, 768) -> (B, 12, T, 64)``."""
        b, t, _ = x.shape
        return x.view(b, t, HEADS, HIDDEN // HEADS).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, 12, T, 64)
        ctx = ctx.transpose(1, 2).reshape(x.shape)
        x = self.attention_norm(self.attention_output(ctx) + x)
        return self.output_norm(self.output(F.gelu(self.intermediate(x))) + x)


class BertBase(nn.Module):
    """BERT-base: ``(input_ids, attention_mask)`` each ``(B, T)`` int64 ->
    ``(last_hidden_state (B, T, 768), pooler_output (B, 768))``."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings()
        self.layers = nn.ModuleList(BertLayer() for _ in range(LAYERS))
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Additive mask as in BertModel: 0 where attended, dtype-min where padded; broadcasts
        # over heads and query positions.
        mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = self.embeddings(input_ids)
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pooler(x[:, 0]))


def build() -> tuple[nn.Module, dict[str, torch.Tensor], tuple[str, ...]]:
    """Return the (untrained, eval-mode) module, example inputs (``(1, 128)`` int64 each, in
    ``forward`` order) and the output names."""
    example = {
        "input_ids": torch.randint(0, VOCAB_SIZE, (1, SEQ_LEN)),
        "attention_mask": torch.ones(1, SEQ_LEN, dtype=torch.long),
    }
    return BertBase().eval(), example, ("last_hidden_state", "pooler_output")

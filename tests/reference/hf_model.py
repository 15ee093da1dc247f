#!/usr/bin/python3
"""The HuggingFace BertForMaskedLM and BertForTokenClassification reference models (part of
tests/reference/hf_reference.py): HF semantics and state_dict names (modeling_bert.py), float64;
written from HF's definition, never from the C sources or reference.py."""
import math

import numpy as np
import torch
import torch.nn as nn

from hf_safetensors import read_folder


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c.get("layer_norm_eps", 1e-12))
        self.kind = c.get("position_embedding_type", "absolute")

    def forward(self, ids, types):
        x = self.word_embeddings(ids) + self.token_type_embeddings(types)
        if self.kind == "absolute":  # HF adds absolute positions only in this mode
            x = x + self.position_embeddings(torch.arange(ids.shape[1]))[None]
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, self.heads = c["hidden_size"], c["num_attention_heads"]
        self.d = H // self.heads
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.kind = c.get("position_embedding_type", "absolute")
        self.max_pos = c["max_position_embeddings"]
        if self.kind != "absolute":
            self.distance_embedding = nn.Embedding(2 * self.max_pos - 1, self.d)

    def forward(self, x, mask_add):
        B, L, _ = x.shape
        split = lambda t: t.view(B, L, self.heads, self.d).permute(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.kind != "absolute":
            distance = torch.arange(L).view(-1, 1) - torch.arange(L).view(1, -1)  # l - r
            pe = self.distance_embedding(distance + self.max_pos - 1)  # [L, L, d]
            if self.kind == "relative_key":
                scores = scores + torch.einsum("bhld,lrd->bhlr", q, pe)
            else:  # relative_key_query
                scores = scores + torch.einsum("bhld,lrd->bhlr", q, pe) + \
                    torch.einsum("bhrd,lrd->bhlr", k, pe)
        scores = scores / math.sqrt(self.d) + mask_add[:, None, None, :]
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return ctx.permute(0, 2, 1, 3).reshape(B, L, -1)


class DenseLN(nn.Module):  # BertSelfOutput / BertOutput: LN(dense(x) + residual)
    def __init__(self, n_in, n_out, eps):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(n_in, n_out), nn.LayerNorm(n_out, eps=eps)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = DenseLN(c["hidden_size"], c["hidden_size"], c.get("layer_norm_eps", 1e-12))


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        eps = c.get("layer_norm_eps", 1e-12)
        self.attention, self.intermediate = BertAttention(c), BertIntermediate(c)
        self.output = DenseLN(c["intermediate_size"], c["hidden_size"], eps)

    def forward(self, x, mask_add):
        h = self.attention.output(self.attention.self(x, mask_add), x)
        return self.output(gelu(self.intermediate.dense(h)), h)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c["num_hidden_layers"]))


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])


class BertModel(nn.Module):
    def __init__(self, c, pooler):
        super().__init__()
        self.embeddings, self.encoder = BertEmbeddings(c), BertEncoder(c)
        if pooler:
            self.pooler = BertPooler(c)

    def forward(self, ids, types, attention_mask):
        # HF: (1 - mask) * finfo.min
        mask_add = (1.0 - attention_mask.to(torch.float64)) * torch.finfo(torch.float64).min
        x = self.embeddings(ids, types)
        for layer in self.encoder.layer:
            x = layer(x, mask_add)
        return x


class Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.dense, self.LayerNorm = nn.Linear(H, H), nn.LayerNorm(H, eps=c.get("layer_norm_eps", 1e-12))


class LMPredictionHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = Transform(c)
        self.bias = nn.Parameter(torch.zeros(c["vocab_size"]))


class OnlyMLMHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = LMPredictionHead(c)


class BertForMaskedLM(nn.Module):
    """logits = LN(gelu(W_t h + b_t)) E^T + bias, decoder tied to the word embeddings."""

    def __init__(self, c, pooler=False):
        super().__init__()
        self.bert, self.cls = BertModel(c, pooler), OnlyMLMHead(c)

    def forward(self, ids, types, attention_mask):
        h = self.bert(ids, types, attention_mask)
        t = self.cls.predictions.transform
        h = t.LayerNorm(gelu(t.dense(h)))
        return h @ self.bert.embeddings.word_embeddings.weight.t() + self.cls.predictions.bias


class BertForTokenClassification(nn.Module):
    """HF's token classification: logits = classifier(dropout(sequence output)), no pooler."""

    def __init__(self, c):
        super().__init__()
        self.bert = BertModel(c, pooler=False)
        self.dropout = nn.Dropout(c.get("hidden_dropout_prob", 0.1))
        self.classifier = nn.Linear(c["hidden_size"], len(c["id2label"]))

    def forward(self, ids, types, attention_mask):
        return self.classifier(self.dropout(self.bert(ids, types, attention_mask)))


def load_mlm(folder):
    """BertForMaskedLM with the folder's weights (HF loading rules: 'bert.' prefix optional,
    gamma/beta renamed, decoder tied, NSP/position_ids ignored)."""
    config, tensors = read_folder(folder)
    model = BertForMaskedLM(config).double()
    own = model.state_dict()
    for name, value in tensors.items():
        key = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                          "LayerNorm.bias")
        if key not in own and "bert." + key in own:
            key = "bert." + key
        if key in own:
            own[key] = torch.from_numpy(np.asarray(value, dtype=np.float64).copy())
    model.load_state_dict(own)
    return config, model.eval()

"""FLB: the paper's few-shot batch-learning baseline (Chen et al. 2019) — a linear classifier on frozen
features retrained from scratch on *all* data seen so far at every increment (so it stores all data;
it is an upper-bound-style reference, not a continual learner)."""
from __future__ import annotations

import numpy as np

from .base import IncrementalMethod

__all__ = ["FLB", "train_linear"]


def train_linear(x: np.ndarray, y: np.ndarray, n_classes: int, epochs: int, lr: float, batch_size: int,
                 momentum: float = 0.9, weight_decay: float = 0.0, seed: int = 0,
                 init: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SGD with momentum and cross-entropy on a linear layer; returns (W (d, C), b (C,)) after the LAST
    epoch (no model selection). A fresh shuffle each epoch from one seeded generator."""
    import torch

    g = torch.Generator().manual_seed(int(seed))
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    layer = torch.nn.Linear(xt.shape[1], n_classes)
    with torch.no_grad():
        if init is None:
            bound = 1.0 / np.sqrt(xt.shape[1])
            layer.weight.uniform_(-bound, bound, generator=g)
            layer.bias.uniform_(-bound, bound, generator=g)
        else:
            w0, b0 = init
            layer.weight.zero_()
            layer.bias.zero_()
            layer.weight[: w0.shape[1]] = torch.from_numpy(w0.T.copy())
            layer.bias[: b0.shape[0]] = torch.from_numpy(b0.copy())
    opt = torch.optim.SGD(layer.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = len(xt)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            opt.zero_grad(set_to_none=True)
            loss_fn(layer(xt[idx]), yt[idx]).backward()
            opt.step()
    return layer.weight.detach().numpy().T.copy(), layer.bias.detach().numpy().copy()


class FLB(IncrementalMethod):
    """Batch linear learner on all data so far: paper's lr 0.001, batch 8, 25 epochs + 2 per increment,
    SGD momentum 0.9 (weight decay not stated in the paper: 0 here)."""

    name = "flb"

    def __init__(self, lr: float = 0.001, batch_size: int = 8, epochs: int = 25, epochs_per_increment: int = 2,
                 weight_decay: float = 0.0, seed: int = 0) -> None:
        super().__init__(seed)
        if lr <= 0 or batch_size < 1 or epochs < 1 or epochs_per_increment < 0:
            raise ValueError(f"bad FLB hyperparameters lr={lr} batch={batch_size} epochs={epochs}"
                             f" +{epochs_per_increment}")
        self.lr, self.batch_size, self.epochs = lr, batch_size, epochs
        self.epochs_per_increment, self.weight_decay = epochs_per_increment, weight_decay
        self.data_: dict[int, np.ndarray] = {}

    def _fit_increment(self, feats: dict[int, np.ndarray]) -> None:
        import torch

        for c, x in feats.items():
            self.data_[c] = np.vstack([self.data_[c], x]) if c in self.data_ else x.copy()
        self._order = np.array(list(self.data_), dtype=np.int64)
        x = np.vstack([self.data_[c] for c in self._order])
        y = np.concatenate([np.full(len(self.data_[c]), j) for j, c in enumerate(self._order)])
        torch.manual_seed(self.seed)
        self.w_, self.b_ = train_linear(x, y, len(self._order), self.epochs + self.epochs_per_increment
                                        * self.increments_, self.lr, self.batch_size,
                                        weight_decay=self.weight_decay, seed=self.seed + self.increments_)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return self._order[np.argmax(x @ self.w_ + self.b_, axis=1)]

    def memory_bytes(self) -> int:
        return int(sum(v.nbytes for v in self.data_.values()) + self.w_.nbytes + self.b_.nbytes)
